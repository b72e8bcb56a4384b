use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "catalog:<id>", mode = "shared")]
async fn read_catalog(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "catalog:<id>", mode = true)]
async fn write_catalog(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "catalog:<id>", mode = "read", mode = "write")]
async fn both(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {
    let _ = read_catalog(1);
    let _ = write_catalog(1);
    let _ = both(1);
}
