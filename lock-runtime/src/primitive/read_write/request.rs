//! [`ReadLockRequest`] and [`WriteLockRequest`]:
//! `locker.read_lock(key).ttl(..).wait(..).acquire()`, and the same for
//! `write_lock`.

use std::sync::Arc;

use super::guard::{ReadGuard, WriteGuard};
use super::tasks::{self, Side};
use super::{Mode, ReadWrite};
use crate::engine::core::Core;
use crate::engine::request::{Asked, request_options};
use crate::error::LockError;

/// A read lock request being built:
/// `locker.read_lock(key).ttl(..).wait(..).acquire()`. The same options as
/// [`LockRequest`](crate::LockRequest); readers of one lock hold it
/// together, each with its own lease.
#[must_use = "a lock request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct ReadLockRequest {
    asked: Asked,
}

/// A write lock request being built:
/// `locker.write_lock(key).ttl(..).wait(..).acquire()`. The same options as
/// [`LockRequest`](crate::LockRequest); a writer holds the lock alone.
#[must_use = "a lock request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct WriteLockRequest {
    asked: Asked,
}

request_options!(ReadLockRequest, "read_lock(\"nightly-report\")");
request_options!(WriteLockRequest, "write_lock(\"nightly-report\")");

impl ReadLockRequest {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self {
            asked: Asked::new(core, key),
        }
    }

    /// Takes a read, waiting up to the request's `wait` while a writer
    /// holds the lock or waits for it (writers go first: a read asked
    /// while a writer waits waits behind it). Every waiting reader is
    /// woken at once when the writer leaves.
    ///
    /// A task that holds the write of this lock (through this locker) is
    /// answered at once with a read under that write: it shares the
    /// write's fence and ends with it, and its release lets go of nothing.
    ///
    /// Returns within the wait plus two bounded round trips, as
    /// [`LockRequest::acquire`](crate::LockRequest::acquire) does, with the
    /// same errors. On Redlock a read needs a majority of masters.
    pub async fn acquire(self) -> Result<ReadGuard, LockError> {
        if let Some(guard) = self.under_own_write() {
            return Ok(guard);
        }
        let ttl = self.asked.resolved_ttl();
        let hold = self
            .asked
            .acquire(|keys| Ok(ReadWrite::new(keys, ttl, Mode::Read)))
            .await?;
        Ok(ReadGuard::new(hold))
    }

    /// Tries once: `Ok(None)` when a writer holds the lock or waits for it.
    pub async fn try_acquire(self) -> Result<Option<ReadGuard>, LockError> {
        if let Some(guard) = self.under_own_write() {
            return Ok(Some(guard));
        }
        let ttl = self.asked.resolved_ttl();
        let hold = self
            .asked
            .try_acquire(|keys| Ok(ReadWrite::new(keys, ttl, Mode::Read)));
        Ok(hold.await?.map(ReadGuard::new))
    }

    /// A read under the write this task holds, if it holds it.
    fn under_own_write(&self) -> Option<ReadGuard> {
        match tasks::held_by_this_task(&self.asked.core, &self.asked.key)? {
            Side::Write(handle) => Some(ReadGuard::under(handle)),
            Side::Read => None,
        }
    }
}

impl WriteLockRequest {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self {
            asked: Asked::new(core, key),
        }
    }

    /// Takes the write, waiting up to the request's `wait` for the readers
    /// and the writer holding it. While it waits it keeps an intent, a
    /// lease of its own (2 s, or the ttl if shorter) renewed while it
    /// waits, that turns new readers away: it gets in once the reads
    /// running when it came have ended. When it stops waiting (the wait
    /// ran out, the future was dropped, the process died) readers are let
    /// in again, at once or within that lease.
    ///
    /// Refused at once with [`LockError::UpgradeRefused`] when this task
    /// holds a read of the same lock (through this locker): a read is
    /// never upgraded. Otherwise returns within the wait plus two bounded
    /// round trips, as [`LockRequest::acquire`](crate::LockRequest::acquire)
    /// does, with the same errors. On Redlock a write needs a majority of
    /// masters.
    pub async fn acquire(self) -> Result<WriteGuard, LockError> {
        self.refuse_upgrade()?;
        let ttl = self.asked.resolved_ttl();
        let hold = self
            .asked
            .acquire(|keys| Ok(ReadWrite::new(keys, ttl, Mode::Write)))
            .await?;
        Ok(WriteGuard::new(hold))
    }

    /// Tries once, and leaves no intent: `Ok(None)` when a reader or a
    /// writer holds the lock. An upgrade is refused as by
    /// [`Self::acquire`].
    pub async fn try_acquire(self) -> Result<Option<WriteGuard>, LockError> {
        self.refuse_upgrade()?;
        let ttl = self.asked.resolved_ttl();
        let hold = self
            .asked
            .try_acquire(|keys| Ok(ReadWrite::new(keys, ttl, Mode::Write)));
        Ok(hold.await?.map(WriteGuard::new))
    }

    fn refuse_upgrade(&self) -> Result<(), LockError> {
        match tasks::held_by_this_task(&self.asked.core, &self.asked.key) {
            Some(Side::Read) => Err(LockError::UpgradeRefused {
                key: self.asked.key.clone(),
            }),
            _ => Ok(()),
        }
    }
}
