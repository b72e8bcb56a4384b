use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "stock:<id>", locker = "redis://127.0.0.1/")]
async fn deduct(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
