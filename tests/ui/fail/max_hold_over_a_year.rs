use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "report:<day>", max_hold = "400d")]
async fn nightly(day: u32) -> Result<u32, LockError> {
    Ok(day)
}

fn main() {}
