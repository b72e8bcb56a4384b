//! The in-memory store as a product: the global locker on `memory://`
//! across `#[tokio::test]` runtimes with clocks of their own, the test
//! hooks, paused time, and use outside a runtime. (The behaviours it shares
//! with Redis are in `conformance.rs`.)

use std::time::Duration;

use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};

/// The global locker on the process-wide store, whichever test comes first.
async fn init_global() {
    match lock_runtime::init(LockConfig::from_url("memory://").unwrap()).await {
        Ok(()) | Err(LockError::AlreadyInitialized) => {}
        Err(err) => panic!("{err}"),
    }
}

#[distributed_lock(key = "report:<name>", ttl = "30s")]
async fn nightly_report(name: &str, work: Duration) -> Result<u64, LockError> {
    tokio::time::sleep(work).await;
    Ok(lock_runtime::current().map_or(0, |lock| lock.fence()))
}

/// Each of these runs on a runtime of its own, with its own paused clock,
/// in parallel with the others, on the one global locker: ten minutes of
/// work under a 30 s lease each, renewed on its own clock.
#[tokio::test(start_paused = true)]
async fn the_global_locker_serves_runtime_a() {
    init_global().await;
    let fence = nightly_report("a", Duration::from_secs(600)).await.unwrap();
    assert!(fence > 0);
}

#[tokio::test(start_paused = true)]
async fn the_global_locker_serves_runtime_b() {
    init_global().await;
    let fence = nightly_report("b", Duration::from_secs(600)).await.unwrap();
    assert!(fence > 0);
}

#[tokio::test]
async fn the_global_locker_serves_an_unpaused_runtime() {
    init_global().await;
    nightly_report("c", Duration::from_millis(20))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn ten_minutes_under_a_30s_lease_are_renewed_on_the_paused_clock() {
    let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
    let guard = locker
        .lock("long")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(guard.is_held());
    // Every ttl/3 at the latest: 60 renewals fall due in ten minutes, the
    // last at the very moment this test wakes.
    assert!(locker.stats().renewed >= 59, "{:?}", locker.stats());
    assert!(guard.release().await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn the_hooks_show_holders_and_waiters_and_end_leases() {
    let store = MemoryStore::new();
    let config = LockConfig::in_memory_store(&store).key_prefix("shop:");
    let (a, b) = (
        Locker::connect(config.clone()).await.unwrap(),
        Locker::connect(config).await.unwrap(),
    );
    let guard = a
        .lock("stock:}42")
        .ttl(Duration::from_secs(9))
        .acquire()
        .await
        .unwrap();
    let held = store.holders();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].name, "stock:}42");
    assert_eq!(held[0].key, "shop:{stock:%7D42}");
    assert!(!held[0].contended);
    assert_eq!(held[0].remaining, Duration::from_secs(9));

    assert_eq!(store.waiting("stock:}42"), 0);
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.lock("stock:}42")
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(store.waiting("stock:}42"), 1);
    assert!(store.holders()[0].contended, "the waiter marked it");

    // Ending the lease: the holder is told at its next renewal, and the
    // waiter takes the lock when the lease it was told of would have ended.
    assert_eq!(store.expire("stock:}42"), 1);
    assert_eq!(store.expire("stock:}42"), 0);
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("told at the next renewal");
    let next = waiting.await.unwrap().unwrap();
    assert!(next.fence() > guard.fence());
    let now_held = store.holders();
    assert_eq!(now_held[0].holder, held[0].holder, "one process, one label");
    assert!(
        !now_held[0].contended,
        "a new holder's value starts unmarked"
    );
    assert_eq!(store.waiting("stock:}42"), 0);
}

#[tokio::test(start_paused = true)]
async fn stores_are_separate_unless_shared() {
    let (one, other) = (LockConfig::in_memory(), LockConfig::in_memory());
    let a = Locker::connect(one.clone()).await.unwrap();
    let same = Locker::connect(one).await.unwrap();
    let elsewhere = Locker::connect(other).await.unwrap();
    let _held = a.lock("k").acquire().await.unwrap();
    assert!(same.lock("k").try_acquire().await.unwrap().is_none());
    assert!(elsewhere.lock("k").try_acquire().await.unwrap().is_some());
    let named = LockConfig::from_url("memory://conformance-named").unwrap();
    let _named = Locker::connect(named)
        .await
        .unwrap()
        .lock("k")
        .acquire()
        .await
        .unwrap();
    assert_eq!(MemoryStore::named("conformance-named").holders().len(), 1);
}

#[test]
fn outside_any_runtime_an_acquisition_is_a_config_error_not_a_panic() {
    let runtime = runtime(false);
    let locker = runtime
        .block_on(Locker::connect(LockConfig::in_memory()))
        .unwrap();
    drop(runtime);
    let attempt = futures_util::FutureExt::now_or_never(locker.lock("k").acquire());
    let Some(Err(LockError::Config(text))) = attempt else {
        panic!("{attempt:?}");
    };
    assert!(text.contains("runtime"), "{text}");
}

#[test]
fn outside_any_runtime_a_release_lets_go_without_a_panic() {
    let runtime = runtime(false);
    let store = MemoryStore::new();
    let locker = runtime
        .block_on(Locker::connect(LockConfig::in_memory_store(&store)))
        .unwrap();
    let guard = runtime.block_on(locker.lock("outside").acquire()).unwrap();
    // Released from a thread with no runtime (the store's calls never wait).
    let released =
        std::thread::spawn(move || futures_util::FutureExt::now_or_never(guard.release()))
            .join()
            .expect("the release panicked");
    assert!(matches!(released, Some(Ok(true))), "{released:?}");
    assert!(store.holders().is_empty());
}

/// A guard kept past the runtime that acquired it (and ran its watchdog):
/// nothing renews its lease any more, so it is reported lost at once rather
/// than never, while another locker may take the lock once it expires.
#[test]
fn a_guard_outliving_its_acquiring_runtime_is_told_of_its_loss() {
    let later = runtime(false);
    let store = MemoryStore::new();
    let locker = later
        .block_on(Locker::connect(LockConfig::in_memory_store(&store)))
        .unwrap();
    let acquiring = runtime(false);
    let guard = acquiring
        .block_on(locker.lock("moved").ttl(Duration::from_secs(30)).acquire())
        .unwrap();
    assert!(guard.is_held());
    drop(acquiring);
    later.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), guard.lost())
            .await
            .expect("the holder is told its lease is no longer watched");
    });
    assert!(!guard.is_held());
    assert_eq!(locker.stats().lost, 1);
}

fn runtime(paused: bool) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(paused)
        .build()
        .unwrap()
}

/// Enough locks to make the store sweep its expired keys at each call.
const MANY: usize = 4_100;

/// Two runtimes with clocks of their own share a store on distinct keys:
/// the one whose clock was advanced an hour sweeps only its own keys, not
/// the other's live lock.
#[test]
fn a_sweep_on_an_advanced_clock_leaves_another_runtimes_lock_alone() {
    let store = MemoryStore::new();
    let real = runtime(false);
    let connect = |on: &tokio::runtime::Runtime| {
        on.block_on(Locker::connect(LockConfig::in_memory_store(&store)))
            .unwrap()
    };
    let (holder, rival) = (connect(&real), connect(&real));
    let request = holder.lock("held").ttl(Duration::from_secs(30));
    let guard = real.block_on(request.acquire()).unwrap();
    let paused = runtime(true);
    let other = connect(&paused);
    paused.block_on(async {
        let mut fixed = Vec::with_capacity(MANY);
        for n in 0..MANY {
            let request = other
                .lock(format!("order:{n}"))
                .ttl(Duration::from_secs(60));
            fixed.push(request.watchdog(false).acquire().await.unwrap());
        }
        tokio::time::advance(Duration::from_secs(3600)).await;
        // Any call on the store now sweeps, on this runtime's clock.
        assert!(other.lock("probe").try_acquire().await.unwrap().is_some());
        drop(fixed);
    });
    real.block_on(async {
        assert!(guard.is_held());
        let second = rival.lock("held").try_acquire().await.unwrap();
        assert!(second.is_none(), "a second owner took a lock still held");
        assert!(guard.release().await.unwrap());
    });
}

/// The other way round: a paused runtime's lock, its clock standing still,
/// is not swept by a runtime on real time once that time passed its lease.
#[test]
fn a_sweep_on_real_time_leaves_a_paused_runtimes_lock_alone() {
    let store = MemoryStore::new();
    let paused = runtime(true);
    let connect = |on: &tokio::runtime::Runtime| {
        on.block_on(Locker::connect(LockConfig::in_memory_store(&store)))
            .unwrap()
    };
    let (holder, rival) = (connect(&paused), connect(&paused));
    let request = holder.lock("held").ttl(Duration::from_millis(300));
    let guard = paused.block_on(request.acquire()).unwrap();
    let real = runtime(false);
    let other = connect(&real);
    real.block_on(async {
        let mut held = Vec::with_capacity(MANY);
        for n in 0..MANY {
            let request = other
                .lock(format!("order:{n}"))
                .ttl(Duration::from_secs(60));
            held.push(request.acquire().await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(other.lock("probe").try_acquire().await.unwrap().is_some());
        drop(held);
    });
    paused.block_on(async {
        assert!(guard.is_held(), "no time passed on this runtime's clock");
        let second = rival.lock("held").try_acquire().await.unwrap();
        assert!(second.is_none(), "a second owner took a lock still held");
        assert!(guard.release().await.unwrap());
    });
}

/// A lock lost to its hold cap and then given back by its holder (as the
/// attribute always does) is counted once, as lost, not also as released.
#[tokio::test(start_paused = true)]
async fn a_lock_lost_then_given_back_counts_as_lost_only() {
    let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
    let guard = locker
        .lock("capped")
        .ttl(Duration::from_secs(3))
        .max_hold(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("told at the cap");
    // The key is still ours on the store: the cap stops renewals only.
    assert!(guard.release().await.unwrap());
    let stats = locker.stats();
    assert_eq!(
        (stats.acquired, stats.lost, stats.released),
        (1, 1, 0),
        "{stats:?}"
    );
}

/// A runtime that ends while a task of it holds a
/// lock (and another of its tasks waits in line for it) leaves nothing
/// held in the store: the guard's drop (and the untaken hand-over's) let
/// go at once.
#[test]
fn a_runtime_ending_with_a_holder_and_a_waiter_leaves_nothing_held() {
    for paused in [false, true] {
        let store = MemoryStore::new();
        let ending = runtime(paused);
        let locker = ending
            .block_on(Locker::connect(LockConfig::in_memory_store(&store)))
            .unwrap();
        ending.block_on(async {
            let (held, acquired) = tokio::sync::oneshot::channel();
            let holder = locker.clone();
            tokio::spawn(async move {
                let guard = holder
                    .lock("kept")
                    .ttl(Duration::from_secs(30))
                    .acquire()
                    .await;
                let _ = held.send(());
                let _guard = guard;
                std::future::pending::<()>().await;
            });
            acquired.await.unwrap();
            let waiter = locker.clone();
            tokio::spawn(async move {
                let _ = waiter
                    .lock("kept")
                    .wait(Duration::from_secs(600))
                    .acquire()
                    .await;
            });
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        });
        drop(ending);
        assert_eq!(store.holders(), Vec::new(), "paused: {paused}");
    }
}

/// Waiters of one locker cancelled at every stage
/// (queued for their turn, subscribed, just handed the lock) while the
/// lock is passed along the line: afterwards nothing is held, nobody is
/// listed as waiting, and the lock is free at once.
#[tokio::test(start_paused = true)]
async fn waiters_cancelled_along_a_passing_line_leave_nothing_behind() {
    let store = MemoryStore::new();
    let config = LockConfig::in_memory_store(&store);
    let (ours, theirs) = (
        Locker::connect(config.clone()).await.unwrap(),
        Locker::connect(config).await.unwrap(),
    );
    let first = ours
        .lock("hot")
        .ttl(Duration::from_secs(9))
        .acquire()
        .await
        .unwrap();
    // Another locker waits too, so that the line's subscription matters.
    let outside = {
        let theirs = theirs.clone();
        tokio::spawn(async move {
            let request = theirs.lock("hot").wait(Duration::from_secs(3600));
            let guard = request.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(3)).await;
            guard.release().await.unwrap();
        })
    };
    let mut tasks = Vec::new();
    for n in 0..60u64 {
        let ours = ours.clone();
        tasks.push(tokio::spawn(async move {
            let request = ours
                .lock("hot")
                .ttl(Duration::from_secs(9))
                .wait(Duration::from_secs(3600));
            // Cut after 0..=19 ms: some in line, some holding.
            let cut = Duration::from_millis(n % 20);
            if let Ok(Ok(guard)) = tokio::time::timeout(cut, request.acquire()).await {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if n % 3 == 0 {
                    drop(guard);
                } else {
                    let _ = guard.release().await;
                }
            }
        }));
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    drop(first);
    for task in tasks {
        task.await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(60), outside)
        .await
        .expect("the other locker's waiter got the lock")
        .unwrap();
    assert_eq!(store.waiting("hot"), 0);
    assert_eq!(store.holders(), Vec::new());
    let again = ours.lock("hot").try_acquire().await.unwrap();
    assert!(again.is_some(), "free at once");
}

/// The shortest lease accepted (10 ms: 4.9 to 7.4 ms to trust after the
/// drift allowance and the reaction margin), renewed by the watchdog on a
/// store that answers at once: every renewal is sent while the lease is
/// still trusted, so it is kept. (A 3 ms lease, the shortest accepted
/// before, was reported lost before its first renewal was due.)
#[tokio::test(start_paused = true)]
async fn the_shortest_lease_accepted_is_kept_by_the_watchdog() {
    let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
    let guard = locker
        .lock("tiny")
        .ttl(Duration::from_millis(10))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let stats = locker.stats();
    assert!(guard.is_held(), "lost: {stats:?}");
    // Every 3.3 ms, on a timer of millisecond grain.
    assert!(stats.renewed >= 5, "{stats:?}");
    assert!(guard.release().await.unwrap());
}

/// `MemoryStore::waiting` counts the acquisitions waiting for a lock to be
/// released, whether or not it is held right now: a lease ended with
/// `expire` leaves its rival waiting (it retries when the lease it was
/// told of would have ended), and it is still counted.
#[tokio::test(start_paused = true)]
async fn waiting_still_counts_a_rival_after_the_lease_was_ended() {
    let store = MemoryStore::new();
    let config = LockConfig::in_memory_store(&store);
    let (a, b) = (
        Locker::connect(config.clone()).await.unwrap(),
        Locker::connect(config).await.unwrap(),
    );
    let _guard = a
        .lock("k")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let rival = {
        let b = b.clone();
        tokio::spawn(async move { b.lock("k").wait(Duration::from_secs(60)).acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(store.waiting("k"), 1);
    assert_eq!(store.expire("k"), 1);
    assert!(!rival.is_finished());
    assert_eq!(b.stats().asleep, 1, "the rival still waits");
    assert_eq!(store.waiting("k"), 1, "the rival still waits for `k`");
    rival.abort();
}
