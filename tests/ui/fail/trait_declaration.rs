use lock_runtime::{LockError, distributed_lock};

trait Shop {
    // A declaration has no body to lock: the error says where to put it.
    #[distributed_lock(key = "stock:<id>")]
    async fn deduct(&self, id: u64) -> Result<u64, LockError>;
}

fn main() {}
