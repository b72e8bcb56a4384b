//! Calls an operation left running in the background, and waiting until
//! they ended, on one master or on all.
//!
//! A Redlock round answers as soon as its outcome is known, while its calls
//! on slower masters run on to their end in the background. A clean-up of
//! that operation (a cancelled acquisition's release, a holder's release)
//! must reach each master after the operation's own call did, or it would
//! delete nothing there and leave a key held by nobody: on each master it
//! waits for [`Landing::landed_on`] that master first, and only there, so
//! that one frozen master holds up its own clean-up and nothing else. One
//! node leaves no call behind: its operations are [`grounded`], which
//! costs nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Carried by the operation itself, or by each of its calls on one master;
/// dropped when it ends.
#[derive(Debug)]
pub(crate) struct InFlight(Option<Carried>);

#[derive(Debug)]
struct Carried {
    flights: Arc<Flights>,
    /// The master of a call; None for the operation itself, which may
    /// still start calls on any master.
    master: Option<usize>,
}

/// Completes once the [`InFlight`]s of its operation were dropped (on one
/// master, or on all).
#[derive(Clone, Debug)]
pub(crate) struct Landing(Arc<Flights>);

/// How many [`InFlight`]s of one operation are alive: the operation's own,
/// and its calls' per master. One allocation per operation.
#[derive(Debug)]
struct Flights {
    own: AtomicUsize,
    masters: Box<[AtomicUsize]>,
    /// Woken whenever a count falls to zero.
    ended: Notify,
}

/// A new operation over `masters` masters: its own [`InFlight`], and its
/// landing.
pub(crate) fn in_flight(masters: usize) -> (InFlight, Landing) {
    let flights = Arc::new(Flights {
        own: AtomicUsize::new(1),
        masters: (0..masters).map(|_| AtomicUsize::new(0)).collect(),
        ended: Notify::new(),
    });
    let own = Carried {
        flights: flights.clone(),
        master: None,
    };
    (InFlight(Some(own)), Landing(flights))
}

/// An operation whose calls all end before it answers: nothing to land.
pub(crate) fn grounded() -> InFlight {
    InFlight(None)
}

impl Flights {
    fn count(&self, master: Option<usize>) -> Option<&AtomicUsize> {
        match master {
            None => Some(&self.own),
            Some(master) => self.masters.get(master),
        }
    }

    /// Whether nothing of the operation runs on `master` (None: anywhere)
    /// and the operation itself cannot start anything more.
    fn landed(&self, master: Option<usize>) -> bool {
        let idle = |count: &AtomicUsize| count.load(Ordering::Acquire) == 0;
        idle(&self.own)
            && match master {
                Some(master) => self.masters.get(master).is_none_or(idle),
                None => self.masters.iter().all(idle),
            }
    }
}

impl InFlight {
    /// What a call of this operation on master `master` carries.
    pub(crate) fn on(&self, master: usize) -> InFlight {
        let Some(carried) = &self.0 else {
            return grounded();
        };
        let call = Carried {
            flights: carried.flights.clone(),
            master: Some(master),
        };
        if let Some(count) = call.flights.count(call.master) {
            count.fetch_add(1, Ordering::AcqRel);
        }
        InFlight(Some(call))
    }
}

impl Clone for InFlight {
    fn clone(&self) -> Self {
        let Some(carried) = &self.0 else {
            return grounded();
        };
        if let Some(count) = carried.flights.count(carried.master) {
            count.fetch_add(1, Ordering::AcqRel);
        }
        InFlight(Some(Carried {
            flights: carried.flights.clone(),
            master: carried.master,
        }))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some(carried) = &self.0 else {
            return;
        };
        if let Some(count) = carried.flights.count(carried.master)
            && count.fetch_sub(1, Ordering::AcqRel) == 1
        {
            carried.flights.ended.notify_waiters();
        }
    }
}

impl Landing {
    /// Waits until every call that carried the operation's [`InFlight`]
    /// ended, on every master.
    #[cfg(test)]
    pub(crate) async fn landed(&self) {
        self.wait(None).await;
    }

    /// Waits until the operation's calls on `master` ended (and the
    /// operation can start no more).
    pub(crate) async fn landed_on(&self, master: usize) {
        self.wait(Some(master)).await;
    }

    async fn wait(&self, master: Option<usize>) {
        loop {
            // Enabled before the check, so that an end between the check
            // and the await still wakes it.
            let ended = self.0.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.0.landed(master) {
                return;
            }
            ended.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test]
    async fn lands_when_the_last_call_ends() {
        let (flight, landing) = in_flight(3);
        let call = flight.on(1);
        drop(flight);
        let mut landed = Box::pin(landing.landed());
        assert!((&mut landed).now_or_never().is_none(), "a call still runs");
        drop(call);
        landed.await;
    }

    #[tokio::test]
    async fn lands_at_once_when_the_calls_ended_before_it_waits() {
        let (flight, landing) = in_flight(3);
        let calls: Vec<InFlight> = (0..3).map(|master| flight.on(master)).collect();
        drop(flight);
        drop(calls);
        assert!(landing.landed().now_or_never().is_some());
    }

    #[tokio::test]
    async fn a_master_lands_while_a_call_on_another_still_runs() {
        let (flight, landing) = in_flight(3);
        let (slow, quick) = (flight.on(0), flight.on(1));
        assert!(
            landing.landed_on(2).now_or_never().is_none(),
            "the operation itself may still start a call there"
        );
        drop(flight);
        assert!(landing.landed_on(2).now_or_never().is_some());
        assert!(landing.landed_on(1).now_or_never().is_none());
        drop(quick);
        assert!(landing.landed_on(1).now_or_never().is_some());
        let mut everywhere = Box::pin(landing.landed());
        assert!((&mut everywhere).now_or_never().is_none());
        let mut on_slow = Box::pin(landing.landed_on(0));
        assert!((&mut on_slow).now_or_never().is_none());
        drop(slow);
        on_slow.await;
        everywhere.await;
    }

    #[tokio::test]
    async fn lands_once_calls_on_other_threads_end() {
        let (flight, landing) = in_flight(8);
        let calls: Vec<_> = (0..8)
            .map(|master| {
                let call = flight.on(master);
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
