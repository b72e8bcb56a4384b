//! One purchase, with and without the lock, and the keys it uses.

use std::time::Duration;

use lock_examples::Data;
use lock_runtime::{LockError, Locker, distributed_lock};

/// The keys of one run. Distinct from the lock's own keys
/// (`lock:{stock:<sku>}`...), which the library manages.
#[derive(Clone, Debug)]
pub struct Keys {
    /// The stock count.
    pub stock: String,
    /// Buyers started so far: each one `INCR`s it, so the processes share
    /// the buyer budget without talking to each other.
    pub buyers: String,
    /// Units handed out, for the progress line.
    pub sold: String,
}

impl Keys {
    /// The keys of `sku`.
    pub fn new(sku: &str) -> Self {
        Self {
            stock: format!("demo:stock:{sku}"),
            buyers: format!("demo:stock:{sku}:buyers"),
            sold: format!("demo:stock:{sku}:sold"),
        }
    }
}

/// One purchase: read the stock, and if any is left, write back one less.
/// A read-then-write like this is exactly what races without a lock: two
/// buyers read 7, both write 6, and two units were sold for one.
pub async fn take_one(data: &Data, keys: &Keys) -> Result<bool, LockError> {
    let left = data.get(&keys.stock).await?.unwrap_or(0);
    if left == 0 {
        return Ok(false);
    }
    // The "payment" between the check and the write widens the window.
    tokio::time::sleep(Duration::from_millis(1)).await;
    data.set(&keys.stock, left - 1).await?;
    Ok(true)
}

/// The same purchase, run by at most one buyer at a time per SKU across
/// every process. A generous `wait`: a buyer queues behind the others
/// rather than giving up (one that still times out is counted as busy).
#[distributed_lock(key = "stock:<sku>", ttl = "3s", wait = "10s", locker = locker)]
pub async fn buy_locked(
    locker: &Locker,
    sku: &str,
    data: &Data,
    keys: &Keys,
) -> Result<bool, LockError> {
    take_one(data, keys).await
}
