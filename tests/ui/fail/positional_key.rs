use lock_runtime::{distributed_lock, LockError};

#[distributed_lock("stock:<id>")]
async fn deduct(id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
