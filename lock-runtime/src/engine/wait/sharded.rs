//! The release listener on a Redis Cluster: sharded pub/sub.
//!
//! A release `SPUBLISH`es on the node that serves the lock's slot, so the
//! listener `SSUBSCRIBE`s each channel on that node, through a cluster
//! connection (RESP3, messages arrive as pushes). The redis crate routes
//! each subscription by its channel's slot, follows `MOVED`, and after a
//! node's connection drops it reconnects and subscribes again to what it
//! tracks. What it does not cover is handled here:
//!
//! - When a slot moves to another node, the old node drops the shard
//!   subscriptions of that slot with a `sunsubscribe` of its own, and the
//!   redis crate forgets them. A channel dropped that way that someone still
//!   waits on is subscribed again (now on the new owner), and then its
//!   waiters are woken, since a release may have been missed meanwhile.
//! - After a dropped node connection, releases may have gone unheard,
//!   and the node may be gone for good (its replica promoted in its
//!   place): the session ends, every waiter is woken, and the next session
//!   subscribes on whichever node serves each channel's slot then.
//!
//! A server without sharded pub/sub (before Redis 7) answers `SSUBSCRIBE`
//! with an unknown-command error; the listener then uses plain `SUBSCRIBE`,
//! which matches the release script's fallback to `PUBLISH`.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc;

use super::inbox::{Batch, Inbox, Timeouts};
use super::sessions::{Opening, Session, SessionEnd};
use super::sightings::Release;
use super::waiters::Waiters;

/// Sharded pub/sub sessions on one cluster.
pub(super) struct ShardedSessions {
    client: ClusterClient,
    timeouts: Timeouts,
}

impl ShardedSessions {
    pub(super) fn new(client: ClusterClient, timeouts: Timeouts) -> Self {
        Self { client, timeouts }
    }
}

impl Session for ShardedSessions {
    const COMMAND: &'static str = "SSUBSCRIBE";

    async fn run(
        &mut self,
        waiters: &Waiters,
        inbox: &mut Inbox,
        opening: Opening<'_>,
    ) -> SessionEnd {
        session(&self.client, self.timeouts, waiters, inbox, opening).await
    }
}

/// One cluster connection's life: subscribe to every wanted channel, then
/// serve subscription requests and turn pushes into wake-ups until it fails.
async fn session(
    client: &ClusterClient,
    timeouts: Timeouts,
    waiters: &Waiters,
    inbox: &mut Inbox,
    opening: Opening<'_>,
) -> SessionEnd {
    let (push_sender, mut pushes) = mpsc::unbounded_channel::<PushInfo>();
    let config = ClusterConfig::new()
        .set_connection_timeout(timeouts.connect)
        .set_response_timeout(timeouts.response)
        .set_push_sender(push_sender);
    // Dropping `opening` on failure unblocks its waiters, unconfirmed.
    let Ok(Ok(connection)) = tokio::time::timeout(
        timeouts.connect,
        client.get_async_connection_with_config(config),
    )
    .await
    else {
        return SessionEnd::Failed;
    };
    let mut channels = Channels {
        connection,
        // A subscription may follow a redirect to another node.
        limit: timeouts.connect + timeouts.response,
        sharded: true,
        subscribed: HashSet::new(),
    };
    if let Err(end) = channels.subscribe_all(waiters.channels()).await {
        return end;
    }
    opening.subscribed(waiters);
    loop {
        tokio::select! {
            command = inbox.recv() => match command {
                Some(first) => {
                    let batch = Batch::take(first, inbox);
                    if let Err(end) = channels.subscribe_all(batch.new_channels(&channels.subscribed)).await {
                        return end;
                    }
                    for channel in batch.confirm() {
                        // A new waiter may have come for it meanwhile.
                        if !waiters.is_wanted(&channel)
                            && let Err(end) = channels.unsubscribe(&channel).await
                        {
                            return end;
                        }
                    }
                }
                None => return SessionEnd::Shutdown,
            },
            push = pushes.recv() => match push {
                Some(push) => {
                    if let Err(end) = on_push(push, &mut channels, waiters).await {
                        return end;
                    }
                }
                // The connection's task ended, and its sender with it.
                None => return SessionEnd::Failed,
            },
        }
    }
}

/// Acts on one push from any node.
async fn on_push(
    push: PushInfo,
    channels: &mut Channels,
    waiters: &Waiters,
) -> Result<(), SessionEnd> {
    match push.kind {
        PushKind::SMessage | PushKind::Message => {
            if let Some(message) = redis::Msg::from_push_info(push) {
                // One source: every message is news (no sightings).
                let release = Release::from_payload(0, message.get_payload_bytes());
                waiters.wake(message.get_channel_name(), release);
            }
        }
        // What that node published meanwhile is lost, and the node may be
        // gone for good: the crate would reconnect to it and subscribe it
        // again, but learns the slot map again only when a command meets a
        // redirect, which a connection with nothing to send never does, so
        // a subscription of a primary that died stayed with it, deaf to the
        // replica promoted in its place. A new session learns the slot map
        // afresh (retried until a node serves the slot) and subscribes
        // every wanted channel where it is served now; the end of this one
        // wakes every waiter.
        PushKind::Disconnection => return Err(SessionEnd::Failed),
        PushKind::SUnsubscribe | PushKind::Unsubscribe => {
            let Some(channel) = channel_of(&push) else {
                return Ok(());
            };
            // Our own unsubscriptions leave `subscribed` before they are
            // sent: a channel still in it was dropped by the server, which
            // happens to shard channels whose slot moved away.
            if channels.subscribed.remove(&channel) && waiters.is_wanted(&channel) {
                // Subscribed again first, then woken: a release in between
                // is heard, and one before is found by the waiters' tries.
                channels.subscribe(channel).await?;
                waiters.wake_all();
            }
        }
        _ => {}
    }
    Ok(())
}

/// The channel named in a subscription push (`[channel, count]`).
fn channel_of(push: &PushInfo) -> Option<String> {
    match push.data.first()? {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        _ => None,
    }
}

/// The session's subscriptions, as far as this listener asked for them.
struct Channels {
    connection: ClusterConnection,
    /// Bound of one subscription command.
    limit: Duration,
    /// False once a server did not know `SSUBSCRIBE`.
    sharded: bool,
    subscribed: HashSet<String>,
}

impl Channels {
    /// Subscribes to `channel` unless already subscribed.
    async fn subscribe(&mut self, channel: String) -> Result<(), SessionEnd> {
        if self.subscribed.contains(&channel) {
            return Ok(());
        }
        if self.sharded {
            match self
                .bounded(self.connection.clone().ssubscribe(&channel))
                .await
            {
                Ok(()) => {
                    self.subscribed.insert(channel);
                    return Ok(());
                }
                Err(Some(err)) if is_unknown_command(&err) => {
                    tracing::info!("the cluster has no sharded pub/sub; using SUBSCRIBE");
                    self.sharded = false;
                }
                Err(err) => return Err(session_end(err)),
            }
        }
        match self
            .bounded(self.connection.clone().subscribe(&channel))
            .await
        {
            Ok(()) => {
                self.subscribed.insert(channel);
                Ok(())
            }
            Err(err) => Err(session_end(err)),
        }
    }

    /// Subscribes to each of `channels` not subscribed yet, all at once:
    /// each shard channel goes to its own slot's node, so one command
    /// cannot carry them, but their round trips overlap.
    async fn subscribe_all(&mut self, channels: Vec<String>) -> Result<(), SessionEnd> {
        let fresh: HashSet<String> = channels
            .into_iter()
            .filter(|channel| !self.subscribed.contains(channel))
            .collect();
        let (sharded, this) = (self.sharded, &*self);
        let answers = join_all(fresh.into_iter().map(|channel| {
            let mut connection = this.connection.clone();
            async move {
                let call = async {
                    if sharded {
                        connection.ssubscribe(&channel).await
                    } else {
                        connection.subscribe(&channel).await
                    }
                };
                let answer = this.bounded(call).await;
                (channel, answer)
            }
        }))
        .await;
        for (channel, answer) in answers {
            match answer {
                Ok(()) => {
                    self.subscribed.insert(channel);
                }
                // No sharded pub/sub: `subscribe` learns it and goes on
                // with plain `SUBSCRIBE`.
                Err(Some(err)) if sharded && is_unknown_command(&err) => {
                    self.subscribe(channel).await?;
                }
                Err(err) => return Err(session_end(err)),
            }
        }
        Ok(())
    }

    /// Unsubscribes from `channel` if subscribed.
    async fn unsubscribe(&mut self, channel: &str) -> Result<(), SessionEnd> {
        if !self.subscribed.remove(channel) {
            return Ok(());
        }
        let mut connection = self.connection.clone();
        let answer = if self.sharded {
            self.bounded(async move { connection.sunsubscribe(channel).await })
                .await
        } else {
            self.bounded(async move { connection.unsubscribe(channel).await })
                .await
        };
        answer.map_err(session_end)
    }

    /// Runs one subscription command within `limit`; `Err(None)` when it
    /// timed out.
    async fn bounded(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<()>>,
    ) -> Result<(), Option<redis::RedisError>> {
        match tokio::time::timeout(self.limit, call).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(Some(err)),
            Err(_) => Err(None),
        }
    }
}

/// How a failed subscription command ends the session.
fn session_end(err: Option<redis::RedisError>) -> SessionEnd {
    match err {
        Some(err) if err.code() == Some("NOPERM") => SessionEnd::NotPermitted,
        _ => SessionEnd::Failed,
    }
}

/// Whether the server did not know the command (sharded pub/sub needs 7.0).
fn is_unknown_command(err: &redis::RedisError) -> bool {
    err.to_string()
        .to_ascii_lowercase()
        .contains("unknown command")
}
