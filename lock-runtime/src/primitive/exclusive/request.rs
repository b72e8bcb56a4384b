//! [`LockRequest`]: `locker.lock(key).ttl(..).wait(..).acquire()`.

use std::sync::Arc;
use std::time::Duration;

use super::Exclusive;
use crate::engine::core::Core;
use crate::engine::request::{Asked, request_options};
use crate::error::LockError;
use crate::primitive::exclusive::guard::LockGuard;

/// A lock request being built: `locker.lock(key).ttl(..).wait(..).acquire()`.
#[must_use = "a lock request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct LockRequest {
    asked: Asked,
}

request_options!(LockRequest, "lock(\"nightly-report\")");

impl LockRequest {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self {
            asked: Asked::new(core, key),
        }
    }

    /// Takes the lock, waiting up to the request's `wait` while someone else
    /// holds it.
    ///
    /// Returns within the wait plus two bounded round trips (each at most
    /// `connect_timeout + response_timeout`), plus the replica timeout when
    /// waiting for replicas, whatever the servers do.
    ///
    /// Errors: [`LockError::Timeout`] when the wait ran out,
    /// [`LockError::Redis`] when the server failed or did not answer within
    /// that bound (a dropped or refused connection is retried once),
    /// [`LockError::Config`] for an empty key or a ttl out of range,
    /// [`LockError::QuorumNotReached`] when too few Redlock masters granted
    /// it for the whole wait (or a majority is down),
    /// [`LockError::NotReplicated`] when too few replicas confirmed it.
    /// Dropping the returned future part-way is safe: a lock it may have
    /// taken is released in the background, after the calls it sent.
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let hold = self.asked.acquire(|keys| Ok(Exclusive::new(keys))).await?;
        Ok(LockGuard::new(hold))
    }

    /// Tries once: `Ok(None)` when someone else holds the lock.
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, LockError> {
        let hold = self.asked.try_acquire(|keys| Ok(Exclusive::new(keys)));
        Ok(hold.await?.map(LockGuard::new))
    }

    /// How long this request waits: its own wait, the config's default
    /// wait, or its ttl (the longest a crashed owner can block it).
    pub(crate) fn resolved_wait(&self) -> Duration {
        self.asked.resolved_wait()
    }
}
