//! [`Resolver`]: asks the sentinels which server is the master right now.
//!
//! The lookup is done here rather than by the `redis` crate's `Sentinel`,
//! so that the master's `ROLE` check goes through the locker's own TLS
//! settings (a private CA, a client certificate), as every other
//! connection of the locker does.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::backend::pool::cannot_connect;
use crate::config::tls::TlsSettings;
use crate::error::LockError;

/// The sentinels of one master name, and when they were last asked.
pub(super) struct Resolver {
    sentinels: Vec<ConnectionInfo>,
    master: String,
    /// Credentials and database of the master (never of the sentinels).
    node: RedisConnectionInfo,
    tls: TlsSettings,
    /// One connection per sentinel, kept between lookups; dropped after a
    /// lookup that failed or ran out of time, so that the next one
    /// connects afresh.
    connections: Vec<Option<MultiplexedConnection>>,
    /// Longest one lookup may take.
    bound: Duration,
    last_asked: Option<Instant>,
}

impl Resolver {
    /// A resolver for the master monitored as `master`; `node` carries the
    /// credentials and database of the master (never of the sentinels).
    pub(super) fn new(
        sentinels: &[ConnectionInfo],
        master: &str,
        node: &RedisConnectionInfo,
        tls: &TlsSettings,
        bound: Duration,
    ) -> Self {
        Self {
            sentinels: sentinels.to_vec(),
            master: master.to_owned(),
            node: node.clone(),
            tls: tls.clone(),
            connections: sentinels.iter().map(|_| None).collect(),
            bound,
            last_asked: None,
        }
    }
    /// Whether a lookup started at or after `moment`: its answer already
    /// reflects whatever happened before then.
    pub(super) fn asked_since(&self, moment: Instant) -> bool {
        self.last_asked.is_some_and(|asked| asked >= moment)
    }

    /// How long to wait before the next lookup so that lookups start at
    /// least `gap` apart.
    pub(super) fn pause_before_next(&self, gap: Duration) -> Duration {
        self.last_asked
            .map_or(Duration::ZERO, |asked| gap.saturating_sub(asked.elapsed()))
    }

    /// The master's address, as the first sentinel (in the order
    /// configured) that knows a healthy master names it, after that server
    /// confirmed with `ROLE` that it is a master. The sentinels are asked
    /// together, each for at most the resolver's bound: a frozen sentinel
    /// delays a lookup by that bound, but cannot stall it.
    pub(super) async fn master(&mut self) -> Result<ConnectionInfo, LockError> {
        self.last_asked = Some(Instant::now());
        let lookup = Lookup {
            master: &self.master,
            node: &self.node,
            tls: &self.tls,
        };
        let bound = self.bound;
        // Built in a plain loop: with a closure here, rustc cannot prove the
        // caller's future `Send`.
        let mut lookups = Vec::with_capacity(self.sentinels.len());
        for (slot, sentinel) in self.connections.iter_mut().zip(&self.sentinels) {
            lookups.push(lookup.ask(slot, sentinel, bound));
        }
        // In order, all at once: the first answer wins once every sentinel
        // before it has failed.
        let mut answers = futures_util::stream::iter(lookups).buffered(self.sentinels.len());
        let mut last_error = None;
        while let Some(answer) = answers.next().await {
            match answer {
                Ok(address) => return Ok(address),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| LockError::config("the list of sentinels is empty")))
    }
}

/// What one sentinel is asked, and how its answer is checked.
struct Lookup<'a> {
    master: &'a str,
    node: &'a RedisConnectionInfo,
    tls: &'a TlsSettings,
}

impl Lookup<'_> {
    /// One sentinel's answer, within `bound`, through the connection in
    /// `slot` (opened if empty, emptied when the sentinel failed).
    async fn ask(
        &self,
        slot: &mut Option<MultiplexedConnection>,
        sentinel: &ConnectionInfo,
        bound: Duration,
    ) -> Result<ConnectionInfo, LockError> {
        match tokio::time::timeout(bound, self.ask_unbounded(slot, sentinel)).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(err)) => {
                *slot = None;
                Err(err)
            }
            Err(_) => {
                *slot = None;
                let what = format!("asking the sentinel at {} for the master", sentinel.addr());
                Err(LockError::redis_timeout(&what, bound))
            }
        }
    }

    /// The master's address as `sentinel` names it, once that server
    /// confirmed with `ROLE` that it is a master. Every error names the
    /// server it came from, the sentinel or the master (addresses only):
    /// a wrong CA or a refused password must say where it was met.
    async fn ask_unbounded(
        &self,
        slot: &mut Option<MultiplexedConnection>,
        sentinel: &ConnectionInfo,
    ) -> Result<ConnectionInfo, LockError> {
        let named = self.named_by(slot, sentinel).await.map_err(|err| {
            let what = format!(
                "asking the sentinel at {} for master `{}`",
                sentinel.addr(),
                self.master
            );
            cannot_connect(&what, err)
        })?;
        let Some((host, port)) = named else {
            return Err(no_master(format!(
                "the sentinel at {} knows no master named `{}`",
                sentinel.addr(),
                self.master
            )));
        };
        // Sentinels reached over TLS name masters reached over TLS.
        let addr = match sentinel.addr() {
            ConnectionAddr::TcpTls { insecure, .. } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        let what = format!(
            "connecting to the master at {addr} that the sentinel at {} names",
            sentinel.addr()
        );
        let (info, role) = self
            .reach(addr)
            .await
            .map_err(|err| cannot_connect(&what, err))?;
        match role.first() {
            Some(redis::Value::BulkString(role)) if role == b"master" => Ok(info),
            _ => Err(no_master(format!(
                "the server at {} that the sentinels name is not a master (yet)",
                info.addr()
            ))),
        }
    }

    /// The master's address as `sentinel` names it (`None`: it knows no
    /// master by that name), through the connection in `slot`.
    async fn named_by(
        &self,
        slot: &mut Option<MultiplexedConnection>,
        sentinel: &ConnectionInfo,
    ) -> redis::RedisResult<Option<(String, u16)>> {
        let connection = match slot {
            Some(connection) => connection,
            None => {
                let client = redis::Client::open(sentinel.clone())?;
                slot.insert(client.get_multiplexed_async_connection().await?)
            }
        };
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(self.master)
            .query_async(connection)
            .await
    }

    /// The server at `addr` as the master is reached (its credentials and
    /// database, the locker's TLS settings), and its answer to `ROLE`.
    async fn reach(
        &self,
        addr: ConnectionAddr,
    ) -> redis::RedisResult<(ConnectionInfo, Vec<redis::Value>)> {
        let info = addr
            .into_connection_info()?
            .set_redis_settings(self.node.clone());
        let info = crate::backend::tls::with_tls(info, self.tls)?;
        let mut master = redis::Client::open(info.clone())?
            .get_multiplexed_async_connection()
            .await?;
        let role = redis::cmd("ROLE").query_async(&mut master).await?;
        Ok((info, role))
    }
}

/// A lookup that found no usable master: like a refused connection, the
/// caller tries again.
fn no_master(why: String) -> LockError {
    LockError::Redis(redis::RedisError::from((
        redis::ErrorKind::Io,
        "no master from the sentinels",
        why,
    )))
}
