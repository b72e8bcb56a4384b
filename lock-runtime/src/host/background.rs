//! The library's own small tokio runtime: one thread, started at the first
//! [`Locker::connect`](crate::Locker::connect), living as long as the process.
//!
//! Every connection a locker opens, and every task it runs in the
//! background (the watchdog, the release listener, reconnects, clean-ups of
//! cancelled acquisitions), lives on it. Three things follow:
//!
//! - A locker works from any runtime, including the short-lived runtime of
//!   each `#[tokio::test]`: the runtime that called `init` may end, and the
//!   connections and the watchdog go on.
//! - Renewals stay on time while the application's runtime is blocked or
//!   starved (a task that blocks a worker thread delays its own runtime,
//!   not this one).
//! - Every network bound (connect and response timeouts, a lock's `wait`)
//!   runs on this runtime's clock, which is never paused: an application
//!   testing with `tokio::time::pause()` does not see its calls to a real
//!   Redis time out at once.
//!
//! Calls made by the application are polled by the application's own task
//! (no hand-off, no extra wake-up) inside [`on_background`], which makes
//! this runtime the current one while the call is polled, so that whatever
//! the call creates (timers, spawned tasks, reconnects) belongs here. One
//! part is handed off: an acquisition that found its lock busy waits for
//! the release here, where the message arrives, and tries again from here
//! (see [`Attempt::run`](crate::engine::attempt::Attempt::run)).

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::{Builder, Handle};

use crate::error::LockError;

static RUNTIME: OnceLock<Handle> = OnceLock::new();

/// The background runtime, started on first use: a current-thread runtime
/// driven by a thread of its own for the rest of the process.
///
/// Fails (with [`LockError::Config`], the only variant that fits a machine
/// refusing a thread) when the runtime or its thread cannot be started.
pub(crate) fn handle() -> Result<Handle, LockError> {
    if let Some(handle) = RUNTIME.get() {
        return Ok(handle.clone());
    }
    let cannot = |err: std::io::Error| {
        LockError::config(format!(
            "cannot start the lock runtime's background thread: {err}"
        ))
    };
    // Two first callers at once: one runtime is built while the other waits.
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(handle) = RUNTIME.get() {
        return Ok(handle.clone());
    }
    let runtime = Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(cannot)?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("lock-runtime".to_owned())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(cannot)?;
    Ok(RUNTIME.get_or_init(|| handle).clone())
}

pin_project_lite::pin_project! {
    /// A future polled with the background runtime as the current one (or
    /// as it is, without one).
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct OnBackground<F> {
        handle: Option<Handle>,
        #[pin]
        future: F,
    }
}

/// Wraps `future` so that everything it creates while polled (timers,
/// spawned tasks, connections and their reconnects) belongs to the
/// background runtime `handle`, while the caller's task keeps polling it.
/// With `None`, the future is polled as it is (on the caller's runtime).
pub(crate) fn on_background<F: Future>(handle: Option<&Handle>, future: F) -> OnBackground<F> {
    OnBackground {
        handle: handle.cloned(),
        future,
    }
}

impl<F: Future> Future for OnBackground<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.handle.as_ref().map(Handle::enter);
        this.future.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_runtime_for_the_whole_process() {
        let a = handle().unwrap();
        let b = handle().unwrap();
        assert_eq!(a.id(), b.id());
    }

    #[tokio::test(start_paused = true)]
    async fn timers_made_on_background_ignore_a_paused_clock() {
        let background = handle().unwrap();
        let started = std::time::Instant::now();
        // On the paused test clock this would fire at once (auto-advance);
        // on the background clock it takes real time.
        let slept = on_background(Some(&background), async {
            tokio::time::sleep(Duration::from_millis(30)).await;
        });
        slept.await;
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn works_without_any_runtime_of_the_caller() {
        let background = handle().unwrap();
        let value =
            futures_util::FutureExt::now_or_never(on_background(Some(&background), async { 7 }));
        assert_eq!(value, Some(7));
    }
}
