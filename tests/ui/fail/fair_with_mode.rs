use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "catalog:<id>", fair = true, mode = "read")]
async fn read_fairly(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {
    let _ = read_fairly(1);
}
