//! Calls an operation left running in the background, and waiting until
//! they ended.
//!
//! A Redlock round answers as soon as its outcome is known, while its calls
//! on slower masters run on to their end in the background. A clean-up of
//! that operation (a cancelled acquisition's release) must reach each
//! master after the operation's own call did, or it would delete nothing
//! there and leave a key held by nobody: it waits for [`Landing::landed`]
//! first.

use tokio::sync::mpsc;

/// Carried by each background call of one operation; dropped when it ends.
#[derive(Clone, Debug)]
pub(crate) struct InFlight(#[allow(dead_code)] mpsc::Sender<()>);

/// Completes once every [`InFlight`] of its operation was dropped.
#[derive(Debug)]
pub(crate) struct Landing(mpsc::Receiver<()>);

/// A new operation's pair.
pub(crate) fn in_flight() -> (InFlight, Landing) {
    let (sender, receiver) = mpsc::channel(1);
    (InFlight(sender), Landing(receiver))
}

impl Landing {
    /// Waits until every call that carried the operation's [`InFlight`]
    /// ended (nothing is ever sent: the channel closes when the last
    /// sender is dropped).
    pub(crate) async fn landed(mut self) {
        while self.0.recv().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test]
    async fn lands_when_the_last_call_ends() {
        let (flight, landing) = in_flight();
        let call = flight.clone();
        drop(flight);
        let mut landed = Box::pin(landing.landed());
        assert!((&mut landed).now_or_never().is_none(), "a call still runs");
        drop(call);
        landed.await;
    }
}
