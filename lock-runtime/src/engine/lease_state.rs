//! [`StateCell`]: where a lease stands, and a wait for its loss.
//!
//! A `tokio::sync::watch` channel served before, and cost every lock call
//! more than it needed: its sender's drop wakes every shard of its
//! notifier (eight locks taken for nobody), as does each change with a
//! receiver. A lease changes state once and is waited on only by those
//! who race work against its loss, so a mutex and one `Notify` do.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// Where a lease stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaseState {
    /// Ours, as far as the holder can tell.
    Held,
    /// Known gone (see [`crate::engine::lost`]).
    Lost,
    /// Given back by the holder.
    Released,
}

/// A lease's state, shared with the waits on its loss.
#[derive(Debug)]
pub(crate) struct StateCell {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<LeaseState>,
    /// Woken at each change.
    changed: Notify,
}

impl StateCell {
    /// A cell holding `state`.
    pub(crate) fn new(state: LeaseState) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                changed: Notify::new(),
            }),
        }
    }

    /// The state now.
    pub(crate) fn get(&self) -> LeaseState {
        *self.shared.lock()
    }

    /// Runs `change` on the state, under its lock (what it records is
    /// seen by whoever sees the new state); when it answers true, wakes
    /// the waits. Answers what `change` did.
    pub(crate) fn modify(&self, change: impl FnOnce(&mut LeaseState) -> bool) -> bool {
        let changed = change(&mut self.shared.lock());
        if changed {
            self.shared.changed.notify_waiters();
        }
        changed
    }

    /// Completes once the state is `Lost` (at once if it is); never for
    /// a lease that is never lost. Owns what it needs (`'static`).
    pub(crate) fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let shared = self.shared.clone();
        async move {
            loop {
                // Registered before the look: a change after the look
                // wakes it.
                let mut changed = pin!(shared.changed.notified());
                changed.as_mut().enable();
                if *shared.lock() == LeaseState::Lost {
                    return;
                }
                changed.await;
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, LeaseState> {
        // A state is whole at every moment: a panic elsewhere leaves
        // nothing half-written in it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use super::*;

    fn polled(future: std::pin::Pin<&mut impl Future<Output = ()>>) -> Poll<()> {
        let waker = futures_util::task::noop_waker();
        future.poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_wait_from_before_the_loss_is_woken_by_it() {
        let cell = StateCell::new(LeaseState::Held);
        let mut lost = Box::pin(cell.lost());
        assert!(polled(lost.as_mut()).is_pending());
        assert!(cell.modify(|state| {
            *state = LeaseState::Lost;
            true
        }));
        assert!(polled(lost.as_mut()).is_ready());
    }

    #[test]
    fn a_wait_from_after_the_loss_sees_it_at_once() {
        let cell = StateCell::new(LeaseState::Held);
        cell.modify(|state| {
            *state = LeaseState::Lost;
            true
        });
        assert!(polled(Box::pin(cell.lost()).as_mut()).is_ready());
        assert_eq!(cell.get(), LeaseState::Lost);
    }

    #[test]
    fn a_release_or_a_refused_change_ends_no_wait() {
        let cell = StateCell::new(LeaseState::Held);
        let mut lost = Box::pin(cell.lost());
        assert!(polled(lost.as_mut()).is_pending());
        assert!(!cell.modify(|_| false));
        assert!(polled(lost.as_mut()).is_pending());
        cell.modify(|state| {
            *state = LeaseState::Released;
            true
        });
        assert!(polled(lost.as_mut()).is_pending());
        drop(cell);
        assert!(polled(lost.as_mut()).is_pending());
    }
}
