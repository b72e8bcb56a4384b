//! `keys = [..]` at run time: an annotated call that takes several keys
//! at once ([`Locker::lock_all`]) rather than one.

use std::future::Future;

use super::Options;
use super::answer::{answer, run_guarded};
use super::mode::with_options;
use crate::engine::lost as loss;
use crate::engine::reentrancy::held_by_this_task;
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
    let keys = guard.keys().join(", ");
    let body = loss::guarded(handle.lease(), options.on_lost, body);
    let outcome = run_guarded(locker, &handle, options.on_lost, body).await;
    let released = guard.release().await;
    let gone = "its keys were lost";
    answer(
        outcome,
        released,
        options.on_release_error,
        &handle,
        &keys,
        gone,
    )
}
