//! A single Redis server (or a proxy that looks like one).
//!
//! Lock traffic is spread round-robin over a small fixed set of multiplexed,
//! self-reconnecting [`ConnectionManager`]s: no checkout and no per-use
//! round trip, so one lock costs exactly the round trips of its scripts.
//! Acquisitions that wait for replicas (`WAIT`) run on connections of their
//! own, opened at first use: `WAIT` blocks its connection, and lock traffic
//! must never queue behind it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use super::{AcquireReply, ClientSource, ReleaseFeed, Renewal, Renewed};
use crate::config::ReplicaAck;
use crate::keys::LockKeys;
use crate::scripts;
use crate::token::OwnerToken;
use crate::{LockConfig, LockError};

/// The pooled connections to one Redis server.
#[derive(Clone)]
pub(crate) struct RedisBackend {
    pub(crate) pool: Arc<[ConnectionManager]>,
    /// The watchdog's connection: a round of large renewal batches never
    /// queues in front of anyone's acquire or release.
    pub(crate) renewals: ConnectionManager,
    next: Arc<AtomicUsize>,
    client: redis::Client,
    /// Connections for acquisitions followed by `WAIT`, one per pool slot.
    blocking: Arc<[OnceCell<ConnectionManager>]>,
    manager_config: ConnectionManagerConfig,
    /// Upper bound of one call: reconnecting plus waiting for the answer.
    call_bound: Duration,
}

impl RedisBackend {
    /// Opens every pooled connection, failing fast when the server is
    /// unreachable: a service learns at start-up, not at its first lock.
    pub(crate) async fn connect(
        server: redis::ConnectionInfo,
        config: &LockConfig,
    ) -> Result<Self, LockError> {
        let client = redis::Client::open(server)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.response_timeout))
            // Few, quick reconnect attempts: a call during an outage should
            // fail within its bound, and the next call starts a fresh attempt.
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let (pool, renewals) = super::open_pool(config, "connecting to Redis", || {
            ConnectionManager::new_with_config(client.clone(), manager_config.clone())
        })
        .await?;
        Ok(Self {
            pool: pool.into(),
            renewals,
            next: Arc::new(AtomicUsize::new(0)),
            client,
            blocking: (0..config.pool_size).map(|_| OnceCell::new()).collect(),
            manager_config,
            call_bound: config.connect_timeout + config.response_timeout,
        })
    }

    /// The next pooled connection, round-robin. Callers keep the index when
    /// a later command must be ordered after an earlier one.
    pub(crate) fn pick(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len()
    }

    /// Release messages are published on this server.
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        ReleaseFeed::PubSub(ClientSource::fixed(self.client.clone()))
    }

    /// One run of the acquire script on connection `conn`; with `replicas`,
    /// on that slot's blocking connection, followed by `WAIT`.
    pub(crate) async fn acquire(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        ttl_ms: u64,
        replicas: Option<ReplicaAck>,
    ) -> Result<AcquireReply, LockError> {
        match replicas {
            None => {
                self.run_acquire(self.pool[conn].clone(), keys, token, ttl_ms)
                    .await
            }
            Some(ack) => {
                self.acquire_replicated(conn, keys, token, ttl_ms, ack)
                    .await
            }
        }
    }

    /// Acquire, then `WAIT` for `ack.replicas` on the same connection (WAIT
    /// counts the writes of its own connection). Too few: release before
    /// answering, so no lock is left behind by a failed call.
    async fn acquire_replicated(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        ttl_ms: u64,
        ack: ReplicaAck,
    ) -> Result<AcquireReply, LockError> {
        let connection = self.blocking_connection(conn).await?;
        let reply = self
            .run_acquire(connection.clone(), keys, token, ttl_ms)
            .await?;
        if matches!(reply, AcquireReply::Busy { .. }) {
            return Ok(reply);
        }
        let mut wait = redis::cmd("WAIT");
        wait.arg(ack.replicas).arg(ack.timeout_ms());
        let acked: i64 = match tokio::time::timeout(
            self.call_bound + ack.timeout,
            wait.query_async(&mut connection.clone()),
        )
        .await
        {
            Ok(answer) => answer?,
            Err(_) => {
                return Err(LockError::redis_timeout(
                    "WAIT",
                    self.call_bound + ack.timeout,
                ));
            }
        };
        let acked = u32::try_from(acked).unwrap_or(0);
        if acked >= ack.replicas {
            return Ok(reply);
        }
        self.run_release(connection, keys, token).await?;
        Err(LockError::NotReplicated {
            key: keys.name().to_owned(),
            acked,
            wanted: ack.replicas,
            timeout: ack.timeout,
        })
    }

    /// The blocking connection of pool slot `conn`, opened at first use.
    /// No response timeout of its own: `WAIT` may rightly take as long as
    /// asked, and every call on it is bounded by its caller.
    async fn blocking_connection(&self, conn: usize) -> Result<ConnectionManager, LockError> {
        let open = || async {
            let config = self.manager_config.clone().set_response_timeout(None);
            ConnectionManager::new_with_config(self.client.clone(), config).await
        };
        match tokio::time::timeout(self.call_bound, self.blocking[conn].get_or_try_init(open)).await
        {
            Ok(connection) => Ok(connection?.clone()),
            Err(_) => Err(LockError::redis_timeout(
                "connecting for WAIT",
                self.call_bound,
            )),
        }
    }

    async fn run_acquire(
        &self,
        mut connection: ConnectionManager,
        keys: &LockKeys,
        token: &OwnerToken,
        ttl_ms: u64,
    ) -> Result<AcquireReply, LockError> {
        let mut invocation = scripts::ACQUIRE.key(keys.lock());
        invocation.key(keys.fence()).arg(token.as_str()).arg(ttl_ms);
        let (granted, value): (i64, i64) = self
            .bounded("acquire", invocation.invoke_async(&mut connection))
            .await?;
        Ok(AcquireReply::from_script(granted, value))
    }

    /// One run of the release script; true when our lock was deleted.
    pub(crate) async fn release(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        self.run_release(self.pool[conn].clone(), keys, token).await
    }

    async fn run_release(
        &self,
        mut connection: ConnectionManager,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let mut invocation = scripts::RELEASE.key(keys.lock());
        invocation.key(keys.channel()).arg(token.as_str());
        let deleted: i64 = self
            .bounded("release", invocation.invoke_async(&mut connection))
            .await?;
        Ok(deleted == 1)
    }

    /// Renews a batch of leases in one command, on the watchdog's own
    /// connection; one bool (still ours) per entry.
    pub(crate) async fn extend(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let mut connection = self.renewals.clone();
        let mut invocation = scripts::EXTEND.prepare_invoke();
        for renewal in batch {
            invocation
                .key(renewal.keys.lock())
                .arg(renewal.token.as_str())
                .arg(renewal.ttl_ms);
        }
        let renewed: Vec<i64> = self
            .bounded("extend", invocation.invoke_async(&mut connection))
            .await?;
        Renewed::from_script(renewed, batch.len())
    }

    /// Runs one call within `call_bound`, so that no caller waits on a
    /// stalled server or a reconnect loop longer than it was promised.
    async fn bounded<T>(
        &self,
        what: &str,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(self.call_bound, call).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(LockError::redis_timeout(what, self.call_bound)),
        }
    }
}
