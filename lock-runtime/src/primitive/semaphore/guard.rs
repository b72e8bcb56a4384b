//! [`PermitGuard`]: proof of holding permits of a semaphore, and the way
//! to give them back.

use std::future::Future;
use std::time::Duration;

use super::Semaphore;
use crate::engine::handle::LockHandle;
use crate::engine::release::Hold;
use crate::error::LockError;

/// Permits of a semaphore, held. While it lives, the watchdog renews
/// their lease (unless the request turned it off);
/// [`release`](Self::release) gives them back and wakes the waiters they
/// suffice for, and dropping an unreleased guard does the same in the
/// background.
///
/// Several holders hold a semaphore at once, so a fence alone orders
/// nothing among them. Each permit is a *slot* instead, one of
/// `0..limit`: no two holders hold one slot at once, and a slot's holders
/// get rising fences. A store that keeps, per slot, the highest fence it
/// saw and refuses a lower one turns a stale holder away (one whose lease
/// ended while it stalled) without refusing the others.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let guard = locker.semaphore("render:acme", 4).acquire().await?;
/// let (slot, fence) = (guard.slots()[0], guard.fence());
/// render(slot, fence).await;
/// guard.release().await?;
/// # Ok(()) }
/// # async fn render(_: u32, _: u64) {}
/// ```
#[must_use = "dropping a guard gives its permits back at once"]
pub struct PermitGuard {
    hold: Hold<Semaphore>,
    /// Its grant's slots, read once the grant was final.
    slots: Vec<u32>,
}

impl std::fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitGuard")
            .field("key", &self.key())
            .field("permits", &self.permits())
            .field("slots", &self.slots())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl PermitGuard {
    pub(crate) fn new(hold: Hold<Semaphore>) -> Self {
        let slots = hold.primitive().slots();
        Self { hold, slots }
    }

    /// The semaphore's name as requested (without the configured prefix).
    pub fn key(&self) -> &str {
        self.hold.handle().key()
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.hold.primitive().permits()
    }

    /// The semaphore's limit, as this request named it (the one its
    /// permits were granted under).
    pub fn limit(&self) -> u32 {
        self.hold.primitive().limit()
    }

    /// The slots this guard's permits hold, one per permit, ascending:
    /// each the lowest free one of `0..limit` at the grant.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// The fencing token of the grant, for every slot it holds: higher
    /// than every earlier grant's of this semaphore, so higher than the
    /// fence of every earlier holder of the same slot.
    pub fn fence(&self) -> u64 {
        self.hold.handle().fence()
    }

    /// The lease length the permits were taken with.
    pub fn ttl(&self) -> Duration {
        self.hold.handle().ttl()
    }

    /// Whether the permits are still ours; see [`LockHandle::is_held`].
    pub fn is_held(&self) -> bool {
        self.hold.handle().is_held()
    }

    /// Completes when the permits are known lost, before their lease can
    /// run out on the server; see [`LockHandle::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.hold.handle().lost()
    }

    /// A cloneable view of this hold (key, fence, loss signal) to hand to
    /// code that must not release it.
    pub fn handle(&self) -> LockHandle {
        self.hold.handle().clone()
    }

    /// Gives the permits back and wakes the waiters they suffice for.
    /// `Ok(false)` means they were no longer ours (lost, or expired).
    ///
    /// Returns within two bounded round trips (`connect_timeout +
    /// response_timeout` each); on an error, the guard's drop tries once
    /// more in the background, and the lease bounds the permits either
    /// way.
    pub async fn release(self) -> Result<bool, LockError> {
        self.hold.release().await
    }
}
