//! The release listener: one pub/sub connection per locker, owned by a
//! task that subscribes to exactly the channels someone waits on, turns each
//! release message into a wake-up, and reconnects (and resubscribes) when
//! the connection drops.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::waiters::{Subscription, Waiters};
use crate::backend::{ClientSource, ReleaseFeed};

/// Handle to the listener task; the task ends when every handle is dropped.
#[derive(Clone)]
pub(crate) struct ReleaseListener {
    waiters: Waiters,
    commands: mpsc::UnboundedSender<Command>,
}

/// Bounds of the listener's own calls: a frozen server must not stall it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
}

pub(super) enum Command {
    Subscribe {
        channel: String,
        confirmed: oneshot::Sender<bool>,
    },
    Unsubscribe {
        channel: String,
    },
}

impl ReleaseListener {
    /// Starts the listener task on the current runtime. It connects only
    /// when the first waiter arrives.
    pub(crate) fn start(feed: ReleaseFeed, timeouts: Timeouts) -> Self {
        let waiters = Waiters::default();
        let (commands, inbox) = mpsc::unbounded_channel();
        match feed {
            ReleaseFeed::PubSub(source) => {
                tokio::spawn(run(source, timeouts, waiters.clone(), inbox));
            }
            #[cfg(feature = "cluster")]
            ReleaseFeed::Sharded(client) => {
                tokio::spawn(super::sharded::run(
                    client,
                    timeouts,
                    waiters.clone(),
                    inbox,
                ));
            }
        }
        Self { waiters, commands }
    }

    /// Joins the line of waiters on `channel`; returns once the server
    /// confirmed the subscription (or the listener could not get it, in
    /// which case the waiter still works, on its timers alone).
    pub(crate) async fn subscribe(&self, channel: &str) -> Subscription {
        let commands = self.commands.clone();
        let unsubscribe = move |channel| {
            let _ = commands.send(Command::Unsubscribe { channel });
        };
        let subscription = self.waiters.join(channel, Box::new(unsubscribe));
        let (confirmed, confirmation) = oneshot::channel();
        let request = Command::Subscribe {
            channel: channel.to_owned(),
            confirmed,
        };
        if self.commands.send(request).is_ok() {
            let _ = confirmation.await;
        }
        subscription
    }
}

/// Pause before the first reconnect after a failure; doubles up to
/// [`MAX_PAUSE`] while failures go on.
pub(super) const MIN_PAUSE: Duration = Duration::from_millis(50);
pub(super) const MAX_PAUSE: Duration = Duration::from_secs(2);
/// A session that lasted this long counts as healthy: the next reconnect
/// starts again from [`MIN_PAUSE`].
pub(super) const HEALTHY_SESSION: Duration = Duration::from_secs(1);

/// How a pub/sub session ended.
enum SessionEnd {
    /// Every locker handle is gone: the task ends.
    Shutdown,
    /// Connection or command failed; try again after a pause.
    Failed,
    /// The server refuses SUBSCRIBE (ACL): waiters rely on their timers.
    NotPermitted,
}

async fn run(
    source: ClientSource,
    timeouts: Timeouts,
    waiters: Waiters,
    mut inbox: mpsc::UnboundedReceiver<Command>,
) {
    let mut pause = MIN_PAUSE;
    loop {
        // Idle until someone waits: a process that never contends never
        // opens the pub/sub connection.
        let mut pending = Vec::new();
        if waiters.is_empty() {
            match inbox.recv().await {
                Some(Command::Subscribe { confirmed, .. }) => pending.push(confirmed),
                Some(Command::Unsubscribe { .. }) => continue,
                None => return,
            }
        }
        let started = std::time::Instant::now();
        let end = match tokio::time::timeout(timeouts.connect, source.next()).await {
            Ok(Ok(client)) => session(&client, timeouts, &waiters, &mut inbox, pending).await,
            // No server to subscribe on right now (a failover in progress):
            // dropping `pending` lets those waiters go on their timers.
            Ok(Err(_)) | Err(_) => SessionEnd::Failed,
        };
        // Anything published while we were not listening was missed.
        waiters.wake_all();
        match end {
            SessionEnd::Shutdown => return,
            SessionEnd::NotPermitted => {
                tracing::warn!(
                    "the Redis user may not SUBSCRIBE; waiters fall back to backoff polling"
                );
                refuse_all(&mut inbox).await;
                return;
            }
            SessionEnd::Failed => {
                if started.elapsed() >= HEALTHY_SESSION {
                    pause = MIN_PAUSE;
                }
                tracing::debug!(?pause, "release listener lost its connection; reconnecting");
                if sleep_draining(&mut inbox, pause).await.is_err() {
                    return;
                }
                pause = pause.saturating_mul(2).min(MAX_PAUSE);
            }
        }
    }
}

/// One connection's life: subscribe to every wanted channel, then serve
/// subscription requests and dispatch release messages until it fails.
async fn session(
    client: &redis::Client,
    timeouts: Timeouts,
    waiters: &Waiters,
    inbox: &mut mpsc::UnboundedReceiver<Command>,
    pending: Vec<oneshot::Sender<bool>>,
) -> SessionEnd {
    // Dropping `pending` on failure unblocks those waiters, unconfirmed.
    let Ok(Ok(pubsub)) = tokio::time::timeout(timeouts.connect, client.get_async_pubsub()).await
    else {
        return SessionEnd::Failed;
    };
    let (mut sink, mut messages) = pubsub.split();
    let mut subscribed = HashSet::new();
    let wanted = waiters.channels();
    if !wanted.is_empty() {
        if let Err(end) = bounded(timeouts.response, sink.subscribe(&wanted)).await {
            return end;
        }
        subscribed.extend(wanted);
    }
    // Wake the waiters before confirming, so that a waiter confirmed here
    // does not also see this wake-up as a release.
    waiters.wake_all();
    for confirmed in pending {
        let _ = confirmed.send(true);
    }
    loop {
        tokio::select! {
            command = inbox.recv() => match command {
                Some(Command::Subscribe { channel, confirmed }) => {
                    if !subscribed.contains(&channel) {
                        if let Err(end) = bounded(timeouts.response, sink.subscribe(&channel)).await {
                            return end;
                        }
                        subscribed.insert(channel);
                    }
                    let _ = confirmed.send(true);
                }
                Some(Command::Unsubscribe { channel }) => {
                    // A new waiter may have come for it meanwhile.
                    let still_wanted = waiters.is_wanted(&channel);
                    if !still_wanted
                        && subscribed.remove(&channel)
                        && let Err(end) = bounded(timeouts.response, sink.unsubscribe(&channel)).await
                    {
                        return end;
                    }
                }
                None => return SessionEnd::Shutdown,
            },
            message = messages.next() => match message {
                Some(message) => waiters.wake_one(message.get_channel_name()),
                None => return SessionEnd::Failed,
            },
        }
    }
}

/// After SUBSCRIBE was refused for good: answer every request at once,
/// unconfirmed, until the locker is dropped.
pub(super) async fn refuse_all(inbox: &mut mpsc::UnboundedReceiver<Command>) {
    while inbox.recv().await.is_some() {}
}

/// Runs one pub/sub command within `limit`; on failure, says how the
/// session ends (the caller then drops the connection).
async fn bounded(
    limit: Duration,
    call: impl std::future::Future<Output = redis::RedisResult<()>>,
) -> Result<(), SessionEnd> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) if err.code() == Some("NOPERM") => Err(SessionEnd::NotPermitted),
        Ok(Err(_)) | Err(_) => Err(SessionEnd::Failed),
    }
}

/// Sleeps for `pause`, turning away subscription requests meanwhile (their
/// waiters rely on their timers until the listener is back).
pub(super) async fn sleep_draining(
    inbox: &mut mpsc::UnboundedReceiver<Command>,
    pause: Duration,
) -> Result<(), ()> {
    let sleep = tokio::time::sleep(pause);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            () = &mut sleep => return Ok(()),
            command = inbox.recv() => match command {
                Some(Command::Subscribe { confirmed, .. }) => drop(confirmed),
                Some(Command::Unsubscribe { .. }) => {}
                None => return Err(()),
            },
        }
    }
}
