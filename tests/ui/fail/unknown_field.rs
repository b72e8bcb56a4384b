use lock_runtime::{LockError, distributed_lock};

struct Order {
    id: u64,
}

// Reported at the key, without a suggestion to replace the key with `id`.
#[distributed_lock(key = "stock:<order.idd>")]
async fn deduct(order: Order) -> Result<u64, LockError> {
    Ok(order.id)
}

fn main() {}
