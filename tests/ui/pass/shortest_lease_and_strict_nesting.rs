use lock_runtime::{distributed_lock, LockError};

// The shortest lease the runtime accepts, and a call that refuses nesting.
#[distributed_lock(key = "stock:<id>", ttl = "10ms", reentrant = false)]
async fn deduct(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {
    let _ = deduct(1);
}
