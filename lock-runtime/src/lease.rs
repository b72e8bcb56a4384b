//! The state one held lock shares between its guard, its handles and the
//! watchdog: held, lost or released, and until when the holder may trust it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::backend::Route;
use crate::clock::Clock;
use crate::keys::LockKeys;
use crate::token::OwnerToken;
use crate::{telemetry, validity};

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

/// What a grant is made of: everything a [`Lease`] starts from.
pub(crate) struct Grant {
    pub(crate) id: u64,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) fence: u64,
    /// The lease length sent to the server, in whole milliseconds.
    pub(crate) ttl: Duration,
    pub(crate) route: Route,
    /// When the acquire request was sent, on `clock`.
    pub(crate) sent_at: Instant,
    pub(crate) clock: Clock,
    pub(crate) max_hold: Option<Duration>,
    /// The bounded name of the lock for metrics and traces.
    pub(crate) template: &'static str,
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
    /// Longest the lease may be renewed for, from its send (`max_hold`).
    pub(crate) max_hold: Option<Duration>,
    /// The bounded name of the lock, for metrics (see [`crate::telemetry`]).
    pub(crate) template: &'static str,
    /// The hold's span: what happens to the lock while it is held (its
    /// renewals failing, its loss, its release) is recorded in it.
    pub(crate) span: tracing::Span,
    granted_at: Instant,
    /// Lost because it reached `max_hold`.
    capped: AtomicBool,
    state: watch::Sender<LeaseState>,
    valid_until: Mutex<Instant>,
}

impl Lease {
    /// A lease whose acquire request was sent at `grant.sent_at`.
    pub(crate) fn new(grant: Grant) -> Self {
        let span = tracing::debug_span!(
            "lock.hold",
            key = grant.keys.name(),
            template = grant.template,
            fence = grant.fence,
        );
        telemetry::granted(grant.template);
        Self {
            id: grant.id,
            valid_until: Mutex::new(validity::validity_end(grant.sent_at, grant.ttl)),
            keys: grant.keys,
            token: grant.token,
            fence: grant.fence,
            ttl: grant.ttl,
            route: grant.route,
            clock: grant.clock,
            max_hold: grant.max_hold,
            template: grant.template,
            span,
            granted_at: grant.sent_at,
            capped: AtomicBool::new(false),
            state: watch::Sender::new(LeaseState::Held),
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
                let held = self.clock.now().saturating_duration_since(self.granted_at);
                telemetry::ended(self.template, held);
            }
            changed
        })
    }

    /// Records that the lease was lost to its hold cap (before it leaves
    /// `Held`, so that whoever sees `Lost` sees this too).
    pub(crate) fn mark_capped(&self) {
        self.capped.store(true, Ordering::SeqCst);
    }

    /// Whether the lease was lost to its hold cap.
    pub(crate) fn capped(&self) -> bool {
        self.capped.load(Ordering::SeqCst)
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
        Lease::new(Grant {
            id: 1,
            keys: LockKeys::new("lock:", "k").unwrap(),
            token: OwnerToken::random("test"),
            fence: 1,
            ttl: Duration::from_secs(1),
            route: Route::pooled(0),
            sent_at: Clock::Boot.now(),
            clock: Clock::Boot,
            max_hold: None,
            template: "k",
        })
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
