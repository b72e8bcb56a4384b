use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(ttl = "3s")]
async fn deduct(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
