//! Redlock over independent masters (being built; see issue 7).

use super::{AcquireReply, ReleaseFeed, Renewal, Renewed};
use crate::config::ReplicaAck;
use crate::keys::LockKeys;
use crate::token::OwnerToken;
use crate::{LockConfig, LockError};

#[derive(Clone)]
pub(crate) struct RedlockBackend {
    _private: (),
}

impl RedlockBackend {
    pub(crate) async fn connect(
        _masters: &[redis::ConnectionInfo],
        _config: &LockConfig,
    ) -> Result<Self, LockError> {
        Err(LockError::config("redlock is not built yet"))
    }

    pub(crate) fn pick(&self) -> usize {
        0
    }

    pub(crate) async fn acquire(
        &self,
        _conn: usize,
        _keys: &LockKeys,
        _token: &OwnerToken,
        _ttl_ms: u64,
        _replicas: Option<ReplicaAck>,
    ) -> Result<AcquireReply, LockError> {
        Err(LockError::config("redlock is not built yet"))
    }

    pub(crate) async fn release(
        &self,
        _conn: usize,
        _keys: &LockKeys,
        _token: &OwnerToken,
    ) -> Result<bool, LockError> {
        Err(LockError::config("redlock is not built yet"))
    }

    pub(crate) async fn extend(&self, _batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        Err(LockError::config("redlock is not built yet"))
    }

    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        unreachable!("never connected")
    }
}
