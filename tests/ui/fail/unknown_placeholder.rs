use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "stock:<idd>")]
async fn deduct(id: u64, qty: u32) -> Result<u64, LockError> {
    Ok(id + u64::from(qty))
}

fn main() {
    // Still type-checks: the function exists despite the error above.
    let _ = deduct(1, 2);
}
