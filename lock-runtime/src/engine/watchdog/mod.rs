//! The watchdog: one background task per [`Locker`](crate::Locker), on the
//! library's own runtime ([`crate::host::background`]), that keeps every held
//! lease alive and says so the moment one is lost ([`crate::engine::lost`]).
//!
//! - Each lease is renewed every ttl/6 to ttl/3. Leases that fall due in the
//!   same round are renewed in batch commands sent together on the
//!   watchdog's own connection, so 10,000 held locks cost one round trip per
//!   round, not 10,000 timers and commands, and lock traffic never waits
//!   behind a round.
//! - A renewal answered "not yours" is a loss, at once. A renewal that
//!   errors is retried until the lease's local validity runs out; then the
//!   lease is lost. That deadline is a timer of its own, so a renewal stuck
//!   on a frozen server cannot delay the signal.
//! - While it watches anything, the task wakes at least every
//!   [`SAMPLE_EVERY`] and records how late its timer fired
//!   ([`validity::observe_lateness`]): a process or machine that stalls
//!   widens every lease's reaction margin, so that the loss signal keeps
//!   coming before the key can expire on the server. The same wake-up
//!   notices a machine that was suspended ([`crate::host::clock`]).
//! - After the locks moved to another server (a Sentinel failover), every
//!   lease is renewed there at once, so one whose key did not reach the new
//!   server is reported lost now, not at its next scheduled renewal.
//!
//! A locker on the in-memory store watches each lease with a watchdog of
//! its own, on the runtime that acquired it ([`Watching::PerLease`]): that
//! runtime's clock is the lease's (a test may pause it), and runtimes do
//! not share clocks.

mod schedule;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use self::schedule::{BatchOutcome, Schedule};
use crate::backend::{Backend, RenewalGroup};
use crate::engine::lease::Lease;
use crate::engine::lost::{self, Cause};
use crate::engine::renewal::{self, Renewal};
use crate::engine::stats::Counters;
use crate::engine::validity;
use crate::engine::wait::Turn;
use crate::host::clock::Clock;
use crate::metrics;

/// Longest sleep while any lease is watched: how finely stalls of the
/// process are seen.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Handle to the watchdog. Watching and forgetting a lease only touch the
/// shared schedule under a mutex: no message, and no wake-up of the task
/// unless the new lease needs it sooner than the task planned to wake, so a
/// short-lived lock costs the watchdog next to nothing. The task ends when
/// every handle is dropped.
#[derive(Clone)]
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    _alive: Arc<Alive>,
}

/// What the handles and the task share.
struct Shared {
    schedule: Mutex<Schedule>,
    /// The clock the leases are on.
    clock: Clock,
    /// Wakes the task early: a lease due before its planned wake-up, or shutdown.
    wake: Notify,
    shutdown: AtomicBool,
}

/// Dropped with the last handle: tells the task to end.
struct Alive(Arc<Shared>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.shutdown.store(true, Ordering::SeqCst);
        self.0.wake.notify_one();
    }
}

impl Shared {
    fn schedule(&self) -> MutexGuard<'_, Schedule> {
        // The schedule stays consistent even if a holder panicked mid-update.
        self.schedule.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How a locker's leases are watched.
pub(crate) enum Watching {
    /// By one watchdog for all of them, on the library's runtime.
    One(Watchdog),
    /// Each by a watchdog of its own, started on the runtime that acquired
    /// it, on that runtime's tokio clock (the in-memory store).
    PerLease {
        backend: Backend,
        counters: Arc<Counters>,
    },
}

impl Watching {
    /// Starts watching a freshly acquired lease, whose acquire request was
    /// sent at `sent_at`; it is watched until the returned value is dropped
    /// or ended. The holder's `turn` in its locker's line is kept with it,
    /// and given up as soon as the lease is lost (see [`Watched::end`]).
    pub(crate) fn watch(
        &self,
        lease: Arc<Lease>,
        renews: bool,
        sent_at: Instant,
        turn: Option<Turn>,
    ) -> Watched {
        let watchdog = match self {
            Watching::One(watchdog) => watchdog.clone(),
            Watching::PerLease { backend, counters } => {
                // Acquisitions on the in-memory store only run inside a
                // runtime (`Host::runtime` turned the others away).
                let Ok(on) = tokio::runtime::Handle::try_current() else {
                    tracing::warn!(
                        key = lease.keys.name(),
                        "a lease acquired outside any runtime is not watched"
                    );
                    return Watched {
                        watchdog: None,
                        id: lease.id,
                        turn,
                    };
                };
                Watchdog::start(&on, backend.clone(), counters.clone(), Clock::Tokio)
            }
        };
        let id = lease.id;
        let turn = watchdog.watch(lease, renews, sent_at, turn);
        Watched {
            watchdog: Some(watchdog),
            id,
            turn,
        }
    }
}

/// A lease under watch; dropping it stops the watch (released, or its
/// guard dropped).
pub(crate) struct Watched {
    watchdog: Option<Watchdog>,
    id: u64,
    /// The holder's turn, when no watchdog keeps it.
    turn: Option<Turn>,
}

impl Watched {
    /// Stops the watch (the holder lets go); answers the holder's turn,
    /// unless the lease was lost meanwhile and the turn given up.
    pub(crate) fn end(mut self) -> Option<Turn> {
        let kept = self
            .watchdog
            .take()
            .and_then(|watchdog| watchdog.forget(self.id));
        kept.or_else(|| self.turn.take())
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(watchdog) = &self.watchdog {
            watchdog.forget(self.id);
        }
    }
}

impl Watchdog {
    /// Starts the task on the runtime `on`, for leases on `clock`.
    pub(crate) fn start(
        on: &tokio::runtime::Handle,
        backend: Backend,
        counters: Arc<Counters>,
        clock: Clock,
    ) -> Self {
        let shared = Arc::new(Shared {
            schedule: Mutex::new(Schedule::default()),
            clock,
            wake: Notify::new(),
            shutdown: AtomicBool::new(false),
        });
        if let Some(moves) = backend.moves() {
            on.spawn(renew_all_on_move(moves, Arc::downgrade(&shared)));
        }
        // Made before the task is spawned: a task dropped before its first
        // poll (its runtime shut down at once) drops it all the same.
        let orphaned = Orphaned {
            shared: shared.clone(),
            counters: counters.clone(),
        };
        on.spawn(run(backend, counters, shared.clone(), orphaned));
        Self {
            _alive: Arc::new(Alive(shared.clone())),
            shared,
        }
    }

    /// Starts watching a lease, whose acquire request was sent at
    /// `sent_at`, with its holder's `turn`; answers the turn when it is
    /// not kept here.
    fn watch(
        &self,
        lease: Arc<Lease>,
        renews: bool,
        sent_at: Instant,
        turn: Option<Turn>,
    ) -> Option<Turn> {
        #[cfg(feature = "sabotage")]
        if crate::sabotage::active() == Some(crate::sabotage::Sabotage::SilentWatchdog) {
            return turn;
        }
        let mut schedule = self.shared.schedule();
        let first_event = schedule.watch(lease, renews, sent_at, turn);
        let sooner = schedule.armed_until.is_none_or(|armed| first_event < armed);
        drop(schedule);
        if sooner {
            // A stored permit if the task is busy: it then looks again.
            self.shared.wake.notify_one();
        }
        None
    }

    /// Stops watching a lease (released, or its guard dropped); answers
    /// its holder's turn if the lease was not lost meanwhile. The task may
    /// still wake for it, finds nothing to do, and sleeps on.
    fn forget(&self, id: u64) -> Option<Turn> {
        self.shared.schedule().forget(id)
    }
}

async fn run(backend: Backend, counters: Arc<Counters>, shared: Arc<Shared>, orphaned: Orphaned) {
    let _orphaned = orphaned;
    let clock = shared.clock;
    let mut in_flight: JoinSet<BatchOutcome> = JoinSet::new();
    // The stall the leases' ends were last planned with.
    let mut planned_with = validity::recent_stall();
    // How long telling one holder of its loss takes, about (see
    // `Schedule::expire`); only where time passes while it is told.
    let mut telling = TellingCost::new(clock);
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let now = clock.now();
        let (expired, batches, wake_at) = {
            let mut schedule = shared.schedule();
            // A stall seen since (by this watchdog or another one) widens
            // the margin of every lease, those confirmed before it too.
            let stall = validity::recent_stall();
            if stall > planned_with {
                schedule.narrow();
            }
            planned_with = stall;
            schedule.telling_each = telling.each();
            let expired = schedule.expire(now);
            let batches = schedule.take_due(now);
            let next = schedule.next_event();
            // While anything is watched, wake often enough to see stalls
            // (on a clock where a late timer means one).
            let sample = (clock.shows_stalls() && schedule.len() > 0).then(|| now + SAMPLE_EVERY);
            let wake_at = match (next, sample) {
                (Some(at), Some(sample)) => Some(at.min(sample)),
                (next, sample) => next.or(sample),
            };
            // Nothing left to watch, a sample after the last lease came:
            // the task stays armed until then, so that the next lease (a
            // hold taken and given back in a loop is gone before the task
            // looks) wakes it only if its first event comes sooner.
            let idle_until = (wake_at.is_none() && clock.shows_stalls())
                .then(|| schedule.last_watched.map(|at| at + SAMPLE_EVERY))
                .flatten()
                .filter(|&at| at > now);
            let wake_at = wake_at.or(idle_until);
            schedule.armed_until = next.or(idle_until);
            (expired, batches, wake_at)
        };
        let told = telling.start(expired.len());
        for (lease, cause, turn) in expired {
            #[cfg(feature = "sabotage")]
            if crate::sabotage::active() == Some(crate::sabotage::Sabotage::SilentAfterStall)
                && now > lease.valid_until() + lease.ttl / 4
            {
                continue;
            }
            lost::declare(&lease, cause, &counters);
            // The rest of the holder's line goes on trying.
            drop(turn);
        }
        telling.done(told);
        if !batches.is_empty() {
            Counters::bump(&counters.renewal_rounds);
        }
        // All batches of a round go out at once, pipelined on the
        // watchdog's connection: one round trip per round. Each renewal
        // group (a cluster's hash slot) is a batch of its own, whose answer
        // is applied when it comes, whatever the other groups' nodes do.
        for batch in batches
            .into_iter()
            .flat_map(|batch| by_group(&backend, batch))
        {
            Counters::bump(&counters.renewal_calls);
            in_flight.spawn(renew_batch(backend.clone(), batch, clock));
        }
        let answered = tokio::select! {
            () = shared.wake.notified() => None,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => done.ok(),
            () = sleep_until(clock, wake_at) => None,
        };
        // However the task woke, running after its planned wake-up means
        // its thread was stalled that long: a new lease's notice or a
        // renewal's answer may be what woke it after the stall. Measured
        // before any work of this turn, so that the answer's leases are
        // trusted with the margin the stall set.
        observe_if_late(clock, wake_at);
        if let Some(outcome) = answered {
            apply(&shared, outcome, &counters);
            // And after it: a stall while the answer was applied (a pause
            // of the process, a log sink that blocks the warning of a
            // loss) kept the task from its timers as much.
            observe_if_late(clock, wake_at);
        }
    }
}

/// How long telling one holder of its loss takes, learnt from the passes
/// that told many: the schedule takes leases due that much later per
/// holder told before them (see `Schedule::expire`).
struct TellingCost {
    clock: Clock,
    each: Duration,
}

/// A pass of telling that started at `at`, with `count` holders.
struct Telling {
    at: Instant,
    count: usize,
}

impl TellingCost {
    /// The first guess, on the safe side: a debug build takes about 10 µs
    /// per holder on a busy machine, a release build one or two. Only
    /// leases whose renewals went unconfirmed are told early (see
    /// `Schedule::expiries_to_tell`), so a guess too high costs nothing
    /// while the server answers.
    const FIRST: Duration = Duration::from_micros(20);
    /// A pass is measured when it tells at least this many holders.
    const MEASURED_FROM: usize = 64;
    /// The most it is taken to be: several times what a debug build takes
    /// on a busy machine.
    const MOST: Duration = Duration::from_micros(50);

    fn new(clock: Clock) -> Self {
        // On a clock that does not run while the library works (tokio's,
        // paused in a test) telling takes no time.
        let each = if clock.shows_stalls() {
            Self::FIRST
        } else {
            Duration::ZERO
        };
        Self { clock, each }
    }

    fn each(&self) -> Duration {
        self.each
    }

    fn start(&self, count: usize) -> Telling {
        Telling {
            at: self.clock.now(),
            count,
        }
    }

    /// Learns from a pass that told many holders: what one took there,
    /// within bounds (a pass slowed by a stall would teach far too much;
    /// the stall is recorded as one and widens the margins anyway).
    fn done(&mut self, pass: Telling) {
        if !self.clock.shows_stalls() || pass.count < Self::MEASURED_FROM {
            return;
        }
        let took = self.clock.now().saturating_duration_since(pass.at);
        let per = took / u32::try_from(pass.count).unwrap_or(u32::MAX);
        self.each = per.clamp(Duration::from_micros(1), Self::MOST);
    }
}

/// Records the stall of the task's thread if it runs after `planned`, the
/// wake-up it planned last.
fn observe_if_late(clock: Clock, planned: Option<Instant>) {
    if let Some(planned) = planned
        && clock.shows_stalls()
    {
        let now = clock.now();
        if now > planned {
            validity::observe_lateness(planned, now);
        }
    }
}

/// Dropped with the task: if it was not told to end, the runtime it ran on
/// shut down (an in-memory store's watchdog runs on the runtime that
/// acquired the lease, and a guard may outlive it). Nothing renews or
/// times its leases any more, so they are reported lost now, rather than
/// never, and their holders' lines go on.
struct Orphaned {
    shared: Arc<Shared>,
    counters: Arc<Counters>,
}

impl Drop for Orphaned {
    fn drop(&mut self) {
        if self.shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let (leases, turns) = self.shared.schedule().forget_all();
        for lease in &leases {
            lost::declare(lease, Cause::Unwatched, &self.counters);
        }
        drop(turns);
    }
}

/// Applies one batch's answer and reports what it found.
fn apply(shared: &Shared, outcome: BatchOutcome, counters: &Counters) {
    let applied = shared.schedule().apply(outcome, shared.clock.now());
    for labels in &applied.renewed {
        Counters::bump(&counters.renewed);
        metrics::renewal(*labels, "renewed");
    }
    for (lease, turn) in applied.lost {
        metrics::renewal(lease.labels, "refused");
        lost::declare(&lease, Cause::Refused, counters);
        drop(turn);
    }
    for labels in &applied.unconfirmed {
        metrics::renewal(*labels, "unconfirmed");
    }
    if !applied.unconfirmed.is_empty() {
        Counters::bump(&counters.renewal_errors);
        match &applied.failed {
            Some(err) => {
                tracing::warn!(error = %err, locks = applied.unconfirmed.len(), "lock renewal failed; retrying while the leases are valid")
            }
            None => tracing::warn!(
                locks = applied.unconfirmed.len(),
                "lock renewal not confirmed by enough nodes; retrying while the leases are valid"
            ),
        }
    }
}

/// After the locks moved to another server, renews every lease there at
/// once: a lease whose key did not reach the new server is then reported
/// lost now, not at its next scheduled renewal (up to ttl/3 later), while
/// someone else may already hold it.
async fn renew_all_on_move(mut moves: tokio::sync::watch::Receiver<u64>, shared: Weak<Shared>) {
    while moves.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.schedule().all_due(shared.clock.now());
        shared.wake.notify_one();
    }
}

async fn sleep_until(clock: Clock, at: Option<Instant>) {
    match at {
        Some(at) => clock.sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `batch` split by renewal group, in order of first appearance.
fn by_group(backend: &Backend, batch: Vec<Arc<Lease>>) -> Vec<Vec<Arc<Lease>>> {
    let mut groups: Vec<(RenewalGroup, Vec<Arc<Lease>>)> = Vec::new();
    for lease in batch {
        let group = backend.renewal_group(lease.keys.lock());
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, leases)) => leases.push(lease),
            None => groups.push((group, vec![lease])),
        }
    }
    groups.into_iter().map(|(_, leases)| leases).collect()
}

async fn renew_batch(backend: Backend, batch: Vec<Arc<Lease>>, clock: Clock) -> BatchOutcome {
    let renewals: Vec<Renewal<'_>> = batch
        .iter()
        .map(|lease| Renewal {
            kind: lease.leased.kind,
            keys: &lease.keys,
            also: &lease.also,
            suffix: lease.leased.suffix,
            holders: lease.leased.holders,
            token: &lease.token,
            ttl_ms: u64::try_from(lease.ttl.as_millis()).unwrap_or(u64::MAX),
            fence: lease.fence,
        })
        .collect();
    let sent_at = clock.now();
    let result = renewal::renew(&backend, &renewals).await;
    BatchOutcome {
        ids: batch.iter().map(|lease| lease.id).collect(),
        labels: batch.iter().map(|lease| lease.labels).collect(),
        sent_at,
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::NodeBackend;
    use crate::backend::memory::MemoryBackend;
    use crate::engine::fence::FenceBasis;
    use crate::engine::lease::Grant;
    use crate::keys::LockKeys;
    use crate::memory::MemoryStore;
    use crate::owner::OwnerToken;

    fn lease(id: u64, ttl: Duration) -> Arc<Lease> {
        let now = Clock::Boot.now();
        Arc::new(Lease::new(Grant {
            id,
            keys: LockKeys::new("lock:", &format!("stalled{id}")).unwrap(),
            also: Vec::new(),
            leased: crate::engine::lease::Leased::KEY,
            role: crate::engine::lease::Role::Hold,
            token: OwnerToken::random("test"),
            fence: id,
            ttl,
            route: crate::backend::Route::pooled(0),
            sent_at: now,
            granted_at: now,
            fence_basis: FenceBasis::issued_now(id),
            clock: Clock::Boot,
            max_hold: None,
            first_lease: crate::engine::lease::FirstLease::Ttl,
            labels: crate::metrics::Labels {
                template: "k",
                primitive: "test",
            },
        }))
    }

    /// Runs `test` on a runtime of its own (its thread is the one the test
    /// stalls) with a watchdog over an in-memory store, on the machine's
    /// clock, where a late timer means a stall.
    fn on_a_watchdog_of_its_own<T, F: std::future::Future<Output = T>>(
        test: impl FnOnce(Watchdog) -> F,
    ) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let store = MemoryStore::new();
        let backend = Backend::Node(NodeBackend::Memory(Arc::new(MemoryBackend::new(store))));
        runtime.block_on(async {
            let watchdog = Watchdog::start(
                &tokio::runtime::Handle::current(),
                backend,
                Arc::new(Counters::default()),
                Clock::Boot,
            );
            test(watchdog).await
        })
    }

    /// The task is asleep on its sample timer when its thread stalls; right
    /// after the stall a lease due sooner than anything planned wakes it
    /// through its notice, not its timer: the stall is recorded all the same.
    #[test]
    fn a_stall_is_recorded_whatever_wakes_the_watchdog_after_it() {
        let _record = validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let missed = on_a_watchdog_of_its_own(|watchdog| async move {
            let mut missed = Vec::new();
            // A fixed lease with a far end: the task samples every 100 ms.
            let held = lease(1, Duration::from_secs(600));
            watchdog.watch(held.clone(), false, held.confirmed_at(), None);
            for trial in 0..3u64 {
                tokio::time::sleep(Duration::from_millis(150)).await;
                // The thread stalls: its runtime is blocked.
                let stall = Duration::from_millis(300 + 200 * trial);
                std::thread::sleep(stall);
                let sooner = lease(100 + trial, Duration::from_secs(60));
                watchdog.watch(sooner.clone(), false, sooner.confirmed_at(), None);
                tokio::time::sleep(Duration::from_millis(20)).await;
                // The sample was due at most 100 ms before the stall ended.
                let recorded = validity::recent_stall();
                if recorded + Duration::from_millis(110) < stall {
                    missed.push((stall, recorded));
                }
                watchdog.forget(sooner.id);
            }
            missed
        });
        assert!(
            missed.is_empty(),
            "stalls not recorded (stall, longest recorded): {missed:?}"
        );
    }

    /// A hold taken and given back before the task looks leaves it armed
    /// a sample past, so that the next one (given back as fast, in a loop)
    /// need not wake it; then, with nothing come, it sleeps until told.
    #[test]
    fn the_task_stays_armed_a_sample_past_the_last_lease_and_no_longer() {
        on_a_watchdog_of_its_own(|watchdog| async move {
            // A paused machine can run the task only after the sample has
            // passed: then it is rightly not armed, and the case is tried
            // again.
            let mut armed_pass = None;
            for id in 0..10 {
                let brief = lease(id, Duration::from_secs(600));
                watchdog.watch(brief.clone(), true, brief.confirmed_at(), None);
                // Forgotten before the task (on this thread) ever ran.
                watchdog.forget(brief.id);
                tokio::time::sleep(Duration::from_millis(10)).await;
                let armed = watchdog.shared.schedule().armed_until;
                if brief.confirmed_at().elapsed() < SAMPLE_EVERY / 2 {
                    armed_pass = Some((brief, armed));
                    break;
                }
            }
            let (brief, armed) = armed_pass.expect("the task ran in time once in ten tries");
            assert_eq!(armed, Some(brief.confirmed_at() + SAMPLE_EVERY));
            // A lease whose first event is later needs no wake-up.
            let next = lease(100, Duration::from_secs(600));
            let first =
                watchdog
                    .shared
                    .schedule()
                    .watch(next.clone(), true, next.confirmed_at(), None);
            assert!(armed.is_some_and(|armed| first > armed));
            watchdog.forget(next.id);
            // With nothing come, the task disarms at its timer.
            let deadline = Instant::now() + Duration::from_secs(5);
            while watchdog.shared.schedule().armed_until.is_some() {
                assert!(Instant::now() < deadline, "the task stayed armed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    }

    /// Stalls its thread once, inside the first loss it is told of.
    struct StallInLossReport {
        stall: Duration,
        done: AtomicBool,
    }

    impl tracing::Subscriber for StallInLossReport {
        fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
            metadata.is_event() && metadata.target() == "lock_runtime::engine::lost"
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, _: &tracing::Event<'_>) {
            if !self.done.swap(true, Ordering::SeqCst) {
                std::thread::sleep(self.stall);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// The thread stalls while the watchdog applies a renewal's answer
    /// (here, inside the warning of the loss it found): the stall is
    /// recorded as any other, though no timer of the task was due then.
    #[test]
    fn a_stall_while_the_watchdog_applies_an_answer_is_recorded() {
        let _record = validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Longer than any other test's stall, so that this one is the
        // longest recorded.
        let stall = Duration::from_millis(1200);
        let subscriber = StallInLossReport {
            stall,
            done: AtomicBool::new(false),
        };
        let recorded = tracing::subscriber::with_default(subscriber, || {
            on_a_watchdog_of_its_own(|watchdog| async move {
                // Keeps the task sampling every 100 ms.
                let kept = lease(1, Duration::from_secs(600));
                watchdog.watch(kept.clone(), false, kept.confirmed_at(), None);
                // Never taken on the store: its first renewal, due after
                // 100 ms, is answered "not yours".
                let gone = lease(2, Duration::from_millis(300));
                watchdog.watch(gone.clone(), true, gone.confirmed_at(), None);
                tokio::time::timeout(Duration::from_secs(30), lost::signal(&gone))
                    .await
                    .expect("the refused renewal was not reported");
                // A few turns of the task after the stall.
                tokio::time::sleep(Duration::from_millis(150)).await;
                watchdog.forget(kept.id);
                validity::recent_stall()
            })
        });
        // Whatever the task was waiting for next was at most 100 ms away.
        assert!(
            recorded + SAMPLE_EVERY >= stall,
            "a {stall:?} stall recorded as {recorded:?}"
        );
    }

    /// A stall seen after a lease was last confirmed widens that lease's
    /// margin too, as it does the next lease's: a holder whose renewals
    /// then keep failing is told `ttl/20` plus the stall before its key can
    /// expire, not only the margin it had when its last renewal was sent.
    #[test]
    fn a_stall_seen_after_a_confirmation_narrows_the_trust_of_that_lease() {
        let _record = validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        on_a_watchdog_of_its_own(|watchdog| async move {
            // A fixed lease: nothing confirms it again, as for a lease whose
            // renewals fail from here on. Its margin may grow by up to 1 s.
            let ttl = Duration::from_secs(4);
            let held = lease(1, ttl);
            watchdog.watch(held.clone(), false, held.confirmed_at(), None);
            let before = validity::recent_stall();
            tokio::time::sleep(Duration::from_millis(150)).await;
            // The thread stalls longer than any other test records, then
            // the watchdog runs again and records it.
            std::thread::sleep(Duration::from_millis(900));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let recorded = validity::recent_stall();
            // Trusted no longer than a lease confirmed by the same send
            // would be now, and told then.
            let trusted_until = validity::validity_end(held.confirmed_at(), ttl);
            let sent = held.confirmed_at();
            assert!(
                held.valid_until() <= trusted_until,
                "trusted until {:?} after the send, {:?} with the stall recorded since ({before:?} before, {recorded:?} now)",
                held.valid_until() - sent,
                trusted_until - sent,
            );
            let due = watchdog.shared.schedule().next_event();
            assert!(
                due.is_some_and(|due| due <= trusted_until),
                "the loss is due {:?} after the send, trusted until {:?}",
                due.map(|due| due - sent),
                trusted_until - sent,
            );
            watchdog.forget(held.id);
        });
    }
}
