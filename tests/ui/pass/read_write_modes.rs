use lock_runtime::{LockError, Locker, distributed_lock};

#[distributed_lock(key = "catalog:<id>", mode = "read", ttl = "3s")]
async fn read_catalog(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "catalog:<id>", mode = "write", wait = "0s", on_lost = "continue", locker = locker)]
async fn write_catalog(locker: &Locker, id: u64) -> Result<u64, LockError> {
    let _ = locker;
    Ok(id)
}

fn main() {
    let _ = read_catalog(1);
}
