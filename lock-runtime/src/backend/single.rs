//! A single Redis server (or a proxy that looks like one).
//!
//! Lock traffic is spread round-robin over a small fixed set of multiplexed,
//! self-reconnecting connections: no checkout and no per-use round trip,
//! so one lock costs exactly the round trips of its scripts. Each is a
//! [`DirectConnection`], whose callers write their own requests, where
//! the URL allows (plain TCP, RESP2), and a redis-rs [`ConnectionManager`]
//! otherwise (see [`NodeConnection`]).
//! Acquisitions that wait for replicas (`WAIT`) run on connections of their
//! own, one per pool slot, opened at first use: `WAIT` blocks its
//! connection, and lock traffic must never queue behind it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::Either;
use redis::FromRedisValue;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use super::direct::{self, DirectConnection};
use super::lock_connection::LockConnection;
use super::node_connection::NodeConnection;
use super::plain::PlainCommands;
use super::script::{LuaScript, ScriptCall};
use super::{BatchEntry, ClientSource, ReleaseFeed, Route, batch_answers, batch_call, bounded};
use crate::config::LockConfig;
use crate::config::ReplicaAck;
use crate::error::LockError;

/// The pooled connections to one Redis server.
pub(crate) struct SingleBackend {
    pool: Box<[NodeConnection]>,
    /// The watchdog's connection: a round of large renewal batches never
    /// queues in front of anyone's acquire or release.
    renewals: NodeConnection,
    next: AtomicUsize,
    client: redis::Client,
    /// Connections for acquisitions followed by `WAIT`, one per pool slot.
    blocking: Box<[OnceCell<NodeConnection>]>,
    /// Per blocking connection, the replica timeouts (ms) of the `WAIT`s
    /// sent on it and not answered yet: a `WAIT` queues behind them.
    waiting_ms: Box<[AtomicU64]>,
    manager_config: ConnectionManagerConfig,
    /// Upper bound of one call: reconnecting plus waiting for the answer.
    call_bound: Duration,
    /// Which calls [`Self::call_bound`] is enforced on here; the others'
    /// callers bound them.
    own_bounds: OwnBounds,
}

/// Which calls a [`SingleBackend`] bounds itself with its call bound
/// (reconnecting plus waiting for the answer). A timer costs about a
/// thousand instructions to arm and disarm, so a call under several that
/// end it for the same reason keeps only the one its caller needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OwnBounds {
    /// Every call: a Sentinel's master, where a call must fail on its own
    /// for the next one to go to a new master.
    Every,
    /// Renewals only (the watchdog's batch has no bound around it): the
    /// locker's one server. A lock call runs inside an operation's bound
    /// (an acquisition's, a release's, a clean-up's); on a pooled
    /// connection its response timeout ends a wait for a frozen server's
    /// answer sooner. On a blocking connection (no response timeout) a
    /// script may queue behind another acquisition's `WAIT` on it, so only
    /// the acquisition's bound, which counts the replica timeout, stops it:
    /// a bound of its own would report a server that answers as silent.
    /// (The `WAIT` itself keeps one.)
    Renewals,
    /// None: a Redlock master, whose rounds bound every call.
    None,
}

impl SingleBackend {
    /// Opens every pooled connection, failing fast when the server is
    /// unreachable: a service learns at start-up, not at its first lock.
    pub(crate) async fn connect(
        server: redis::ConnectionInfo,
        config: &LockConfig,
    ) -> Result<Self, LockError> {
        let what = format!("connecting to Redis at {}", server.addr());
        let client = super::tls::client(server, &config.tls)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.response_timeout))
            // Few, quick reconnect attempts: a call during an outage should
            // fail within its bound, and the next call starts a fresh attempt.
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let info = client.get_connection_info().clone();
        let direct = direct::supports(&info);
        let (pool, renewals) = super::pool::open_pool(config, &what, || {
            let info = info.clone();
            let manager =
                ConnectionManager::new_with_config(client.clone(), manager_config.clone());
            async move {
                if direct {
                    let response = Some(config.response_timeout);
                    let connection =
                        DirectConnection::connect(info, config.connect_timeout, response).await?;
                    Ok(NodeConnection::Direct(connection))
                } else {
                    Ok(NodeConnection::Managed(manager.await?))
                }
            }
        })
        .await?;
        Ok(Self {
            pool: pool.into(),
            renewals,
            next: AtomicUsize::new(0),
            client,
            blocking: (0..config.pool_size).map(|_| OnceCell::new()).collect(),
            waiting_ms: (0..config.pool_size).map(|_| AtomicU64::new(0)).collect(),
            manager_config,
            call_bound: config.call_bound(),
            own_bounds: OwnBounds::Every,
        })
    }

    /// This server as a locker's one server: each lock call on a pooled
    /// connection runs inside an operation's own bound (see
    /// [`OwnBounds::Renewals`]).
    pub(crate) fn bounded_by_operations(self) -> Self {
        Self {
            own_bounds: OwnBounds::Renewals,
            ..self
        }
    }

    /// This server as a Redlock master: each round bounds every call on
    /// it, renewals included.
    pub(crate) fn bounded_by_rounds(self) -> Self {
        Self {
            own_bounds: OwnBounds::None,
            ..self
        }
    }

    /// `call` within the call bound, unless its caller bounds it. A plain
    /// function for the reason [`bounded`] is one.
    fn within<'a, T: 'a>(
        &self,
        what: &'a str,
        call: impl std::future::Future<Output = redis::RedisResult<T>> + 'a,
    ) -> impl std::future::Future<Output = Result<T, LockError>> + 'a {
        let own = match self.own_bounds {
            OwnBounds::Every => true,
            OwnBounds::Renewals | OwnBounds::None => false,
        };
        if own {
            Either::Left(bounded(self.call_bound, what, call))
        } else {
            Either::Right(call.map(|answer| Ok(answer?)))
        }
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

    /// Runs `call` on `route`'s connection, within the call bound where
    /// this server enforces it (see [`OwnBounds`]).
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        route: Route,
        call: &ScriptCall,
    ) -> Result<T, LockError> {
        let mut connection = self.connection(route).await?;
        self.within("a lock script", connection.run_script(call))
            .await
    }

    /// Runs the plain commands `pipe` on `route`'s connection, within the
    /// call bound where this server enforces it (see [`OwnBounds`]).
    pub(crate) async fn run_plain<T: FromRedisValue>(
        &self,
        route: Route,
        pipe: &PlainCommands,
    ) -> Result<T, LockError> {
        let mut connection = self.connection(route).await?;
        self.within("a lock pipeline", connection.run_plain(pipe))
            .await
    }

    /// Runs `call`, then `WAIT`s for `ack` on the same blocking connection
    /// (`WAIT` counts the writes of its own connection).
    pub(crate) async fn run_then_wait<T: FromRedisValue>(
        &self,
        route: Route,
        call: &ScriptCall,
        ack: ReplicaAck,
    ) -> Result<(T, u32), LockError> {
        let route = Route {
            blocking: true,
            ..route
        };
        let answer = self.run(route, call).await?;
        let mut connection = self.connection(route).await?;
        let mut wait = redis::cmd("WAIT");
        wait.arg(ack.replicas).arg(ack.timeout_ms());
        // Another acquisition's `WAIT` sent before this one on the slot's
        // connection is answered first: this one's bound counts it too.
        let queued = QueuedWait::join(&self.waiting_ms[route.conn], ack.timeout_ms());
        let limit = self.call_bound + ack.timeout + Duration::from_millis(queued.ahead_ms);
        let acked: i64 = bounded(limit, "WAIT", wait.query_async(&mut connection)).await?;
        drop(queued);
        Ok((answer, u32::try_from(acked).unwrap_or(0)))
    }

    /// Runs `call` on the watchdog's connection, within the call bound
    /// unless a Redlock round bounds it.
    pub(crate) async fn run_renewal<T: FromRedisValue>(
        &self,
        call: &ScriptCall,
    ) -> Result<T, LockError> {
        let mut connection = self.renewals.clone();
        let renewal = connection.run_script(call);
        match self.own_bounds {
            OwnBounds::None => Ok(renewal.await?),
            OwnBounds::Every | OwnBounds::Renewals => {
                bounded(self.call_bound, "a renewal script", renewal).await
            }
        }
    }

    /// Runs a batch script over all of `entries` in one call, on the
    /// watchdog's connection.
    pub(crate) async fn run_batch(
        &self,
        script: &'static LuaScript,
        entries: &[BatchEntry],
    ) -> Result<Vec<Option<redis::Value>>, LockError> {
        let answer = self.run_renewal(&batch_call(script, entries)).await?;
        Ok(batch_answers(answer, entries.len())?
            .into_iter()
            .map(Some)
            .collect())
    }

    /// Fails when the server refuses commands for want of a login
    /// (`NOAUTH`): a connection to a server that requires a password
    /// opens without one, and only its first command says so. One `PING`
    /// at start-up, so that a service learns it then, with what to change,
    /// and not at its first lock (on Redlock, after a whole wait, as a
    /// quorum not reached). Any other answer, or none within `bound`, is
    /// left to the lock calls to report. (Sentinel's lookup checks its
    /// master with `ROLE`, which says the same.)
    pub(crate) async fn check_login(&self, bound: Duration) -> Result<(), LockError> {
        let mut connection = self.pool[0].clone();
        let command = redis::cmd("PING");
        let ping = command.query_async::<redis::Value>(&mut connection);
        match tokio::time::timeout(bound, ping).await {
            Ok(Err(err)) if err.code() == Some("NOAUTH") => {
                Err(LockError::Redis(redis::RedisError::from((
                    redis::ErrorKind::AuthenticationFailed,
                    "cannot connect",
                    format!(
                        "connecting to Redis at {}: the server requires a password and the URL gives none; put it in the URL: `redis://:password@host:port/`, or `redis://user:password@host:port/` for an ACL user",
                        self.client.get_connection_info().addr()
                    ),
                ))))
            }
            _ => Ok(()),
        }
    }

    /// Loads `scripts` (best effort, each within the response bound), so
    /// that the first calls on a fresh server take one round trip.
    pub(crate) async fn preload(&self, scripts: &[&LuaScript], bound: Duration) {
        let mut connection = self.pool[0].clone();
        for script in scripts {
            let load = script.load_command();
            let loaded = tokio::time::timeout(bound, load.query_async::<String>(&mut connection));
            if !matches!(loaded.await, Ok(Ok(_))) {
                return;
            }
        }
    }

    /// The connection of `route`: the pooled one, or the slot's blocking
    /// one, opened at first use. That one has no response timeout of its
    /// own: `WAIT` may rightly take as long as asked, and every call on it
    /// is bounded by its caller.
    async fn connection(&self, route: Route) -> Result<NodeConnection, LockError> {
        let pooled = &self.pool[route.conn];
        if !route.blocking {
            return Ok(pooled.clone());
        }
        let open = || async {
            if let NodeConnection::Direct(pooled) = pooled {
                // Opened at its first call, within that call's bound.
                return Ok(NodeConnection::Direct(pooled.unbounded_sibling()));
            }
            let config = self.manager_config.clone().set_response_timeout(None);
            let manager = ConnectionManager::new_with_config(self.client.clone(), config).await?;
            Ok::<_, redis::RedisError>(NodeConnection::Managed(manager))
        };
        let opening = self.blocking[route.conn].get_or_try_init(open);
        match tokio::time::timeout(self.call_bound, opening).await {
            Ok(connection) => Ok(connection?.clone()),
            Err(_) => Err(LockError::redis_timeout(
                "connecting for WAIT",
                self.call_bound,
            )),
        }
    }
}

/// A `WAIT` in flight on a blocking connection, counted there until it is
/// answered or given up (dropped).
struct QueuedWait<'a> {
    waiting_ms: &'a AtomicU64,
    own_ms: u64,
    /// The replica timeouts of the `WAIT`s sent before it, still waiting.
    ahead_ms: u64,
}

impl<'a> QueuedWait<'a> {
    fn join(waiting_ms: &'a AtomicU64, own_ms: u64) -> Self {
        // Each counted as at most 49 days: the sum of fewer than 2^32
        // waits never wraps.
        let own_ms = own_ms.min(u64::from(u32::MAX));
        let ahead_ms = waiting_ms.fetch_add(own_ms, Ordering::Relaxed);
        Self {
            waiting_ms,
            own_ms,
            ahead_ms,
        }
    }
}

impl Drop for QueuedWait<'_> {
    fn drop(&mut self) {
        self.waiting_ms.fetch_sub(self.own_ms, Ordering::Relaxed);
    }
}
