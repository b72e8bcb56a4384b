//! Unit tests of an annotated stock handler with no Redis at all: the
//! locker runs on the in-memory store, and the tests run on a paused tokio
//! clock, so a 3 s lease, a 2 s wait and a 10 s payment take no real time.
//! (The README's "Testing your code" shows this file.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};

/// What the service keeps: its locker and its stock (here a map, standing
/// in for the application's database).
struct Stock {
    locker: Locker,
    units: Mutex<HashMap<u64, u32>>,
}

#[derive(Debug, PartialEq)]
enum AppError {
    SoldOut,
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

impl Stock {
    async fn new(store: &MemoryStore, sku: u64, units: u32) -> Self {
        Self {
            locker: Locker::connect(LockConfig::in_memory_store(store))
                .await
                .unwrap(),
            units: Mutex::new(HashMap::from([(sku, units)])),
        }
    }

    fn left(&self, sku: u64) -> u32 {
        self.units.lock().unwrap()[&sku]
    }
}

/// Reads the stock, takes a payment (`payment` long), writes the stock
/// back: a race without the lock.
#[distributed_lock(key = "stock:<sku>", ttl = "3s", wait = "2s", locker = stock.locker)]
async fn deduct(stock: &Stock, sku: u64, qty: u32, payment: Duration) -> Result<u32, AppError> {
    let left = stock.left(sku);
    if left < qty {
        return Err(AppError::SoldOut);
    }
    tokio::time::sleep(payment).await;
    stock.units.lock().unwrap().insert(sku, left - qty);
    Ok(left - qty)
}

#[tokio::test(start_paused = true)]
async fn ten_buyers_for_three_units_never_oversell() {
    let store = MemoryStore::new();
    let stock = Stock::new(&store, 42, 3).await;
    let payment = Duration::from_millis(150);
    let buyers = (0..10).map(|_| deduct(&stock, 42, 1, payment));
    let results = futures_util::future::join_all(buyers).await;
    let sold = results.iter().filter(|r| r.is_ok()).count();
    let sold_out = results
        .iter()
        .filter(|r| **r == Err(AppError::SoldOut))
        .count();
    assert_eq!((sold, sold_out), (3, 7), "{results:?}");
    assert_eq!(stock.left(42), 0);
    assert!(store.holders().is_empty(), "every lock given back");
}

#[tokio::test(start_paused = true)]
async fn a_payment_longer_than_the_lease_keeps_its_lock() {
    let store = MemoryStore::new();
    let stock = Stock::new(&store, 42, 3).await;
    // 10 s under a 3 s lease: the watchdog renews it, on the paused clock.
    let left = deduct(&stock, 42, 1, Duration::from_secs(10)).await;
    assert_eq!(left, Ok(2));
    assert!(stock.locker.stats().renewed >= 3);
}

#[tokio::test(start_paused = true)]
async fn a_lock_lost_mid_payment_cancels_the_deduction() {
    let store = MemoryStore::new();
    let stock = Stock::new(&store, 42, 3).await;
    let order = deduct(&stock, 42, 1, Duration::from_secs(10));
    let meddle = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        // An operator, or an expired lease: the next renewal finds it gone.
        assert_eq!(store.expire("stock:42"), 1);
    };
    let (result, ()) = tokio::join!(order, meddle);
    assert_eq!(result, Err(AppError::Interrupted));
    assert_eq!(stock.left(42), 3, "the cancelled order wrote nothing");
}

#[tokio::test(start_paused = true)]
async fn a_sku_held_elsewhere_answers_busy_after_the_wait() {
    let store = MemoryStore::new();
    let stock = Stock::new(&store, 42, 3).await;
    // Another instance of the service, on the same store.
    let elsewhere = Locker::connect(LockConfig::in_memory_store(&store))
        .await
        .unwrap();
    let _held = elsewhere.lock("stock:42").acquire().await.unwrap();
    let started = tokio::time::Instant::now();
    let result = deduct(&stock, 42, 1, Duration::ZERO).await;
    assert_eq!(result, Err(AppError::Busy));
    assert!(started.elapsed() >= Duration::from_secs(2));
}
