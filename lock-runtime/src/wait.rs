//! Waiting for a busy lock without polling it.
//!
//! A waiter subscribes to the lock's release channel, tries again, and then
//! sleeps until whichever comes first: a release message, the end of the
//! owner's lease (the PTTL the acquire script returned), or a capped,
//! jittered backoff that only matters when a message was missed.
//!
//! All waiters of one [`Locker`](crate::Locker) share one pub/sub connection,
//! owned by a listener task that (re)subscribes to exactly the channels
//! someone waits on. After a reconnect it wakes every waiter, since a release
//! may have been published while the connection was down.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};

/// Handle to the listener task; the task ends when every handle is dropped.
#[derive(Clone)]
pub(crate) struct ReleaseListener {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    commands: mpsc::UnboundedSender<Command>,
}

/// Bounds of the listener's own calls: a frozen server must not stall it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
}

/// One channel somebody in this process waits on.
struct Channel {
    /// Bumped on every release message (and on every reconnect).
    releases: watch::Sender<u64>,
    waiters: usize,
}

enum Command {
    Subscribe {
        channel: String,
        confirmed: oneshot::Sender<bool>,
    },
    Unsubscribe {
        channel: String,
    },
}

/// One waiter's interest in one release channel; unsubscribes on drop.
pub(crate) struct Subscription {
    listener: ReleaseListener,
    channel: String,
    releases: watch::Receiver<u64>,
}

impl ReleaseListener {
    /// Starts the listener task on the current runtime. It connects only
    /// when the first waiter arrives.
    pub(crate) fn start(client: redis::Client, timeouts: Timeouts) -> Self {
        let channels = Arc::new(Mutex::new(HashMap::new()));
        let (commands, inbox) = mpsc::unbounded_channel();
        tokio::spawn(run(client, timeouts, channels.clone(), inbox));
        Self { channels, commands }
    }

    /// Subscribes to `channel`; returns once the server confirmed the
    /// subscription (or the listener could not get it, in which case the
    /// waiter still works, on its timers alone).
    pub(crate) async fn subscribe(&self, channel: &str) -> Subscription {
        let releases = {
            let mut channels = lock(&self.channels);
            let entry = channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    releases: watch::Sender::new(0),
                    waiters: 0,
                });
            entry.waiters += 1;
            entry.releases.subscribe()
        };
        let subscription = Subscription {
            listener: self.clone(),
            channel: channel.to_owned(),
            releases,
        };
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

impl Subscription {
    /// Forgets releases seen so far; call right before trying to acquire, so
    /// that a release after the try is never missed.
    pub(crate) fn mark_seen(&mut self) {
        self.releases.borrow_and_update();
    }

    /// Completes at the first release (or reconnect) since [`Self::mark_seen`].
    pub(crate) async fn released(&mut self) {
        if self.releases.changed().await.is_err() {
            // Listener gone: only the waiter's timers can wake it now.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = lock(&self.listener.channels);
        if let Some(entry) = channels.get_mut(&self.channel) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                channels.remove(&self.channel);
                let channel = std::mem::take(&mut self.channel);
                let _ = self
                    .listener
                    .commands
                    .send(Command::Unsubscribe { channel });
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map stays consistent even if a holder panicked mid-update.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wakes every waiter of every channel (or of the one named).
fn notify(channels: &Mutex<HashMap<String, Channel>>, only: Option<&str>) {
    let channels = lock(channels);
    match only {
        Some(name) => {
            if let Some(channel) = channels.get(name) {
                channel.releases.send_modify(|n| *n += 1);
            }
        }
        None => {
            for channel in channels.values() {
                channel.releases.send_modify(|n| *n += 1);
            }
        }
    }
}

/// Pause before the first reconnect after a failure; doubles up to
/// [`MAX_PAUSE`] while failures go on.
const MIN_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(2);
/// A session that lasted this long counts as healthy: the next reconnect
/// starts again from [`MIN_PAUSE`].
const HEALTHY_SESSION: Duration = Duration::from_secs(1);

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
    client: redis::Client,
    timeouts: Timeouts,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    mut inbox: mpsc::UnboundedReceiver<Command>,
) {
    let mut pause = MIN_PAUSE;
    loop {
        // Idle until someone waits: a process that never contends never
        // opens the pub/sub connection.
        let mut pending = Vec::new();
        if lock(&channels).is_empty() {
            match inbox.recv().await {
                Some(Command::Subscribe { confirmed, .. }) => pending.push(confirmed),
                Some(Command::Unsubscribe { .. }) => continue,
                None => return,
            }
        }
        let started = std::time::Instant::now();
        let end = session(&client, timeouts, &channels, &mut inbox, pending).await;
        // Anything published while we were not listening was missed.
        notify(&channels, None);
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
    channels: &Mutex<HashMap<String, Channel>>,
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
    let wanted: Vec<String> = lock(channels).keys().cloned().collect();
    if !wanted.is_empty() {
        if let Err(end) = bounded(timeouts.response, sink.subscribe(&wanted)).await {
            return end;
        }
        subscribed.extend(wanted);
    }
    // Wake the waiters before confirming, so that a waiter confirmed here
    // does not also see this wake-up as a release.
    notify(channels, None);
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
                    let still_wanted = lock(channels).contains_key(&channel);
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
                Some(message) => notify(channels, Some(message.get_channel_name())),
                None => return SessionEnd::Failed,
            },
        }
    }
}

/// After SUBSCRIBE was refused for good: answer every request at once,
/// unconfirmed, until the locker is dropped.
async fn refuse_all(inbox: &mut mpsc::UnboundedReceiver<Command>) {
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
async fn sleep_draining(
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

/// Capped exponential backoff with jitter, for the case a release message
/// never comes (listener down, or the owner crashed and its lease runs out).
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self { next: min, max }
    }

    /// The next pause: uniformly between half and all of the current step,
    /// so that waiters woken together do not retry in lockstep.
    pub(crate) fn next_pause(&mut self) -> Duration {
        let step = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        let mut bytes = [0u8; 4];
        let _ = getrandom::fill(&mut bytes);
        let fraction = f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX);
        step / 2 + step.mul_f64(0.5 * fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_cap_does_not_overflow() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::MAX);
        for _ in 0..100 {
            backoff.next_pause();
        }
    }

    #[test]
    fn backoff_grows_to_its_cap_and_stays_in_range() {
        let min = Duration::from_millis(10);
        let max = Duration::from_millis(80);
        let mut backoff = Backoff::new(min, max);
        let mut step = min;
        for _ in 0..10 {
            let pause = backoff.next_pause();
            assert!(
                pause >= step / 2 && pause <= step,
                "{pause:?} outside {step:?}"
            );
            step = (step * 2).min(max);
        }
    }
}
