//! `limit = ..` (and `permits = ..`) at run time: an annotated call that
//! takes permits of a semaphore rather than a lock.

use std::future::Future;

use super::mode::with_options;
use super::{OnReleaseError, Options, Permits, lost};
use crate::engine::lost::{self as loss, OnLost};
use crate::engine::traced::in_span;
use crate::error::LockError;
use crate::locker::Locker;

/// Takes permits of the semaphore `key`, runs `body` while holding them,
/// gives them back. No nesting: a call inside the body takes permits of
/// its own, and [`crate::current`] does not name the semaphore (a lock of
/// the same name nested in it is another lock, and is taken).
pub(super) async fn run_with_permits<F: Future>(
    locker: &Locker,
    key: String,
    permits: Permits,
    options: Options,
    body: F,
) -> Result<F::Output, LockError> {
    let request = locker
        .semaphore(key, permits.limit)
        .permits(permits.permits);
    let guard = with_options!(request, &options).acquire().await?;
    let handle = guard.handle();
    let key = guard.key().to_owned();
    let outcome = if handle.is_held() {
        let body = loss::guarded(handle.lease(), options.on_lost, body);
        let output = in_span(&handle.lease().span, body).await;
        loss::declare_if_lapsed(handle.lease(), &locker.core().counters);
        match output {
            Some(_) if options.on_lost == OnLost::Cancel && !handle.is_held() => None,
            output => output,
        }
    } else {
        None
    };
    match guard.release().await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(key, "the body finished after its permits were lost"),
        Err(err) => {
            tracing::warn!(key, error = %err, "release after the body failed; the lease will expire");
            if options.on_release_error == OnReleaseError::Fail && outcome.is_some() {
                return Err(LockError::ReleaseFailed {
                    key,
                    source: Box::new(err),
                });
            }
        }
    }
    outcome.ok_or_else(|| lost(&handle, key))
}
