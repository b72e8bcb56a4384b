//! Redis Cluster: each lock in one hash slot, sharded release messages.
//!
//! All keys of one lock share the `{key}` hash tag, so every script runs on
//! the one node that serves that slot. The redis crate's cluster connection
//! routes each script call by its first key, follows `MOVED` and `ASK`
//! while slots move, and retries `TRYAGAIN`.
//!
//! A node that lacks a script gets it in full on its first `NOSCRIPT`
//! ([`ScriptCall::run`]), and no other node is involved: the redis crate's
//! own reload sends `SCRIPT LOAD` to every node and waits for all of them,
//! so one frozen node would stall every lock on a restarted or flushed one.
//!
//! The redis crate learns a new slot map from a redirect or a dropped
//! connection, never from a timeout: after a primary that froze (its
//! connections open, nothing answered) was replaced by its replica, every
//! call for its slots would go on timing out on it. A connection whose call
//! timed out is therefore opened again in the background, from the seeds,
//! and swapped in ([`renewable`]). (The release listener's subscriptions
//! on the frozen node stay there: they hear releases again once it comes
//! back, as a replica of the new primary, which passes shard messages on,
//! or dies, which ends the listener's session; waiters of those slots
//! wake on their timers meanwhile.)
//!
//! - [`slots`]: a batch split into one script call per slot.
//! - [`renewable`]: a connection opened again after a timeout.

mod renewable;
mod slots;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::{join_all, try_join_all};
use redis::FromRedisValue;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;

use super::lock_connection::LockConnection;
use super::script::{LuaScript, ScriptCall};
use super::{BatchEntry, ReleaseFeed, Route, batch_answers, batch_call, bounded};
use crate::config::LockConfig;
use crate::error::LockError;
use renewable::{Renewable, Renewals};

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
    pool: Arc<[Arc<Renewable>]>,
    /// The watchdog's connection: a round of renewals never queues in
    /// front of anyone's acquire or release.
    renewals: Arc<Renewable>,
    /// Opens connections again after a timeout, and announces it.
    renewing: Arc<Renewals>,
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
        let call_bound = config.call_bound();
        let nodes = nodes
            .iter()
            .map(|node| super::tls::with_tls(node.clone(), &config.tls))
            .collect::<Result<Vec<_>, _>>()?;
        let builder = || {
            let builder = ClusterClientBuilder::new(nodes.clone());
            // Every node, discovered ones too, with the configured certificates.
            #[cfg(feature = "tls")]
            let builder = if config.tls.is_set() {
                builder.certs(config.tls.certificates())
            } else {
                builder
            };
            builder
                .connection_timeout(config.connect_timeout)
                .response_timeout(config.response_timeout)
                // Redirects and TRYAGAIN pauses share the call's bound.
                .overall_response_timeout(Some(call_bound))
                .retries(RETRIES)
                .min_retry_wait(MIN_RETRY_WAIT_MS)
                .max_retry_wait(MAX_RETRY_WAIT_MS)
        };
        let seeds: Vec<String> = nodes.iter().map(|node| node.addr().to_string()).collect();
        let what = format!(
            "connecting to the Redis Cluster through {}",
            seeds.join(", ")
        );
        let client = builder().build()?;
        let feed = builder()
            .use_protocol(redis::ProtocolVersion::RESP3)
            .build()?;
        // Discovery from the seeds, then a connection to every node: each
        // step waits for a silent node up to a connect and a response
        // timeout (the redis crate waits for every seed, answered or not).
        let open_bound = call_bound * 2;
        let (pool, renewals) = open_pool(config, &what, open_bound, &client).await?;
        Ok(Self {
            pool: pool.into_iter().map(Renewable::new).collect(),
            renewals: Renewable::new(renewals),
            renewing: Arc::new(Renewals::new(client, open_bound)),
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

    /// Runs `call` on the node that serves its first key's slot, following
    /// `MOVED` and `ASK` and retrying `TRYAGAIN` within the call bound.
    /// When the retries run out mid-migration, the error says so
    /// ([`super::slot_in_flux`]). A call that timed out has its connection
    /// opened again in the background.
    pub(crate) async fn run<T: FromRedisValue + Send>(
        &self,
        route: Route,
        call: &ScriptCall,
    ) -> Result<T, LockError> {
        let slot = &self.pool[route.conn];
        let mut connection = slot.connection();
        let answer = bounded(
            self.call_bound,
            "a lock script",
            connection.run_script(call),
        )
        .await;
        self.renewing.after(slot, &answer);
        answer
    }

    /// Runs a batch script: one call per hash slot, all in parallel on the
    /// watchdog's connection. A call that fails, or takes longer than a
    /// response timeout, answers `None` for its own entries only, so one
    /// frozen node costs the entries on the others nothing. A slot in
    /// mid-migration, its keys split between two nodes, answers a call on
    /// several of them `TRYAGAIN` until the migration ends: each of those
    /// keys is then renewed alone, which `ASK` takes to wherever it is.
    pub(crate) async fn run_batch(
        &self,
        script: &'static LuaScript,
        entries: &[BatchEntry],
    ) -> Result<Vec<Option<redis::Value>>, LockError> {
        let groups = slots::group_by_slot(entries.iter().map(|entry| entry.key.as_str()));
        let calls = groups.iter().map(|group| async move {
            match self.run_group(script, entries, group).await {
                Ok(answer) => answer.into_iter().map(Some).collect(),
                Err(err) if group.len() > 1 && super::slot_in_flux(&err) => {
                    let alone = group.iter().map(|&index| async move {
                        let answer = self.run_group(script, entries, &[index]).await;
                        answer.ok().and_then(|mut answer| answer.pop())
                    });
                    join_all(alone).await
                }
                Err(err) => {
                    tracing::debug!(%err, entries = group.len(), "a batch call on one slot failed");
                    vec![None; group.len()]
                }
            }
        });
        let answers = join_all(calls).await;
        let mut values = vec![None; entries.len()];
        for (group, answer) in groups.iter().zip(answers) {
            for (&index, value) in group.iter().zip(answer) {
                values[index] = value;
            }
        }
        Ok(values)
    }

    /// One batch call for the entries at `group` (one slot's).
    async fn run_group(
        &self,
        script: &'static LuaScript,
        entries: &[BatchEntry],
        group: &[usize],
    ) -> Result<Vec<redis::Value>, LockError> {
        let call = batch_call(script, group.iter().map(|&index| &entries[index]));
        let mut connection = self.renewals.connection();
        let answer = bounded(
            self.renewal_bound,
            "a batch script",
            connection.run_script(&call),
        )
        .await;
        self.renewing.after(&self.renewals, &answer);
        batch_answers(answer?, group.len())
    }
}

/// Opens the `pool_size` connections for lock traffic and one more for the
/// watchdog's renewals (returned apart), all at once, within `bound`.
///
/// Not the one server's [`super::pool::open_pool`], which opens them one
/// after the other within the connect timeout: the redis crate waits for
/// every seed, so one frozen node (a replica, with every slot served)
/// held each connection up for a whole connect timeout, and no locker
/// could start while a single node of the cluster was silent.
async fn open_pool(
    config: &LockConfig,
    what: &str,
    bound: Duration,
    client: &ClusterClient,
) -> Result<(Vec<ClusterConnection>, ClusterConnection), LockError> {
    let opening = (0..=config.pool_size).map(|_| client.get_async_connection());
    let mut pool = match tokio::time::timeout(bound, try_join_all(opening)).await {
        Ok(Ok(pool)) => pool,
        Ok(Err(err)) => return Err(super::pool::cannot_connect(what, err)),
        Err(_) => return Err(LockError::redis_timeout(what, bound)),
    };
    let renewals = pool
        .pop()
        .ok_or_else(|| LockError::config("pool_size must be at least 1"))?;
    Ok((pool, renewals))
}
