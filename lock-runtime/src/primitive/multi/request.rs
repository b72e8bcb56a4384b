//! [`MultiLockRequest`]: `locker.lock_all(keys).ttl(..).acquire()`.

use std::sync::Arc;

use super::Multi;
use super::guard::MultiGuard;
use crate::engine::core::Core;
use crate::engine::request::{Asked, request_options};
use crate::error::LockError;

/// A request for several keys at once being built:
/// `locker.lock_all(["acct:1", "acct:2"]).ttl(..).acquire()`. The same
/// options as [`LockRequest`](crate::LockRequest).
#[must_use = "a multi-key request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct MultiLockRequest {
    asked: Asked,
    keys: Vec<String>,
}

request_options!(MultiLockRequest, "lock_all([\"acct:1\", \"acct:2\"])");

impl MultiLockRequest {
    pub(crate) fn new(core: Arc<Core>, keys: Vec<String>) -> Self {
        // The request's name in traces and errors: the first key named
        // (a hold's errors name the first key in the order taken).
        let name = keys.first().cloned().unwrap_or_default();
        Self {
            asked: Asked::new(core, name),
            keys,
        }
    }

    /// Takes every key, or none, waiting up to the request's `wait` while
    /// any is held by someone else (by a multi-key hold or by
    /// [`Locker::lock`](crate::Locker::lock)). The caller never returns
    /// holding some of them: a failed, timed-out or cancelled attempt
    /// leaves nothing held (a process killed mid-way leaves nothing beyond
    /// the ttl).
    ///
    /// Returns within the wait plus two bounded round trips, as
    /// [`LockRequest::acquire`](crate::LockRequest::acquire) does, with the
    /// same errors; [`LockError::Config`] for no key, more than
    /// [`MULTI_MAX_KEYS`](crate::MULTI_MAX_KEYS).
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// let guard = locker.lock_all(["acct:7", "acct:3"]).acquire().await?;
    /// assert_eq!(guard.keys(), ["acct:3", "acct:7"]);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(self) -> Result<MultiGuard, LockError> {
        let core = self.asked.core.clone();
        Self::check(&self.keys)?;
        let keys = self.keys;
        let hold = self
            .asked
            .acquire(|_| Multi::new(&core.config.key_prefix, &keys, &core.backend))
            .await?;
        Ok(MultiGuard::new(hold))
    }

    /// Tries once: `Ok(None)` when any key is held by someone else.
    pub async fn try_acquire(self) -> Result<Option<MultiGuard>, LockError> {
        let core = self.asked.core.clone();
        Self::check(&self.keys)?;
        let keys = self.keys;
        let hold = self
            .asked
            .try_acquire(|_| Multi::new(&core.config.key_prefix, &keys, &core.backend));
        Ok(hold.await?.map(MultiGuard::new))
    }

    /// An empty list is refused before anything else looks at its name.
    fn check(keys: &[String]) -> Result<(), LockError> {
        if keys.is_empty() {
            return Err(LockError::config(
                "a multi-key lock needs at least one key; `lock_all` was given none",
            ));
        }
        Ok(())
    }
}
