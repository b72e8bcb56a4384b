use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "queue:<id>", fair = "yes")]
async fn serve(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
