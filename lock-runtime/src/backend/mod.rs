//! Topologies: where a script runs, and how its call gets there. A
//! topology knows nothing of locks; a primitive
//! ([`crate::primitive`]) decides what its scripts are and what their
//! answers mean.
//!
//! Two families, because they answer differently:
//!
//! - [`NodeBackend`]: every call runs on the one node that owns its first
//!   key, and answers once.
//!   - [`single`]: one server, a pool of multiplexed connections.
//!   - [`sentinel`]: one server found through Sentinel, followed across failovers.
//!   - [`cluster`]: Redis Cluster; a call goes to the node serving its key's slot.
//!   - [`memory`]: the in-memory store, in the process; a call runs as its
//!     script's twin.
//! - [`redlock`]: independent masters; a call runs on every master at
//!   once and answers once per master ([`redlock::RedlockBackend::fan_out`]).
//!   The primitive counts the votes.

pub(crate) mod memory;
pub(crate) mod redlock;
pub(crate) mod script;
pub(crate) mod single;

#[cfg(feature = "cluster")]
pub(crate) mod cluster;
#[cfg(feature = "sentinel")]
pub(crate) mod sentinel;

mod direct;
mod feed;
pub(crate) mod flights;
mod lock_connection;
mod node_connection;
pub(crate) mod permissions;
pub(crate) mod plain;
mod pool;
pub(crate) mod resp;
pub(crate) mod tls;

use futures_util::FutureExt;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use feed::{ClientSource, ReleaseFeed};
use plain::PlainCommands;
use script::{LuaScript, ScriptCall};

use crate::config::LockConfig;
use crate::config::{ReplicaAck, Topology};
use crate::error::LockError;

/// Which connection a call goes on. Calls on one route reach the server in
/// the order they were made, so an acquisition's clean-up is routed exactly
/// like the acquisition itself and can never overtake it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// A pool slot (see [`Backend::pick`]).
    pub(crate) conn: usize,
    /// On the slot's blocking connection, where an acquisition that waits
    /// for replicas (`WAIT`) runs.
    pub(crate) blocking: bool,
}

impl Route {
    /// Pool slot `conn`, on its usual connection.
    pub(crate) fn pooled(conn: usize) -> Self {
        Self {
            conn,
            blocking: false,
        }
    }
}

/// One entry of a batch script: its key and its arguments. The topology
/// groups entries by where their keys live and runs one call per group;
/// the script answers with one value per entry, in order.
pub(crate) struct BatchEntry {
    pub(crate) key: String,
    pub(crate) args: Vec<String>,
}

/// Leases renewed by one call (see [`Backend::renewal_group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RenewalGroup {
    /// Every lease: one server, Sentinel, Redlock.
    All,
    /// The leases of one hash slot of a cluster.
    #[cfg(feature = "cluster")]
    Slot(redis::cluster_routing::Slot),
}

/// The lock store of one [`Locker`](crate::Locker), as configured.
#[derive(Clone)]
pub(crate) enum Backend {
    /// Calls that run on one node.
    Node(NodeBackend),
    /// Calls that run on a majority of independent masters.
    Redlock(redlock::RedlockBackend),
}

/// The topologies whose calls run on one node.
#[derive(Clone)]
pub(crate) enum NodeBackend {
    Single(Arc<single::SingleBackend>),
    Memory(Arc<memory::MemoryBackend>),
    #[cfg(feature = "sentinel")]
    Sentinel(sentinel::SentinelBackend),
    #[cfg(feature = "cluster")]
    Cluster(cluster::ClusterBackend),
}

/// Calls the same method on whichever node topology is in use; the
/// in-memory store's calls never wait, so it has an expression of its own.
macro_rules! dispatch {
    ($self:ident, $memory:ident => $in_memory:expr, $backend:ident => $call:expr) => {
        match $self {
            NodeBackend::Memory($memory) => $in_memory,
            NodeBackend::Single($backend) => $call,
            #[cfg(feature = "sentinel")]
            NodeBackend::Sentinel($backend) => $call,
            #[cfg(feature = "cluster")]
            NodeBackend::Cluster($backend) => $call,
        }
    };
}

impl Backend {
    /// Opens the connections the configuration names, failing fast when the
    /// deployment cannot be reached; `scripts` are loaded on fresh Redlock
    /// masters (a node topology loads each on its first `NOSCRIPT`).
    pub(crate) async fn connect(
        config: &LockConfig,
        scripts: &'static [&'static LuaScript],
    ) -> Result<Self, LockError> {
        let node = |backend| Ok(Backend::Node(backend));
        match &config.topology {
            Topology::Memory(store) => node(NodeBackend::Memory(Arc::new(
                memory::MemoryBackend::new(crate::memory::MemoryStore::of(store)),
            ))),
            // Every lock call on one server runs inside an operation's own
            // bound (an acquisition's, a release's, a clean-up's).
            Topology::Single(server) => {
                let backend = single::SingleBackend::connect(server.clone(), config).await?;
                backend.check_login(config.response_timeout).await?;
                node(NodeBackend::Single(Arc::new(
                    backend.bounded_by_operations(),
                )))
            }
            Topology::Redlock { masters } => Ok(Backend::Redlock(
                redlock::RedlockBackend::connect(masters, config, scripts).await?,
            )),
            #[cfg(feature = "cluster")]
            Topology::Cluster { nodes } => node(NodeBackend::Cluster(
                cluster::ClusterBackend::connect(nodes, config).await?,
            )),
            #[cfg(feature = "sentinel")]
            Topology::Sentinel {
                sentinels,
                master,
                node: settings,
            } => node(NodeBackend::Sentinel(
                sentinel::SentinelBackend::connect(sentinels, master, settings, config).await?,
            )),
            #[allow(unreachable_patterns)]
            other => Err(LockError::config(format!(
                "this build of lock-runtime has no {0} support: enable its `{0}` feature",
                other.kind()
            ))),
        }
    }

    /// A pool slot for one acquisition; its clean-up and release use the
    /// same one, so they queue behind the acquisition.
    pub(crate) fn pick(&self) -> usize {
        match self {
            Backend::Node(node) => node.pick(),
            Backend::Redlock(redlock) => redlock.pick(),
        }
    }

    /// Where waiters hear about releases.
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        match self {
            Backend::Node(node) => {
                dispatch!(node, memory => memory.release_feed(), backend => backend.release_feed())
            }
            Backend::Redlock(redlock) => redlock.release_feed(),
        }
    }

    /// Which renewal group the key `key` belongs to: the leases of one
    /// group are renewed by one call, whose answer is applied as soon as it
    /// arrives. On a cluster, a hash slot (so a frozen node delays the
    /// renewals of its own leases only); elsewhere, one group.
    pub(crate) fn renewal_group(&self, key: &str) -> RenewalGroup {
        match self {
            #[cfg(feature = "cluster")]
            Backend::Node(NodeBackend::Cluster(_)) => {
                RenewalGroup::Slot(redis::cluster_routing::Slot::for_key(key))
            }
            _ => {
                let _ = key;
                RenewalGroup::All
            }
        }
    }

    /// The commands that announce releases and listen for them here:
    /// sharded pub/sub on a cluster, plain pub/sub elsewhere.
    pub(crate) fn pubsub_commands(&self) -> [&'static str; 3] {
        match self {
            #[cfg(feature = "cluster")]
            Backend::Node(NodeBackend::Cluster(_)) => ["SPUBLISH", "SSUBSCRIBE", "SUNSUBSCRIBE"],
            _ => ["PUBLISH", "SUBSCRIBE", "UNSUBSCRIBE"],
        }
    }

    /// Whether the server's user may run what `needs` names (see
    /// [`permissions`]), on every node reachable now (each within
    /// `bound`); `server` names the deployment in the error. A node that
    /// does not answer is not judged here: its calls fail on their own.
    pub(crate) async fn check_permissions(
        &self,
        needs: &permissions::Needs,
        server: &str,
        bound: Duration,
    ) -> Result<(), LockError> {
        let mut call = permissions::PROBE.call();
        for key in &needs.keys {
            call.key(key);
        }
        call.arg(&needs.channel);
        for command in &needs.commands {
            call.arg(command);
        }
        let answers: Vec<Result<Vec<String>, LockError>> = match self {
            Backend::Node(NodeBackend::Memory(_)) => return Ok(()),
            Backend::Node(node) => {
                let probe = node.run::<Vec<String>>(Route::pooled(0), &call);
                vec![bounded_answer(bound, probe).await]
            }
            Backend::Redlock(masters) => {
                let call = Arc::new(call);
                let mut round = masters.fan_out(0..masters.len(), bound, "an ACL check", None, {
                    move |_, master| {
                        let call = call.clone();
                        async move { master.run::<Vec<String>>(Route::pooled(0), &call).await }
                    }
                });
                let mut answers = Vec::new();
                while let Some((_, answer)) = round.recv().await {
                    answers.push(answer);
                }
                answers
            }
        };
        for answer in answers {
            match answer {
                Ok(denied) if denied.is_empty() => {}
                Ok(denied) => return Err(permissions::denied(server, &denied)),
                Err(err) => match permissions::refused(server, err) {
                    config @ LockError::Config(_) => return Err(config),
                    err => tracing::debug!(error = %err, "the ACL check got no answer; not judged"),
                },
            }
        }
        Ok(())
    }

    /// How many times the locks moved to another server as a whole (the
    /// Sentinel failovers this locker followed); always 0 for topologies
    /// whose locks never move as a whole. A call that failed while this
    /// changed failed on a server no longer in use.
    pub(crate) fn generation(&self) -> u64 {
        match self {
            #[cfg(feature = "sentinel")]
            Backend::Node(NodeBackend::Sentinel(backend)) => backend.generation(),
            _ => 0,
        }
    }

    /// Tells when the locks moved to another server (a Sentinel failover),
    /// so that the watchdog renews every lease on it at once; None for
    /// topologies whose locks never move as a whole.
    pub(crate) fn moves(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            #[cfg(feature = "sentinel")]
            Backend::Node(NodeBackend::Sentinel(backend)) => Some(backend.moves()),
            _ => None,
        }
    }
}

impl NodeBackend {
    /// A pool slot, round-robin.
    pub(crate) fn pick(&self) -> usize {
        dispatch!(self, memory => memory.pick(), backend => backend.pick())
    }

    /// The command a release script announces itself with: `SPUBLISH` on
    /// a cluster (the message reaches only the shard that owns the
    /// channel, where the listener `SSUBSCRIBE`s), else `PUBLISH`.
    pub(crate) fn publish_command(&self) -> &'static str {
        match self {
            #[cfg(feature = "cluster")]
            NodeBackend::Cluster(_) => "SPUBLISH",
            _ => "PUBLISH",
        }
    }

    /// Runs `call` on the node that owns its first key, on `route`.
    pub(crate) async fn run<T: redis::FromRedisValue + Send>(
        &self,
        route: Route,
        call: &ScriptCall,
    ) -> Result<T, LockError> {
        dispatch!(self, memory => memory.run(call), backend => backend.run(route, call).await)
    }

    /// Runs the plain-command pipeline `pipe` on `route`; None where a
    /// topology runs scripts only (a cluster, where a slot that moves
    /// between the two commands would read the clock on another node; the
    /// in-memory store, whose twin of the script is as cheap).
    pub(crate) async fn run_plain<T: redis::FromRedisValue + Send>(
        &self,
        route: Route,
        pipe: &PlainCommands,
    ) -> Result<Option<T>, LockError> {
        match self {
            NodeBackend::Memory(_) => Ok(None),
            NodeBackend::Single(backend) => backend.run_plain(route, pipe).await.map(Some),
            #[cfg(feature = "sentinel")]
            NodeBackend::Sentinel(backend) => backend.run_plain(route, pipe).await.map(Some),
            #[cfg(feature = "cluster")]
            NodeBackend::Cluster(_) => Ok(None),
        }
    }

    /// Runs `call` on `route`'s blocking connection, then waits (`WAIT`)
    /// until `ack.replicas` replicas have its writes, for at most
    /// `ack.timeout`; answers with the call's answer and how many replicas
    /// acknowledged. Not on a cluster (rejected by the configuration).
    pub(crate) async fn run_then_wait<T: redis::FromRedisValue + Send>(
        &self,
        route: Route,
        call: &ScriptCall,
        ack: ReplicaAck,
    ) -> Result<(T, u32), LockError> {
        match self {
            NodeBackend::Memory(_) => Err(crate::config::rules::replicas_unsupported("memory")),
            NodeBackend::Single(backend) => backend.run_then_wait(route, call, ack).await,
            #[cfg(feature = "sentinel")]
            NodeBackend::Sentinel(backend) => backend.run_then_wait(route, call, ack).await,
            #[cfg(feature = "cluster")]
            NodeBackend::Cluster(_) => Err(crate::config::rules::replicas_unsupported("cluster")),
        }
    }

    /// Runs a batch script over `entries` on the watchdog's connection:
    /// one call per node-sized group, all sent together. One answer per
    /// entry, in order; `None` where that entry's group failed (the rest
    /// still answer). `Err` when the whole batch failed.
    pub(crate) async fn run_batch(
        &self,
        script: &'static LuaScript,
        entries: &[BatchEntry],
    ) -> Result<Vec<Option<redis::Value>>, LockError> {
        dispatch!(
            self,
            memory => memory.run_batch(script, entries),
            backend => backend.run_batch(script, entries).await
        )
    }
}

/// `call`'s answer, or a timeout after `bound`.
async fn bounded_answer<T>(
    bound: Duration,
    call: impl std::future::Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    tokio::time::timeout(bound, call)
        .await
        .unwrap_or_else(|_| Err(LockError::redis_timeout("an ACL check", bound)))
}

/// Whether a cluster answered that `err`'s call did not run because its
/// slot is moving (`TRYAGAIN`, or a redirect with no retry left to follow).
/// The call may still have run on an earlier try, so nothing is known.
pub(crate) fn slot_in_flux(err: &LockError) -> bool {
    matches!(err, LockError::Redis(err) if matches!(err.code(), Some("TRYAGAIN" | "ASK" | "MOVED")))
}

/// Runs `call` within `limit`, so that no caller waits on a stalled server
/// or a reconnect loop longer than it was promised.
///
/// A plain function, not an `async fn`: an `async fn` would keep `call`
/// twice in its state (as an argument and inside the timeout it awaits),
/// and every lock call's future would carry the copy.
pub(crate) fn bounded<'a, T>(
    limit: Duration,
    what: &'a str,
    call: impl std::future::Future<Output = redis::RedisResult<T>> + 'a,
) -> impl std::future::Future<Output = Result<T, LockError>> + 'a {
    tokio::time::timeout(limit, call).map(move |outcome| match outcome {
        Ok(result) => Ok(result?),
        Err(_) => Err(LockError::redis_timeout(what, limit)),
    })
}

/// One call of the batch script `script` over `entries`: each entry's key,
/// and its arguments in the same order.
pub(crate) fn batch_call<'a>(
    script: &'static LuaScript,
    entries: impl IntoIterator<Item = &'a BatchEntry>,
) -> ScriptCall {
    let mut call = script.call();
    for entry in entries {
        call.key(entry.key.as_str());
        for arg in &entry.args {
            call.arg(arg);
        }
    }
    call
}

/// A batch call's answer, one value per entry of `entries` entries.
pub(crate) fn batch_answers(
    answer: redis::Value,
    entries: usize,
) -> Result<Vec<redis::Value>, LockError> {
    match answer {
        redis::Value::Array(values) if values.len() == entries => Ok(values),
        _ => Err(LockError::Redis(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "a batch script answered for a different number of entries",
        )))),
    }
}
