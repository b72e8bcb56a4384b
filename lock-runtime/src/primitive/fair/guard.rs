//! [`FairGuard`]: proof of holding a fair lock, and the way to give it
//! back (to the next waiter in line).

use std::future::Future;
use std::time::Duration;

use super::Fair;
use crate::engine::handle::LockHandle;
use crate::engine::release::Hold;
use crate::error::LockError;

/// A held fair lock. While it lives, the watchdog renews the lease (unless
/// the request turned it off); [`release`](Self::release) hands the lock to
/// the first live waiter in line, and dropping an unreleased guard does
/// the same in the background.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let guard = locker.fair_lock("printer").acquire().await?;
/// print_with_fence(guard.fence()).await;
/// guard.release().await?;
/// # Ok(()) }
/// # async fn print_with_fence(_: u64) {}
/// ```
#[must_use = "dropping a guard releases its lock at once"]
pub struct FairGuard {
    hold: Hold<Fair>,
}

impl std::fmt::Debug for FairGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairGuard")
            .field("key", &self.key())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl FairGuard {
    pub(crate) fn new(hold: Hold<Fair>) -> Self {
        Self { hold }
    }

    /// The lock's name as requested (without the configured prefix).
    pub fn key(&self) -> &str {
        self.hold.handle().key()
    }

    /// The fencing token: higher than every earlier owner's of this fair
    /// lock; see [`LockHandle::fence`].
    pub fn fence(&self) -> u64 {
        self.hold.handle().fence()
    }

    /// The lease length the lock was taken with.
    pub fn ttl(&self) -> Duration {
        self.hold.handle().ttl()
    }

    /// When the server first saw this holder wait in line, in µs since
    /// the Unix epoch on the server's clock; None when it took the lock
    /// without waiting in line (at its first try, or at a try after its
    /// place ran out with nobody alive in line before it). Grants follow
    /// these: no holder with a later arrival was granted the lock while
    /// this one waited (one whose place ran out, a process stalled longer
    /// than its place's lease, waits again with a new arrival).
    pub fn arrival(&self) -> Option<u64> {
        self.hold.primitive().arrival()
    }

    /// Whether the lock is still ours; see [`LockHandle::is_held`].
    pub fn is_held(&self) -> bool {
        self.hold.handle().is_held()
    }

    /// Completes when the lock is known lost, before its lease can run out
    /// on the server; see [`LockHandle::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.hold.handle().lost()
    }

    /// A cloneable view of this lock (key, fence, loss signal) to hand to
    /// code that must not release it.
    pub fn handle(&self) -> LockHandle {
        self.hold.handle().clone()
    }

    /// Releases the lock: in one step on the server, hands it to the first
    /// waiter in line whose place is alive (that waiter holds it without a
    /// request of its own), or frees it when nobody waits. `Ok(false)`
    /// means it was no longer ours (lost, or expired), so nothing was
    /// handed on.
    ///
    /// Returns within two bounded round trips (`connect_timeout +
    /// response_timeout` each); on an error, the guard's drop tries once
    /// more in the background, and the lease bounds the lock either way.
    pub async fn release(self) -> Result<bool, LockError> {
        self.hold.release().await
    }
}
