use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "stock:<id>")]
async fn deduct(id: u64) -> Result<u32, LockError> {
    if id == 0 {
        return Ok(0);
    }
    Ok(id)
}

fn main() {}
