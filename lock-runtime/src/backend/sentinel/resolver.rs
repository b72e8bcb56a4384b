//! [`Resolver`]: asks the sentinels which server is the master right now.

use std::time::{Duration, Instant};

use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{ConnectionAddr, ConnectionInfo, RedisConnectionInfo, TlsMode};

use crate::LockError;

/// The sentinels of one master name, and when they were last asked.
pub(super) struct Resolver {
    sentinels: Vec<ConnectionInfo>,
    master: String,
    node: SentinelNodeConnectionInfo,
    /// Keeps its connections to the sentinels between lookups; rebuilt
    /// after a lookup that ran out of time, so one frozen sentinel cannot
    /// keep stalling every later lookup on a cached connection.
    client: Option<Sentinel>,
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
        bound: Duration,
    ) -> Self {
        let mut node_info =
            SentinelNodeConnectionInfo::default().set_redis_connection_info(node.clone());
        // Sentinels reached over TLS name masters reached over TLS.
        if let Some(ConnectionAddr::TcpTls { insecure, .. }) = sentinels.first().map(|s| s.addr()) {
            node_info = node_info.set_tls_mode(if *insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            });
        }
        Self {
            sentinels: sentinels.to_vec(),
            master: master.to_owned(),
            node: node_info,
            client: None,
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

    /// The master's address, as the first sentinel that knows a healthy
    /// master names it, after that server confirmed with `ROLE` that it is
    /// a master. Bounded by the resolver's bound.
    pub(super) async fn master(&mut self) -> Result<ConnectionInfo, LockError> {
        self.last_asked = Some(Instant::now());
        let sentinel = match &mut self.client {
            Some(sentinel) => sentinel,
            None => self.client.insert(Sentinel::build(self.sentinels.clone())?),
        };
        let lookup = sentinel.async_master_for(&self.master, Some(&self.node));
        match tokio::time::timeout(self.bound, lookup).await {
            Ok(Ok(client)) => Ok(client.get_connection_info().clone()),
            Ok(Err(err)) => Err(LockError::Redis(err)),
            Err(_) => {
                self.client = None;
                Err(LockError::redis_timeout(
                    "asking the sentinels for the master",
                    self.bound,
                ))
            }
        }
    }
}
