//! The state one held lock shares between its guard, its handles and the
//! watchdog: held, lost or released, and until when the holder may trust it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::backend::Route;
use crate::clock::Clock;
use crate::keys::LockKeys;
use crate::token::OwnerToken;
use crate::validity;

/// Where a lease stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaseState {
    /// Ours, as far as the holder can tell.
    Held,
    /// Known gone (see [`crate::lost`]).
    Lost,
    /// Given back by the holder.
    Released,
}

/// One acquired lock.
pub(crate) struct Lease {
    pub(crate) id: u64,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) fence: u64,
    /// The lease length actually sent to the server, in whole milliseconds.
    pub(crate) ttl: Duration,
    /// Where the lock was taken; its release goes the same way.
    pub(crate) route: Route,
    /// The clock `sent_at` and the validity are on (see [`Clock`]).
    pub(crate) clock: Clock,
    state: watch::Sender<LeaseState>,
    valid_until: Mutex<Instant>,
}

impl Lease {
    /// A lease whose acquire request was sent at `sent_at` on `clock`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        keys: LockKeys,
        token: OwnerToken,
        fence: u64,
        ttl: Duration,
        route: Route,
        sent_at: Instant,
        clock: Clock,
    ) -> Self {
        Self {
            id,
            keys,
            token,
            fence,
            ttl,
            route,
            clock,
            state: watch::Sender::new(LeaseState::Held),
            valid_until: Mutex::new(validity::validity_end(sent_at, ttl)),
        }
    }

    /// The state now.
    pub(crate) fn state(&self) -> LeaseState {
        *self.state.borrow()
    }

    /// Held and still inside its local validity window.
    pub(crate) fn is_held(&self) -> bool {
        self.state() == LeaseState::Held && self.clock.now() < self.valid_until()
    }

    /// The instant after which the holder can no longer trust the lock.
    pub(crate) fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A renewal sent at `sent_at` was confirmed; returns the new end.
    pub(crate) fn renewed(&self, sent_at: Instant) -> Instant {
        let end = validity::validity_end(sent_at, self.ttl);
        let mut valid_until = self.valid_until.lock().unwrap_or_else(|e| e.into_inner());
        *valid_until = (*valid_until).max(end);
        *valid_until
    }

    /// Moves a held lease to `to`; true when this call made the change.
    /// `account` runs before anyone waiting on [`Self::subscribe`] is
    /// woken, so what it records is visible to them.
    pub(crate) fn leave_held(&self, to: LeaseState, account: impl FnOnce()) -> bool {
        self.state.send_if_modified(|state| {
            let changed = *state == LeaseState::Held;
            if changed {
                *state = to;
                account();
            }
            changed
        })
    }

    /// Marks the lease released by its holder (a later loss is not news).
    pub(crate) fn mark_released(&self) {
        self.leave_held(LeaseState::Released, || {});
    }

    /// A receiver that sees every state change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<LeaseState> {
        self.state.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease::new(
            1,
            LockKeys::new("lock:", "k").unwrap(),
            OwnerToken::random(),
            1,
            Duration::from_secs(1),
            Route::pooled(0),
            Clock::Boot.now(),
            Clock::Boot,
        )
    }

    #[test]
    fn lost_and_released_are_final() {
        let lease = lease();
        assert!(lease.is_held());
        lease.mark_released();
        assert!(!lease.leave_held(LeaseState::Lost, || panic!(
            "a released lease was marked lost"
        )));
        assert_eq!(lease.state(), LeaseState::Released);
    }

    #[test]
    fn a_renewal_never_shortens_validity() {
        let lease = lease();
        let before = lease.valid_until();
        let earlier = before - Duration::from_secs(5);
        assert_eq!(lease.renewed(earlier), before);
    }
}
