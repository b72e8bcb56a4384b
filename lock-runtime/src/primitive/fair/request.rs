//! [`FairLockRequest`]: `locker.fair_lock(key).ttl(..).wait(..).acquire()`.

use std::sync::Arc;

use super::Fair;
use super::guard::FairGuard;
use crate::engine::core::Core;
use crate::engine::request::{Asked, request_options};
use crate::error::LockError;

/// A fair lock request being built:
/// `locker.fair_lock(key).ttl(..).wait(..).acquire()`. The same options as
/// [`LockRequest`](crate::LockRequest); the waiters of a fair lock are
/// granted in the order the server first saw them.
#[must_use = "a lock request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct FairLockRequest {
    asked: Asked,
}

request_options!(FairLockRequest, "fair_lock(\"nightly-report\")");

impl FairLockRequest {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self {
            asked: Asked::new(core, key),
        }
    }

    /// Takes the lock, waiting up to the request's `wait` for the waiters
    /// ahead in line and the owner. While it waits, its place in line is
    /// a lease the watchdog renews: however long it waits, it keeps its
    /// place; when it stops waiting (the wait ran out, the future was
    /// dropped, the process died) it leaves the line, at once or within
    /// that lease (2 s, or the ttl if shorter).
    ///
    /// Returns within the wait plus two bounded round trips, as
    /// [`LockRequest::acquire`](crate::LockRequest::acquire) does, with the
    /// same errors; and [`LockError::Config`] on Redlock, whose masters
    /// would each keep a line of their own.
    pub async fn acquire(self) -> Result<FairGuard, LockError> {
        let (core, ttl) = (self.asked.core.clone(), self.asked.resolved_ttl());
        let hold = self
            .asked
            .acquire(|keys| Fair::new(keys, &core.backend, ttl))
            .await?;
        Ok(FairGuard::new(hold))
    }

    /// Tries once, and takes no place in line: `Ok(None)` when the lock is
    /// held or others wait for it.
    pub async fn try_acquire(self) -> Result<Option<FairGuard>, LockError> {
        let (core, ttl) = (self.asked.core.clone(), self.asked.resolved_ttl());
        let hold = self
            .asked
            .try_acquire(|keys| Fair::new(keys, &core.backend, ttl));
        Ok(hold.await?.map(FairGuard::new))
    }
}
