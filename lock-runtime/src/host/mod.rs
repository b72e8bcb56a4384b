//! [`Host`]: where a locker's timers and background tasks run, and the
//! clock its leases are measured on.
//!
//! - A locker on Redis is hosted by the library's own runtime
//!   ([`crate::host::background`]): its connections and watchdog outlive any
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
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

pub(crate) mod at_exit;
pub(crate) mod background;
pub(crate) mod clock;
pub(crate) mod forks;

use futures_util::FutureExt;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::error::LockError;
use crate::host::background::{OnBackground, on_background};
use crate::host::clock::Clock;

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

    /// Whether [`Self::hand_off`] runs work on a runtime of its own: the
    /// library's, whose thread hears release messages and drives the
    /// connections.
    pub(crate) fn waits_elsewhere(&self) -> bool {
        matches!(self, Host::Background(_))
    }

    /// Runs `work` as a task of the library's runtime, for a caller that
    /// awaits what it returns. Dropping that sets `let_go` at once (work
    /// that checks it starts nothing new) and stops the task at its next
    /// `.await`, where its own drop cleans up. A caller-hosted locker has
    /// no runtime of its own to hand off to: [`LockError::Config`].
    pub(crate) fn hand_off<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, LockError>> + Send + 'static,
        let_go: LetGo,
    ) -> Result<HandedOff<T>, LockError> {
        match self {
            Host::Background(handle) => Ok(HandedOff {
                task: handle.spawn(work),
                let_go,
            }),
            Host::Caller => Err(LockError::config(
                "the in-memory lock store runs its calls on the caller's runtime",
            )),
        }
    }

    /// Runs `work` without anyone awaiting it, for at most `bound` (its
    /// calls carry no bound of their own, see
    /// [`SingleBackend`](crate::backend::single::SingleBackend)): on the
    /// library's runtime (where the process's normal end waits for it,
    /// see [`crate::host::at_exit`]), or (caller-hosted) at once when it needs no
    /// waiting (the in-memory store's calls never do), else on the
    /// caller's runtime. Outside any runtime, work that would have to wait
    /// is dropped; its lease then simply runs out, as it does for work cut
    /// off by its bound.
    pub(crate) fn detach(&self, bound: Duration, work: impl Future<Output = ()> + Send + 'static) {
        match self {
            Host::Background(handle) => {
                // The process's normal end waits for it (see `at_exit`).
                handle.spawn(crate::host::at_exit::finished_before_exit(
                    bound,
                    within(bound, work),
                ));
            }
            Host::Caller => {
                let mut work = Box::pin(work);
                if (&mut work).now_or_never().is_none()
                    && let Ok(handle) = Handle::try_current()
                {
                    handle.spawn(within(bound, work));
                }
            }
        }
    }
}

/// Set when the caller of work handed off ([`Host::hand_off`]) lets go of
/// it: the task is stopped at its next `.await`, but may be running this
/// very moment on the library's thread, where this tells it at once.
#[derive(Clone, Debug, Default)]
pub(crate) struct LetGo(Arc<AtomicBool>);

impl LetGo {
    /// Whether the caller let go.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Work handed off to the library's runtime ([`Host::hand_off`]); stopped
/// when dropped.
pub(crate) struct HandedOff<T> {
    task: JoinHandle<Result<T, LockError>>,
    let_go: LetGo,
}

impl<T> Future for HandedOff<T> {
    type Output = Result<T, LockError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(Pin::new(&mut self.task).poll(cx)) {
            Ok(output) => output,
            // The work's own panic, passed on to whoever awaits it, as if
            // it had been polled in place.
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            // Only a runtime shutting down cancels a task it was not asked
            // to stop, and the library's runtime lives as long as the
            // process.
            Err(_) => Err(LockError::config(
                "the lock runtime's background thread stopped",
            )),
        })
    }
}

impl<T> Drop for HandedOff<T> {
    fn drop(&mut self) {
        self.let_go.0.store(true, Ordering::SeqCst);
        self.task.abort();
    }
}

/// `work`, cut off after `bound`. The timer is made when it is first
/// polled, on the runtime that runs it (a timer needs one).
async fn within(bound: Duration, work: impl Future<Output = ()>) {
    let _ = tokio::time::timeout(bound, work).await;
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
        Host::Caller.detach(std::time::Duration::from_secs(1), async move {
            flag.store(true, Ordering::SeqCst)
        });
        assert!(done.load(Ordering::SeqCst));
    }

    #[test]
    fn a_caller_hosted_locker_outside_a_runtime_is_a_config_error() {
        assert!(matches!(Host::Caller.runtime(), Err(LockError::Config(_))));
    }

    /// Sets its flag when dropped.
    struct DropFlag(Arc<AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn detached_work_that_never_ends_is_dropped_at_its_bound() {
        let host = Host::Background(crate::host::background::handle().unwrap());
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(dropped.clone());
        let started = std::time::Instant::now();
        host.detach(std::time::Duration::from_millis(50), async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        });
        // Generous: the background thread may be starved under load.
        while !dropped.load(Ordering::SeqCst) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the work outlived its bound"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(started.elapsed() >= std::time::Duration::from_millis(50));
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
