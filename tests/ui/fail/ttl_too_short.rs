use lock_runtime::{distributed_lock, LockError};

// 9.9 ms is sent as 9 ms: too little time left after the drift and
// reaction margins to renew the lease.
#[distributed_lock(key = "stock:<id>", ttl = "9900us")]
async fn deduct(id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
