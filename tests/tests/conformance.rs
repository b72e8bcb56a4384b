//! One conformance suite for every backend: each behaviour below is written
//! once, as a function of a [`Site`], and run on the in-memory store, one
//! Redis server, a Redis Cluster, Sentinel and Redlock. A behaviour a
//! backend cannot have is listed for it as an exclusion with the reason,
//! and shows as an ignored test with that reason; a test per backend checks
//! that every behaviour is either run or excluded.
//!
//! `cargo test conformance` runs them all. The in-memory runs use a paused
//! tokio clock: its leases, waits and renewals run on the test's time, so
//! the same 1.5 s leases take no real time there.
//!
//! Bounds are what the library promises plus [`STALL_ROOM`] for a machine
//! that stalls; safety assertions are exact.

use lock_tests::conformance::{Kind, Site};

/// Every behaviour of the suite, once.
const BEHAVIOURS: &[&str] = &[
    "acquire_and_release",
    "busy_is_refused_without_waiting",
    "a_zero_wait_tries_once",
    "a_wait_ends_in_a_timeout_within_its_bound",
    "a_release_wakes_a_waiter",
    "fences_rise_from_owner_to_owner",
    "only_the_owner_releases",
    "an_external_delete_is_reported_lost",
    "the_watchdog_keeps_a_lock_past_its_ttl",
    "a_fixed_lease_ends_with_a_loss_signal",
    "an_abandoned_fixed_lease_frees_after_its_ttl",
    "distinct_names_do_not_contend",
    "a_cancelled_wait_takes_nothing",
    "a_cancelled_acquisition_leaves_nothing_held",
    "dropping_a_guard_releases_the_lock",
    "contenders_take_turns_and_never_overlap",
    "the_next_task_in_line_is_handed_the_lock",
    "a_nested_call_reenters_without_waiting",
    "sibling_nested_calls_take_turns",
    "a_non_reentrant_nested_call_fails_at_once",
    "a_lost_lock_cancels_the_body",
    "on_lost_continue_lets_the_body_finish",
    "current_names_the_held_lock",
    "a_ttl_too_short_to_use_is_a_config_error",
    "waiting_for_replicas_needs_replicas",
    "a_retry_after_a_lost_reply_finds_the_lock_ours",
    "inspect_shows_holder_and_lease",
    "force_unlock_frees_the_lock_and_the_holder_is_told",
    "a_hold_cap_stops_the_body",
    "a_lock_found_gone_at_its_release_is_counted",
    "a_pass_the_next_task_cannot_use_is_not_counted_as_a_handover",
    "a_wait_that_timed_out_on_a_busy_lock_counts_as_contended",
    "a_fair_lock_is_taken_and_released_leaving_nothing",
    "fair_waiters_are_granted_in_arrival_order",
    "a_fair_waiter_that_stops_waiting_leaves_the_line",
    "a_deleted_fair_lock_is_reported_lost",
    "the_fair_attribute_reenters_its_own_lock",
];

/// Fails unless `listed` names every behaviour exactly once.
fn check_listed(backend: &str, listed: &[&str]) {
    let mut listed = listed.to_vec();
    listed.sort_unstable();
    let mut all = BEHAVIOURS.to_vec();
    all.sort_unstable();
    assert_eq!(
        listed, all,
        "{backend}: every behaviour must be run or excluded with a reason, once"
    );
}

/// The site for test `name` on `kind`; a Redis deployment is started off
/// the test's runtime threads (it blocks for seconds, once per binary).
fn site(kind: Kind, name: &str) -> Site {
    match kind {
        Kind::Memory => Site::new(kind, name),
        _ => tokio::task::block_in_place(|| Site::new(kind, name)),
    }
}

macro_rules! conformance {
    (
        $backend:ident, $kind:expr, #[$runtime:meta],
        run: [$($behaviour:ident),* $(,)?],
        exclude: [$($excluded:ident => $why:literal),* $(,)?] $(,)?
    ) => {
        mod $backend {
            use super::*;

            $(
                #[$runtime]
                async fn $behaviour() {
                    let site = site($kind, stringify!($behaviour));
                    behaviours::$behaviour(&site).await;
                }
            )*

            $(
                #[test]
                #[ignore = $why]
                fn $excluded() {}
            )*

            #[test]
            fn every_behaviour_is_run_or_excluded() {
                check_listed(
                    stringify!($backend),
                    &[$(stringify!($behaviour),)* $(stringify!($excluded),)*],
                );
            }
        }
    };
}

/// The behaviours every backend shares, those only some have (`also`),
/// and the backend's exclusions.
macro_rules! all_but {
    (
        $backend:ident, $kind:expr, #[$runtime:meta],
        also: [$($also:ident),* $(,)?],
        exclude: [$($excluded:ident => $why:literal),* $(,)?] $(,)?
    ) => {
        conformance!(
            $backend, $kind, #[$runtime],
            run: [
                acquire_and_release,
                busy_is_refused_without_waiting,
                a_zero_wait_tries_once,
                a_wait_ends_in_a_timeout_within_its_bound,
                a_release_wakes_a_waiter,
                fences_rise_from_owner_to_owner,
                only_the_owner_releases,
                an_external_delete_is_reported_lost,
                the_watchdog_keeps_a_lock_past_its_ttl,
                a_fixed_lease_ends_with_a_loss_signal,
                an_abandoned_fixed_lease_frees_after_its_ttl,
                distinct_names_do_not_contend,
                a_cancelled_wait_takes_nothing,
                a_cancelled_acquisition_leaves_nothing_held,
                dropping_a_guard_releases_the_lock,
                contenders_take_turns_and_never_overlap,
                a_nested_call_reenters_without_waiting,
                sibling_nested_calls_take_turns,
                a_non_reentrant_nested_call_fails_at_once,
                a_lost_lock_cancels_the_body,
                on_lost_continue_lets_the_body_finish,
                current_names_the_held_lock,
                a_ttl_too_short_to_use_is_a_config_error,
                inspect_shows_holder_and_lease,
                force_unlock_frees_the_lock_and_the_holder_is_told,
                a_hold_cap_stops_the_body,
                a_lock_found_gone_at_its_release_is_counted,
                a_wait_that_timed_out_on_a_busy_lock_counts_as_contended,
                $($also,)*
            ],
            exclude: [$($excluded => $why),*],
        );
    };
}

mod conformance {
    use super::*;

    all_but!(
        memory, Kind::Memory, #[tokio::test(start_paused = true)],
        also: [
            a_fair_lock_is_taken_and_released_leaving_nothing,
            fair_waiters_are_granted_in_arrival_order,
            a_fair_waiter_that_stops_waiting_leaves_the_line,
            a_deleted_fair_lock_is_reported_lost,
            the_fair_attribute_reenters_its_own_lock,
            waiting_for_replicas_needs_replicas, the_next_task_in_line_is_handed_the_lock, a_pass_the_next_task_cannot_use_is_not_counted_as_a_handover],
        exclude: [
            a_retry_after_a_lost_reply_finds_the_lock_ours =>
                "the in-memory store cannot lose a reply; its acquire twin's idempotence is unit-tested (primitive/exclusive/twins.rs)",
        ],
    );

    all_but!(
        single, Kind::Single, #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
        also: [
            a_fair_lock_is_taken_and_released_leaving_nothing,
            fair_waiters_are_granted_in_arrival_order,
            a_fair_waiter_that_stops_waiting_leaves_the_line,
            a_deleted_fair_lock_is_reported_lost,
            the_fair_attribute_reenters_its_own_lock,
            the_next_task_in_line_is_handed_the_lock, a_pass_the_next_task_cannot_use_is_not_counted_as_a_handover],
        exclude: [
            waiting_for_replicas_needs_replicas =>
                "one server may have replicas; WAIT is tested with a real replica in replication.rs and bounds.rs",
            a_retry_after_a_lost_reply_finds_the_lock_ours =>
                "needs a reply dropped in flight: lost_replies.rs drops it with the fault proxy",
        ],
    );

    all_but!(
        cluster, Kind::Cluster, #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
        also: [
            a_fair_lock_is_taken_and_released_leaving_nothing,
            fair_waiters_are_granted_in_arrival_order,
            a_fair_waiter_that_stops_waiting_leaves_the_line,
            a_deleted_fair_lock_is_reported_lost,
            the_fair_attribute_reenters_its_own_lock,
            waiting_for_replicas_needs_replicas, the_next_task_in_line_is_handed_the_lock, a_pass_the_next_task_cannot_use_is_not_counted_as_a_handover],
        exclude: [
            a_retry_after_a_lost_reply_finds_the_lock_ours =>
                "needs a reply dropped in flight: the same acquire script as one server (lost_replies.rs), routed by slot",
        ],
    );

    all_but!(
        sentinel, Kind::Sentinel, #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
        also: [
            a_fair_lock_is_taken_and_released_leaving_nothing,
            fair_waiters_are_granted_in_arrival_order,
            a_fair_waiter_that_stops_waiting_leaves_the_line,
            a_deleted_fair_lock_is_reported_lost,
            the_fair_attribute_reenters_its_own_lock,
            the_next_task_in_line_is_handed_the_lock, a_pass_the_next_task_cannot_use_is_not_counted_as_a_handover],
        exclude: [
            waiting_for_replicas_needs_replicas =>
                "Sentinel has replicas to wait for; sentinel.rs and the chaos run's sentinel-wait test it through failovers",
            a_retry_after_a_lost_reply_finds_the_lock_ours =>
                "needs a reply dropped in flight: the same acquire script as one server (lost_replies.rs)",
        ],
    );

    all_but!(
        redlock, Kind::Redlock, #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
        also: [waiting_for_replicas_needs_replicas],
        exclude: [
            a_fair_lock_is_taken_and_released_leaving_nothing =>
                "Redlock refuses a fair lock (its masters would keep a line each): fair.rs checks the refusal",
            fair_waiters_are_granted_in_arrival_order =>
                "Redlock refuses a fair lock (its masters would keep a line each): fair.rs checks the refusal",
            a_fair_waiter_that_stops_waiting_leaves_the_line =>
                "Redlock refuses a fair lock (its masters would keep a line each): fair.rs checks the refusal",
            a_deleted_fair_lock_is_reported_lost =>
                "Redlock refuses a fair lock (its masters would keep a line each): fair.rs checks the refusal",
            the_fair_attribute_reenters_its_own_lock =>
                "Redlock refuses a fair lock (its masters would keep a line each): fair.rs checks the refusal",
            a_pass_the_next_task_cannot_use_is_not_counted_as_a_handover =>
                "a majority is not passed",
            the_next_task_in_line_is_handed_the_lock =>
                "a majority is not passed (each master would need the hand-over, and a vote on it): the holder releases and the next in line takes it",
            a_retry_after_a_lost_reply_finds_the_lock_ours =>
                "needs replies dropped in flight: redlock.rs drops them on a minority and a majority of masters",
        ],
    );
}

/// The fair lock's behaviours.
#[path = "conformance/fair.rs"]
mod fair;

/// The behaviours, each a function of the site it runs on.
mod behaviours {
    pub use crate::fair::*;

    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use lock_runtime::{LockError, Locker, distributed_lock};
    use lock_tests::conformance::Site;
    use lock_tests::fixtures::{RacyAccount, STALL_PROOF_TTL, STALL_ROOM, eventually};
    use tokio::time::Instant;

    /// A lease the watchdog keeps through a machine's stalls.
    pub(crate) const TTL: Duration = STALL_PROOF_TTL;
    /// Longer than any test runs: a lock held this long is never freed by
    /// its lease running out within a test. (The default ttl, which is also
    /// Redlock's default restart quarantine, the longest lease it grants.)
    pub(crate) const FOREVER: Duration = Duration::from_secs(30);

    /// A waiter that never polls: woken only by a release message or the
    /// end of the owner's lease (far away).
    pub(crate) async fn patient(site: &Site) -> Locker {
        Locker::connect(site.config().retry_backoff(FOREVER, FOREVER))
            .await
            .unwrap()
    }

    /// `waiter` waiting for lock `name` (in a task), once it listens for
    /// the lock's release and sleeps until it comes: a release before
    /// then would be met by the try that follows the subscription, and
    /// would wake no one.
    async fn queue_up(
        site: &Site,
        waiter: &Locker,
        name: &'static str,
    ) -> tokio::task::JoinHandle<Result<lock_runtime::LockGuard, LockError>> {
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.lock(name).wait(FOREVER).acquire().await })
        };
        eventually(
            "the waiter listens, asleep",
            Duration::from_secs(10),
            || site.has_waiter(name) && waiter.stats().asleep == 1,
        )
        .await;
        waiting
    }

    pub async fn acquire_and_release(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let guard = a.lock("r").acquire().await.unwrap();
        assert!(guard.is_held());
        assert!(site.exists("r"));
        assert!(b.lock("r").try_acquire().await.unwrap().is_none());
        assert!(guard.release().await.unwrap());
        assert!(!site.exists("r"), "nothing of a released lock is left");
        let again = b.lock("r").try_acquire().await.unwrap();
        assert!(again.expect("free once released").release().await.unwrap());
        assert_eq!((a.stats().released, b.stats().released), (1, 1));
    }

    pub async fn busy_is_refused_without_waiting(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let _held = a.lock("r").ttl(FOREVER).acquire().await.unwrap();
        let started = Instant::now();
        assert!(b.lock("r").try_acquire().await.unwrap().is_none());
        assert!(started.elapsed() < STALL_ROOM, "{:?}", started.elapsed());
        // A single try marks the lock all the same: someone outside the
        // holder's locker wants it, so its line lets it go after its share.
        let info = a.inspect("r").await.unwrap();
        assert!(info.holder.is_some() && info.contended, "{info:?}");
    }

    pub async fn a_zero_wait_tries_once(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let _held = a.lock("r").ttl(FOREVER).acquire().await.unwrap();
        let started = Instant::now();
        let err = b
            .lock("r")
            .wait(Duration::ZERO)
            .acquire()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Timeout { .. }), "{err:?}");
        assert!(started.elapsed() < STALL_ROOM, "{:?}", started.elapsed());
        assert_eq!(b.stats().timer_wakeups + b.stats().release_wakeups, 0);
    }

    pub async fn a_wait_ends_in_a_timeout_within_its_bound(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let _held = a.lock("r").ttl(FOREVER).acquire().await.unwrap();
        let wait = Duration::from_millis(600);
        let started = Instant::now();
        let err = b.lock("r").wait(wait).acquire().await.unwrap_err();
        let waited = started.elapsed();
        let LockError::Timeout { key, .. } = err else {
            panic!("{err:?}");
        };
        assert_eq!(key, "r");
        assert!(waited >= wait, "gave up early: {waited:?}");
        assert!(waited < wait + STALL_ROOM, "{waited:?}");
    }

    pub async fn a_release_wakes_a_waiter(site: &Site) {
        let holder = site.locker().await;
        let waiter = patient(site).await;
        let guard = holder.lock("r").ttl(FOREVER).acquire().await.unwrap();
        let waiting = queue_up(site, &waiter, "r").await;
        let fence = guard.fence();
        assert!(guard.release().await.unwrap());
        let released = Instant::now();
        let next = waiting.await.unwrap().unwrap();
        // Its backoff and the owner's lease are a minute away: only the
        // release message could have woken it this soon.
        assert!(released.elapsed() < STALL_ROOM, "{:?}", released.elapsed());
        assert!(next.fence() > fence);
        let stats = waiter.stats();
        assert!(stats.release_wakeups >= 1, "{stats:?}");
        assert_eq!(stats.timer_wakeups, 0, "{stats:?}");
        assert_eq!(stats.asleep, 0, "{stats:?}");
    }

    pub async fn fences_rise_from_owner_to_owner(site: &Site) {
        let lockers = [site.locker().await, site.locker().await];
        let mut last = 0;
        for round in 0..6 {
            let guard = lockers[round % 2].lock("r").acquire().await.unwrap();
            assert!(guard.fence() > last, "{} after {last}", guard.fence());
            last = guard.fence();
            assert!(guard.release().await.unwrap());
        }
        // After a lease that ran out rather than being released, too.
        let lease = Duration::from_millis(500);
        let expired = lockers[0].lock("r").ttl(lease).watchdog(false);
        let expired = expired.wait(STALL_ROOM).acquire().await.unwrap();
        assert!(expired.fence() > last);
        let next = lockers[1]
            .lock("r")
            .wait(lease + STALL_ROOM)
            .acquire()
            .await;
        assert!(next.unwrap().fence() > expired.fence());
    }

    pub async fn only_the_owner_releases(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let stale = a.lock("r").ttl(TTL).acquire().await.unwrap();
        site.delete("r");
        let owner = b.lock("r").ttl(FOREVER).acquire().await.unwrap();
        assert!(owner.fence() > stale.fence());
        assert!(
            !stale.release().await.unwrap(),
            "released another owner's lock"
        );
        assert!(site.exists("r"), "the owner's lock is gone");
        assert!(owner.is_held());
        assert!(owner.release().await.unwrap());
    }

    pub async fn an_external_delete_is_reported_lost(site: &Site) {
        let locker = site.locker().await;
        let guard = locker.lock("r").ttl(TTL).acquire().await.unwrap();
        site.delete("r");
        let deleted = Instant::now();
        tokio::time::timeout(TTL / 3 + STALL_ROOM, guard.lost())
            .await
            .expect("the loss was not told at the next renewal");
        assert!(deleted.elapsed() < TTL / 3 + STALL_ROOM);
        assert!(!guard.is_held());
        assert_eq!(locker.stats().lost, 1);
        assert!(!guard.release().await.unwrap());
    }

    pub async fn the_watchdog_keeps_a_lock_past_its_ttl(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let guard = a.lock("r").ttl(TTL).acquire().await.unwrap();
        tokio::time::sleep(TTL * 2).await;
        assert!(guard.is_held());
        assert!(b.lock("r").try_acquire().await.unwrap().is_none());
        assert!(a.stats().renewed >= 2, "{:?}", a.stats());
        assert!(guard.release().await.unwrap());
    }

    pub async fn a_fixed_lease_ends_with_a_loss_signal(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let acquired = Instant::now();
        let guard = a
            .lock("r")
            .ttl(TTL)
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        tokio::time::timeout(TTL + STALL_ROOM, guard.lost())
            .await
            .expect("a fixed lease must end with a loss signal");
        let told = acquired.elapsed();
        // Told before the key can expire, and not long before: the lease
        // minus its drift and reaction margins
        // (drift, the base margin and up to a quarter for recent stalls).
        assert!(told >= TTL * 2 / 3, "{told:?}");
        assert!(!guard.is_held());
        assert_eq!(a.stats().renewed, 0);
        let next = b.lock("r").wait(TTL + STALL_ROOM).acquire().await.unwrap();
        assert!(next.fence() > guard.fence());
    }

    pub async fn an_abandoned_fixed_lease_frees_after_its_ttl(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let lease = Duration::from_millis(500);
        let guard = a.lock("r").ttl(lease).watchdog(false).acquire().await;
        // A holder that vanished without a release (a crash, to the server).
        std::mem::forget(guard.unwrap());
        let started = Instant::now();
        let _taken = b
            .lock("r")
            .wait(lease + STALL_ROOM)
            .acquire()
            .await
            .unwrap();
        assert!(started.elapsed() < lease + STALL_ROOM);
    }

    pub async fn distinct_names_do_not_contend(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let mut held = Vec::new();
        for n in 0..20 {
            let locker = if n % 2 == 0 { &a } else { &b };
            let name = format!("sku:{n}");
            let guard = locker.lock(name.as_str()).try_acquire().await.unwrap();
            held.push(guard.unwrap_or_else(|| panic!("{name} was busy")));
        }
        assert_eq!(a.stats().contended + b.stats().contended, 0);
    }

    pub async fn a_cancelled_wait_takes_nothing(site: &Site) {
        let (a, b, c) = (
            site.locker().await,
            site.locker().await,
            site.locker().await,
        );
        let guard = a.lock("r").ttl(FOREVER).acquire().await.unwrap();
        let waiting = queue_up(site, &b, "r").await;
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        // On Redis the wait was moved to the library's runtime, which
        // stops it at its next await: a moment after the caller let go.
        eventually("a cancelled waiter sleeps no more", STALL_ROOM, || {
            b.stats().asleep == 0
        })
        .await;
        assert!(guard.release().await.unwrap());
        let next = c.lock("r").wait(STALL_ROOM).acquire().await;
        assert!(next.is_ok(), "the cancelled waiter took it: {next:?}");
        assert_eq!(b.stats().acquired, 0);
    }

    pub async fn a_cancelled_acquisition_leaves_nothing_held(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        // Cancelled at its first await, after its script was sent (or, in
        // memory, after it completed): either way nothing stays held.
        for _ in 0..5 {
            let request = a.lock("r").ttl(FOREVER).acquire();
            let _ = tokio::time::timeout(Duration::ZERO, request).await;
        }
        let next = b.lock("r").wait(STALL_ROOM * 3).acquire().await;
        assert!(next.is_ok(), "held by a cancelled acquisition: {next:?}");
    }

    pub async fn dropping_a_guard_releases_the_lock(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let guard = a.lock("r").ttl(FOREVER).acquire().await.unwrap();
        drop(guard);
        let started = Instant::now();
        let _taken = b.lock("r").wait(STALL_ROOM * 3).acquire().await.unwrap();
        assert!(started.elapsed() < STALL_ROOM * 3);
        // Counted once the release's answer is read, maybe after b's grant.
        eventually("the release counted", STALL_ROOM, || {
            a.stats().released == 1
        })
        .await;
    }

    /// Takes lock `r` (lease `TTL`, waiting as long as it takes) and
    /// counts the caller in `inside`, failing if another holder is there.
    async fn enter_alone(locker: &Locker, inside: &AtomicU32) -> lock_runtime::LockGuard {
        let guard = locker
            .lock("r")
            .ttl(TTL)
            .wait(FOREVER)
            .acquire()
            .await
            .unwrap();
        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
        guard
    }

    pub async fn contenders_take_turns_and_never_overlap(site: &Site) {
        let lockers = [site.locker().await, site.locker().await];
        let inside = std::sync::Arc::new(AtomicU32::new(0));
        let mut tasks = Vec::new();
        for n in 0..8 {
            let locker = lockers[n % 2].clone();
            let inside = inside.clone();
            tasks.push(tokio::spawn(async move {
                let guard = enter_alone(&locker, &inside).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                let fence = guard.fence();
                assert!(guard.release().await.unwrap());
                fence
            }));
        }
        let mut fences = Vec::new();
        for task in tasks {
            fences.push(task.await.unwrap());
        }
        fences.sort_unstable();
        fences.dedup();
        assert_eq!(fences.len(), 8, "each turn its own fence");
    }

    /// Tasks of one locker take turns on a key; a holder with someone in
    /// line passes the lock (in process: the same hold with the next fence;
    /// at least every ninth in a row on the server: a fresh token and a
    /// fence from its clock) instead of releasing it.
    pub async fn the_next_task_in_line_is_handed_the_lock(site: &Site) {
        const TASKS: usize = 4;
        const ROUNDS: usize = 10;
        let locker = site.locker().await;
        let inside = std::sync::Arc::new(AtomicU32::new(0));
        // Fences in the order of the grants, recorded while held.
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let (locker, inside, order) = (locker.clone(), inside.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = enter_alone(&locker, &inside).await;
                    order.lock().unwrap().push(guard.fence());
                    // Held across an await: the others queue up meanwhile.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    assert!(guard.release().await.unwrap(), "still ours");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order.len(), TASKS * ROUNDS);
        assert!(
            order.windows(2).all(|pair| pair[0] < pair[1]),
            "fences rise grant after grant: {order:?}"
        );
        let stats = locker.stats();
        assert_eq!(stats.acquired, (TASKS * ROUNDS) as u64, "{stats:?}");
        assert_eq!(stats.released, (TASKS * ROUNDS) as u64, "{stats:?}");
        assert!(stats.handovers > 0, "nobody was handed the lock: {stats:?}");
        // Each run of passes in process follows a grant or a pass by the
        // server, and is at most 8 long.
        let by_server =
            (stats.acquired - stats.handovers) + (stats.handovers - stats.handovers_in_process);
        assert!(
            stats.handovers_in_process <= 8 * by_server,
            "at most 8 passes in a row without the server: {stats:?}"
        );
        // The last holder had nobody in line: it released, nothing is left.
        eventually("the lock is gone", STALL_ROOM, || !site.exists("r")).await;
        assert!(locker.inspect("r").await.unwrap().holder.is_none());
    }

    #[distributed_lock(key = "acct:<id>", wait = "5s", locker = locker)]
    async fn deposit(locker: &Locker, account: &RacyAccount, id: u32) -> Result<u64, LockError> {
        account.add_one().await;
        Ok(lock_runtime::current().map_or(0, |lock| lock.fence()))
    }

    #[distributed_lock(key = "acct:<id>", locker = locker)]
    async fn deposit_twice(
        locker: &Locker,
        account: &RacyAccount,
        id: u32,
    ) -> Result<u64, LockError> {
        let outer = lock_runtime::current().map_or(0, |lock| lock.fence());
        let (a, b) = tokio::join!(deposit(locker, account, id), deposit(locker, account, id));
        assert_eq!(
            (a?, b?),
            (outer, outer),
            "nested calls run under the outer lock"
        );
        Ok(outer)
    }

    #[distributed_lock(key = "acct:<id>", locker = locker)]
    async fn deposit_nested_twice(
        locker: &Locker,
        account: &RacyAccount,
        id: u32,
    ) -> Result<(), LockError> {
        deposit_twice(locker, account, id).await?;
        Ok(())
    }

    #[distributed_lock(key = "acct:<id>", reentrant = false, locker = locker)]
    async fn audit(locker: &Locker, id: u32) -> Result<(), LockError> {
        Ok(())
    }

    #[distributed_lock(key = "acct:<id>", locker = locker)]
    async fn close(locker: &Locker, id: u32) -> Result<(), LockError> {
        audit(locker, id).await
    }

    pub async fn a_nested_call_reenters_without_waiting(site: &Site) {
        let locker = site.locker().await;
        let account = RacyAccount::default();
        let started = Instant::now();
        deposit_nested_twice(&locker, &account, 7).await.unwrap();
        assert!(started.elapsed() < STALL_ROOM, "a nested call waited");
        assert_eq!(account.balance(), 2);
        assert_eq!(locker.stats().acquired, 1, "one lock for the whole call");
        assert!(!site.exists("acct:7"));
    }

    pub async fn sibling_nested_calls_take_turns(site: &Site) {
        let locker = site.locker().await;
        let account = RacyAccount::default();
        for _ in 0..3 {
            deposit_twice(&locker, &account, 8).await.unwrap();
        }
        assert_eq!(account.overlaps(), 0, "two at once");
        assert_eq!(account.balance(), 6, "a deposit lost");
    }

    pub async fn a_non_reentrant_nested_call_fails_at_once(site: &Site) {
        let locker = site.locker().await;
        let started = Instant::now();
        let err = close(&locker, 9).await.unwrap_err();
        assert!(matches!(err, LockError::HeldByThisTask { .. }), "{err:?}");
        assert!(started.elapsed() < STALL_ROOM);
        // Alone, it locks as usual.
        audit(&locker, 9).await.unwrap();
    }

    #[distributed_lock(key = "job:<name>", ttl = "1500ms", locker = locker)]
    async fn long_job(
        locker: &Locker,
        name: &str,
        inside: tokio::sync::oneshot::Sender<()>,
        finished: &AtomicU32,
    ) -> Result<(), LockError> {
        let _ = inside.send(());
        tokio::time::sleep(FOREVER).await;
        finished.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    #[distributed_lock(key = "job:<name>", ttl = "1500ms", on_lost = "continue", locker = locker)]
    async fn stubborn_job(
        locker: &Locker,
        name: &str,
        inside: tokio::sync::oneshot::Sender<()>,
    ) -> Result<bool, LockError> {
        let _ = inside.send(());
        let lock = lock_runtime::current().expect("inside the lock");
        lock.lost().await;
        Ok(lock.is_held())
    }

    pub async fn a_lost_lock_cancels_the_body(site: &Site) {
        let locker = site.locker().await;
        let finished = AtomicU32::new(0);
        let (inside, entered) = tokio::sync::oneshot::channel();
        let job = long_job(&locker, "nightly", inside, &finished);
        let deleting = async {
            entered.await.unwrap();
            site.delete("job:nightly");
            Instant::now()
        };
        let (result, deleted) = tokio::join!(job, deleting);
        assert!(matches!(result, Err(LockError::Lost { .. })), "{result:?}");
        assert!(deleted.elapsed() < TTL / 3 + STALL_ROOM);
        assert_eq!(finished.load(Ordering::SeqCst), 0, "the body ran on");
    }

    pub async fn on_lost_continue_lets_the_body_finish(site: &Site) {
        let locker = site.locker().await;
        let (inside, entered) = tokio::sync::oneshot::channel();
        let job = stubborn_job(&locker, "report", inside);
        let deleting = async {
            entered.await.unwrap();
            site.delete("job:report");
        };
        let (result, ()) = tokio::join!(job, deleting);
        let held_at_the_end = result.unwrap();
        assert!(!held_at_the_end, "finished, knowing the lock was lost");
    }

    #[distributed_lock(key = "order:<id>", locker = locker)]
    async fn which_lock(locker: &Locker, id: u64) -> Result<(String, u64), LockError> {
        let lock = lock_runtime::current().expect("inside the lock");
        assert!(lock.is_held());
        Ok((lock.key().to_owned(), lock.fence()))
    }

    pub async fn current_names_the_held_lock(site: &Site) {
        let locker = site.locker().await;
        assert!(lock_runtime::current().is_none());
        let (key, fence) = which_lock(&locker, 42).await.unwrap();
        assert_eq!(key, "order:42");
        assert!(fence > 0);
        assert!(lock_runtime::current().is_none());
    }

    pub async fn a_ttl_too_short_to_use_is_a_config_error(site: &Site) {
        let locker = site.locker().await;
        for ttl in [Duration::ZERO, Duration::from_millis(2)] {
            let err = locker.lock("r").ttl(ttl).acquire().await.unwrap_err();
            assert!(matches!(err, LockError::Config(_)), "{ttl:?}: {err:?}");
        }
        assert!(!site.exists("r"));
    }

    pub async fn inspect_shows_holder_and_lease(site: &Site) {
        let holder = Locker::connect(site.config().holder_label("worker-7"))
            .await
            .unwrap();
        let operator = site.locker().await;
        assert!(!operator.inspect("r").await.unwrap().held);
        let guard = holder.lock("r").ttl(FOREVER).acquire().await.unwrap();
        let info = operator.inspect("r").await.unwrap();
        assert!(info.held, "{info:?}");
        assert_eq!(info.key, "r");
        assert_eq!(info.holder.as_deref(), Some("worker-7"));
        assert!(!info.contended, "nobody waited");
        let left = info.remaining.expect("a lease");
        assert!(left <= FOREVER && left > FOREVER - STALL_ROOM, "{left:?}");
        assert!(guard.release().await.unwrap());
        assert!(!operator.inspect("r").await.unwrap().held);
        // A fixed lease that ran out is free again.
        let lease = Duration::from_millis(400);
        let fixed = holder.lock("f").ttl(lease).watchdog(false).acquire().await;
        tokio::time::timeout(lease + STALL_ROOM, fixed.unwrap().lost())
            .await
            .unwrap();
        eventually("the lease ran out", STALL_ROOM * 2, || !site.exists("f")).await;
        let info = operator.inspect("f").await.unwrap();
        assert!(!info.held && info.holder.is_none(), "{info:?}");
    }

    pub async fn force_unlock_frees_the_lock_and_the_holder_is_told(site: &Site) {
        let (holder, operator) = (site.locker().await, site.locker().await);
        let waiter = patient(site).await;
        let guard = holder.lock("r").ttl(TTL).acquire().await.unwrap();
        let waiting = queue_up(site, &waiter, "r").await;
        assert!(operator.force_unlock("r").await.unwrap());
        let unlocked = Instant::now();
        // Woken by the release message (its backoff is a minute away).
        let next = waiting.await.unwrap().unwrap();
        assert!(unlocked.elapsed() < STALL_ROOM, "{:?}", unlocked.elapsed());
        assert!(next.fence() > guard.fence());
        // The holder learns at its next renewal.
        tokio::time::timeout(TTL / 3 + STALL_ROOM, guard.lost())
            .await
            .expect("the holder was not told");
        assert!(
            !guard.release().await.unwrap(),
            "released the new owner's lock"
        );
        assert!(next.is_held());
        assert!(next.release().await.unwrap());
        assert!(
            !operator.force_unlock("r").await.unwrap(),
            "nothing to unlock"
        );
    }

    #[distributed_lock(key = "job:<name>", ttl = "1500ms", max_hold = "2s", locker = locker)]
    async fn stuck_job(locker: &Locker, name: &str) -> Result<(), LockError> {
        tokio::time::sleep(FOREVER).await;
        Ok(())
    }

    pub async fn a_hold_cap_stops_the_body(site: &Site) {
        let locker = site.locker().await;
        let started = Instant::now();
        let err = stuck_job(&locker, "stuck").await.unwrap_err();
        let held = started.elapsed();
        let LockError::HoldCapExceeded { key, cap } = err else {
            panic!("{err:?}");
        };
        assert_eq!((key.as_str(), cap), ("job:stuck", Duration::from_secs(2)));
        assert!(held >= cap && held < cap + STALL_ROOM, "{held:?}");
        // Renewed until the cap, and given back at once after it.
        assert!(locker.stats().renewed >= 2, "{:?}", locker.stats());
        assert!(!site.exists("job:stuck"));
    }

    /// Every lock a locker acquired ends up counted once: still held,
    /// released, or lost (`LockerStats`). A lock deleted behind its
    /// holder's back (an operator's `force_unlock`, or a lease that ran
    /// out) and then given back by its holder before the watchdog noticed
    /// answers `Ok(false)`: it was lost, and is counted so.
    pub async fn a_lock_found_gone_at_its_release_is_counted(site: &Site) {
        let (holder, operator) = (site.locker().await, site.locker().await);
        let guard = holder.lock("r").ttl(FOREVER).acquire().await.unwrap();
        assert!(operator.force_unlock("r").await.unwrap());
        // Given back before its next renewal (a third of a minute away).
        assert!(!guard.release().await.unwrap(), "it was no longer ours");
        let stats = holder.stats();
        assert_eq!(
            stats.acquired,
            stats.released + stats.lost,
            "acquired = released + lost + held (none held): {stats:?}"
        );
    }

    /// A holder with a task of its locker in line passes the lock; a pass
    /// that task cannot use (it asked for another ttl) is given back and
    /// the task takes the lock from the server like anyone: no lock was
    /// "passed straight to the next task ... without being freed on the
    /// server" (`LockerStats::handovers`).
    pub async fn a_pass_the_next_task_cannot_use_is_not_counted_as_a_handover(site: &Site) {
        let locker = site.locker().await;
        let first = locker.lock("r").ttl(TTL).acquire().await.unwrap();
        let next = {
            let locker = locker.clone();
            tokio::spawn(async move {
                let request = locker.lock("r").ttl(TTL * 2).wait(FOREVER);
                request.acquire().await.unwrap().release().await.unwrap()
            })
        };
        // Long enough for `next` to queue behind `first` in the line.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(first.release().await.unwrap());
        assert!(next.await.unwrap());
        let stats = locker.stats();
        assert_eq!((stats.acquired, stats.released), (2, 2), "{stats:?}");
        assert_eq!(stats.handovers, 0, "the pass was given back: {stats:?}");
    }

    /// `LockerStats::contended` counts "acquisitions that found the lock
    /// busy at least once": one that waited its whole wait for a busy lock
    /// and timed out found it busy.
    pub async fn a_wait_that_timed_out_on_a_busy_lock_counts_as_contended(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let _held = a.lock("r").ttl(FOREVER).acquire().await.unwrap();
        let err = b.lock("r").wait(Duration::from_millis(300)).acquire().await;
        assert!(matches!(err, Err(LockError::Timeout { .. })), "{err:?}");
        let stats = b.stats();
        assert_eq!(stats.timeouts, 1, "{stats:?}");
        assert_eq!(stats.contended, 1, "it found the lock busy: {stats:?}");
    }

    /// Where there are no replicas to wait for, asking is a configuration
    /// error, per request and in the configuration.
    pub async fn waiting_for_replicas_needs_replicas(site: &Site) {
        let locker = site.locker().await;
        let request = locker
            .lock("r")
            .wait_for_replicas(1, Duration::from_secs(1));
        let err = request.acquire().await.unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{err:?}");
        let config = site.config().wait_for_replicas(1, Duration::from_secs(1));
        let err = Locker::connect(config).await.unwrap_err();
        assert!(matches!(err, LockError::Config(_)), "{err:?}");
    }
}
