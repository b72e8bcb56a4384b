//! The fair lock's behaviours: the same on every backend that has it
//! (Redlock refuses it; `fair.rs` checks the refusal).

use std::time::Duration;

use lock_runtime::{FairGuard, LockError, Locker, distributed_lock};
use lock_tests::conformance::Site;
use lock_tests::fixtures::{STALL_ROOM, eventually};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::behaviours::{FOREVER, TTL, patient};

/// The longest a waiter's place lasts between renewals (the runtime's
/// `PLACE_LEASE`): what a waiter that left without saying so can cost.
const PLACE_LEASE: Duration = Duration::from_secs(2);

/// `waiter` waiting for fair lock `name` (in a task), once it sleeps in
/// line: the server saw its first try, so it is behind every waiter lined
/// up before it.
async fn line_up(waiter: &Locker, name: &'static str) -> JoinHandle<Result<FairGuard, LockError>> {
    let asleep = waiter.stats().asleep;
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.fair_lock(name).wait(FOREVER).acquire().await })
    };
    eventually(
        "the fair waiter is in line, asleep",
        Duration::from_secs(10),
        || waiter.stats().asleep == asleep + 1,
    )
    .await;
    waiting
}

/// Nothing of the resource `name` is left on the site.
async fn nothing_left(site: &Site, name: &str) {
    eventually(
        "nothing of the fair lock is left",
        Duration::from_secs(10),
        || site.keys_of(name).is_empty(),
    )
    .await;
}

pub async fn a_fair_lock_is_taken_and_released_leaving_nothing(site: &Site) {
    let (a, b) = (site.locker().await, site.locker().await);
    let guard = a.fair_lock("f").acquire().await.unwrap();
    assert!(guard.is_held());
    assert_eq!(guard.arrival(), None, "taken at its first try");
    assert_eq!(site.keys_of("f").len(), 1, "{:?}", site.keys_of("f"));
    assert!(b.fair_lock("f").try_acquire().await.unwrap().is_none());
    // A single try takes no place in line.
    assert_eq!(site.keys_of("f").len(), 1, "{:?}", site.keys_of("f"));
    // The plain lock of the same name is another lock.
    let plain = b.lock("f").try_acquire().await.unwrap();
    assert!(plain.expect("another lock").release().await.unwrap());
    let fence = guard.fence();
    assert!(guard.release().await.unwrap());
    assert!(site.keys_of("f").is_empty(), "{:?}", site.keys_of("f"));
    let again = b.fair_lock("f").try_acquire().await.unwrap();
    let again = again.expect("free once released");
    assert!(again.fence() > fence);
    assert!(again.release().await.unwrap());
    assert!(site.keys_of("f").is_empty());
}

pub async fn fair_waiters_are_granted_in_arrival_order(site: &Site) {
    let holder = site.locker().await;
    let held = holder.fair_lock("f").ttl(FOREVER).acquire().await.unwrap();
    let waiters = [
        patient(site).await,
        patient(site).await,
        patient(site).await,
    ];
    let mut lined = Vec::new();
    for waiter in &waiters {
        lined.push(line_up(waiter, "f").await);
    }
    let mut fence = held.fence();
    let mut arrival = 0;
    assert!(held.release().await.unwrap());
    // Each is handed the lock by the release before it; none overtakes
    // (a waiter granted out of order would hold the lock while the one
    // awaited here waits behind it: its wait would end the test).
    for (position, waiting) in lined.into_iter().enumerate() {
        let released = Instant::now();
        let within = PLACE_LEASE + STALL_ROOM;
        let guard = tokio::time::timeout(within, waiting)
            .await
            .unwrap_or_else(|_| panic!("waiter {position} was not handed the lock"))
            .unwrap()
            .unwrap();
        // Its backoff is a minute away: the hand-over's message woke it.
        assert!(released.elapsed() < STALL_ROOM, "{:?}", released.elapsed());
        assert!(guard.fence() > fence, "{} after {fence}", guard.fence());
        let arrived = guard.arrival().expect("it waited in line");
        assert!(arrived > arrival, "{arrived} after {arrival}");
        (fence, arrival) = (guard.fence(), arrived);
        assert!(guard.release().await.unwrap());
    }
    for waiter in &waiters {
        assert_eq!(waiter.stats().timer_wakeups, 0, "{:?}", waiter.stats());
    }
    nothing_left(site, "f").await;
}

pub async fn a_fair_waiter_that_stops_waiting_leaves_the_line(site: &Site) {
    let holder = site.locker().await;
    let held = holder.fair_lock("f").ttl(FOREVER).acquire().await.unwrap();
    // One whose wait runs out, one whose future is dropped.
    let quitter = site.locker().await;
    let wait = Duration::from_millis(600);
    let err = quitter.fair_lock("f").wait(wait).acquire().await;
    assert!(matches!(err, Err(LockError::Timeout { .. })), "{err:?}");
    let dropped = patient(site).await;
    let cancelled = line_up(&dropped, "f").await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    let last = patient(site).await;
    let waiting = line_up(&last, "f").await;
    assert!(held.release().await.unwrap());
    let released = Instant::now();
    let guard = tokio::time::timeout(PLACE_LEASE + STALL_ROOM, waiting)
        .await
        .expect("a waiter that left blocked the line")
        .unwrap()
        .unwrap();
    assert!(
        released.elapsed() < PLACE_LEASE + STALL_ROOM,
        "{:?}",
        released.elapsed()
    );
    assert!(guard.release().await.unwrap());
    nothing_left(site, "f").await;
}

pub async fn a_deleted_fair_lock_is_reported_lost(site: &Site) {
    let locker = site.locker().await;
    let guard = locker.fair_lock("f").ttl(TTL).acquire().await.unwrap();
    site.delete_all("f");
    let deleted = Instant::now();
    tokio::time::timeout(TTL / 3 + STALL_ROOM, guard.lost())
        .await
        .expect("the loss was not told at the next renewal");
    assert!(deleted.elapsed() < TTL / 3 + STALL_ROOM);
    assert!(!guard.is_held());
    assert_eq!(locker.stats().lost, 1);
    assert!(!guard.release().await.unwrap());
}

#[distributed_lock(key = "shelf:<id>", fair = true, locker = locker)]
async fn stock_fairly(locker: &Locker, id: u32) -> Result<(u64, u64), LockError> {
    let mine = lock_runtime::current().expect("inside the lock").fence();
    Ok((mine, count_fairly(locker, id).await?))
}

#[distributed_lock(key = "shelf:<id>", fair = true, wait = "0s", locker = locker)]
async fn count_fairly(locker: &Locker, id: u32) -> Result<u64, LockError> {
    Ok(lock_runtime::current().expect("inside the lock").fence())
}

pub async fn the_fair_attribute_reenters_its_own_lock(site: &Site) {
    let locker = site.locker().await;
    let started = Instant::now();
    let (outer, nested) = stock_fairly(&locker, 3).await.unwrap();
    assert!(started.elapsed() < STALL_ROOM, "a nested call waited");
    assert_eq!(outer, nested, "the nested call took a second lock");
    assert_eq!(locker.stats().acquired, 1, "one lock for the whole call");
    assert!(site.keys_of("shelf:3").is_empty());
}
