//! [`LockGuard`]: proof of holding a lock, and the way to give it back.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::lease::Lease;
use crate::stats::Counters;
use crate::{LockError, LockHandle, Locker};

/// A held lock. While it lives, the watchdog renews the lease (unless the
/// request turned it off); [`release`](Self::release) gives the lock back,
/// and dropping an unreleased guard releases it in the background.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let guard = locker.lock("invoice:7").acquire().await?;
/// tokio::select! {
///     () = guard.lost() => eprintln!("lock lost; stop writing"),
///     () = write_with_fence(guard.fence()) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// # async fn write_with_fence(_: u64) {}
/// ```
#[must_use = "dropping a guard releases its lock at once"]
pub struct LockGuard {
    handle: LockHandle,
    locker: Locker,
    released: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.key())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    pub(crate) fn new(lease: Arc<Lease>, locker: Locker) -> Self {
        Self {
            handle: LockHandle::new(lease),
            locker,
            released: false,
        }
    }

    /// The lock key as requested (without the configured prefix).
    pub fn key(&self) -> &str {
        self.handle.key()
    }

    /// The fencing token; see [`LockHandle::fence`].
    pub fn fence(&self) -> u64 {
        self.handle.fence()
    }

    /// The lease length the lock was taken with.
    pub fn ttl(&self) -> Duration {
        self.handle.ttl()
    }

    /// Whether the lock is still ours; see [`LockHandle::is_held`].
    pub fn is_held(&self) -> bool {
        self.handle.is_held()
    }

    /// Completes when the lock is known lost, before the key can expire on
    /// the server; see [`LockHandle::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.handle.lost()
    }

    /// A cloneable view of this lock (key, fence, loss signal) to hand to
    /// code that must not release it.
    pub fn handle(&self) -> LockHandle {
        self.handle.clone()
    }

    fn lease(&self) -> &Arc<Lease> {
        self.handle.lease()
    }

    /// Releases the lock: deletes the key only if it is still ours and
    /// wakes the waiters. `Ok(false)` means it was no longer ours (lost, or
    /// expired), so nothing was deleted.
    ///
    /// On an error (or if this future is dropped before the answer), the
    /// guard's drop tries once more in the background; the compare-and-delete
    /// makes that safe, and the lease bounds the lock either way.
    pub async fn release(mut self) -> Result<bool, LockError> {
        self.lease().mark_released();
        self.locker.watchdog().forget(self.lease().id);
        let deleted = self
            .locker
            .backend()
            .release(self.lease().conn, &self.lease().keys, &self.lease().token)
            .await?;
        self.released = true;
        if deleted {
            Counters::bump(&self.locker.counters().released);
        }
        Ok(deleted)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.lease().mark_released();
        self.locker.watchdog().forget(self.lease().id);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Dropped outside any runtime: the lease runs out on its own.
            tracing::debug!(
                key = self.key(),
                "lock guard dropped outside a runtime; its lease will expire"
            );
            return;
        };
        let locker = self.locker.clone();
        let lease = self.lease().clone();
        runtime.spawn(async move {
            match locker.backend().release(lease.conn, &lease.keys, &lease.token).await {
                Ok(true) => Counters::bump(&locker.counters().released),
                Ok(false) => {}
                Err(err) => tracing::warn!(key = lease.keys.name(), error = %err, "background release failed; the lease will expire"),
            }
        });
    }
}
