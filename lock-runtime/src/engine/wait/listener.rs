//! The release listener: one pub/sub connection per locker and server it
//! listens on (one, but each master on Redlock), owned by a task that
//! subscribes to exactly the channels someone waits on, turns each release
//! message into a wake-up, and reconnects (and resubscribes) when the
//! connection drops.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

use super::behind::Behind;
use super::grantee::Grantee;
use super::inbox::{Batch, Command, Inbox, Timeouts};
use super::sessions::{Opening, Session, SessionEnd, serve};
use super::sightings::Release;
use super::waiters::{Subscription, Waiters};
use crate::backend::{ClientSource, ReleaseFeed};
use crate::engine::handover::Handover;
use crate::host::clock::Clock;
use crate::owner::LineId;

/// Handle to the listener tasks; they end when every handle is dropped.
#[derive(Clone)]
pub(crate) struct ReleaseListener {
    waiters: Waiters,
    /// To each listener task (one per server it listens on); none for the
    /// in-memory store, which hands each release to the waiters itself.
    commands: Arc<[mpsc::UnboundedSender<Command>]>,
}

impl ReleaseListener {
    /// Starts the listener tasks on the runtime `on` (none is needed for
    /// the in-memory store), for the locker whose lines are `own` and
    /// whose leases run on `clock`. They
    /// connect only when the first waiter arrives.
    pub(crate) fn start(
        on: Option<&tokio::runtime::Handle>,
        feed: ReleaseFeed,
        timeouts: Timeouts,
        own: LineId,
        clock: Clock,
    ) -> Self {
        let waiters = Waiters::of(own, clock);
        let mut commands = Vec::new();
        match feed {
            ReleaseFeed::PubSub(source) => {
                let sessions = PlainSessions {
                    source,
                    master: 0,
                    timeouts,
                };
                commands.push(spawn_listener(on, sessions, &waiters, false));
            }
            ReleaseFeed::EachOf(clients) => {
                for (master, client) in clients.into_iter().enumerate() {
                    let source = ClientSource::fixed(client);
                    let sessions = PlainSessions {
                        source,
                        master,
                        timeouts,
                    };
                    commands.push(spawn_listener(on, sessions, &waiters, true));
                }
            }
            #[cfg(feature = "cluster")]
            ReleaseFeed::Sharded(client) => {
                let sessions = super::sharded::ShardedSessions::new(client, timeouts);
                commands.push(spawn_listener(on, sessions, &waiters, false));
            }
            ReleaseFeed::Memory(store) => store.listen(Box::new(waiters.downgrade())),
        }
        Self {
            waiters,
            commands: commands.into(),
        }
    }

    /// Hands a lock held in this locker to its waiter `to` on `channel`
    /// (see [`Waiters::pass`]).
    pub(crate) fn pass(
        &self,
        channel: &str,
        to: Grantee,
        handover: Handover,
        behind: Behind,
    ) -> Option<Handover> {
        self.waiters.pass(channel, to, handover, behind)
    }

    /// Joins the line of waiters on `channel` (as `grantee`, as for
    /// [`Self::subscribe`]) only if this process listens on it already,
    /// confirmed by a server (the in-memory store: always): the waiter
    /// hears every release published from now on. None otherwise, when
    /// only [`Self::subscribe`] can say when it does.
    pub(crate) fn join_listening(
        &self,
        channel: &str,
        grantee: Option<Grantee>,
    ) -> Option<Subscription> {
        if self.commands.is_empty() {
            return Some(self.waiters.join(channel, grantee, Box::new(|_| {})));
        }
        let commands = self.commands.clone();
        let unsubscribe = move |channel: String| {
            for listener in commands.iter() {
                let channel = channel.clone();
                let _ = listener.send(Command::Unsubscribe { channel });
            }
        };
        self.waiters
            .join_confirmed(channel, grantee, Box::new(unsubscribe))
    }

    /// Joins the line of waiters on `channel` (as `grantee`, when a
    /// release may hand this waiter the lock); returns once a server
    /// confirmed the subscription (`true`), or no listener could get it
    /// (`false`: the waiter still works, on its timers alone). Listening on
    /// several servers (Redlock's masters), the first confirmation is
    /// enough, so that a frozen master holds no waiter up: the others
    /// subscribe as they come, and each wakes every waiter when it does
    /// (what it published meanwhile went unheard).
    pub(crate) async fn subscribe(
        &self,
        channel: &str,
        grantee: Option<Grantee>,
    ) -> (Subscription, bool) {
        if self.commands.is_empty() {
            // The in-memory store: in line is subscribed.
            return (self.waiters.join(channel, grantee, Box::new(|_| {})), true);
        }
        let unsubscribe = {
            let commands = self.commands.clone();
            move |channel: String| {
                for listener in commands.iter() {
                    let channel = channel.clone();
                    let _ = listener.send(Command::Unsubscribe { channel });
                }
            }
        };
        let subscription = self.waiters.join(channel, grantee, Box::new(unsubscribe));
        let confirmations: FuturesUnordered<_> = self
            .commands
            .iter()
            .map(|listener| {
                let (confirmed, confirmation) = oneshot::channel();
                let request = Command::Subscribe {
                    channel: channel.to_owned(),
                    confirmed,
                };
                let sent = listener.send(request).is_ok();
                async move { sent && matches!(confirmation.await, Ok(true)) }
            })
            .collect();
        // Stops at the first confirmation; the others come when they come.
        let confirmed = confirmations.any(std::future::ready).await;
        if confirmed {
            self.waiters.mark_confirmed(channel);
        }
        (subscription, confirmed)
    }
}

/// Starts a listener task serving sessions of `sessions` on the runtime
/// `on` (`others_listen`: as [`serve`]); answers the sender of its inbox.
fn spawn_listener<S: Session + Send + 'static>(
    on: Option<&tokio::runtime::Handle>,
    sessions: S,
    waiters: &Waiters,
    others_listen: bool,
) -> mpsc::UnboundedSender<Command> {
    let (commands, inbox) = mpsc::unbounded_channel();
    if let Some(on) = on {
        on.spawn(serve(sessions, waiters.clone(), inbox, others_listen));
    }
    commands
}

/// Plain pub/sub sessions, each on the server the source names at the time.
struct PlainSessions {
    source: ClientSource,
    /// Which master its messages come from (Redlock; 0 elsewhere).
    master: usize,
    timeouts: Timeouts,
}

impl Session for PlainSessions {
    const COMMAND: &'static str = "SUBSCRIBE";

    async fn run(
        &mut self,
        waiters: &Waiters,
        inbox: &mut Inbox,
        opening: Opening<'_>,
    ) -> SessionEnd {
        match tokio::time::timeout(self.timeouts.connect, self.source.next()).await {
            Ok(Ok(named)) => {
                let client = &named.client;
                let serving = session(client, self.master, self.timeouts, waiters, inbox, opening);
                tokio::select! {
                    end = serving => end,
                    // A move past this server ends the session on it; its
                    // waiters are woken when the next one subscribes.
                    () = self.source.moved_past(named.generation) => SessionEnd::Failed,
                }
            }
            // No server to subscribe on right now (a failover in progress):
            // dropping `opening` lets its waiters go on their timers.
            Ok(Err(_)) | Err(_) => SessionEnd::Failed,
        }
    }
}

/// One connection's life: subscribe to every wanted channel, then serve
/// subscription requests and dispatch release messages until it fails.
async fn session(
    client: &redis::Client,
    master: usize,
    timeouts: Timeouts,
    waiters: &Waiters,
    inbox: &mut Inbox,
    opening: Opening<'_>,
) -> SessionEnd {
    // Dropping `opening` on failure unblocks its waiters, unconfirmed.
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
    opening.subscribed(waiters);
    loop {
        tokio::select! {
            command = inbox.recv() => match command {
                Some(first) => {
                    let batch = Batch::take(first, inbox);
                    let fresh = batch.new_channels(&subscribed);
                    if !fresh.is_empty() {
                        if let Err(end) = bounded(timeouts.response, sink.subscribe(&fresh)).await {
                            return end;
                        }
                        subscribed.extend(fresh);
                    }
                    // A new waiter may have come for a channel meanwhile.
                    let unwanted: Vec<String> = batch
                        .confirm()
                        .into_iter()
                        .filter(|channel| !waiters.is_wanted(channel) && subscribed.remove(channel))
                        .collect();
                    if !unwanted.is_empty()
                        && let Err(end) = bounded(timeouts.response, sink.unsubscribe(&unwanted)).await
                    {
                        return end;
                    }
                }
                None => return SessionEnd::Shutdown,
            },
            message = messages.next() => match message {
                Some(message) => {
                    let release = Release::from_payload(master, message.get_payload_bytes());
                    waiters.wake(message.get_channel_name(), release);
                }
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
