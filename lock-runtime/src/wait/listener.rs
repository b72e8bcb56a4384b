//! The release listener: one pub/sub connection per locker, owned by a
//! task that subscribes to exactly the channels someone waits on, turns each
//! release message into a wake-up, and reconnects (and resubscribes) when
//! the connection drops.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::inbox::{Command, Inbox, Timeouts};
use super::sessions::{Session, SessionEnd, serve};
use super::waiters::{Subscription, Waiters};
use crate::backend::{ClientSource, ReleaseFeed};

/// Handle to the listener task; the task ends when every handle is dropped.
#[derive(Clone)]
pub(crate) struct ReleaseListener {
    waiters: Waiters,
    /// To the listener task; none for the in-memory store, which hands
    /// each release to the waiters itself.
    commands: Option<mpsc::UnboundedSender<Command>>,
}

impl ReleaseListener {
    /// Starts the listener task on the runtime `on` (none is needed for
    /// the in-memory store). It connects only when the first waiter
    /// arrives.
    pub(crate) fn start(
        on: Option<&tokio::runtime::Handle>,
        feed: ReleaseFeed,
        timeouts: Timeouts,
    ) -> Self {
        let waiters = Waiters::default();
        let (commands, inbox) = mpsc::unbounded_channel();
        match feed {
            ReleaseFeed::PubSub(source) => {
                let sessions = PlainSessions { source, timeouts };
                spawn_on(on, serve(sessions, waiters.clone(), inbox));
            }
            #[cfg(feature = "cluster")]
            ReleaseFeed::Sharded(client) => {
                let sessions = super::sharded::ShardedSessions::new(client, timeouts);
                spawn_on(on, serve(sessions, waiters.clone(), inbox));
            }
            ReleaseFeed::Memory(store) => {
                store.listen(Box::new(waiters.downgrade()));
                return Self {
                    waiters,
                    commands: None,
                };
            }
        }
        Self {
            waiters,
            commands: Some(commands),
        }
    }

    /// Joins the line of waiters on `channel`; returns once the server
    /// confirmed the subscription (`true`), or the listener could not get
    /// it (`false`: the waiter still works, on its timers alone).
    pub(crate) async fn subscribe(&self, channel: &str) -> (Subscription, bool) {
        let Some(commands) = &self.commands else {
            // The in-memory store: in line is subscribed.
            return (self.waiters.join(channel, Box::new(|_| {})), true);
        };
        let unsubscribe = {
            let commands = commands.clone();
            move |channel| {
                let _ = commands.send(Command::Unsubscribe { channel });
            }
        };
        let subscription = self.waiters.join(channel, Box::new(unsubscribe));
        let (confirmed, confirmation) = oneshot::channel();
        let request = Command::Subscribe {
            channel: channel.to_owned(),
            confirmed,
        };
        let confirmed = commands.send(request).is_ok() && matches!(confirmation.await, Ok(true));
        (subscription, confirmed)
    }
}

/// Runs the listener `task` on the runtime `on`.
fn spawn_on(
    on: Option<&tokio::runtime::Handle>,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) {
    if let Some(on) = on {
        on.spawn(task);
    }
}

/// Plain pub/sub sessions, each on the server the source names at the time.
struct PlainSessions {
    source: ClientSource,
    timeouts: Timeouts,
}

impl Session for PlainSessions {
    const COMMAND: &'static str = "SUBSCRIBE";

    async fn run(
        &mut self,
        waiters: &Waiters,
        inbox: &mut Inbox,
        pending: Vec<oneshot::Sender<bool>>,
    ) -> SessionEnd {
        match tokio::time::timeout(self.timeouts.connect, self.source.next()).await {
            Ok(Ok(client)) => session(&client, self.timeouts, waiters, inbox, pending).await,
            // No server to subscribe on right now (a failover in progress):
            // dropping `pending` lets those waiters go on their timers.
            Ok(Err(_)) | Err(_) => SessionEnd::Failed,
        }
    }
}

/// One connection's life: subscribe to every wanted channel, then serve
/// subscription requests and dispatch release messages until it fails.
async fn session(
    client: &redis::Client,
    timeouts: Timeouts,
    waiters: &Waiters,
    inbox: &mut Inbox,
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
