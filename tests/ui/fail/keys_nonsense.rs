use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(keys = [])]
async fn no_key(a: u64) -> Result<u64, LockError> {
    Ok(a)
}

#[distributed_lock(keys = "acct:<a>")]
async fn not_an_array(a: u64) -> Result<u64, LockError> {
    Ok(a)
}

#[distributed_lock(keys = ["acct:<a>", 7, "acct:<a"])]
async fn not_templates(a: u64) -> Result<u64, LockError> {
    Ok(a)
}

#[distributed_lock(keys = ["a:<a>", "b:<b>"], fair = true)]
async fn fair_beside(a: u64, b: u64) -> Result<u64, LockError> {
    Ok(a + b)
}

#[distributed_lock(keys = ["a:<a>", "b:<b>"], mode = "write")]
async fn a_mode_beside(a: u64, b: u64) -> Result<u64, LockError> {
    Ok(a + b)
}

#[distributed_lock(keys = ["a:<a>", "b:<b>"], limit = 2)]
async fn a_limit_beside(a: u64, b: u64) -> Result<u64, LockError> {
    Ok(a + b)
}

#[distributed_lock(keys = ["a:<a>", "b:<b>"], reentrant = false)]
async fn reentrant_beside(a: u64, b: u64) -> Result<u64, LockError> {
    Ok(a + b)
}

fn main() {}
