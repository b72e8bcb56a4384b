// `#[async_trait]` on the impl block expands first and turns each method
// into a plain `fn` returning `Box::pin(async move { .. })`; the lock goes
// inside that future.
use std::sync::Arc;

use lock_runtime::{LockError, Locker, distributed_lock};

#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Parse(std::num::ParseIntError),
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        AppError::Lock(error)
    }
}

impl From<std::num::ParseIntError> for AppError {
    fn from(error: std::num::ParseIntError) -> Self {
        AppError::Parse(error)
    }
}

#[async_trait::async_trait]
trait Inventory {
    async fn reserve(&self, sku: u64) -> Result<u64, LockError>;
    async fn parse(&self, sku: &str) -> Result<u64, AppError>;
    async fn close(self: Arc<Self>, shard: u32) -> Result<u32, LockError>;
    async fn by_default(&self, sku: u64) -> Result<u64, LockError>;
}

struct Warehouse {
    locker: Locker,
    shard: u32,
}

#[async_trait::async_trait]
impl Inventory for Warehouse {
    #[distributed_lock(key = "sku:<self.shard>:<sku>", locker = self.locker)]
    async fn reserve(&self, sku: u64) -> Result<u64, LockError> {
        Ok(sku)
    }

    /// Documented, with `?` and an early return.
    #[distributed_lock(key = "sku:<sku>", ttl = "3s", wait = "0s", locker = self.locker)]
    async fn parse(&self, sku: &str) -> Result<u64, AppError> {
        let sku: u64 = sku.parse()?;
        if sku == 0 {
            return Err(AppError::Lock(LockError::NotInitialized));
        }
        Ok(sku)
    }

    #[distributed_lock(key = "shard:<shard>", locker = self.locker)]
    async fn close(self: Arc<Self>, shard: u32) -> Result<u32, LockError> {
        Ok(self.shard + shard)
    }

    #[distributed_lock(key = "sku:<sku>")]
    async fn by_default(&self, sku: u64) -> Result<u64, LockError> {
        Ok(sku)
    }
}

#[async_trait::async_trait(?Send)]
trait Local {
    async fn count(&self, id: u32) -> Result<usize, LockError>;
}

#[async_trait::async_trait(?Send)]
impl Local for Warehouse {
    #[distributed_lock(key = "local:<id>", locker = self.locker)]
    async fn count(&self, id: u32) -> Result<usize, LockError> {
        let shared = std::rc::Rc::new(id);
        tokio::task::yield_now().await;
        Ok(std::rc::Rc::strong_count(&shared))
    }
}

// The same form written by hand.
struct Job;

impl Job {
    #[distributed_lock(key = "job:<id>")]
    fn run(
        &self,
        id: u64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, LockError>> + Send + '_>>
    {
        Box::pin(async move { Ok(id) })
    }
}

fn send<T: Send>(_: T) {}

fn use_dyn(inventory: &dyn Inventory, warehouse: Arc<Warehouse>) {
    send(inventory.reserve(1));
    send(inventory.parse("1"));
    send(inventory.by_default(1));
    send(warehouse.close(1));
}

fn main() {
    let _ = use_dyn;
    let _ = <Warehouse as Local>::count;
    let _ = Job.run(1);
}
