//! A holder with another task of its locker in line passes the lock to it
//! (see `lock-runtime/src/handover.rs`): what is never passed, what is given
//! back, and that another locker's waiter is not starved by a busy line.
//! The common case runs on every backend in conformance.rs
//! (`the_next_task_in_line_is_handed_the_lock`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, LockError, LockGuard, Locker, distributed_lock};
use lock_tests::fixtures::{STALL_PROOF_TTL, eventually, get, lock_key, locker};
use lock_tests::{FaultProxy, RedisServer};

const FOREVER: Duration = Duration::from_secs(60);

/// `name` taken by `locker` with a lease of `ttl`, waiting as long as it
/// takes.
async fn take(locker: &Locker, name: &str, ttl: Duration) -> LockGuard {
    let request = locker.lock(name).ttl(ttl).wait(FOREVER);
    request.acquire().await.unwrap()
}

/// A task of `locker` queued behind the current holder of `name` (on a
/// current-thread runtime, one yield lets it reach its place in line).
async fn queue(
    locker: &Locker,
    name: &'static str,
    ttl: Duration,
) -> tokio::task::JoinHandle<LockGuard> {
    let locker = locker.clone();
    let task = tokio::spawn(async move { take(&locker, name, ttl).await });
    tokio::task::yield_now().await;
    task
}

#[tokio::test]
async fn a_lock_that_is_no_longer_ours_is_not_passed_through_the_server() {
    let server = RedisServer::start();
    let (ours, theirs) = (locker(&server.url()).await, locker(&server.url()).await);
    // Not renewed, and held past half its lease: too little left to pass
    // in process, so the pass goes through the server.
    let request = ours.lock("gone").ttl(STALL_PROOF_TTL).wait(FOREVER);
    let request = request.watchdog(false);
    let guard = request.acquire().await.unwrap();
    let next = queue(&ours, "gone", STALL_PROOF_TTL).await;
    tokio::time::sleep(STALL_PROOF_TTL / 2).await;
    // An operator frees the lock and another locker takes it.
    assert!(theirs.force_unlock("gone").await.unwrap());
    let other = theirs.lock("gone").try_acquire().await.unwrap().unwrap();
    assert!(
        !guard.release().await.unwrap(),
        "not ours to release or pass"
    );
    assert_eq!(ours.stats().handovers, 0);
    assert!(!next.is_finished());
    let other_fence = other.fence();
    assert!(other.release().await.unwrap());
    // The next in line took it from the server once it was free.
    let next = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next in line got the lock")
        .unwrap();
    assert!(next.fence() > other_fence);
    assert_eq!(ours.stats().handovers, 0);
    assert!(next.release().await.unwrap());
}

/// A holder whose lease ended (here a fixed lease that ran out) gives up
/// its turn in its locker's line then, though it keeps its guard: the next
/// task of its locker takes the lock from the server as a task of another
/// locker would, instead of waiting for the stale guard to go.
#[tokio::test]
async fn a_holder_whose_lease_ended_does_not_hold_back_its_line() {
    let server = RedisServer::start();
    let ours = locker(&server.url()).await;
    let request = ours.lock("fixed").ttl(Duration::from_millis(300));
    let stale = request
        .watchdog(false)
        .wait(FOREVER)
        .acquire()
        .await
        .unwrap();
    let next = queue(&ours, "fixed", STALL_PROOF_TTL).await;
    tokio::time::timeout(Duration::from_secs(10), stale.lost())
        .await
        .expect("told its fixed lease ended");
    let next = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next in line took the lock while the stale guard lives")
        .unwrap();
    assert!(next.fence() > stale.fence());
    assert_eq!(ours.stats().handovers, 0, "a lost lease is never passed");
    assert!(!stale.release().await.unwrap(), "no longer ours");
    assert!(next.release().await.unwrap());
}

/// A pass in process checks nothing on the server: a lock lost without
/// its holder knowing yet goes on to the next in line, which is told at
/// the watchdog's next renewal, as the holder would have been, and whose
/// fence is below the new owner's, so a fenced resource refuses it.
#[tokio::test]
async fn a_lock_lost_unknowingly_and_passed_in_process_is_reported_lost_to_the_taker() {
    let server = RedisServer::start();
    let (ours, theirs) = (locker(&server.url()).await, locker(&server.url()).await);
    let guard = take(&ours, "gone", STALL_PROOF_TTL).await;
    let next = queue(&ours, "gone", STALL_PROOF_TTL).await;
    // Room for the next fence: two µs per fence since the grant.
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(theirs.force_unlock("gone").await.unwrap());
    let other = theirs.lock("gone").try_acquire().await.unwrap().unwrap();
    let given_fence = guard.fence();
    assert!(guard.release().await.unwrap(), "ours as far as we knew");
    let next = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next in line was handed the lock")
        .unwrap();
    let stats = ours.stats();
    assert_eq!((stats.handovers, stats.handovers_in_process), (1, 1));
    assert_eq!(next.fence(), given_fence + 1, "the hold's next fence");
    assert!(
        next.fence() < other.fence(),
        "the new owner's fence is higher"
    );
    tokio::time::timeout(STALL_PROOF_TTL, next.lost())
        .await
        .expect("told within the lease it was handed");
    assert!(!next.release().await.unwrap(), "not ours");
    assert!(
        other.release().await.unwrap(),
        "the new owner's lock was left alone"
    );
}

/// A line that keeps a lock busy passes it in process, and sends every
/// ninth pass in a row through the server, which renews the lease and
/// issues a fence from its clock.
#[tokio::test]
async fn passes_in_process_continue_the_hold_and_every_ninth_goes_through_the_server() {
    const GRANTS: usize = 20;
    // Long enough that half of it outlasts the whole run, stalls included.
    const TTL: Duration = Duration::from_secs(8);
    let server = RedisServer::start();
    let ours = locker(&server.url()).await;
    let first = take(&ours, "chain", TTL).await;
    let fences = Arc::new(std::sync::Mutex::new(vec![first.fence()]));
    let mut line = Vec::new();
    for _ in 1..GRANTS {
        let (ours, fences) = (ours.clone(), fences.clone());
        line.push(tokio::spawn(async move {
            let guard = take(&ours, "chain", TTL).await;
            fences.lock().unwrap().push(guard.fence());
            // Held for a while: the fence may rise by one per two µs.
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(guard.release().await.unwrap());
        }));
        // On this one-thread runtime, the task reaches its place in line.
        tokio::task::yield_now().await;
    }
    assert!(first.release().await.unwrap());
    for task in line {
        task.await.unwrap();
    }
    let fences = fences.lock().unwrap().clone();
    let stats = ours.stats();
    assert_eq!(stats.handovers, (GRANTS - 1) as u64, "{stats:?}");
    // Passes 1-8 in process, 9 on the server, 10-17 in process, 18 on
    // the server, 19 in process.
    assert_eq!(stats.handovers_in_process, 17, "{stats:?}");
    for (n, pair) in fences.windows(2).enumerate() {
        let pass = n + 1;
        if pass % 9 == 0 {
            assert!(
                pair[1] > pair[0] + 1,
                "pass {pass} by the server: {fences:?}"
            );
        } else {
            assert_eq!(pair[1], pair[0] + 1, "pass {pass} in process: {fences:?}");
        }
    }
    assert!(get(&server, &lock_key("chain")).is_none(), "nothing left");
}

#[tokio::test]
async fn a_lock_passed_with_another_lease_is_given_back_and_taken_again() {
    let server = RedisServer::start();
    let ours = locker(&server.url()).await;
    let guard = take(&ours, "ttl", STALL_PROOF_TTL).await;
    // The next in line asks for a longer lease than the pass would give.
    let next = queue(&ours, "ttl", STALL_PROOF_TTL * 2).await;
    let passed_fence = guard.fence();
    assert!(guard.release().await.unwrap());
    let next = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next in line got the lock")
        .unwrap();
    // Given back, then taken with the lease it asked for.
    assert!(next.fence() > passed_fence);
    assert_eq!(next.ttl(), STALL_PROOF_TTL * 2);
    let stats = ours.stats();
    // A pass given back is a release, not a hand-over.
    assert_eq!((stats.released, stats.handovers), (1, 0), "{stats:?}");
    let pttl = lock_tests::fixtures::pttl(&server, &lock_key("ttl"));
    assert!(pttl > STALL_PROOF_TTL.as_millis() as i64, "pttl {pttl}");
    assert!(next.release().await.unwrap());
    assert!(get(&server, &lock_key("ttl")).is_none(), "nothing left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_line_does_not_starve_another_lockers_waiter() {
    a_busy_line_lets_another_locker_in(3, Duration::from_millis(1), Duration::ZERO, None).await;
}

/// The same with the other locker's waiter 2 ms away from the server each
/// way (another zone): its release message and then its try take longer
/// than the line's first hold-back, which grows until it gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_line_does_not_starve_a_distant_lockers_waiter() {
    let distance = Some(Duration::from_millis(2));
    a_busy_line_lets_another_locker_in(3, Duration::from_millis(1), Duration::ZERO, distance).await;
}

/// Two tasks, each back in line before the other lets go, but alone in it
/// when a pass lands (the giver is outside): the limit counts the run of
/// passes all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_of_one_between_passes_does_not_starve_another_lockers_waiter() {
    let (hold, outside) = (Duration::from_millis(4), Duration::from_millis(1));
    a_busy_line_lets_another_locker_in(2, hold, outside, None).await;
}

/// `tasks` of one locker take a hot lock in turn, each holding it for
/// `hold` and then working `outside` of it, while a waiter of another
/// locker (`distance` away from the server each way, through a proxy)
/// asks for it: it gets in within a few batches of passes.
async fn a_busy_line_lets_another_locker_in(
    tasks: usize,
    hold: Duration,
    outside: Duration,
    distance: Option<Duration>,
) {
    let server = RedisServer::start();
    let proxy = distance.map(|one_way| {
        let proxy = FaultProxy::start(server.port());
        proxy.set_latency(one_way);
        proxy
    });
    let other_url = proxy.as_ref().map_or_else(|| server.url(), FaultProxy::url);
    let (busy, other) = (locker(&server.url()).await, locker(&other_url).await);
    let grants = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut line = Vec::new();
    for _ in 0..tasks {
        let (busy, grants, stop) = (busy.clone(), grants.clone(), stop.clone());
        line.push(tokio::spawn(async move {
            // Bounded in count as well as by the other locker's turn.
            for _ in 0..2_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let guard = take(&busy, "sale", STALL_PROOF_TTL).await;
                grants.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(hold).await;
                guard.release().await.unwrap();
                if !outside.is_zero() {
                    tokio::time::sleep(outside).await;
                }
            }
        }));
    }
    eventually("the line is busy", Duration::from_secs(10), || {
        grants.load(Ordering::SeqCst) >= 20
    })
    .await;
    let before = grants.load(Ordering::SeqCst);
    let guard = take(&other, "sale", STALL_PROOF_TTL).await;
    let waited = grants.load(Ordering::SeqCst) - before;
    stop.store(true, Ordering::SeqCst);
    assert!(guard.release().await.unwrap());
    for task in line {
        task.await.unwrap();
    }
    println!(
        "the other locker's waiter got the lock after {waited} grants of the busy line; {:?}",
        busy.stats()
    );
    assert!(busy.stats().handovers > 0, "{:?}", busy.stats());
    // About one batch of the line (8 passes and a release), a few more
    // from afar while the hold-back grows; far below the thousands of
    // grants the line would make if it never let go.
    let most = if distance.is_some() { 100 } else { 50 };
    assert!(waited < most, "starved for {waited} grants");
}

/// A line whose passes its next tasks cannot use (here: fixed leases, which
/// a pass in process cannot give; or each task its own ttl) gives each pass
/// back and takes the lock again from the server: that is still the line's
/// run of holds, and a waiter of another locker gets in after about one
/// batch of them, as behind a line that passes (on the in-memory store,
/// whose calls answer at once, the next in line always takes the lock
/// back before that waiter runs).
#[tokio::test(start_paused = true)]
async fn a_line_whose_passes_are_given_back_does_not_starve_another_lockers_waiter() {
    for fixed_leases in [true, false] {
        let waited = grants_before_another_locker_gets_in(fixed_leases).await;
        assert!(
            waited < 50,
            "fixed leases {fixed_leases}: starved for {waited} grants"
        );
    }
}

/// Three tasks of one in-memory locker take a hot lock in turn, with fixed
/// leases (`fixed_leases`) or each with a ttl of its own; then a waiter of
/// another locker asks for it: how many grants of the line it waited.
async fn grants_before_another_locker_gets_in(fixed_leases: bool) -> u64 {
    const TTL: Duration = Duration::from_secs(9);
    let store = MemoryStore::new();
    let config = LockConfig::in_memory_store(&store);
    let busy = Locker::connect(config.clone()).await.unwrap();
    let other = Locker::connect(config).await.unwrap();
    let grants = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut line = Vec::new();
    for n in 0..3u32 {
        let (busy, grants, stop) = (busy.clone(), grants.clone(), stop.clone());
        let ttl = if fixed_leases {
            TTL
        } else {
            TTL + Duration::from_secs(1) * n
        };
        line.push(tokio::spawn(async move {
            // Bounded in count as well as by the other locker's turn.
            for _ in 0..1_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let request = busy.lock("sale").ttl(ttl).wait(FOREVER);
                let guard = request.watchdog(!fixed_leases).acquire().await.unwrap();
                grants.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                guard.release().await.unwrap();
            }
        }));
    }
    for _ in 0..100 {
        if grants.load(Ordering::SeqCst) >= 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let before = grants.load(Ordering::SeqCst);
    let guard = take(&other, "sale", TTL).await;
    let waited = grants.load(Ordering::SeqCst) - before;
    stop.store(true, Ordering::SeqCst);
    assert!(guard.release().await.unwrap());
    for task in line {
        task.await.unwrap();
    }
    assert_eq!(store.holders(), Vec::new(), "nothing left");
    waited
}

/// A body that runs on past its lease's validity (its process paused,
/// here its clock moved on while the watchdog could not run) ends with
/// the lock reported lost, though its key lingers on the store.
#[distributed_lock(key = "<name>", ttl = "10s", locker = locker)]
async fn overrun(locker: &Locker, name: &str) -> Result<(), LockError> {
    // The next in line joins meanwhile (one thread: it runs now).
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    // Moves the paused clock without yielding to the watchdog.
    let moved =
        futures_util::FutureExt::now_or_never(tokio::time::advance(Duration::from_millis(9_700)));
    assert!(moved.is_none(), "the clock moved, the yield is dropped");
    Ok(())
}

/// A lock reported lost (its holder ran past its validity while the key
/// lingered) and then passed to the next in line by the holder's release
/// is counted once, as lost, as a release of it would be
/// (`LockerStats`: "a lock acquired ends counted once").
#[tokio::test(start_paused = true)]
async fn a_lock_reported_lost_and_then_passed_counts_as_lost_only() {
    let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
    let next = {
        let locker = locker.clone();
        tokio::spawn(async move { take(&locker, "late", Duration::from_secs(10)).await })
    };
    let outcome = overrun(&locker, "late").await;
    assert!(
        matches!(outcome, Err(LockError::Lost { .. })),
        "{outcome:?}"
    );
    let next = tokio::time::timeout(Duration::from_secs(1), next)
        .await
        .expect("the next in line got the lock")
        .unwrap();
    assert!(next.release().await.unwrap());
    let stats = locker.stats();
    assert_eq!(stats.acquired, 2, "{stats:?}");
    assert_eq!(stats.lost, 1, "{stats:?}");
    assert_eq!(
        stats.acquired,
        stats.released + stats.lost,
        "each lock counted once: {stats:?}"
    );
}
