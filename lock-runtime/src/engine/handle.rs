//! [`LockHandle`]: a cheap, cloneable view of a held lock, for code that
//! needs to know about the lock without owning it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::lease::Lease;

/// What the holder of a lock can observe: its key, fencing token and
/// whether it is still held. Cloning it does not extend or duplicate the
/// lock; the [`LockGuard`](crate::LockGuard) alone releases it.
///
/// Inside an annotated function, [`current`](crate::current) returns the
/// handle of the lock the function holds.
#[derive(Clone)]
pub struct LockHandle {
    lease: Arc<Lease>,
}

impl std::fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockHandle")
            .field("key", &self.key())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .finish()
    }
}

impl LockHandle {
    pub(crate) fn new(lease: Arc<Lease>) -> Self {
        Self { lease }
    }

    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// The lock key as requested (without the configured prefix).
    pub fn key(&self) -> &str {
        self.lease.keys.name()
    }

    /// The fencing token: strictly greater than that of every earlier owner
    /// of this key. Pass it to the store you write to and have the store
    /// refuse a token smaller than one it has seen; that stops a stale owner
    /// (paused longer than its lease) from overwriting a newer owner's work.
    pub fn fence(&self) -> u64 {
        self.lease.fence
    }

    /// The lease length the lock was taken with.
    pub fn ttl(&self) -> Duration {
        self.lease.ttl
    }

    /// Whether the lock is still ours as far as this process can tell: not
    /// lost, not released, and inside the lease's validity window.
    pub fn is_held(&self) -> bool {
        self.lease.is_held()
    }

    /// Completes when the lock is known lost: a renewal was refused (the key
    /// was deleted or taken over), renewals failed until the lease's validity
    /// ran out, or a fixed lease ended. It completes *before* the key can
    /// expire on the server, so the holder can stop in time.
    ///
    /// The future owns what it needs (`'static`), so it can be raced against
    /// the work the lock protects. It never completes for a lock released by
    /// its holder.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        crate::engine::lost::signal(&self.lease)
    }
}
