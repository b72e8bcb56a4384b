use lock_runtime::{distributed_lock, LockError};

// 2.9 ms is sent as 2 ms: no time left after the drift and reaction margins.
#[distributed_lock(key = "stock:<id>", ttl = "2900us")]
async fn deduct(id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
