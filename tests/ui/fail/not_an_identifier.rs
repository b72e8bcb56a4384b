use lock_runtime::{LockError, distributed_lock};

// Text the Rust lexer reads as a reserved prefix (`id#`, `app#`) or a
// malformed number (`1e`) is reported once, at the literal.
#[distributed_lock(key = "order:<id#>")]
async fn by_hash(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "order:<id.1e>")]
async fn by_exponent(id: (u64,)) -> Result<u64, LockError> {
    Ok(id.0)
}

#[distributed_lock(key = "order:<id>", crate = "my_app#locks")]
async fn renamed(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
