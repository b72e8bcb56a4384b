//! Counters a [`Locker`](crate::Locker) keeps about its own work, for
//! dashboards, benchmarks and tests that must know *why* something happened.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a locker's counters since it was connected.
///
/// ```no_run
/// # async fn show(locker: &lock_runtime::Locker) {
/// let stats = locker.stats();
/// println!("{} acquired, {} had to wait, {} lost", stats.acquired, stats.contended, stats.lost);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockerStats {
    /// Locks acquired.
    pub acquired: u64,
    /// Acquisitions that found the lock busy at least once (or queued
    /// behind this locker's other tasks for it), whether they got it or
    /// their wait ran out.
    pub contended: u64,
    /// `acquire` calls that gave up after their whole wait.
    pub timeouts: u64,
    /// Tries sent to the servers: each acquisition's first, one after each
    /// wake-up, and a retry after a dropped connection (on Redlock, one
    /// per round). Divided by `acquired`, what a lock cost in tries: a
    /// fair lock handed over by its release takes none of its own.
    pub tries: u64,
    /// Waiters woken by a release message.
    pub release_wakeups: u64,
    /// Waiters woken by their own timer (backoff, or the owner's lease end).
    pub timer_wakeups: u64,
    /// Watchdog rounds that renewed anything (the batches of a round are
    /// sent together: one round trip per pool connection).
    pub renewal_rounds: u64,
    /// Renewal commands sent (each renews a batch of leases).
    pub renewal_calls: u64,
    /// Leases renewed.
    pub renewed: u64,
    /// Renewal commands that failed (and were retried while validity lasted).
    pub renewal_errors: u64,
    /// Leases reported lost: by the watchdog (or the end of a body that
    /// ran past its lease), or found gone by their holder's release. A
    /// lock acquired ends counted once, as released or as lost.
    pub lost: u64,
    /// Locks released by their holder (explicitly or by dropping the guard)
    /// while still theirs; releasing a lock already lost does not count.
    /// A lock whose release failed, and the guard's retry in the background
    /// too, counts here as well: its holder gave it up, and its lease runs
    /// out on the server.
    pub released: u64,
    /// Of those, locks passed straight to the next task of this locker
    /// waiting for the same key, without being freed on the server;
    /// counted when that task takes it (a pass whose taker has gone
    /// is given back: a release, not a hand-over).
    pub handovers: u64,
    /// Of those, handovers made without a server call: the next task
    /// continued the same hold, with the next fence (see
    /// [`LockGuard::release`](crate::LockGuard::release)).
    pub handovers_in_process: u64,
    /// Releases that failed (an error, or cut at their bound), whether
    /// `release()` or a guard's drop made them: such a lock stays held
    /// until its lease ends. A guard whose `release()` failed tries once
    /// more when it is dropped, which may succeed.
    pub release_errors: u64,
    /// Acquisitions asleep right now until a release message or their
    /// timer wakes them: a gauge, not a count. At most one per key and
    /// locker sleeps on the server's answer; this locker's other tasks
    /// for the key wait for their turn in the process and are not counted.
    /// On Redis a waiter sleeps on the library's runtime: one whose caller
    /// let go stops counting a moment later, when that runtime stops it.
    pub asleep: u64,
}

/// The live counters behind [`LockerStats`].
#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub(crate) acquired: AtomicU64,
    pub(crate) contended: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) tries: AtomicU64,
    pub(crate) release_wakeups: AtomicU64,
    pub(crate) timer_wakeups: AtomicU64,
    pub(crate) renewal_rounds: AtomicU64,
    pub(crate) renewal_calls: AtomicU64,
    pub(crate) renewed: AtomicU64,
    pub(crate) renewal_errors: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) released: AtomicU64,
    pub(crate) handovers: AtomicU64,
    pub(crate) handovers_in_process: AtomicU64,
    pub(crate) release_errors: AtomicU64,
    pub(crate) asleep: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A consistent-enough copy for reporting.
    pub(crate) fn snapshot(&self) -> LockerStats {
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LockerStats {
            acquired: read(&self.acquired),
            contended: read(&self.contended),
            timeouts: read(&self.timeouts),
            tries: read(&self.tries),
            release_wakeups: read(&self.release_wakeups),
            timer_wakeups: read(&self.timer_wakeups),
            renewal_rounds: read(&self.renewal_rounds),
            renewal_calls: read(&self.renewal_calls),
            renewed: read(&self.renewed),
            renewal_errors: read(&self.renewal_errors),
            lost: read(&self.lost),
            released: read(&self.released),
            handovers: read(&self.handovers),
            handovers_in_process: read(&self.handovers_in_process),
            release_errors: read(&self.release_errors),
            asleep: read(&self.asleep),
        }
    }

    /// Counts one more acquisition asleep in [`LockerStats::asleep`] until
    /// the returned mark is dropped (woken, or the acquisition cancelled).
    pub(crate) fn fall_asleep(&self) -> Asleep<'_> {
        self.asleep.fetch_add(1, Ordering::Relaxed);
        Asleep(&self.asleep)
    }
}

/// An acquisition counted asleep while this lives.
pub(crate) struct Asleep<'a>(&'a AtomicU64);

impl Drop for Asleep<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
