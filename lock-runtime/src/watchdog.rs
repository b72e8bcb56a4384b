//! The watchdog: one background task per [`Locker`](crate::Locker) that keeps
//! every held lease alive and says so the moment one is lost.
//!
//! - Each lease is renewed every ttl/6 to ttl/3. Leases that fall due in the
//!   same round are renewed in batch commands sent together on the
//!   watchdog's own connection, so 10,000 held locks cost one round trip per
//!   round, not 10,000 timers and commands, and lock traffic never waits
//!   behind a round.
//! - A renewal answered 0 means the key is gone or someone else's: *lost*, at once.
//! - A renewal that errors is retried until the lease's local validity
//!   (ttl - time since the request was sent - drift - a 5 % reaction margin)
//!   runs out; then *lost*.
//!   That deadline is a timer of its own, so a renewal stuck on a frozen
//!   server cannot delay the signal: the owner hears of the loss before the
//!   key can expire on the server.
//! - A fixed lease (`watchdog(false)`) is never renewed; it is reported lost
//!   when its validity runs out.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::LockError;
use crate::backend::{Backend, Renewal, Renewed};
use crate::lease::Lease;
use crate::stats::Counters;

/// Most leases renewed by one script call; keeps one call short on the server.
const MAX_BATCH: usize = 512;

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

impl Watchdog {
    /// Starts the task on the current tokio runtime.
    pub(crate) fn start(backend: Backend, counters: Arc<Counters>) -> Self {
        let shared = Arc::new(Shared {
            schedule: Mutex::new(Schedule::default()),
            wake: Notify::new(),
            shutdown: AtomicBool::new(false),
        });
        if let Some(moves) = backend.moves() {
            tokio::spawn(renew_all_on_move(moves, Arc::downgrade(&shared)));
        }
        tokio::spawn(run(backend, counters, shared.clone()));
        Self {
            _alive: Arc::new(Alive(shared.clone())),
            shared,
        }
    }

    /// Starts watching a freshly acquired lease, whose acquire request was
    /// sent at `sent_at`.
    pub(crate) fn watch(&self, lease: Arc<Lease>, renew: bool, sent_at: Instant) {
        let mut schedule = self.shared.schedule();
        let first_event = schedule.watch(lease, renew, sent_at);
        let sooner = schedule.armed_until.is_none_or(|armed| first_event < armed);
        drop(schedule);
        if sooner {
            // A stored permit if the task is busy: it then looks again.
            self.shared.wake.notify_one();
        }
    }

    /// Stops watching a lease (released, or its guard dropped). The task
    /// may still wake for it, finds nothing to do, and sleeps on.
    pub(crate) fn forget(&self, id: u64) {
        self.shared.schedule().forget(id);
    }
}

/// One watched lease.
struct Watched {
    lease: Arc<Lease>,
    renew_every: Duration,
    /// When the next renewal is due; None for a fixed lease or while a
    /// renewal is in flight.
    due: Option<Instant>,
    /// When the holder must be told the lease is lost.
    valid_until: Instant,
}

/// Every watched lease, plus two queues ordered by time.
#[derive(Default)]
struct Schedule {
    watched: HashMap<u64, Watched>,
    renewals: BTreeSet<(Instant, u64)>,
    expiries: BTreeSet<(Instant, u64)>,
    /// When the task plans to wake next (None: not until told).
    armed_until: Option<Instant>,
}

/// What came back from one batch command.
struct BatchOutcome {
    ids: Vec<u64>,
    sent_at: Instant,
    result: Result<Vec<Renewed>, LockError>,
}

async fn run(backend: Backend, counters: Arc<Counters>, shared: Arc<Shared>) {
    let mut in_flight: JoinSet<BatchOutcome> = JoinSet::new();
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let (batches, wake_at) = {
            let mut schedule = shared.schedule();
            let now = Instant::now();
            schedule.expire(now, &counters);
            let batches = schedule.take_due(now);
            let wake_at = schedule.next_event();
            schedule.armed_until = wake_at;
            (batches, wake_at)
        };
        if !batches.is_empty() {
            Counters::bump(&counters.renewal_rounds);
        }
        // All batches of a round go out at once, pipelined on the
        // watchdog's connection: one round trip per round.
        for batch in batches {
            let backend = backend.clone();
            Counters::bump(&counters.renewal_calls);
            in_flight.spawn(renew_batch(backend, batch));
        }
        tokio::select! {
            () = shared.wake.notified() => {}
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                if let Ok(outcome) = done {
                    shared.schedule().apply(outcome, &counters);
                }
            }
            () = sleep_until(wake_at) => {}
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
        shared.schedule().all_due(Instant::now());
        shared.wake.notify_one();
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn renew_batch(backend: Backend, batch: Vec<Arc<Lease>>) -> BatchOutcome {
    let renewals: Vec<Renewal<'_>> = batch
        .iter()
        .map(|lease| Renewal {
            keys: &lease.keys,
            token: &lease.token,
            ttl_ms: ttl_millis(lease.ttl),
            fence: lease.fence,
        })
        .collect();
    let sent_at = Instant::now();
    let result = backend.extend(&renewals).await;
    BatchOutcome {
        ids: batch.iter().map(|lease| lease.id).collect(),
        sent_at,
        result,
    }
}

/// A lease length in the whole milliseconds Redis takes.
pub(crate) fn ttl_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

impl Schedule {
    /// Adds a lease; returns the first moment the task must act for it.
    fn watch(&mut self, lease: Arc<Lease>, renew: bool, sent_at: Instant) -> Instant {
        let id = lease.id;
        let renew_every = lease.ttl / 3;
        let valid_until = lease.valid_until();
        // Counted from the send, like the lease itself: after a slow reply
        // the first renewal is simply due sooner (or at once).
        let due = renew.then(|| sent_at + renew_every);
        if let Some(due) = due {
            self.renewals.insert((due, id));
        }
        self.expiries.insert((valid_until, id));
        self.watched.insert(
            id,
            Watched {
                lease,
                renew_every,
                due,
                valid_until,
            },
        );
        due.map_or(valid_until, |due| due.min(valid_until))
    }

    fn forget(&mut self, id: u64) {
        if let Some(watched) = self.watched.remove(&id) {
            if let Some(due) = watched.due {
                self.renewals.remove(&(due, id));
            }
            self.expiries.remove(&(watched.valid_until, id));
        }
    }

    /// Makes every renewing lease due at `now` (fixed leases and those with
    /// a renewal in flight are left as they are).
    fn all_due(&mut self, now: Instant) {
        let Self {
            watched, renewals, ..
        } = self;
        for (&id, watched) in watched.iter_mut() {
            if let Some(due) = watched.due.replace(now) {
                renewals.remove(&(due, id));
                renewals.insert((now, id));
            } else {
                watched.due = None;
            }
        }
    }

    /// The earliest moment something must happen.
    fn next_event(&self) -> Option<Instant> {
        let renewal = self.renewals.first().map(|&(at, _)| at);
        let expiry = self.expiries.first().map(|&(at, _)| at);
        match (renewal, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Reports every lease whose validity has run out.
    fn expire(&mut self, now: Instant, counters: &Counters) {
        while let Some(&(at, id)) = self.expiries.first() {
            if at > now {
                break;
            }
            if let Some(watched) = self.watched.get(&id) {
                let lease = watched.lease.clone();
                self.forget(id);
                declare_lost(
                    &lease,
                    "its lease ran out before a renewal was confirmed",
                    counters,
                );
            } else {
                self.expiries.pop_first();
            }
        }
    }

    /// Takes every lease due now or within half its renewal interval,
    /// grouped into batches. Renewing early is harmless, and half is the
    /// window at which groups merge: the leases renewed in one round are
    /// due again within half an interval of the next round, so after a
    /// round or two every lease of a ttl is renewed in the same round.
    fn take_due(&mut self, now: Instant) -> Vec<Vec<Arc<Lease>>> {
        // A round starts only when a lease is actually due; the early
        // window is for joining that round, not for waking on its own
        // (else every batch answer would start a small round of its own).
        if self.renewals.first().is_none_or(|&(at, _)| at > now) {
            return Vec::new();
        }
        let mut due = Vec::new();
        while let Some(&(at, id)) = self.renewals.first() {
            let Some(watched) = self.watched.get_mut(&id) else {
                self.renewals.pop_first();
                continue;
            };
            if at > now + watched.renew_every / 2 {
                break;
            }
            self.renewals.pop_first();
            watched.due = None;
            due.push(watched.lease.clone());
        }
        let mut batches = Vec::new();
        while !due.is_empty() {
            let rest = due.split_off(due.len().min(MAX_BATCH));
            batches.push(std::mem::replace(&mut due, rest));
        }
        batches
    }

    /// Applies the answer to one batch command.
    fn apply(&mut self, outcome: BatchOutcome, counters: &Counters) {
        let BatchOutcome {
            ids,
            sent_at,
            result,
        } = outcome;
        match result {
            Ok(renewed) => {
                let mut unconfirmed = 0;
                for (id, answer) in ids.into_iter().zip(renewed) {
                    match answer {
                        Renewed::Yes => {
                            Counters::bump(&counters.renewed);
                            self.renewed(id, sent_at);
                        }
                        Renewed::Gone => {
                            if let Some(watched) = self.watched.get(&id) {
                                let lease = watched.lease.clone();
                                self.forget(id);
                                declare_lost(
                                    &lease,
                                    "the server no longer holds it for us",
                                    counters,
                                );
                            }
                        }
                        Renewed::Unknown => {
                            unconfirmed += 1;
                            self.retry(id);
                        }
                    }
                }
                if unconfirmed > 0 {
                    Counters::bump(&counters.renewal_errors);
                    tracing::warn!(
                        locks = unconfirmed,
                        "lock renewal not confirmed by enough nodes; retrying while the leases are valid"
                    );
                }
            }
            Err(err) => {
                Counters::bump(&counters.renewal_errors);
                tracing::warn!(error = %err, locks = ids.len(), "lock renewal failed; retrying while the leases are valid");
                for id in ids {
                    self.retry(id);
                }
            }
        }
    }

    fn renewed(&mut self, id: u64, sent_at: Instant) {
        let Some(watched) = self.watched.get_mut(&id) else {
            return; // released while the renewal was in flight
        };
        let valid_until = watched.lease.renewed(sent_at);
        self.expiries.remove(&(watched.valid_until, id));
        watched.valid_until = valid_until;
        self.expiries.insert((valid_until, id));
        let due = sent_at + watched.renew_every;
        watched.due = Some(due);
        self.renewals.insert((due, id));
    }

    fn retry(&mut self, id: u64) {
        let Some(watched) = self.watched.get_mut(&id) else {
            return;
        };
        let pause =
            (watched.renew_every / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let due = Instant::now() + pause;
        watched.due = Some(due);
        self.renewals.insert((due, id));
    }
}

fn declare_lost(lease: &Lease, why: &str, counters: &Counters) {
    if lease.mark_lost(|| Counters::bump(&counters.lost)) {
        tracing::warn!(
            key = lease.keys.name(),
            fence = lease.fence,
            reason = why,
            "lock lost"
        );
    }
}
