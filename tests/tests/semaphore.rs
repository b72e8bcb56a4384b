//! The semaphore's behaviours, written once as functions of a [`Site`]
//! and run on the in-memory store, one Redis server, a Redis Cluster,
//! Sentinel and Redlock (as `conformance.rs` runs the exclusive lock's).
//! Across processes, with kill -9: `semaphore_processes.rs`; Redlock's
//! own quorum, with masters cut: `semaphore_redlock.rs`.
//!
//! The in-memory runs use a paused tokio clock. Bounds are what the
//! library promises plus [`STALL_ROOM`]; counts of permits and of tries
//! are exact.

use lock_tests::conformance::{Kind, Site};

/// The site for test `name` on `kind`; a Redis deployment is started off
/// the test's runtime threads (it blocks for seconds, once per binary).
fn site(kind: Kind, name: &str) -> Site {
    match kind {
        Kind::Memory => Site::new(kind, name),
        _ => tokio::task::block_in_place(|| Site::new(kind, name)),
    }
}

/// Every behaviour, on one backend.
macro_rules! on {
    ($backend:ident, $kind:expr, #[$runtime:meta]) => {
        mod $backend {
            use super::*;

            on!(@each $kind, #[$runtime],
                permits_are_all_or_nothing_within_the_limit,
                the_last_release_leaves_nothing_behind,
                slots_are_the_lowest_free_and_their_fences_rise,
                a_release_wakes_as_many_waiters_as_its_permits_suffice_for,
                a_waiter_for_three_is_not_woken_by_one_free_permit,
                the_watchdog_keeps_permits_past_their_ttl,
                an_abandoned_fixed_lease_gives_its_permits_back_after_its_ttl,
                a_deleted_semaphore_is_reported_lost,
                another_limit_is_refused_while_permits_are_held,
                a_hold_cap_gives_the_permits_back,
                nonsense_is_a_config_error,
                a_cancelled_wait_takes_nothing,
            );
        }
    };
    (@each $kind:expr, #[$runtime:meta], $($behaviour:ident),* $(,)?) => {
        $(
            #[$runtime]
            async fn $behaviour() {
                let site = site($kind, concat!("sem-", stringify!($behaviour)));
                behaviours::$behaviour(&site).await;
            }
        )*
    };
}

mod semaphore {
    use super::*;

    on!(memory, Kind::Memory, #[tokio::test(start_paused = true)]);
    on!(single, Kind::Single, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
    on!(cluster, Kind::Cluster, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
    on!(sentinel, Kind::Sentinel, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
    on!(redlock, Kind::Redlock, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
}

/// The attribute with `limit`: its calls take permits, never more than
/// the limit at once, on the in-memory store's paused clock.
mod attribute {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};

    /// Permits inside the bodies now, and the most ever.
    static INSIDE: AtomicU32 = AtomicU32::new(0);
    static MOST: AtomicU32 = AtomicU32::new(0);

    /// A body holding `permits` for `length`.
    async fn inside(permits: u32, length: Duration) {
        let now = INSIDE.fetch_add(permits, Ordering::SeqCst) + permits;
        MOST.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(length).await;
        INSIDE.fetch_sub(permits, Ordering::SeqCst);
    }

    #[distributed_lock(key = "render:<tenant>", limit = 3, wait = "60s", locker = locker)]
    async fn render(locker: &Locker, tenant: &str) -> Result<(), LockError> {
        inside(1, Duration::from_millis(50)).await;
        Ok(())
    }

    #[distributed_lock(key = "render:<tenant>", limit = 3, permits = 2, wait = "60s", locker = locker)]
    async fn render_large(locker: &Locker, tenant: &str) -> Result<(), LockError> {
        inside(2, Duration::from_millis(80)).await;
        Ok(())
    }

    /// A body three leases long.
    #[distributed_lock(key = "report", limit = 1, ttl = "1s", locker = locker)]
    async fn long_report(locker: &Locker) -> Result<bool, LockError> {
        tokio::time::sleep(Duration::from_secs(3)).await;
        Ok(true)
    }

    #[tokio::test(start_paused = true)]
    async fn calls_with_a_limit_never_run_more_than_it_at_once() {
        let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
        let small = (0..8).map(|_| futures_util::future::Either::Left(render(&locker, "acme")));
        let large =
            (0..4).map(|_| futures_util::future::Either::Right(render_large(&locker, "acme")));
        for result in futures_util::future::join_all(small.chain(large)).await {
            result.unwrap();
        }
        assert_eq!(MOST.load(Ordering::SeqCst), 3, "permits inside at once");
        assert_eq!(locker.stats().acquired, 12);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_longer_than_the_ttl_keeps_its_permit() {
        let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
        let (long, rival) = tokio::join!(long_report(&locker), async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            locker.semaphore("report", 1).try_acquire().await
        });
        assert!(long.unwrap(), "the body ran to its end");
        assert!(rival.unwrap().is_none(), "its permit outlived its ttl");
        assert!(locker.stats().renewed >= 2, "{:?}", locker.stats());
        assert_eq!(locker.stats().lost, 0);
    }
}

/// The behaviours, each a function of the site it runs on.
mod behaviours {
    use std::time::Duration;

    use lock_runtime::{LockError, Locker, PermitGuard};
    use lock_tests::conformance::Site;
    use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM, eventually};
    use tokio::task::JoinHandle;
    use tokio::time::Instant;

    /// A lease the watchdog keeps through a machine's stalls.
    const TTL: Duration = STALL_PROOF_TTL;
    /// Longer than any test runs.
    const FOREVER: Duration = Duration::from_secs(30);
    /// The semaphore's key, after the lock key.
    const SEM: &str = ":sem";

    /// A locker whose waiters never poll: woken only by a release message
    /// or the end of the first lease they wait for (far away).
    ///
    /// Its release listeners are connected to every server before it is
    /// returned: on Redlock, each master's listener that subscribes after
    /// another one already confirmed a waiter wakes every waiter (what that
    /// master published meanwhile went unheard), and such a wake-up is a
    /// try no release caused. A waiter for another semaphore opens them;
    /// once every master has it subscribed, each of those first sessions
    /// has done its wake-up, and later channels join them without one.
    async fn patient(site: &Site) -> Locker {
        let locker = Locker::connect(site.config().retry_backoff(FOREVER, FOREVER))
            .await
            .unwrap();
        let holder = site.locker().await;
        let held = holder.semaphore("warm", 1).ttl(FOREVER).try_acquire();
        let held = held.await.unwrap().expect("nobody holds it");
        let warming = {
            let locker = locker.clone();
            tokio::spawn(async move { locker.semaphore("warm", 1).wait(FOREVER).acquire().await })
        };
        let channel = format!("{SEM}:released");
        eventually(
            "every server's listener subscribed",
            Duration::from_secs(10),
            || site.listeners("warm", &channel) > 0,
        )
        .await;
        warming.abort();
        let _ = warming.await;
        eventually("the warming waiter left", Duration::from_secs(10), || {
            locker.stats().asleep == 0
        })
        .await;
        assert!(held.release().await.unwrap());
        locker
    }

    /// A waiter of `locker` for `permits` of `name` (limit `limit`), once it
    /// listens and sleeps (`asleep` of the locker's waiters in all).
    async fn queue_up(
        site: &Site,
        locker: &Locker,
        limit: u32,
        permits: u32,
        asleep: u64,
    ) -> JoinHandle<Result<PermitGuard, LockError>> {
        let waiting = {
            let locker = locker.clone();
            tokio::spawn(async move {
                let request = locker.semaphore("r", limit).permits(permits);
                request.wait(FOREVER).ttl(FOREVER).acquire().await
            })
        };
        eventually(
            "the waiter listens, asleep",
            Duration::from_secs(10),
            || site.has_waiter_of("r", SEM) && locker.stats().asleep == asleep,
        )
        .await;
        waiting
    }

    async fn take(locker: &Locker, limit: u32, permits: u32) -> Option<PermitGuard> {
        let request = locker.semaphore("r", limit).permits(permits).ttl(FOREVER);
        request.try_acquire().await.unwrap()
    }

    pub async fn permits_are_all_or_nothing_within_the_limit(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let two = take(&a, 3, 2).await.expect("2 of 3 free");
        assert_eq!((two.permits(), two.limit()), (2, 3));
        assert!(take(&b, 3, 2).await.is_none(), "2 of 1 free: none taken");
        let one = take(&b, 3, 1).await.expect("1 of 1 free");
        assert!(take(&a, 3, 1).await.is_none(), "the limit is reached");
        assert!(two.release().await.unwrap());
        // Many holds of one locker at once.
        let both = take(&b, 3, 2).await.expect("2 free again");
        assert!(one.is_held() && both.is_held());
        assert!(take(&a, 3, 1).await.is_none());
    }

    pub async fn the_last_release_leaves_nothing_behind(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let first = take(&a, 2, 1).await.unwrap();
        let second = take(&b, 2, 1).await.unwrap();
        assert!(site.exists_of("r", SEM));
        assert!(first.release().await.unwrap());
        assert!(site.exists_of("r", SEM), "one permit is still held");
        drop(second);
        eventually("the dropped guard released", STALL_ROOM * 3, || {
            b.stats().released == 1
        })
        .await;
        assert!(
            !site.exists_of("r", SEM),
            "nothing of a released semaphore is left"
        );
    }

    pub async fn slots_are_the_lowest_free_and_their_fences_rise(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let zero = take(&a, 4, 1).await.unwrap();
        let one_two = take(&b, 4, 2).await.unwrap();
        assert_eq!((zero.slots(), one_two.slots()), (&[0][..], &[1, 2][..]));
        assert!(one_two.fence() > zero.fence());
        let stale = zero.fence();
        assert!(zero.release().await.unwrap());
        let again = take(&a, 4, 2).await.unwrap();
        assert_eq!(again.slots(), [0, 3], "the lowest free slots");
        assert!(again.fence() > stale, "slot 0's next holder fences higher");
        assert!(again.fence() > one_two.fence());
    }

    pub async fn a_release_wakes_as_many_waiters_as_its_permits_suffice_for(site: &Site) {
        let holder = site.locker().await;
        let waiter = patient(site).await;
        let held = take(&holder, 2, 2).await.unwrap();
        let mut waiting = Vec::new();
        for asleep in 1..=3 {
            waiting.push(queue_up(site, &waiter, 2, 1, asleep).await);
        }
        let before = waiter.stats();
        assert!(held.release().await.unwrap());
        let released = Instant::now();
        eventually("two waiters are granted", STALL_ROOM * 3, || {
            waiter.stats().acquired == 2
        })
        .await;
        // Their backoff and the lease they waited for are far away: only
        // the release message could have woken them this soon.
        assert!(
            released.elapsed() < STALL_ROOM * 3,
            "{:?}",
            released.elapsed()
        );
        let after = waiter.stats();
        assert_eq!(
            after.tries - before.tries,
            2,
            "one try per grant: {after:?}"
        );
        assert_eq!(after.release_wakeups - before.release_wakeups, 2);
        assert_eq!(after.timer_wakeups, 0, "{after:?}");
        assert_eq!(after.asleep, 1, "the third sleeps on: {after:?}");
        let finished: Vec<bool> = waiting.iter().map(JoinHandle::is_finished).collect();
        assert_eq!(finished, [true, true, false], "the longest waiters first");
        for task in waiting {
            task.abort();
        }
    }

    pub async fn a_waiter_for_three_is_not_woken_by_one_free_permit(site: &Site) {
        let holder = site.locker().await;
        let waiter = patient(site).await;
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(take(&holder, 3, 1).await.unwrap());
        }
        let waiting = queue_up(site, &waiter, 3, 3, 1).await;
        let before = waiter.stats().tries;
        let last = held.pop().unwrap();
        for guard in held {
            assert!(guard.release().await.unwrap());
            // Told one, then two permits are free: not enough to wake it.
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(waiter.stats().tries, before, "woken to find too few");
            assert_eq!(waiter.stats().asleep, 1);
        }
        assert!(last.release().await.unwrap());
        let three = tokio::time::timeout(STALL_ROOM * 3, waiting)
            .await
            .expect("three free permits wake it")
            .unwrap()
            .unwrap();
        assert_eq!(three.slots(), [0, 1, 2]);
        let stats = waiter.stats();
        assert_eq!(stats.tries, before + 1, "one try for its grant: {stats:?}");
        assert_eq!(stats.timer_wakeups, 0, "{stats:?}");
    }

    pub async fn the_watchdog_keeps_permits_past_their_ttl(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let guard = a.semaphore("r", 1).ttl(TTL).acquire().await.unwrap();
        tokio::time::sleep(TTL * 2).await;
        assert!(guard.is_held());
        assert!(
            take(&b, 1, 1).await.is_none(),
            "the permit outlived its ttl"
        );
        assert!(a.stats().renewed >= 2, "{:?}", a.stats());
        assert!(guard.release().await.unwrap());
        assert!(!site.exists_of("r", SEM));
    }

    pub async fn an_abandoned_fixed_lease_gives_its_permits_back_after_its_ttl(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let lease = Duration::from_millis(500);
        let request = a.semaphore("r", 2).permits(2).ttl(lease).watchdog(false);
        let guard = request.acquire().await.unwrap();
        let acquired = Instant::now();
        std::mem::forget(guard);
        let next = b.semaphore("r", 2).wait(lease + STALL_ROOM).acquire().await;
        let next = next.expect("its permits came back");
        assert!(acquired.elapsed() >= lease / 2, "{:?}", acquired.elapsed());
        assert!(next.release().await.unwrap());
        assert!(!site.exists_of("r", SEM), "nothing left of it");
    }

    pub async fn a_deleted_semaphore_is_reported_lost(site: &Site) {
        let locker = site.locker().await;
        let guard = locker.semaphore("r", 2).ttl(TTL).acquire().await.unwrap();
        site.delete_of("r", SEM);
        tokio::time::timeout(TTL / 3 + STALL_ROOM, guard.lost())
            .await
            .expect("the loss was not told at the next renewal");
        assert!(!guard.is_held());
        assert_eq!(locker.stats().lost, 1);
        assert!(!guard.release().await.unwrap());
    }

    pub async fn another_limit_is_refused_while_permits_are_held(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let held = take(&a, 4, 1).await.unwrap();
        let err = b.semaphore("r", 3).acquire().await.unwrap_err();
        let LockError::Config(message) = err else {
            panic!("{err:?}");
        };
        assert!(
            message.contains("limit of 3") && message.contains("limit of 4"),
            "{message}"
        );
        assert!(b.semaphore("r", 3).try_acquire().await.is_err());
        assert!(held.release().await.unwrap());
        // Once none is held, the next grant's limit is the semaphore's.
        let three = take(&b, 3, 3).await.expect("a new limit once none is held");
        let err = a.semaphore("r", 4).try_acquire().await.unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{err:?}");
        assert!(three.release().await.unwrap());
    }

    pub async fn a_hold_cap_gives_the_permits_back(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let cap = TTL;
        let guard = a
            .semaphore("r", 1)
            .ttl(TTL)
            .max_hold(cap)
            .acquire()
            .await
            .unwrap();
        tokio::time::timeout(cap + STALL_ROOM, guard.lost())
            .await
            .expect("the cap ends the hold");
        assert!(!guard.is_held());
        let next = b.semaphore("r", 1).wait(TTL + STALL_ROOM).acquire().await;
        assert!(next.is_ok(), "the capped permit came back: {next:?}");
    }

    pub async fn nonsense_is_a_config_error(site: &Site) {
        let locker = site.locker().await;
        for (limit, permits) in [
            (0, 1),
            (2, 0),
            (2, 3),
            (lock_runtime::SEMAPHORE_MAX_LIMIT + 1, 1),
        ] {
            let request = locker.semaphore("r", limit).permits(permits);
            let err = request.try_acquire().await.unwrap_err();
            assert!(
                matches!(err, LockError::Config(_)),
                "{limit}/{permits}: {err:?}"
            );
        }
        let err = locker.semaphore("r", 1).ttl(Duration::ZERO).acquire().await;
        assert!(matches!(err, Err(LockError::Config(_))), "{err:?}");
        assert!(!site.exists_of("r", SEM));
    }

    pub async fn a_cancelled_wait_takes_nothing(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let held = take(&a, 1, 1).await.unwrap();
        let waiting = b.semaphore("r", 1).wait(FOREVER).acquire();
        assert!(
            tokio::time::timeout(Duration::from_millis(300), waiting)
                .await
                .is_err()
        );
        assert!(held.release().await.unwrap());
        assert!(
            !site.exists_of("r", SEM),
            "the cancelled waiter took nothing"
        );
        assert!(take(&a, 1, 1).await.is_some());
    }
}
