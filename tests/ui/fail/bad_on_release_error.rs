use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "stock:<id>", on_release_error = "ignore")]
async fn deduct(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
