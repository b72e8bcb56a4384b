use lock_runtime::{LockError, Locker, distributed_lock};

struct Order {
    id: u64,
    lines: (u32, u32),
}

struct Shard {
    shard: u16,
    locker: Locker,
}

impl Shard {
    #[distributed_lock(key = "shard:<self.shard>:order:<order.id>:<order.lines.0>", locker = self.locker)]
    async fn by_ref(&self, order: &Order) -> Result<u64, LockError> {
        Ok(order.id)
    }

    #[distributed_lock(key = "shard:<self.shard>", locker = self.locker)]
    async fn by_mut_ref(&mut self) -> Result<(), LockError> {
        self.shard += 1;
        Ok(())
    }

    #[distributed_lock(key = "shard:<self.shard>", locker = self.locker)]
    async fn by_value(self, order: Order) -> Result<Order, LockError> {
        Ok(order)
    }

    #[distributed_lock(key = "static:<id>")]
    async fn associated(id: u64) -> Result<u64, LockError> {
        Ok(id)
    }
}

fn main() {}
