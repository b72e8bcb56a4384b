//! [`MultiGuard`]: proof of holding several keys at once, and the way to
//! give them all back.

use std::future::Future;
use std::time::Duration;

use super::Multi;
use crate::engine::handle::LockHandle;
use crate::engine::release::Hold;
use crate::error::LockError;

/// Several keys, held together. While it lives, the watchdog renews every
/// key's lease (unless the request turned it off); the loss of any key is
/// the loss of the hold ([`lost`](Self::lost)), told before any of them
/// can expire on the server. [`release`](Self::release) gives every key
/// back, and dropping an unreleased guard does the same in the background.
///
/// Each key has its own fence, as if taken by
/// [`Locker::lock`](crate::Locker::lock): higher than every earlier
/// holder's of that key, whichever kind of lock held it.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let guard = locker.lock_all(["acct:1", "acct:2"]).acquire().await?;
/// let fence = guard.fence("acct:1").unwrap();
/// tokio::select! {
///     () = guard.lost() => eprintln!("a key was lost; stop writing"),
///     () = transfer(fence) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// # async fn transfer(_: u64) {}
/// ```
#[must_use = "dropping a guard releases its keys at once"]
pub struct MultiGuard {
    hold: Hold<Multi>,
    /// The keys as named, each once, in the order they were taken.
    keys: Vec<String>,
    /// Each key's fence, in the order of `keys`.
    fences: Vec<u64>,
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiGuard")
            .field("keys", &self.keys)
            .field("fences", &self.fences)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl MultiGuard {
    pub(crate) fn new(hold: Hold<Multi>) -> Self {
        let primitive = hold.primitive();
        let keys = primitive
            .all_keys()
            .iter()
            .map(|keys| keys.name().to_owned())
            .collect();
        let fences = primitive.fences();
        Self { hold, keys, fences }
    }

    /// Every key held, as named (without the configured prefix), each
    /// once, in the order they were taken (the same for every caller).
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The fencing token of `key`, if this guard holds it: higher than the
    /// fence of every earlier holder of that key.
    pub fn fence(&self, key: &str) -> Option<u64> {
        let at = self.keys.iter().position(|held| held == key)?;
        self.fences.get(at).copied()
    }

    /// Every key's fence, in the order of [`keys`](Self::keys).
    pub fn fences(&self) -> &[u64] {
        &self.fences
    }

    /// The lease length the keys were taken with.
    pub fn ttl(&self) -> Duration {
        self.hold.handle().ttl()
    }

    /// Whether every key is still ours; see [`LockHandle::is_held`].
    pub fn is_held(&self) -> bool {
        self.hold.handle().is_held()
    }

    /// Completes when any key is known lost, before its lease can run out
    /// on the server; see [`LockHandle::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.hold.handle().lost()
    }

    /// A cloneable view of this hold (its first key and fence, the loss
    /// signal of the whole) to hand to code that must not release it.
    pub fn handle(&self) -> LockHandle {
        self.hold.handle().clone()
    }

    /// Gives every key back, waking the waiters of each that someone
    /// waits for. `Ok(false)` means none was ours any more (lost, or
    /// expired).
    ///
    /// Returns within two bounded round trips (`connect_timeout +
    /// response_timeout` each); on an error, the guard's drop tries once
    /// more in the background, and the lease bounds the keys either way.
    pub async fn release(self) -> Result<bool, LockError> {
        self.hold.release().await
    }
}
