use lock_runtime::{LockError, distributed_lock};

struct Order {
    id: u64,
}

#[async_trait::async_trait]
trait Orders {
    async fn ship(&self, order: Order) -> Result<u64, LockError>;
}

struct Shop;

// `#[async_trait]` expands first and renames the destructured parameter.
#[async_trait::async_trait]
impl Orders for Shop {
    #[distributed_lock(key = "order:<id>")]
    async fn ship(&self, Order { id }: Order) -> Result<u64, LockError> {
        Ok(id)
    }
}

fn main() {}
