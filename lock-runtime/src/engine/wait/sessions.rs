//! The life of a release listener, whatever it subscribes through: idle
//! until someone waits, then one [`Session`] (a connection's life) after
//! another, waking every waiter between them (a release may have gone
//! unheard) and pausing longer after each failed one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::inbox::{Command, Inbox};
use super::waiters::Waiters;

/// Pause before the first reconnect after a failure; doubles up to
/// [`MAX_PAUSE`] while failures go on.
const MIN_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(2);
/// A session that lasted this long counts as healthy: the next reconnect
/// starts again from [`MIN_PAUSE`].
const HEALTHY_SESSION: Duration = Duration::from_secs(1);

/// How a session ended.
pub(super) enum SessionEnd {
    /// Every locker handle is gone: the task ends.
    Shutdown,
    /// Connecting or a command failed; try again after a pause.
    Failed,
    /// The server refuses subscriptions (ACL): waiters rely on their timers.
    NotPermitted,
}

/// One connection's life: subscribe to every channel `waiters` want, then
/// [`Opening::subscribed`], then serve the inbox and turn release messages
/// into wake-ups until the connection fails or the locker is dropped.
pub(super) trait Session {
    /// The subscribe command, for logs (`SUBSCRIBE`, `SSUBSCRIBE`).
    const COMMAND: &'static str;

    fn run(
        &mut self,
        waiters: &Waiters,
        inbox: &mut Inbox,
        opening: Opening<'_>,
    ) -> impl Future<Output = SessionEnd> + Send;
}

/// What a session owes once it has subscribed to every wanted channel.
pub(super) struct Opening<'a> {
    /// Requests waiting for the session; dropping them (a session that
    /// failed first) unblocks their waiters, unconfirmed.
    pending: Vec<oneshot::Sender<bool>>,
    /// Releases may have gone unheard by this listener while waiters were
    /// already listening (see [`serve`]).
    after_gap: bool,
    /// Set once the session subscribed.
    reached: &'a AtomicBool,
}

impl Opening<'_> {
    /// Subscribed: wakes every waiter after a gap, then confirms the
    /// pending requests (in that order, so that a waiter confirmed here
    /// does not also see the wake-up as a release).
    pub(super) fn subscribed(self, waiters: &Waiters) {
        self.reached.store(true, Ordering::Relaxed);
        if self.after_gap {
            waiters.wake_all();
        }
        for confirmed in self.pending {
            let _ = confirmed.send(true);
        }
    }
}

/// The listener task: sessions of `session` until the locker is dropped.
///
/// `others_listen`: other listeners share `waiters` (one per Redlock
/// master), so a waiter may be listening, confirmed by another, before
/// this one's first session subscribes: releases published here meanwhile
/// went unheard, and that session wakes every waiter. A lone listener's
/// first session has no such gap: each waiter tries again once its
/// subscription is confirmed, which only this listener does.
pub(super) async fn serve<S: Session>(
    mut session: S,
    waiters: Waiters,
    mut inbox: Inbox,
    others_listen: bool,
) {
    let mut pause = MIN_PAUSE;
    let mut after_gap = others_listen;
    loop {
        // Idle until someone waits: a process that never contends never
        // opens the connection.
        let mut pending = Vec::new();
        if waiters.is_empty() {
            match inbox.recv().await {
                // Its waiter left already (nobody waits at all): no
                // connection for it.
                Some(Command::Subscribe { .. }) if waiters.is_empty() => continue,
                Some(Command::Subscribe { confirmed, .. }) => pending.push(confirmed),
                Some(Command::Unsubscribe { .. }) => continue,
                None => return,
            }
        }
        let started = Instant::now();
        let reached = AtomicBool::new(false);
        let opening = Opening {
            pending,
            after_gap,
            reached: &reached,
        };
        let end = session.run(&waiters, &mut inbox, opening).await;
        if reached.load(Ordering::Relaxed) {
            // Anything published from now until the next session
            // subscribes goes unheard. A session that never subscribed
            // changes nothing (a server down for long must not wake every
            // waiter at each reconnect attempt).
            waiters.wake_all();
            after_gap = true;
        }
        match end {
            SessionEnd::Shutdown => return,
            SessionEnd::NotPermitted => {
                tracing::warn!(
                    command = S::COMMAND,
                    "the Redis user may not subscribe; waiters fall back to backoff polling"
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

/// After subscriptions were refused for good: answer every request at
/// once, unconfirmed, until the locker is dropped.
async fn refuse_all(inbox: &mut Inbox) {
    while inbox.recv().await.is_some() {}
}

/// Sleeps for `pause`, turning away subscription requests meanwhile (their
/// waiters rely on their timers until the listener is back).
async fn sleep_draining(inbox: &mut Inbox, pause: Duration) -> Result<(), ()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::mpsc;

    /// A session that only counts how often it was opened, and ends as if
    /// the locker were dropped.
    struct Counted(Arc<AtomicUsize>);

    impl Session for Counted {
        const COMMAND: &'static str = "SUBSCRIBE";

        async fn run(&mut self, _: &Waiters, _: &mut Inbox, _: Opening<'_>) -> SessionEnd {
            self.0.fetch_add(1, Ordering::SeqCst);
            SessionEnd::Shutdown
        }
    }

    fn subscribe(channel: &str) -> (Command, oneshot::Receiver<bool>) {
        let (confirmed, answer) = oneshot::channel();
        let command = Command::Subscribe {
            channel: channel.to_owned(),
            confirmed,
        };
        (command, answer)
    }

    #[tokio::test]
    async fn a_request_whose_waiter_already_left_opens_no_connection() {
        let opened = Arc::new(AtomicUsize::new(0));
        let (commands, inbox) = mpsc::unbounded_channel();
        // The waiter asked, then left before the idle listener read it.
        let (request, _answer) = subscribe("lock:{a}:released");
        commands.send(request).unwrap();
        let unsubscribe = Command::Unsubscribe {
            channel: "lock:{a}:released".to_owned(),
        };
        commands.send(unsubscribe).unwrap();
        drop(commands);
        serve(Counted(opened.clone()), Waiters::default(), inbox, false).await;
        assert_eq!(opened.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_request_of_a_waiter_still_there_opens_the_connection() {
        let opened = Arc::new(AtomicUsize::new(0));
        let waiters = Waiters::default();
        let (commands, inbox) = mpsc::unbounded_channel();
        let listener = tokio::spawn(serve(
            Counted(opened.clone()),
            waiters.clone(),
            inbox,
            false,
        ));
        // Idle: nobody waits yet.
        tokio::task::yield_now().await;
        assert_eq!(opened.load(Ordering::SeqCst), 0);
        let _waiting = waiters.join("lock:{a}:released", None, Box::new(|_| {}));
        let (request, _answer) = subscribe("lock:{a}:released");
        commands.send(request).unwrap();
        listener.await.unwrap();
        assert_eq!(opened.load(Ordering::SeqCst), 1);
    }
}
