//! [`ReadGuard`] and [`WriteGuard`]: proof of holding one side of a
//! read/write lock, and the way to give it back.

use std::future::Future;
use std::time::Duration;

use super::tasks::{self, Registered, Side};
use super::{Mode, ReadWrite};
use crate::engine::convert::{Change, convert};
use crate::engine::handle::LockHandle;
use crate::engine::release::Hold;
use crate::error::LockError;

/// A held read of a read/write lock: other readers may hold it too, no
/// writer does. Its lease is its own, renewed by the watchdog while the
/// guard lives (unless the request turned it off) and reported lost like
/// a lock's; dropping an unreleased guard releases it in the background.
///
/// Its [`fence`](Self::fence) is ordered against writes: above the fence
/// of every write that ended before this read was granted, below that of
/// every write granted after it ends. A store that keeps the fence of the
/// last write it applied can check that what a reader read is no older
/// than the reader's fence says (no write newer than the read was applied
/// before it); overlapping readers are not ordered among themselves.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let read = locker.read_lock("catalog").acquire().await?;
/// // ... read the catalogue, beside other readers ...
/// read.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a guard releases its lock at once"]
pub struct ReadGuard {
    reading: Reading,
    _registered: Option<Registered>,
}

/// How a read is held.
enum Reading {
    /// A lease of its own.
    Own(Hold<ReadWrite>),
    /// Under its task's own write (see [`ReadGuard::under`]).
    Under(LockHandle),
}

/// A held write of a read/write lock: no reader and no other writer holds
/// it. Renewed by the watchdog while the guard lives (unless the request
/// turned it off); dropping an unreleased guard releases it in the
/// background.
///
/// Its [`fence`](Self::fence) is above the fence of every earlier writer
/// and reader of this lock: a store that rejects a write whose fence is
/// not above the last one it applied turns away a writer that was paused
/// past its lease.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let write = locker.write_lock("catalog").acquire().await?;
/// // ... change the catalogue, alone ...
/// let read = write.downgrade().await?; // readers may come in now
/// // ... read what was written, beside them ...
/// read.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a guard releases its lock at once"]
pub struct WriteGuard {
    hold: Hold<ReadWrite>,
    _registered: Registered,
}

impl std::fmt::Debug for ReadGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadGuard")
            .field("key", &self.key())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .field("under_write", &matches!(self.reading, Reading::Under(_)))
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for WriteGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteGuard")
            .field("key", &self.key())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl ReadGuard {
    pub(crate) fn new(hold: Hold<ReadWrite>) -> Self {
        let key = hold.handle().key().to_owned();
        let registered = tasks::register(hold.core(), &key, Side::Read);
        Self {
            reading: Reading::Own(hold),
            _registered: Some(registered),
        }
    }

    /// A read under the write its task holds, seen through `write`.
    pub(crate) fn under(write: LockHandle) -> Self {
        Self {
            reading: Reading::Under(write),
            _registered: None,
        }
    }

    fn view(&self) -> &LockHandle {
        match &self.reading {
            Reading::Own(hold) => hold.handle(),
            Reading::Under(write) => write,
        }
    }

    /// The lock's name as requested (without the configured prefix).
    pub fn key(&self) -> &str {
        self.view().key()
    }

    /// The fencing token, ordered against writes (see [`ReadGuard`]); a
    /// read under its task's own write has the write's.
    pub fn fence(&self) -> u64 {
        self.view().fence()
    }

    /// The lease length the read was taken with.
    pub fn ttl(&self) -> Duration {
        self.view().ttl()
    }

    /// Whether the read is still ours; see [`LockHandle::is_held`].
    pub fn is_held(&self) -> bool {
        self.view().is_held()
    }

    /// Completes when the read is known lost, before its lease can run out
    /// on the server; see [`LockHandle::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.view().lost()
    }

    /// A cloneable view of this read (key, fence, loss signal) to hand to
    /// code that must not release it.
    pub fn handle(&self) -> LockHandle {
        self.view().clone()
    }

    /// Releases the read; the last reader out wakes a waiting writer.
    /// `Ok(false)` means it was no longer ours (lost, or expired). A read
    /// under its task's own write lets go of nothing (the write does) and
    /// answers whether that write is still held.
    ///
    /// Returns within two bounded round trips; on an error, the guard's
    /// drop tries once more in the background, and the lease bounds the
    /// read either way.
    pub async fn release(self) -> Result<bool, LockError> {
        match self.reading {
            Reading::Own(hold) => hold.release().await,
            Reading::Under(write) => Ok(write.is_held()),
        }
    }
}

impl WriteGuard {
    pub(crate) fn new(hold: Hold<ReadWrite>) -> Self {
        let key = hold.handle().key().to_owned();
        let side = Side::Write(hold.handle().clone());
        let registered = tasks::register(hold.core(), &key, side);
        Self {
            hold,
            _registered: registered,
        }
    }

    /// The lock's name as requested (without the configured prefix).
    pub fn key(&self) -> &str {
        self.hold.handle().key()
    }

    /// The fencing token: above every earlier writer's and reader's of
    /// this lock; see [`WriteGuard`].
    pub fn fence(&self) -> u64 {
        self.hold.handle().fence()
    }

    /// The lease length the write was taken with.
    pub fn ttl(&self) -> Duration {
        self.hold.handle().ttl()
    }

    /// Whether the write is still ours; see [`LockHandle::is_held`].
    pub fn is_held(&self) -> bool {
        self.hold.handle().is_held()
    }

    /// Completes when the write is known lost, before its lease can run
    /// out on the server; see [`LockHandle::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.hold.handle().lost()
    }

    /// A cloneable view of this write (key, fence, loss signal) to hand to
    /// code that must not release it. It ends with the write, a downgrade
    /// included.
    pub fn handle(&self) -> LockHandle {
        self.hold.handle().clone()
    }

    /// Releases the write: every waiting reader is woken at once, or, when
    /// another writer waits, that writer. `Ok(false)` means it was no
    /// longer ours (lost, or expired).
    ///
    /// Returns within two bounded round trips; on an error, the guard's
    /// drop tries once more in the background, and the lease bounds the
    /// write either way.
    pub async fn release(self) -> Result<bool, LockError> {
        self.hold.release().await
    }

    /// Turns the write into a read, in one step on the server: there is
    /// no moment when this holder holds neither, so nothing written can
    /// change before it reads it. Waiting readers come in at once (unless
    /// a writer waits: writers go first). The read keeps the write's
    /// token and ttl, and its fence is above the write's; its lease is
    /// renewed as the write's was.
    ///
    /// The other way does not exist: a read is never upgraded (see
    /// [`LockError::UpgradeRefused`]).
    ///
    /// Returns within two bounded round trips. [`LockError::Lost`] when
    /// the write was no longer ours; on any other error the write is let
    /// go of in the background (and a read it became, had the answer been
    /// lost, ends with its lease).
    pub async fn downgrade(self) -> Result<ReadGuard, LockError> {
        let Self { hold, _registered } = self;
        drop(_registered);
        let read = hold.primitive().as_mode(Mode::Read);
        let step = |change: Change| {
            let read = read.clone();
            async move {
                read.downgrade(
                    &change.backend,
                    change.route,
                    &change.token,
                    change.fence,
                    change.ttl,
                )
                .await
            }
        };
        let hold = convert(hold, read.clone(), step).await?;
        Ok(ReadGuard::new(hold))
    }
}
