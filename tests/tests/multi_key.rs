//! The multi-key lock's behaviours (`locker.lock_all(keys)`), written once
//! as functions of a [`Site`] and run on the in-memory store, one Redis
//! server, a Redis Cluster (where distinct names lie in distinct slots, so
//! every behaviour there runs across slots, and `one_slot` runs names that
//! share one) and Sentinel; on Redlock, its refusal.
//!
//! The in-memory runs use a paused tokio clock. Bounds are what the
//! library promises plus [`STALL_ROOM`], scaled with the ttl.

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
                all_or_nothing_when_one_key_is_busy,
                it_and_the_exclusive_lock_exclude_each_other,
                the_release_of_the_blocking_key_wakes_a_waiter,
                a_multi_key_release_wakes_an_exclusive_waiter,
                opposing_orders_make_progress,
                holders_of_overlapping_sets_never_share_a_key,
                the_watchdog_renews_every_key,
                a_deleted_key_is_reported_lost,
                a_fixed_lease_frees_every_key_after_its_ttl,
                a_cancelled_wait_leaves_nothing_held,
                a_dropped_guard_releases_every_key,
                a_hold_cap_gives_every_key_back,
                repeats_are_one_key_and_no_key_is_an_error,
            );
        }
    };
    (@each $kind:expr, #[$runtime:meta], $($behaviour:ident),* $(,)?) => {
        $(
            #[$runtime]
            async fn $behaviour() {
                let site = site($kind, concat!("multi-", stringify!($behaviour)));
                behaviours::$behaviour(&site, behaviours::NAMES).await;
            }
        )*
    };
}

mod multi_key {
    use super::*;

    on!(memory, Kind::Memory, #[tokio::test(start_paused = true)]);
    on!(single, Kind::Single, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
    on!(cluster, Kind::Cluster, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
    on!(sentinel, Kind::Sentinel, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
    on!(redlock, Kind::Redlock, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);

    /// On a Cluster, names whose lock keys share one hash slot: taken by
    /// one script, with the same behaviours.
    mod one_slot {
        use super::*;

        /// Three names whose keys under `site`'s prefix share a slot.
        fn names_in_one_slot(site: &Site) -> [String; 3] {
            use redis::cluster_routing::Slot;
            let slot = Slot::for_key(site.key("s0"));
            let mut found = (1..1_000_000)
                .map(|n| format!("s{n}"))
                .filter(|name| Slot::for_key(site.key(name)) == slot);
            let (b, c) = (found.next().unwrap(), found.next().unwrap());
            ["s0".to_owned(), b, c]
        }

        macro_rules! one_slot {
            ($($behaviour:ident),* $(,)?) => {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $behaviour() {
                        let site = site(Kind::Cluster, concat!("multi-slot-", stringify!($behaviour)));
                        let names = names_in_one_slot(&site);
                        let names = [names[0].as_str(), names[1].as_str(), names[2].as_str()];
                        behaviours::$behaviour(&site, names).await;
                    }
                )*
            };
        }

        one_slot!(
            all_or_nothing_when_one_key_is_busy,
            it_and_the_exclusive_lock_exclude_each_other,
            the_release_of_the_blocking_key_wakes_a_waiter,
            opposing_orders_make_progress,
            holders_of_overlapping_sets_never_share_a_key,
            a_deleted_key_is_reported_lost,
        );
    }

    /// Eight keys across a Cluster's slots, taken by four lockers in four
    /// orders (and one of them alone by a fifth): every caller
    /// makes progress, and no key is inside two bodies at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn eight_keys_across_slots_in_opposing_orders_make_progress() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU32, Ordering};
        use std::time::Duration;

        const ROUNDS: u32 = 8;
        let site = site(Kind::Cluster, "multi-eight-keys");
        let names: Vec<String> = (0..8).map(|n| format!("k{n}")).collect();
        let inside: Arc<Vec<AtomicU32>> = Arc::new((0..8).map(|_| AtomicU32::new(0)).collect());
        let orders: Vec<Vec<usize>> = vec![
            (0..8).collect(),
            (0..8).rev().collect(),
            vec![3, 1, 7, 5, 0, 2, 6, 4],
            vec![6, 4, 2, 0, 7, 5, 3, 1],
            vec![5],
        ];
        let mut tasks = Vec::new();
        for order in orders {
            let locker = site.locker().await;
            let (inside, names) = (inside.clone(), names.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let keys: Vec<String> = order.iter().map(|&i| names[i].clone()).collect();
                    let request = locker
                        .lock_all(keys)
                        .ttl(lock_tests::fixtures::STALL_PROOF_TTL);
                    let guard = request
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await
                        .unwrap();
                    for &i in &order {
                        assert_eq!(inside[i].fetch_add(1, Ordering::SeqCst), 0, "k{i} shared");
                    }
                    tokio::task::yield_now().await;
                    for &i in &order {
                        inside[i].fetch_sub(1, Ordering::SeqCst);
                    }
                    guard.release().await.unwrap();
                }
            }));
        }
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("every order makes progress")
                .unwrap();
        }
        assert!(
            names.iter().all(|name| !site.exists(name)),
            "nothing is left"
        );
    }
}

/// The behaviours, each a function of the site it runs on and of three
/// key names.
mod behaviours {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::Duration;

    use lock_runtime::{LockError, Locker, MultiGuard};
    use lock_tests::conformance::Site;
    use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM, eventually};

    /// Names whose keys lie in distinct slots on a Cluster.
    pub const NAMES: [&str; 3] = ["a", "b", "c"];
    /// A lease the watchdog keeps through a machine's stalls.
    const TTL: Duration = STALL_PROOF_TTL;
    /// Longer than any test runs.
    const FOREVER: Duration = Duration::from_secs(30);

    /// A locker whose waiters never poll: woken only by a release message
    /// or the end of the lease they wait for (far away).
    async fn patient(site: &Site) -> Locker {
        Locker::connect(site.config().retry_backoff(FOREVER, FOREVER))
            .await
            .unwrap()
    }

    async fn take(locker: &Locker, keys: &[&str]) -> Option<MultiGuard> {
        let request = locker.lock_all(keys.iter().copied()).ttl(FOREVER);
        request.try_acquire().await.unwrap()
    }

    pub async fn all_or_nothing_when_one_key_is_busy(site: &Site, [a, b, c]: [&str; 3]) {
        let (x, y) = (site.locker().await, site.locker().await);
        let held = take(&x, &[b]).await.expect("b is free");
        assert!(take(&y, &[a, b, c]).await.is_none(), "b is busy");
        assert!(!site.exists(a) && !site.exists(c), "a busy key takes none");
        let err = y
            .lock_all([c, b, a])
            .wait(Duration::from_millis(300))
            .acquire()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Timeout { .. }), "{err:?}");
        // Across a Cluster's slots, a waiter may hold the keys ordered
        // before b when its wait runs out: let go of in the background.
        eventually("a wait that ran out keeps none", STALL_ROOM * 3, || {
            !site.exists(a) && !site.exists(c)
        })
        .await;
        assert!(held.release().await.unwrap());
        let all = take(&y, &[c, a, b]).await.expect("all free");
        let mut keys = all.keys().to_vec();
        keys.sort_unstable();
        let mut named = [a, b, c];
        named.sort_unstable();
        assert_eq!(keys, named);
        assert!(all.fences().iter().all(|fence| *fence > 0));
        assert!(all.is_held());
        assert!(all.release().await.unwrap());
        assert!(!site.exists(a) && !site.exists(b) && !site.exists(c));
    }

    pub async fn it_and_the_exclusive_lock_exclude_each_other(site: &Site, [a, b, _]: [&str; 3]) {
        let (x, y) = (site.locker().await, site.locker().await);
        let multi = take(&x, &[a, b]).await.unwrap();
        for name in [a, b] {
            let single = y.lock(name).try_acquire().await.unwrap();
            assert!(single.is_none(), "{name} is held by the multi-key hold");
        }
        let stale = multi.fence(a).unwrap();
        assert!(multi.release().await.unwrap());
        let single = y.lock(a).ttl(FOREVER).try_acquire().await.unwrap().unwrap();
        assert!(single.fence() > stale, "the fence of a rises across kinds");
        assert!(take(&x, &[a, b]).await.is_none(), "a is held by lock(a)");
        assert!(!site.exists(b), "and b was not taken");
        let fence = single.fence();
        assert!(single.release().await.unwrap());
        let again = take(&x, &[b, a]).await.unwrap();
        assert!(again.fence(a).unwrap() > fence);
        assert!(again.release().await.unwrap());
    }

    pub async fn the_release_of_the_blocking_key_wakes_a_waiter(site: &Site, [a, b, _]: [&str; 3]) {
        let holder = site.locker().await;
        let waiter = patient(site).await;
        let single = holder.lock(b).ttl(FOREVER).acquire().await.unwrap();
        let waiting = {
            let waiter = waiter.clone();
            let keys = [a.to_owned(), b.to_owned()];
            tokio::spawn(async move {
                waiter
                    .lock_all(keys)
                    .ttl(FOREVER)
                    .wait(FOREVER)
                    .acquire()
                    .await
            })
        };
        eventually("the waiter listens, asleep", STALL_ROOM * 10, || {
            site.has_waiter(b) && waiter.stats().asleep == 1
        })
        .await;
        assert!(single.release().await.unwrap());
        let multi = tokio::time::timeout(STALL_ROOM * 3, waiting)
            .await
            .expect("woken by the release of b")
            .unwrap()
            .unwrap();
        let stats = waiter.stats();
        assert_eq!(stats.timer_wakeups, 0, "{stats:?}");
        assert!(stats.release_wakeups >= 1, "{stats:?}");
        assert!(multi.release().await.unwrap());
    }

    pub async fn a_multi_key_release_wakes_an_exclusive_waiter(site: &Site, [a, b, _]: [&str; 3]) {
        let holder = site.locker().await;
        let waiter = patient(site).await;
        let multi = take(&holder, &[a, b]).await.unwrap();
        let waiting = {
            let waiter = waiter.clone();
            let name = b.to_owned();
            tokio::spawn(
                async move { waiter.lock(name).ttl(FOREVER).wait(FOREVER).acquire().await },
            )
        };
        eventually("the waiter listens, asleep", STALL_ROOM * 10, || {
            site.has_waiter(b) && waiter.stats().asleep == 1
        })
        .await;
        assert!(multi.release().await.unwrap());
        let single = tokio::time::timeout(STALL_ROOM * 3, waiting)
            .await
            .expect("woken by the release of the multi-key hold")
            .unwrap()
            .unwrap();
        assert_eq!(waiter.stats().timer_wakeups, 0, "{:?}", waiter.stats());
        assert!(single.release().await.unwrap());
    }

    pub async fn opposing_orders_make_progress(site: &Site, [a, b, c]: [&str; 3]) {
        const ROUNDS: u32 = 20;
        let inside = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU32::new(0));
        let orders: [Vec<String>; 3] = [
            vec![a.into(), b.into(), c.into()],
            vec![c.into(), b.into(), a.into()],
            vec![b.into(), a.into(), c.into()],
        ];
        let mut tasks = Vec::new();
        for order in orders {
            let locker = site.locker().await;
            let (inside, done) = (inside.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = locker
                        .lock_all(order.clone())
                        .ttl(TTL)
                        .wait(FOREVER)
                        .acquire()
                        .await
                        .unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    tokio::task::yield_now().await;
                    inside.store(false, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }));
        }
        for task in tasks {
            tokio::time::timeout(FOREVER, task)
                .await
                .expect("every order makes progress")
                .unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 3 * ROUNDS);
        // On Redlock a release returns once a majority let go; the last
        // master's delete may still be on its way.
        eventually("every master let go", STALL_ROOM * 3, || {
            !site.exists(a) && !site.exists(b) && !site.exists(c)
        })
        .await;
    }

    /// Holders of [a, b], [b, c], [c, a] and of each key alone, in
    /// opposing orders: no key is ever inside two bodies at once, and each
    /// body finds all of its keys its own.
    pub async fn holders_of_overlapping_sets_never_share_a_key(site: &Site, [a, b, c]: [&str; 3]) {
        const ROUNDS: u32 = 10;
        let names = [a.to_owned(), b.to_owned(), c.to_owned()];
        let inside: Arc<[AtomicU32; 3]> = Arc::new(Default::default());
        let done = Arc::new(AtomicU32::new(0));
        let sets: Vec<Vec<usize>> =
            vec![vec![0, 1], vec![2, 1], vec![2, 0], vec![1], vec![0, 2, 1]];
        let mut tasks = Vec::new();
        for set in sets {
            let locker = site.locker().await;
            let (inside, done, names) = (inside.clone(), done.clone(), names.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let keys: Vec<String> = set.iter().map(|&i| names[i].clone()).collect();
                    let request = locker.lock_all(keys).ttl(TTL).wait(FOREVER);
                    let guard = request.acquire().await.unwrap();
                    for &i in &set {
                        assert_eq!(
                            inside[i].fetch_add(1, Ordering::SeqCst),
                            0,
                            "{} shared",
                            names[i]
                        );
                    }
                    tokio::task::yield_now().await;
                    for &i in &set {
                        inside[i].fetch_sub(1, Ordering::SeqCst);
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }));
        }
        for task in tasks {
            tokio::time::timeout(FOREVER, task)
                .await
                .expect("progress")
                .unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 5 * ROUNDS);
    }

    pub async fn the_watchdog_renews_every_key(site: &Site, [a, b, c]: [&str; 3]) {
        let (x, y) = (site.locker().await, site.locker().await);
        let guard = x.lock_all([a, b, c]).ttl(TTL).acquire().await.unwrap();
        tokio::time::sleep(TTL * 2).await;
        assert!(guard.is_held());
        for name in [a, b, c] {
            assert!(
                y.lock(name).try_acquire().await.unwrap().is_none(),
                "{name} outlived its ttl"
            );
        }
        assert!(x.stats().renewed >= 2, "{:?}", x.stats());
        assert_eq!(x.stats().lost, 0);
        assert!(guard.release().await.unwrap());
        assert!(!site.exists(a) && !site.exists(b) && !site.exists(c));
    }

    pub async fn a_deleted_key_is_reported_lost(site: &Site, [a, b, c]: [&str; 3]) {
        let locker = site.locker().await;
        let guard = locker.lock_all([a, b, c]).ttl(TTL).acquire().await.unwrap();
        site.delete(b);
        tokio::time::timeout(TTL / 3 + STALL_ROOM, guard.lost())
            .await
            .expect("the loss of b was not told at the next renewal");
        assert!(!guard.is_held());
        assert_eq!(locker.stats().lost, 1);
        // The keys still its own are let go of with the hold.
        assert!(guard.release().await.unwrap());
        assert!(!site.exists(a) && !site.exists(c));
    }

    /// A holder that stops without a release (as a process killed would;
    /// `semaphore_processes.rs`-style kill -9 runs are not written yet):
    /// every key is free once its ttl ran out.
    pub async fn a_fixed_lease_frees_every_key_after_its_ttl(site: &Site, [a, b, c]: [&str; 3]) {
        let (x, y) = (site.locker().await, site.locker().await);
        let guard = x
            .lock_all([a, b, c])
            .ttl(TTL)
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        std::mem::forget(guard);
        assert!(take(&y, &[a]).await.is_none());
        let freed = y
            .lock_all([c, b, a])
            .ttl(FOREVER)
            .wait(TTL + STALL_ROOM * 2)
            .acquire();
        let freed = freed.await.expect("free after the ttl");
        assert!(freed.release().await.unwrap());
    }

    pub async fn a_cancelled_wait_leaves_nothing_held(site: &Site, [a, b, c]: [&str; 3]) {
        let (x, y) = (site.locker().await, site.locker().await);
        // The last key of the order busy: a waiter across a Cluster's slots
        // holds the keys before it while it waits.
        let mut order = take(&x, &[a, b, c]).await.unwrap().keys().to_vec();
        let last = order.pop().unwrap();
        drop(x);
        eventually("the first holder let go", STALL_ROOM * 3, || {
            !site.exists(a) && !site.exists(b) && !site.exists(c)
        })
        .await;
        let x = site.locker().await;
        let held = x.lock(last.as_str()).ttl(FOREVER).acquire().await.unwrap();
        // A single try keeps nothing, even the keys ordered before the
        // busy one (taken across a Cluster's slots in the same round).
        assert!(take(&y, &[a, b, c]).await.is_none());
        assert!(
            order.iter().all(|name| !site.exists(name)),
            "a single try kept some keys"
        );
        let waiting = {
            let keys = [a.to_owned(), b.to_owned(), c.to_owned()];
            tokio::spawn(async move { y.lock_all(keys).ttl(FOREVER).wait(FOREVER).acquire().await })
        };
        if site.kind() == lock_tests::conformance::Kind::Cluster {
            // Across slots, the groups before the busy one are held while
            // it waits: a prefix of the order.
            eventually("the waiter holds the prefix", STALL_ROOM * 10, || {
                order.iter().all(|name| site.exists(name))
            })
            .await;
        } else {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(!waiting.is_finished(), "{last} is busy");
        waiting.abort();
        eventually(
            "the cancelled wait let go of every key",
            STALL_ROOM * 3,
            || order.iter().all(|name| !site.exists(name)),
        )
        .await;
        assert!(held.release().await.unwrap());
    }

    pub async fn a_dropped_guard_releases_every_key(site: &Site, [a, b, c]: [&str; 3]) {
        let (x, y) = (site.locker().await, site.locker().await);
        drop(take(&x, &[a, b, c]).await.unwrap());
        eventually("the dropped guard released", STALL_ROOM * 3, || {
            x.stats().released == 1
        })
        .await;
        assert!(!site.exists(a) && !site.exists(b) && !site.exists(c));
        let again = take(&y, &[c, b, a]).await.expect("every key is free");
        assert!(again.release().await.unwrap());
    }

    pub async fn a_hold_cap_gives_every_key_back(site: &Site, [a, b, c]: [&str; 3]) {
        let (x, y) = (site.locker().await, site.locker().await);
        let cap = TTL;
        let guard = x.lock_all([a, b, c]).ttl(TTL).max_hold(cap);
        let guard = guard.acquire().await.unwrap();
        tokio::time::timeout(cap + STALL_ROOM, guard.lost())
            .await
            .expect("the cap ends the hold");
        assert!(!guard.is_held());
        let next = y.lock_all([b, c, a]).wait(TTL + STALL_ROOM).acquire().await;
        assert!(next.is_ok(), "the capped keys came back: {next:?}");
    }

    pub async fn repeats_are_one_key_and_no_key_is_an_error(site: &Site, [a, b, _]: [&str; 3]) {
        let locker = site.locker().await;
        let guard = take(&locker, &[a, b, a, b, a]).await.unwrap();
        assert_eq!(guard.keys().len(), 2);
        assert!(guard.release().await.unwrap());
        let err = locker
            .lock_all(Vec::<String>::new())
            .acquire()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{err:?}");
        let err = locker
            .lock_all(Vec::<String>::new())
            .try_acquire()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{err:?}");
        let err = locker.lock_all([a, ""]).try_acquire().await.unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{err:?}");
        assert!(!site.exists(a));
    }
}

/// An observer reading every key at once (one `MGET` on one server) while
/// holders of overlapping sets contend never sees an owner holding part
/// of its set.
mod observer {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use lock_runtime::{LockConfig, Locker};
    use lock_tests::RedisServer;
    use lock_tests::fixtures::{STALL_PROOF_TTL, lock_key};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_observer_never_sees_a_subset_held_by_one_owner() {
        let server = RedisServer::start();
        let names = ["a", "b", "c"];
        let sets: [&[&str]; 4] = [&["a", "b"], &["c", "b"], &["a", "c", "b"], &["c", "a"]];
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for set in sets {
            let locker = Locker::connect(LockConfig::from_url(&server.url()).unwrap())
                .await
                .unwrap();
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let request = locker.lock_all(set.iter().copied()).ttl(STALL_PROOF_TTL);
                    let guard = request
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await
                        .unwrap();
                    tokio::task::yield_now().await;
                    guard.release().await.unwrap();
                }
            }));
        }
        let keys: Vec<String> = names.iter().map(|name| lock_key(name)).collect();
        let mut seen_held = 0;
        for _ in 0..400 {
            let mut mget = vec!["MGET"];
            mget.extend(keys.iter().map(String::as_str));
            let redis::Value::Array(values) = tokio::task::block_in_place(|| server.cmd(&mget))
            else {
                panic!("MGET answered no array");
            };
            let mut by_owner: HashMap<String, Vec<&str>> = HashMap::new();
            for (name, value) in names.iter().zip(values) {
                if let redis::Value::BulkString(value) = value {
                    let value = String::from_utf8(value).unwrap();
                    let owner = value.trim_end_matches('~').to_owned();
                    by_owner.entry(owner).or_default().push(name);
                }
            }
            for held in by_owner.values() {
                seen_held += 1;
                let whole = sets.iter().any(|set| {
                    let mut set = set.to_vec();
                    set.sort_unstable();
                    set == *held
                });
                assert!(whole, "an owner held {held:?}, part of its set");
            }
        }
        stop.store(true, Ordering::SeqCst);
        for task in tasks {
            task.await.unwrap();
        }
        assert!(
            seen_held >= 50,
            "the observer saw {seen_held} holds: the run proves nothing"
        );
    }
}

/// The attribute with `keys = [..]`: each call holds every key it names
/// at once, and a call nested in one that holds one of them is refused
/// rather than left waiting for its own caller.
mod attribute {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};

    /// Calls inside a body for each of three accounts now, and the most.
    static INSIDE: [AtomicU32; 3] = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
    static MOST: AtomicU32 = AtomicU32::new(0);

    #[distributed_lock(keys = ["acct:<from>", "acct:<to>"], wait = "60s", locker = locker)]
    async fn transfer(locker: &Locker, from: usize, to: usize) -> Result<(), LockError> {
        for account in [from, to] {
            let now = INSIDE[account].fetch_add(1, Ordering::SeqCst) + 1;
            MOST.fetch_max(now, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        for account in [from, to] {
            INSIDE[account].fetch_sub(1, Ordering::SeqCst);
        }
        Ok(())
    }

    #[distributed_lock(key = "acct:<from>", locker = locker)]
    async fn audit_then_transfer(locker: &Locker, from: usize, to: usize) -> Result<(), LockError> {
        transfer(locker, from, to).await
    }

    #[tokio::test(start_paused = true)]
    async fn calls_naming_accounts_in_any_order_never_share_one() {
        let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
        let pairs = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2)];
        let calls = pairs
            .iter()
            .cycle()
            .take(24)
            .map(|&(from, to)| transfer(&locker, from, to));
        for result in futures_util::future::join_all(calls).await {
            result.unwrap();
        }
        assert_eq!(
            MOST.load(Ordering::SeqCst),
            1,
            "an account in two bodies at once"
        );
        assert_eq!(locker.stats().acquired, 24);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_nested_under_one_of_its_keys_is_refused_at_once() {
        let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
        let err = audit_then_transfer(&locker, 0, 1).await.unwrap_err();
        assert!(
            matches!(&err, LockError::HeldByThisTask { key } if key == "acct:0"),
            "{err:?}"
        );
    }
}

/// On Redlock: held when a majority of masters holds every key, each
/// master all or none.
mod redlock_majority {
    use std::time::Duration;

    use lock_runtime::{LockConfig, Locker};
    use lock_tests::fixtures::{exists, lock_key, redlock_url, settled_masters};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_key_busy_on_a_minority_is_granted_and_on_a_majority_is_not() {
        let masters = tokio::task::block_in_place(|| settled_masters(3));
        let locker = Locker::connect(LockConfig::from_url(&redlock_url(&masters)).unwrap())
            .await
            .unwrap();
        // b held by someone else on one master: a majority holds both.
        masters[0].cmd(&["SET", &lock_key("b"), "other/owner", "PX", "30000"]);
        let guard = locker.lock_all(["a", "b"]).try_acquire().await.unwrap();
        let guard = guard.expect("a majority of masters holds a and b");
        // All or none on each master: the one where b is busy took no a.
        assert!(!exists(&masters[0], &lock_key("a")));
        assert!(exists(&masters[1], &lock_key("a")) && exists(&masters[2], &lock_key("b")));
        assert!(guard.release().await.unwrap());
        // b held by someone else on two masters: no majority, nothing left.
        masters[1].cmd(&["SET", &lock_key("b"), "other/owner", "PX", "30000"]);
        let none = locker.lock_all(["a", "b"]).wait(Duration::from_millis(200));
        assert!(none.acquire().await.is_err());
        for master in &masters {
            assert!(!exists(master, &lock_key("a")), "a busy round took a");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_master_down_still_grants_and_fences_rise_across_kinds() {
        let mut masters = tokio::task::block_in_place(|| settled_masters(3));
        let locker = Locker::connect(LockConfig::from_url(&redlock_url(&masters)).unwrap())
            .await
            .unwrap();
        let single = locker.lock("a").try_acquire().await.unwrap().unwrap();
        let before = single.fence();
        assert!(single.release().await.unwrap());
        tokio::task::block_in_place(|| masters[2].kill());
        let guard = locker.lock_all(["b", "a"]).acquire().await.unwrap();
        assert!(guard.fence("a").unwrap() > before);
        let after = guard.fence("a").unwrap();
        assert!(guard.release().await.unwrap());
        let single = locker.lock("a").acquire().await.unwrap();
        assert!(single.fence() > after);
    }
}
