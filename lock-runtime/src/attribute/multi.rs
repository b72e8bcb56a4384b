//! `keys = [..]` at run time: an annotated call that takes several keys
//! at once ([`Locker::lock_all`]) rather than one.

use std::future::Future;

use super::mode::with_options;
use super::{OnReleaseError, Options, lost};
use crate::engine::lost::{self as loss, OnLost};
use crate::engine::reentrancy::held_by_this_task;
use crate::engine::traced::in_span;
use crate::error::LockError;
use crate::locker::Locker;

/// Takes every key of `keys` at once, runs `body` while holding them, and
/// releases them. Not nested: a call inside the body for one of its keys
/// is another acquisition (which waits for this hold until its own `wait`
/// runs out), and [`crate::current`] does not name this hold. A call
/// nested in one of this task's calls that holds one of its keys is
/// refused at once ([`LockError::HeldByThisTask`]): it would wait for its
/// own caller.
pub(super) async fn run_with_keys<F: Future>(
    locker: &Locker,
    keys: Vec<String>,
    options: Options,
    body: F,
) -> Result<F::Output, LockError> {
    for key in &keys {
        if held_by_this_task(locker.core(), key, options.nests_under()).is_some() {
            return Err(LockError::HeldByThisTask { key: key.clone() });
        }
    }
    let request = locker.lock_all(keys);
    let guard = with_options!(request, &options).acquire().await?;
    let handle = guard.handle();
    let key = guard.keys().join(", ");
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
        Ok(false) => tracing::warn!(key, "the body finished after its keys were lost"),
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
