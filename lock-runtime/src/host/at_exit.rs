//! Releases still under way when the process ends normally are finished
//! first.
//!
//! A guard dropped without `release()` gives its lock back in the
//! background, on the library's thread ([`crate::host::Host::detach`]).
//! A process that drops a guard and returns from `main` right after (what
//! `#[tokio::main]` does with a guard alive at its end; a cron job, a CLI
//! tool) would otherwise exit before that release reached the server, and
//! the lock would stay for its whole ttl: the next run of the job waits
//! for it. So every piece of background work is counted while it runs,
//! and a handler registered with `atexit` (run by `exit`, which returning
//! from `main` and `std::process::exit` both call) waits for the count to
//! fall to zero, at most until the latest bound of the work counted. The
//! library's thread keeps running meanwhile, as every thread does until
//! the process is gone.
//!
//! A process killed (`kill -9`, a crash, `abort`) runs no handler: its
//! locks stay until their leases end, as any holder's that dies. A forked
//! child does not wait for its parent's work, which it cannot do.

use std::future::Future;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;

use crate::host::forks;

/// The background work under way, and until when it may run.
#[derive(Default)]
struct Pending {
    count: usize,
    /// The latest end of the work counted (its start plus its bound).
    until: Option<Instant>,
    /// The [`forks::lineage`] of the process the work runs in.
    lineage: u64,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    count: 0,
    until: None,
    lineage: 0,
});
static ENDED: Condvar = Condvar::new();

/// Whether the exit handler is registered; done at the first work counted.
static REGISTERED: Lazy<bool> = Lazy::new(register);

fn pending() -> MutexGuard<'static, Pending> {
    // Plain counts: consistent even if a holder panicked mid-update.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts `work`, which its runner cuts off after `bound`, until it ends
/// (or is dropped): the process's normal end waits for it.
pub(crate) fn finished_before_exit(
    bound: Duration,
    work: impl Future<Output = ()>,
) -> impl Future<Output = ()> {
    let counted = Counted::start(bound);
    async move {
        let _counted = counted;
        work.await;
    }
}

/// One piece of work counted; uncounted when dropped.
struct Counted;

impl Counted {
    fn start(bound: Duration) -> Self {
        let _ = *REGISTERED;
        let lineage = forks::lineage();
        let mut pending = pending();
        if pending.lineage != lineage {
            // A forked child's copy of its parent's count: none of that
            // work runs here.
            *pending = Pending {
                lineage,
                ..Pending::default()
            };
        }
        pending.count += 1;
        let end = Instant::now().checked_add(bound);
        pending.until = match (pending.until, end) {
            (Some(until), Some(end)) => Some(until.max(end)),
            (until, end) => end.or(until),
        };
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut pending = pending();
        pending.count = pending.count.saturating_sub(1);
        if pending.count == 0 {
            pending.until = None;
            ENDED.notify_all();
        }
    }
}

/// Waits until the background work counted in this process has ended, or
/// until the latest of its bounds; answers how much was still under way
/// when it gave up (0: all of it ended).
pub(crate) fn wait_for_pending() -> usize {
    let mut pending = pending();
    if pending.lineage != forks::lineage() {
        return 0;
    }
    while pending.count > 0 {
        let Some(until) = pending.until else {
            break;
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        pending = match ENDED.wait_timeout(pending, left) {
            Ok((pending, _)) => pending,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
    pending.count
}

/// Run by `exit`, on the thread that called it.
#[cfg(unix)]
extern "C" fn at_exit() {
    // Never unwinds into C: a panic here would abort the process.
    let _ = std::panic::catch_unwind(wait_for_pending);
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn register() -> bool {
    // SAFETY: `at_exit` is a plain function that waits on a static
    // condition variable and catches any panic; registering it has no
    // other effect, and it stays registered for the life of the process.
    let status = unsafe { libc::atexit(at_exit) };
    status == 0
}

#[cfg(not(unix))]
fn register() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count is process-wide: one test at a time.
    static ALONE: Mutex<()> = Mutex::new(());

    #[test]
    fn the_wait_ends_when_the_work_ends() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let work = finished_before_exit(Duration::from_secs(30), async {});
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            futures_util::FutureExt::now_or_never(work);
        });
        let started = Instant::now();
        assert_eq!(wait_for_pending(), 0);
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(30), "{waited:?}");
        worker.join().unwrap();
    }

    #[test]
    fn the_wait_gives_up_at_the_latest_bound() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let stuck = Counted::start(Duration::from_millis(50));
        let started = Instant::now();
        assert_eq!(wait_for_pending(), 1, "still under way");
        assert!(started.elapsed() >= Duration::from_millis(40));
        drop(stuck);
        assert_eq!(wait_for_pending(), 0);
    }

    #[test]
    fn work_dropped_unfinished_is_uncounted() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let work = finished_before_exit(Duration::from_secs(30), std::future::pending());
        drop(work);
        assert_eq!(wait_for_pending(), 0);
    }
}
