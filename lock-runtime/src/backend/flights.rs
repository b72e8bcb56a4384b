//! Calls an operation left running in the background, and waiting until
//! they ended.
//!
//! A Redlock round answers as soon as its outcome is known, while its calls
//! on slower masters run on to their end in the background. A clean-up of
//! that operation (a cancelled acquisition's release) must reach each
//! master after the operation's own call did, or it would delete nothing
//! there and leave a key held by nobody: it waits for [`Landing::landed`]
//! first. One node leaves no call behind: its operations are
//! [`grounded`], which costs nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Carried by each background call of one operation; dropped when it ends.
#[derive(Debug)]
pub(crate) struct InFlight(Option<Arc<Flights>>);

/// Completes once every [`InFlight`] of its operation was dropped.
#[derive(Debug)]
pub(crate) struct Landing(Arc<Flights>);

/// The count of an operation's [`InFlight`]s, and the landing's wake-up
/// when it falls to zero. One allocation per operation.
#[derive(Debug)]
struct Flights {
    carried: AtomicUsize,
    ended: Notify,
}

/// A new operation's pair.
pub(crate) fn in_flight() -> (InFlight, Landing) {
    let flights = Arc::new(Flights {
        carried: AtomicUsize::new(1),
        ended: Notify::new(),
    });
    (InFlight(Some(flights.clone())), Landing(flights))
}

/// An operation whose calls all end before it answers: nothing to land.
pub(crate) fn grounded() -> InFlight {
    InFlight(None)
}

impl Clone for InFlight {
    fn clone(&self) -> Self {
        if let Some(flights) = &self.0 {
            flights.carried.fetch_add(1, Ordering::AcqRel);
        }
        Self(self.0.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(flights) = &self.0
            && flights.carried.fetch_sub(1, Ordering::AcqRel) == 1
        {
            // Stores a permit if the landing is not waiting yet.
            flights.ended.notify_one();
        }
    }
}

impl Landing {
    /// Waits until every call that carried the operation's [`InFlight`]
    /// ended.
    pub(crate) async fn landed(&self) {
        while self.0.carried.load(Ordering::Acquire) > 0 {
            self.0.ended.notified().await;
        }
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

    #[tokio::test]
    async fn lands_at_once_when_the_calls_ended_before_it_waits() {
        let (flight, landing) = in_flight();
        let calls: Vec<InFlight> = (0..3).map(|_| flight.clone()).collect();
        drop(flight);
        drop(calls);
        assert!(landing.landed().now_or_never().is_some());
    }

    #[tokio::test]
    async fn lands_once_calls_on_other_threads_end() {
        let (flight, landing) = in_flight();
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let call = flight.clone();
                std::thread::spawn(move || drop(call))
            })
            .collect();
        drop(flight);
        tokio::time::timeout(std::time::Duration::from_secs(10), landing.landed())
            .await
            .expect("every call ended, yet it did not land");
        for call in calls {
            call.join().unwrap();
        }
    }
}
