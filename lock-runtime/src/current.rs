//! Which locks the current task holds through `#[distributed_lock]`: for
//! [`current`], and so that a nested call for a key the task already holds
//! runs at once instead of waiting for itself.

use std::future::Future;
use std::sync::Arc;

use crate::{LockHandle, Locker};

tokio::task_local! {
    static HELD: HeldLocks;
}

/// The locks held by the annotated calls this task is inside, innermost last.
#[derive(Clone, Default)]
struct HeldLocks(Arc<Vec<Held>>);

#[derive(Clone)]
struct Held {
    locker: usize,
    handle: LockHandle,
}

/// The lock held by the innermost `#[distributed_lock]` function this task
/// is running, or `None` outside one. Task-local: a task spawned from the
/// body does not inherit it.
///
/// ```no_run
/// use lock_runtime::{distributed_lock, LockError};
///
/// #[distributed_lock(key = "invoice:<id>")]
/// async fn settle(id: u64) -> Result<u64, LockError> {
///     let lock = lock_runtime::current().expect("inside an annotated fn");
///     Ok(lock.fence()) // send it along with every write
/// }
/// ```
pub fn current() -> Option<LockHandle> {
    HELD.try_with(|held| held.0.last().map(|h| h.handle.clone()))
        .ok()
        .flatten()
}

/// The handle of `key` if this task already holds it through `locker`.
pub(crate) fn held_by_this_task(locker: &Locker, key: &str) -> Option<LockHandle> {
    let id = locker.identity();
    HELD.try_with(|held| {
        held.0
            .iter()
            .rev()
            .find(|h| h.locker == id && h.handle.key() == key)
            .map(|h| h.handle.clone())
    })
    .ok()
    .flatten()
}

/// Runs `body` with `handle` recorded as held by this task.
pub(crate) async fn holding<F: Future>(locker: &Locker, handle: LockHandle, body: F) -> F::Output {
    let mut held: Vec<Held> = HELD
        .try_with(|held| held.0.as_ref().clone())
        .unwrap_or_default();
    held.push(Held {
        locker: locker.identity(),
        handle,
    });
    HELD.scope(HeldLocks(Arc::new(held)), body).await
}
