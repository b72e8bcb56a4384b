//! Redis Cluster: each lock in one hash slot, sharded release messages.
//!
//! All keys of one lock share the `{key}` hash tag, so every script runs on
//! the one node that serves that slot. The redis crate's cluster connection
//! routes each script call by its first key, follows `MOVED` and `ASK`
//! while slots move, and retries `TRYAGAIN`.
//!
//! - [`scripts`]: the scripts, and the release script of a cluster (`SPUBLISH`).
//! - [`call`]: a script call that sends the script in full to a node lacking it.
//! - [`slots`]: a renewal batch split into one script call per slot.

mod call;
mod scripts;
mod slots;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;

use self::call::ScriptCall;
use super::{AcquireReply, ReleaseFeed, Renewal, Renewed};
use crate::config::ReplicaAck;
use crate::keys::LockKeys;
use crate::token::OwnerToken;
use crate::{LockConfig, LockError};

/// Redirects (`MOVED`, `ASK`) and `TRYAGAIN` answers one call may follow
/// before it fails; a slot migration costs one or two per call.
const RETRIES: u32 = 8;
/// Pause range before retrying after `TRYAGAIN` (or a lost node), in ms.
/// The redis crate's default starts above a second, longer than a lock
/// call's whole bound.
const MIN_RETRY_WAIT_MS: u64 = 5;
const MAX_RETRY_WAIT_MS: u64 = 100;

/// Connections to one Redis Cluster.
#[derive(Clone)]
pub(crate) struct ClusterBackend {
    /// Each one multiplexed over one connection per node.
    pool: Arc<[ClusterConnection]>,
    /// The watchdog's connection: a round of renewals never queues in
    /// front of anyone's acquire or release.
    renewals: ClusterConnection,
    next: Arc<AtomicUsize>,
    /// A RESP3 client for the release listener's sharded subscriptions.
    feed: Arc<ClusterClient>,
    /// Upper bound of one call: reconnecting plus waiting for the answer.
    call_bound: Duration,
    /// Upper bound of one slot's renewal: a round answers only when all of
    /// its slots did, so one slow node must not hold back the answers of
    /// the others for long.
    renewal_bound: Duration,
}

impl ClusterBackend {
    /// Discovers the cluster from `nodes` and opens every pooled
    /// connection, failing fast when no node answers.
    pub(crate) async fn connect(
        nodes: &[redis::ConnectionInfo],
        config: &LockConfig,
    ) -> Result<Self, LockError> {
        let call_bound = config.connect_timeout + config.response_timeout;
        let builder = || {
            ClusterClientBuilder::new(nodes.to_vec())
                .connection_timeout(config.connect_timeout)
                .response_timeout(config.response_timeout)
                // Redirects and TRYAGAIN pauses share the call's bound.
                .overall_response_timeout(Some(call_bound))
                .retries(RETRIES)
                .min_retry_wait(MIN_RETRY_WAIT_MS)
                .max_retry_wait(MAX_RETRY_WAIT_MS)
        };
        let client = builder().build()?;
        let feed = builder()
            .use_protocol(redis::ProtocolVersion::RESP3)
            .build()?;
        let (pool, renewals) = super::open_pool(config, "connecting to the Redis Cluster", || {
            client.get_async_connection()
        })
        .await?;
        Ok(Self {
            pool: pool.into(),
            renewals,
            next: Arc::new(AtomicUsize::new(0)),
            feed: Arc::new(feed),
            call_bound,
            renewal_bound: config.response_timeout,
        })
    }

    /// The next pooled connection, round-robin.
    pub(crate) fn pick(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len()
    }

    /// Release messages go to the shard of each lock's slot.
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        ReleaseFeed::Sharded(ClusterClient::clone(&self.feed))
    }

    /// One run of the acquire script on the node that serves the lock's slot.
    ///
    /// A slot in mid-migration answers `TRYAGAIN` to a script whose keys are
    /// not all on the node asked (a free lock next to its fence counter is
    /// such a case), whichever node that is. The cluster connection retries;
    /// when its retries run out on that (or on a last redirect), the script
    /// did not run anywhere, so it is reported as busy with no known lease:
    /// the caller waits and tries again, within its `wait`, until the
    /// migration completes.
    pub(crate) async fn acquire(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        ttl_ms: u64,
        replicas: Option<ReplicaAck>,
    ) -> Result<AcquireReply, LockError> {
        if replicas.is_some() {
            // Configuration validation rejects this earlier; never silently
            // ignore a durability request.
            return Err(LockError::config(
                "wait_for_replicas works with one server or Sentinel, not with cluster",
            ));
        }
        let mut connection = self.pool[conn].clone();
        let mut invocation = ScriptCall::new(&scripts::ACQUIRE);
        invocation
            .key(keys.lock())
            .key(keys.fence())
            .arg(token.as_str())
            .arg(ttl_ms);
        let answer = bounded(
            self.call_bound,
            "acquire",
            invocation.invoke(&mut connection),
        )
        .await;
        let (granted, value): (i64, i64) = match answer {
            Ok(answer) => answer,
            Err(LockError::Redis(err)) if slot_in_flux(&err) => {
                return Ok(AcquireReply::Busy { pttl: None });
            }
            Err(err) => return Err(err),
        };
        Ok(AcquireReply::from_script(granted, value))
    }

    /// One run of the release script; true when our lock was deleted.
    pub(crate) async fn release(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let mut connection = self.pool[conn].clone();
        let mut invocation = ScriptCall::new(&scripts::RELEASE);
        invocation
            .key(keys.lock())
            .arg(token.as_str())
            .arg(keys.channel());
        let deleted: i64 = bounded(
            self.call_bound,
            "release",
            invocation.invoke(&mut connection),
        )
        .await?;
        Ok(deleted == 1)
    }

    /// Renews a batch of leases: one script call per hash slot, all in
    /// parallel on the watchdog's connection. A call that fails, or takes
    /// longer than a response timeout, answers [`Renewed::Unknown`] for its
    /// own entries only (the watchdog retries them while their leases are
    /// valid), so one frozen node costs the leases on the others nothing.
    pub(crate) async fn extend(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let groups = slots::group_by_slot(batch.iter().map(|renewal| renewal.keys.lock()));
        let calls = groups.iter().map(|group| self.extend_slot(batch, group));
        let answers = join_all(calls).await;
        let mut renewed = vec![Renewed::Unknown; batch.len()];
        for (group, answer) in groups.iter().zip(answers) {
            match answer {
                Ok(answer) => {
                    for (&index, value) in group.iter().zip(answer) {
                        renewed[index] = value;
                    }
                }
                Err(err) => {
                    tracing::debug!(%err, locks = group.len(), "renewal of one slot failed");
                }
            }
        }
        Ok(renewed)
    }

    /// The batch script for the entries of `batch` at `group` (one slot).
    async fn extend_slot(
        &self,
        batch: &[Renewal<'_>],
        group: &[usize],
    ) -> Result<Vec<Renewed>, LockError> {
        let mut connection = self.renewals.clone();
        let mut invocation = ScriptCall::new(&scripts::EXTEND);
        for &index in group {
            let renewal = &batch[index];
            invocation
                .key(renewal.keys.lock())
                .arg(renewal.token.as_str())
                .arg(renewal.ttl_ms);
        }
        let renewed: Vec<i64> = bounded(
            self.renewal_bound,
            "extend",
            invocation.invoke(&mut connection),
        )
        .await?;
        Renewed::from_script(renewed, group.len())
    }
}

/// Runs one call within `limit`, whatever the cluster connection's own
/// timeouts and retries do.
async fn bounded<T>(
    limit: Duration,
    what: &str,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, LockError> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(LockError::redis_timeout(what, limit)),
    }
}

/// Whether `err` says the slot is moving and the command was not run:
/// `TRYAGAIN`, or a redirect the connection had no retry left to follow.
fn slot_in_flux(err: &redis::RedisError) -> bool {
    matches!(err.code(), Some("TRYAGAIN" | "ASK" | "MOVED"))
}
