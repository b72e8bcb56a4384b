//! [`LockGuard`]: proof of holding an exclusive lock, and the way to give
//! it back.

use std::future::Future;
use std::time::Duration;

use super::Exclusive;
use crate::engine::handle::LockHandle;
use crate::engine::release::Hold;
use crate::error::LockError;

/// A held lock. While it lives, the watchdog renews the lease (unless the
/// request turned it off); [`release`](Self::release) gives the lock back,
/// and dropping an unreleased guard releases it in the background (also
/// outside any async runtime).
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
    hold: Hold<Exclusive>,
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
    pub(crate) fn new(hold: Hold<Exclusive>) -> Self {
        Self { hold }
    }

    fn handle_ref(&self) -> &LockHandle {
        self.hold.handle()
    }

    /// The lock key as requested (without the configured prefix).
    pub fn key(&self) -> &str {
        self.handle_ref().key()
    }

    /// The fencing token; see [`LockHandle::fence`].
    pub fn fence(&self) -> u64 {
        self.handle_ref().fence()
    }

    /// The lease length the lock was taken with.
    pub fn ttl(&self) -> Duration {
        self.handle_ref().ttl()
    }

    /// Whether the lock is still ours; see [`LockHandle::is_held`].
    pub fn is_held(&self) -> bool {
        self.handle_ref().is_held()
    }

    /// Completes when the lock is known lost, before the key can expire on
    /// the server; see [`LockHandle::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.handle_ref().lost()
    }

    /// A cloneable view of this lock (key, fence, loss signal) to hand to
    /// code that must not release it.
    pub fn handle(&self) -> LockHandle {
        self.handle_ref().clone()
    }

    /// Releases the lock: deletes the key only if it is still ours and
    /// wakes the waiters, or, when another task of this locker waits for
    /// the same key, passes it to that task (a higher fence for it; the key
    /// is never free in between). Most passes need no server call (see
    /// [`LockerStats::handovers_in_process`](crate::LockerStats)): the
    /// next task continues this hold, and learns of a loss the holder did
    /// not know of yet from the watchdog, as this holder would have.
    /// `Ok(false)` means it was no longer ours (lost, or expired), so
    /// nothing was deleted or passed.
    ///
    /// A call whose connection dropped or was refused is made once more
    /// (the first call after a server came back is served); if the first
    /// had reached the server after all, the second finds the lock gone and
    /// answers `Ok(false)`.
    ///
    /// Returns within two bounded round trips (`connect_timeout +
    /// response_timeout` each). On an error (or if this future is dropped
    /// before the answer), the guard's drop tries once more in the
    /// background; the compare-and-delete makes that safe, and the lease
    /// bounds the lock either way.
    pub async fn release(self) -> Result<bool, LockError> {
        self.hold.release().await
    }
}
