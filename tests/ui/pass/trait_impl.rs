use lock_runtime::{LockError, Locker, distributed_lock};

trait Inventory {
    async fn reserve(&self, sku: u64) -> Result<u64, LockError>;
}

struct Warehouse {
    locker: Locker,
}

impl Inventory for Warehouse {
    #[distributed_lock(key = "sku:<sku>", locker = self.locker)]
    async fn reserve(&self, sku: u64) -> Result<u64, LockError> {
        Ok(sku)
    }
}

fn main() {}
