use std::sync::OnceLock;

use lock_runtime as renamed_runtime;
use lock_runtime::{LockError, Locker, distributed_lock};

static ORDERS: OnceLock<Locker> = OnceLock::new();

#[distributed_lock(
    key = "order:<id>",
    ttl = "1m30s",
    wait = "0s",
    watchdog = false,
    on_lost = "continue",
    reentrant = false,
    max_hold = "5m",
    locker = ORDERS,
)]
async fn every_option(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "order:<id>", on_lost = "cancel", ttl = "250ms", crate = "renamed_runtime")]
async fn renamed(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "order:<id>", locker = locker)]
async fn locker_parameter(locker: &Locker, id: u64) -> Result<u64, LockError> {
    let _ = locker;
    Ok(id)
}

#[distributed_lock(key = "queue:<id>", fair = true, ttl = "3s", wait = "10s")]
async fn served_in_arrival_order(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "order:<id>", fair = false)]
async fn plain_when_said(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {
    let _ = every_option(1);
    let _ = served_in_arrival_order(1);
    let _ = plain_when_said(1);
    let _ = renamed(1);
}
