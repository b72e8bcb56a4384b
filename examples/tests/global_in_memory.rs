//! The testing recipe of the README and `docs/testing.md`, run: an
//! application whose annotated functions use the global locker (it calls
//! `init` once at start-up), tested on the in-memory store with paused
//! time. Every test calls `init` and accepts that another got there first;
//! tests share the process-wide store (`memory://`), so each uses keys of
//! its own.

use std::time::Duration;

use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, LockError, distributed_lock};

// The application: a payment that must not run twice at once per order.

#[derive(Debug, PartialEq)]
enum AppError {
    Busy,
    Interrupted,
    Lock(String),
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        match error {
            LockError::Timeout { .. } => AppError::Busy,
            LockError::Lost { .. } => AppError::Interrupted,
            other => AppError::Lock(other.to_string()),
        }
    }
}

#[distributed_lock(key = "order:<order>", ttl = "3s", wait = "2s")]
async fn charge(order: u64, takes: Duration) -> Result<u64, AppError> {
    tokio::time::sleep(takes).await;
    Ok(lock_runtime::current().map_or(0, |lock| lock.fence()))
}

// Its tests.

/// The global locker on the process-wide in-memory store, whichever test
/// runs first.
async fn init_in_memory() {
    match lock_runtime::init(LockConfig::from_url("memory://").unwrap()).await {
        Ok(()) | Err(LockError::AlreadyInitialized) => {}
        Err(error) => panic!("{error}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_charge_longer_than_its_lease_keeps_its_lock() {
    init_in_memory().await;
    // Ten leases long: the watchdog renews it, on paused time.
    let fence = charge(1, Duration::from_secs(30)).await;
    assert!(fence.is_ok_and(|fence| fence > 0));
}

#[tokio::test(start_paused = true)]
async fn a_second_charge_of_one_order_is_busy_after_its_wait() {
    init_in_memory().await;
    let first = charge(2, Duration::from_secs(10));
    let second = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        charge(2, Duration::ZERO).await
    };
    let (first, second) = tokio::join!(first, second);
    assert!(first.is_ok(), "{first:?}");
    assert_eq!(second, Err(AppError::Busy));
}

#[tokio::test(start_paused = true)]
async fn a_lock_lost_mid_charge_cancels_it() {
    init_in_memory().await;
    let charging = charge(3, Duration::from_secs(10));
    let meddle = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        // As a failover that lost the key would: the next renewal finds
        // the lock gone, and the body is cancelled.
        assert_eq!(MemoryStore::shared().expire("order:3"), 1);
    };
    let (charged, ()) = tokio::join!(charging, meddle);
    assert_eq!(charged, Err(AppError::Interrupted));
}
