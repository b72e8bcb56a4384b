//! `limit = ..` (and `permits = ..`) at run time: an annotated call that
//! takes permits of a semaphore rather than a lock.

use std::future::Future;

use super::answer::{answer, run_guarded};
use super::mode::with_options;
use super::{Options, Permits};
use crate::engine::lost as loss;
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
    let body = loss::guarded(handle.lease(), options.on_lost, body);
    let outcome = run_guarded(locker, &handle, options.on_lost, body).await;
    let released = guard.release().await;
    let gone = "its permits were lost";
    answer(
        outcome,
        released,
        options.on_release_error,
        &handle,
        handle.key(),
        gone,
    )
}
