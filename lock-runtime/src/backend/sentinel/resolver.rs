//! [`Resolver`]: asks the sentinels which server is the master right now.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{ConnectionAddr, ConnectionInfo, RedisConnectionInfo, TlsMode};

use crate::error::LockError;

/// The sentinels of one master name, and when they were last asked.
pub(super) struct Resolver {
    sentinels: Vec<ConnectionInfo>,
    master: String,
    node: SentinelNodeConnectionInfo,
    /// One client per sentinel, each keeping its connection between
    /// lookups; dropped after a lookup that ran out of time, so that the
    /// next one connects afresh.
    clients: Vec<Option<Sentinel>>,
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
            clients: sentinels.iter().map(|_| None).collect(),
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
        let (master, node, bound) = (self.master.as_str(), &self.node, self.bound);
        // Built in a plain loop: with a closure here, rustc cannot prove the
        // caller's future `Send`.
        let mut lookups = Vec::with_capacity(self.sentinels.len());
        for (slot, sentinel) in self.clients.iter_mut().zip(&self.sentinels) {
            lookups.push(ask(slot, sentinel, master, node, bound));
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

/// One sentinel's answer, within `bound`, through the client in `slot`
/// (opened if empty, emptied when the sentinel did not answer in time).
async fn ask(
    slot: &mut Option<Sentinel>,
    sentinel: &ConnectionInfo,
    master: &str,
    node: &SentinelNodeConnectionInfo,
    bound: Duration,
) -> Result<ConnectionInfo, LockError> {
    let client = match slot {
        Some(client) => client,
        None => slot.insert(Sentinel::build(vec![sentinel.clone()])?),
    };
    match tokio::time::timeout(bound, client.async_master_for(master, Some(node))).await {
        Ok(found) => Ok(found?.get_connection_info().clone()),
        Err(_) => {
            *slot = None;
            Err(LockError::redis_timeout(
                "asking a sentinel for the master",
                bound,
            ))
        }
    }
}
