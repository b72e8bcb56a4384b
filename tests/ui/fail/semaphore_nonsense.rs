use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "render:<t>", limit = 2, permits = 3)]
async fn more_permits_than_the_limit(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

#[distributed_lock(key = "render:<t>", permits = 2)]
async fn permits_without_a_limit(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

#[distributed_lock(key = "render:<t>", limit = 0)]
async fn a_limit_of_zero(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

#[distributed_lock(key = "render:<t>", limit = "4")]
async fn a_limit_in_quotes(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

#[distributed_lock(key = "render:<t>", limit = 4, reentrant = false)]
async fn reentrant_beside_a_limit(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

#[distributed_lock(key = "render:<t>", limit = 5000)]
async fn a_limit_too_large(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

#[distributed_lock(key = "render:<t>", limit = 4, fair = true)]
async fn fair_beside_a_limit(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

#[distributed_lock(key = "render:<t>", limit = 4, mode = "read")]
async fn a_mode_beside_a_limit(t: u32) -> Result<u32, LockError> {
    Ok(t)
}

fn main() {}
