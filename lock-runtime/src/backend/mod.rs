//! Where locks are stored. Every topology offers the same three atomic
//! steps (acquire, release, renew a batch) and a feed of release messages;
//! [`Backend`] picks the topology the configuration names.
//!
//! - [`redis`]: one server, a pool of multiplexed connections.
//! - [`sentinel`]: one server found through Sentinel, followed across failovers.
//! - [`cluster`]: Redis Cluster; each lock lives in one hash slot.
//! - [`redlock`]: a majority of independent masters.

pub(crate) mod redis;
pub(crate) mod redlock;

#[cfg(feature = "cluster")]
pub(crate) mod cluster;
#[cfg(feature = "sentinel")]
pub(crate) mod sentinel;

mod feed;

use std::time::Duration;

pub(crate) use feed::{ClientSource, ReleaseFeed};

use crate::config::{ReplicaAck, Topology};
use crate::keys::LockKeys;
use crate::token::OwnerToken;
use crate::{LockConfig, LockError};

/// What one acquire step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The caller owns the lock now; `fence` is its fencing token.
    Acquired {
        /// Strictly increasing per key across all owners.
        fence: u64,
    },
    /// Someone else owns it, for `pttl` more (None when the server did not
    /// say, e.g. a key written without expiry by something other than us).
    Busy {
        /// Remaining lease of the current owner.
        pttl: Option<Duration>,
    },
}

impl AcquireReply {
    /// Reads the acquire script's `{granted, fence or pttl}` answer.
    pub(crate) fn from_script(granted: i64, value: i64) -> Self {
        if granted == 1 {
            AcquireReply::Acquired {
                fence: u64::try_from(value).unwrap_or(0),
            }
        } else {
            // A negative PTTL: no expiry (-1) or gone meanwhile (-2).
            AcquireReply::Busy {
                pttl: u64::try_from(value).ok().map(Duration::from_millis),
            }
        }
    }
}

/// One entry of a renewal batch.
pub(crate) struct Renewal<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) token: &'a OwnerToken,
    pub(crate) ttl_ms: u64,
    /// The fence the holder was given (Redlock raises counters to it).
    pub(crate) fence: u64,
}

/// What a renewal found for one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Still ours, with a fresh lease from the moment the batch was sent.
    Yes,
    /// Definitely not ours any more: the holder must be told at once.
    Gone,
    /// Could not be confirmed either way (a node failed); retried while the
    /// lease is still valid.
    Unknown,
}

/// Opens the `pool_size` connections for lock traffic and one more for the
/// watchdog's renewals (returned apart), all within the connect timeout, so
/// a service learns at start-up, not at its first lock, that the server
/// cannot be reached.
async fn open_pool<C, Open, Opening>(
    config: &LockConfig,
    what: &str,
    mut open: Open,
) -> Result<(Vec<C>, C), LockError>
where
    Open: FnMut() -> Opening,
    Opening: std::future::Future<Output = ::redis::RedisResult<C>>,
{
    let connect_all = async {
        let mut pool = Vec::with_capacity(config.pool_size + 1);
        for _ in 0..=config.pool_size {
            pool.push(open().await?);
        }
        Ok::<_, ::redis::RedisError>(pool)
    };
    let mut pool = match tokio::time::timeout(config.connect_timeout, connect_all).await {
        Ok(pool) => pool?,
        Err(_) => return Err(LockError::redis_timeout(what, config.connect_timeout)),
    };
    let renewals = pool
        .pop()
        .ok_or_else(|| LockError::config("pool_size must be at least 1"))?;
    Ok((pool, renewals))
}

impl Renewed {
    /// Reads an extend script's answer: one 1 (renewed) or 0 (not ours)
    /// per lease of a batch of `leases`.
    pub(crate) fn from_script(answers: Vec<i64>, leases: usize) -> Result<Vec<Self>, LockError> {
        if answers.len() != leases {
            return Err(LockError::Redis(::redis::RedisError::from((
                ::redis::ErrorKind::UnexpectedReturnType,
                "the extend script answered for a different number of locks",
            ))));
        }
        Ok(answers
            .into_iter()
            .map(|answer| if answer == 1 { Self::Yes } else { Self::Gone })
            .collect())
    }
}

/// The lock store of one [`Locker`](crate::Locker), as configured.
#[derive(Clone)]
pub(crate) enum Backend {
    Single(std::sync::Arc<redis::RedisBackend>),
    #[cfg(feature = "sentinel")]
    Sentinel(sentinel::SentinelBackend),
    #[cfg(feature = "cluster")]
    Cluster(cluster::ClusterBackend),
    Redlock(redlock::RedlockBackend),
}

/// Calls the same method on whichever topology is in use.
macro_rules! dispatch {
    ($self:ident, $backend:ident => $call:expr) => {
        match $self {
            Backend::Single($backend) => $call,
            #[cfg(feature = "sentinel")]
            Backend::Sentinel($backend) => $call,
            #[cfg(feature = "cluster")]
            Backend::Cluster($backend) => $call,
            Backend::Redlock($backend) => $call,
        }
    };
}

impl Backend {
    /// Opens the connections the configuration names, failing fast when the
    /// deployment cannot be reached.
    pub(crate) async fn connect(config: &LockConfig) -> Result<Self, LockError> {
        match &config.topology {
            Topology::Single(server) => Ok(Backend::Single(std::sync::Arc::new(
                redis::RedisBackend::connect(server.clone(), config).await?,
            ))),
            Topology::Redlock { masters } => Ok(Backend::Redlock(
                redlock::RedlockBackend::connect(masters, config).await?,
            )),
            #[cfg(feature = "cluster")]
            Topology::Cluster { nodes } => Ok(Backend::Cluster(
                cluster::ClusterBackend::connect(nodes, config).await?,
            )),
            #[cfg(feature = "sentinel")]
            Topology::Sentinel {
                sentinels,
                master,
                node,
            } => Ok(Backend::Sentinel(
                sentinel::SentinelBackend::connect(sentinels, master, node, config).await?,
            )),
            #[allow(unreachable_patterns)]
            other => Err(LockError::config(format!(
                "this build of lock-runtime has no {0} support: enable its `{0}` feature",
                other.kind()
            ))),
        }
    }

    /// A connection index for one acquisition; its release and cleanup use
    /// the same one, so they queue behind the acquire.
    pub(crate) fn pick(&self) -> usize {
        dispatch!(self, backend => backend.pick())
    }

    /// One run of the acquire step; with `replicas`, also waits for that
    /// many replicas to confirm it (and releases it if they do not).
    pub(crate) async fn acquire(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        ttl_ms: u64,
        replicas: Option<ReplicaAck>,
    ) -> Result<AcquireReply, LockError> {
        dispatch!(self, backend => backend.acquire(conn, keys, token, ttl_ms, replicas).await)
    }

    /// Deletes the lock if it is still ours; true when something was deleted.
    pub(crate) async fn release(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        dispatch!(self, backend => backend.release(conn, keys, token).await)
    }

    /// Renews a batch of leases; one answer per entry, in order.
    pub(crate) async fn extend(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        dispatch!(self, backend => backend.extend(batch).await)
    }

    /// Where waiters hear about releases.
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        dispatch!(self, backend => backend.release_feed())
    }

    /// Tells when the locks moved to another server (a Sentinel failover),
    /// so that the watchdog renews every lease on it at once; None for
    /// topologies whose locks never move as a whole.
    pub(crate) fn moves(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            #[cfg(feature = "sentinel")]
            Backend::Sentinel(backend) => Some(backend.moves()),
            _ => None,
        }
    }
}
