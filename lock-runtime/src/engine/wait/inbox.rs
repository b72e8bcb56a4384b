//! What waiters ask of the release listener, and the listener's bounds:
//! shared by the listener and each kind of session it runs.

use std::collections::HashSet;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

/// Bounds of the listener's own calls: a frozen server must not stall it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
}

/// A waiter's request to the listener task.
pub(super) enum Command {
    /// Listen on `channel`; answer once the server confirmed (or not).
    Subscribe {
        channel: String,
        confirmed: oneshot::Sender<bool>,
    },
    /// The last waiter on `channel` left.
    Unsubscribe { channel: String },
}

/// Requests from waiters to the listener task.
pub(super) type Inbox = mpsc::UnboundedReceiver<Command>;

/// Most requests a session takes from its inbox at once.
const MOST_IN_A_BATCH: usize = 1024;

/// The requests queued in a session's inbox, taken together: their new
/// channels are subscribed with one command, not one round trip each (a
/// burst of waiters on a thousand distinct keys would otherwise wait for
/// a thousand round trips, and every release message behind them).
#[derive(Default)]
pub(super) struct Batch {
    /// Channels to listen on, with who waits for the confirmation.
    subscribe: Vec<(String, oneshot::Sender<bool>)>,
    /// Channels whose last waiter left.
    unsubscribe: Vec<String>,
}

impl Batch {
    /// `first`, and the requests already queued behind it (a bounded
    /// number: the rest make the next batch).
    pub(super) fn take(first: Command, inbox: &mut Inbox) -> Self {
        let mut batch = Self::default();
        batch.add(first);
        while batch.len() < MOST_IN_A_BATCH {
            match inbox.try_recv() {
                Ok(command) => batch.add(command),
                // Empty, or closed: the next `recv` tells which.
                Err(_) => break,
            }
        }
        batch
    }

    fn add(&mut self, command: Command) {
        match command {
            Command::Subscribe { channel, confirmed } => self.subscribe.push((channel, confirmed)),
            Command::Unsubscribe { channel } => self.unsubscribe.push(channel),
        }
    }

    fn len(&self) -> usize {
        self.subscribe.len() + self.unsubscribe.len()
    }

    /// The channels asked for that are not in `subscribed`, each once.
    pub(super) fn new_channels(&self, subscribed: &HashSet<String>) -> Vec<String> {
        let mut seen = HashSet::new();
        self.subscribe
            .iter()
            .map(|(channel, _)| channel)
            .filter(|channel| !subscribed.contains(*channel) && seen.insert(*channel))
            .cloned()
            .collect()
    }

    /// Confirms every subscription asked for (the session has them all
    /// now); returns the channels whose last waiter left, for the session
    /// to drop those still unwanted.
    pub(super) fn confirm(self) -> Vec<String> {
        for (_, confirmed) in self.subscribe {
            let _ = confirmed.send(true);
        }
        self.unsubscribe
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    fn subscribe(channel: &str) -> (Command, oneshot::Receiver<bool>) {
        let (confirmed, confirmation) = oneshot::channel();
        let channel = channel.to_owned();
        (Command::Subscribe { channel, confirmed }, confirmation)
    }

    #[test]
    fn a_batch_takes_what_is_queued_and_asks_each_new_channel_once() {
        let (sender, mut inbox) = mpsc::unbounded_channel();
        let (first, first_answer) = subscribe("a");
        let mut answers = vec![first_answer];
        for channel in ["b", "a", "old", "c"] {
            let (command, answer) = subscribe(channel);
            sender.send(command).unwrap();
            answers.push(answer);
        }
        let leaving = "gone".to_owned();
        sender
            .send(Command::Unsubscribe { channel: leaving })
            .unwrap();
        let batch = Batch::take(first, &mut inbox);
        assert!(inbox.try_recv().is_err(), "the whole queue was taken");
        let subscribed = HashSet::from(["old".to_owned()]);
        assert_eq!(batch.new_channels(&subscribed), ["a", "b", "c"]);
        assert_eq!(batch.confirm(), ["gone"]);
        for mut answer in answers {
            assert_eq!(answer.try_recv(), Ok(true));
        }
    }

    #[test]
    fn a_batch_is_bounded_and_leaves_the_rest_queued() {
        let (sender, mut inbox) = mpsc::unbounded_channel();
        for n in 0..MOST_IN_A_BATCH + 10 {
            let channel = format!("c{n}");
            sender.send(Command::Unsubscribe { channel }).unwrap();
        }
        let first = inbox.try_recv().unwrap();
        let batch = Batch::take(first, &mut inbox);
        assert_eq!(batch.len(), MOST_IN_A_BATCH);
        let rest = std::iter::from_fn(|| inbox.try_recv().ok()).count();
        assert_eq!(rest, 10);
    }
}
