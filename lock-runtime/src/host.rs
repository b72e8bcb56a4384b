//! [`Host`]: where a locker's timers and background tasks run, and the
//! clock its leases are measured on.
//!
//! - A locker on Redis is hosted by the library's own runtime
//!   ([`crate::background`]): its connections and watchdog outlive any
//!   application runtime and ignore an application's paused clock, because
//!   the server's clock does not pause.
//! - A locker on the in-memory store is hosted by the caller: its "server"
//!   lives in the process, so its leases, waits and renewals run on the
//!   tokio clock of the runtime that uses it. That is what lets a test with
//!   `tokio::time::pause()` run a 30 s lease in microseconds, and each
//!   `#[tokio::test]` runtime keeps its own time. Its calls need no I/O, so
//!   what a Redis locker does in the background (a release on drop, the
//!   clean-up of a cancelled acquisition) it does at once.

use std::future::Future;

use futures_util::FutureExt;
use tokio::runtime::Handle;

use crate::background::{OnBackground, on_background};
use crate::clock::Clock;
use crate::error::LockError;

/// Where a locker's work runs.
#[derive(Clone, Debug)]
pub(crate) enum Host {
    /// The library's own runtime (every Redis topology).
    Background(Handle),
    /// The runtime of whoever calls (the in-memory store).
    Caller,
}

impl Host {
    /// The clock this host's leases are measured on.
    pub(crate) fn clock(&self) -> Clock {
        match self {
            Host::Background(_) => Clock::Boot,
            Host::Caller => Clock::Tokio,
        }
    }

    /// Wraps a call the application polls, so that what it creates (timers,
    /// spawned tasks) belongs to this host.
    pub(crate) fn enter<F: Future>(&self, future: F) -> OnBackground<F> {
        match self {
            Host::Background(handle) => on_background(Some(handle), future),
            Host::Caller => on_background(None, future),
        }
    }

    /// The runtime that runs a task for a call made now: the library's, or
    /// the caller's. [`LockError::Config`] when a caller-hosted locker is
    /// used outside a tokio runtime.
    pub(crate) fn runtime(&self) -> Result<Handle, LockError> {
        match self {
            Host::Background(handle) => Ok(handle.clone()),
            Host::Caller => Handle::try_current().map_err(|_| {
                LockError::config(
                    "the in-memory lock store runs on the caller's tokio runtime; call it from inside one",
                )
            }),
        }
    }

    /// Whether a call made now can run: always on the library's runtime;
    /// caller-hosted, only inside a tokio runtime ([`LockError::Config`]
    /// otherwise, rather than a panic at the first timer).
    pub(crate) fn check_runtime(&self) -> Result<(), LockError> {
        match self {
            Host::Background(_) => Ok(()),
            Host::Caller => self.runtime().map(drop),
        }
    }

    /// Runs `work` to its end without anyone awaiting it: on the library's
    /// runtime, or (caller-hosted) at once when it needs no waiting (the
    /// in-memory store's calls never do), else on the caller's runtime.
    /// Outside any runtime, work that would have to wait is dropped; its
    /// lease then simply runs out.
    pub(crate) fn detach(&self, work: impl Future<Output = ()> + Send + 'static) {
        match self {
            Host::Background(handle) => {
                handle.spawn(work);
            }
            Host::Caller => {
                let mut work = Box::pin(work);
                if (&mut work).now_or_never().is_none()
                    && let Ok(handle) = Handle::try_current()
                {
                    handle.spawn(work);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_caller_hosted_detach_runs_ready_work_at_once_even_without_a_runtime() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        Host::Caller.detach(async move { flag.store(true, Ordering::SeqCst) });
        assert!(done.load(Ordering::SeqCst));
    }

    #[test]
    fn a_caller_hosted_locker_outside_a_runtime_is_a_config_error() {
        assert!(matches!(Host::Caller.runtime(), Err(LockError::Config(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_hosted_locker_runs_on_the_callers_clock() {
        assert_eq!(Host::Caller.clock(), Clock::Tokio);
        let before = tokio::time::Instant::now();
        Host::Caller
            .enter(tokio::time::sleep(std::time::Duration::from_secs(60)))
            .await;
        assert!(before.elapsed() >= std::time::Duration::from_secs(60));
    }
}
