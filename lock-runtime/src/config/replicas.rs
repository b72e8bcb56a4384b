//! [`ReplicaAck`]: how many replicas must confirm a fresh lock, and how long
//! to wait for them.

use std::time::Duration;

use crate::error::LockError;

/// "Wait until `replicas` replicas have the lock, for at most `timeout`":
/// the Redis `WAIT` after an acquisition. Set with
/// [`LockConfig::wait_for_replicas`](crate::LockConfig::wait_for_replicas)
/// or per lock with [`LockRequest::wait_for_replicas`](crate::LockRequest::wait_for_replicas).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplicaAck {
    /// Replicas that must acknowledge (at least 1).
    pub(crate) replicas: u32,
    /// Longest wait for them (at least 1 ms: `WAIT 0` would mean forever).
    pub(crate) timeout: Duration,
}

impl ReplicaAck {
    pub(crate) fn validate(&self) -> Result<(), LockError> {
        if self.replicas == 0 {
            return Err(LockError::config(
                "wait_for_replicas needs at least 1 replica; leave it unset to not wait",
            ));
        }
        if self.timeout < Duration::from_millis(1) || self.timeout > Duration::from_secs(3600) {
            return Err(LockError::config(
                "the wait_for_replicas timeout must be between 1 ms and an hour (Redis reads 0 as forever)",
            ));
        }
        Ok(())
    }

    /// The timeout in the whole milliseconds `WAIT` takes (never 0).
    pub(crate) fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}
