use lock_runtime::{distributed_lock, LockError};

// A wrong argument does not hide the unknown placeholder: both in one build.
#[distributed_lock(key = "stock:<idd>", ttl = "forever")]
async fn deduct(id: u64, qty: u32) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
