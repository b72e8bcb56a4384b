//! What every holding call does once it holds: run the body under the
//! hold as its `on_lost` says, and, once the release was tried, answer.

use std::future::Future;

use tracing::Instrument;

use super::OnReleaseError;
use crate::engine::handle::LockHandle;
use crate::engine::lost::{self, OnLost};
use crate::error::LockError;
use crate::locker::Locker;

/// Runs `guarded` (the body, already raced against the loss signal by
/// [`lost::guarded`]) as a call holding `handle`: `None` when the lock was
/// lost and `on_lost = "cancel"` (cancelled, or finished after the lease
/// ran out: a process paused past its lease can finish before the
/// watchdog runs again, and the local validity check catches that).
pub(super) async fn run_guarded<T>(
    locker: &Locker,
    handle: &LockHandle,
    on_lost: OnLost,
    guarded: impl Future<Output = Option<T>>,
) -> Option<T> {
    if !handle.is_held() {
        // Granted, but with no validity left to run the body in.
        return None;
    }
    // The body runs in the hold's span: its own events nest under the lock.
    // Awaited in one branch or the other, not through `in_span`'s `Either`:
    // no copy of the body's future into a wrapper, and no wrapper to poll
    // through, when nobody records the span (the usual case).
    let span = &handle.lease().span;
    let output = if span.is_disabled() {
        guarded.await
    } else {
        guarded.instrument(span.clone()).await
    };
    let held = lost::declare_if_lapsed(handle.lease(), &locker.core().counters);
    match output {
        Some(output) if on_lost == OnLost::Cancel && !held => {
            drop(output);
            None
        }
        None => {
            tracing::warn!(
                key = handle.key(),
                fence = handle.fence(),
                "lock lost; the body was cancelled"
            );
            None
        }
        output => output,
    }
}

/// The call's answer, from the body's `outcome` (`None`: lost) and what
/// its release said. A release that found the hold gone is logged; one
/// that failed is logged and, under `on_release_error = "fail"`, fails a
/// call whose body ran to its end. `key` names what was held; `gone` says
/// it was lost (`its lock was lost`).
pub(super) fn answer<T>(
    outcome: Option<T>,
    released: Result<bool, LockError>,
    on_release_error: OnReleaseError,
    handle: &LockHandle,
    key: &str,
    gone: &str,
) -> Result<T, LockError> {
    match released {
        Ok(true) => {}
        Ok(false) => tracing::warn!(key, "the body finished after {gone}"),
        // The body's work is done; the lease simply runs out.
        Err(err) => {
            tracing::warn!(key, error = %err, "release after the body failed; the lease will expire");
            // A loss the body was told of says more.
            if on_release_error == OnReleaseError::Fail && outcome.is_some() {
                return Err(LockError::ReleaseFailed {
                    key: key.to_owned(),
                    source: Box::new(err),
                });
            }
        }
    }
    outcome.ok_or_else(|| lost(handle, key.to_owned()))
}

/// The error of a body that lost its lock: the hold cap, or a loss.
pub(super) fn lost(handle: &LockHandle, key: String) -> LockError {
    match handle.lease().max_hold {
        Some(cap) if handle.lease().capped() => LockError::HoldCapExceeded { key, cap },
        _ => LockError::Lost { key },
    }
}
