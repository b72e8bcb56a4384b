//! [`SemaphoreRequest`]: `locker.semaphore(key, limit).permits(..).acquire()`.

use std::sync::Arc;

use super::Semaphore;
use super::guard::PermitGuard;
use crate::engine::core::Core;
use crate::engine::request::{Asked, request_options};
use crate::error::LockError;

/// A request for permits of a semaphore being built:
/// `locker.semaphore(key, limit).permits(..).ttl(..).acquire()`. The same
/// options as [`LockRequest`](crate::LockRequest), and
/// [`permits`](Self::permits).
#[must_use = "a semaphore request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct SemaphoreRequest {
    asked: Asked,
    limit: u32,
    permits: u32,
}

request_options!(SemaphoreRequest, "semaphore(\"nightly-report\", 4)");

impl SemaphoreRequest {
    pub(crate) fn new(core: Arc<Core>, key: String, limit: u32) -> Self {
        Self {
            asked: Asked::new(core, key),
            limit,
            permits: 1,
        }
    }

    /// How many permits to take at once, all or none (default 1; at most
    /// the limit, else [`LockError::Config`]).
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// let guard = locker.semaphore("render:acme", 4).permits(2).acquire().await?;
    /// assert_eq!(guard.permits(), 2);
    /// # Ok(()) }
    /// ```
    pub fn permits(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// Takes the permits, waiting up to the request's `wait` while too few
    /// are free. A release wakes the waiters its freed permits suffice
    /// for; a holder that died gives its permits back when its lease ends.
    ///
    /// Returns within the wait plus two bounded round trips, as
    /// [`LockRequest::acquire`](crate::LockRequest::acquire) does, with the
    /// same errors; [`LockError::Config`] for a limit of 0 or above
    /// [`SEMAPHORE_MAX_LIMIT`](crate::SEMAPHORE_MAX_LIMIT), more permits than the
    /// limit, or a limit other than the one the permits held were granted
    /// under. On Redlock, a grant needs floor(N*K/(K+1)) + 1 of N masters
    /// for a limit K (every master of 3 for a limit of 2 or more).
    pub async fn acquire(self) -> Result<PermitGuard, LockError> {
        let (limit, permits) = (self.limit, self.permits);
        let hold = self
            .asked
            .acquire(|keys| Semaphore::new(keys, limit, permits))
            .await?;
        Ok(PermitGuard::new(hold))
    }

    /// Tries once: `Ok(None)` when too few permits are free.
    pub async fn try_acquire(self) -> Result<Option<PermitGuard>, LockError> {
        let (limit, permits) = (self.limit, self.permits);
        let hold = self
            .asked
            .try_acquire(|keys| Semaphore::new(keys, limit, permits));
        Ok(hold.await?.map(PermitGuard::new))
    }
}
