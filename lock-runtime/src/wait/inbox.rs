//! What waiters ask of the release listener, and the listener's bounds:
//! shared by the listener and each kind of session it runs.

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
