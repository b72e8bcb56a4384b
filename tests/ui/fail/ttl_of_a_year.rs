use lock_runtime::{LockError, distributed_lock};

// `1y` is 365.25 days: over the longest lease, which the error names as
// it is, not as "a year".
#[distributed_lock(key = "stock:<id>", ttl = "1y", max_hold = "1y")]
async fn deduct(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
