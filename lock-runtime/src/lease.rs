//! The state one held lock shares between its guard and the watchdog:
//! held, lost or released, and until when the holder may trust it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::keys::LockKeys;
use crate::token::OwnerToken;

/// Where a lease stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaseState {
    /// Ours, as far as the holder can tell.
    Held,
    /// Known gone: renewal refused, or not confirmed before validity ran out.
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
    /// The pooled connection the lock was taken on.
    pub(crate) conn: usize,
    state: watch::Sender<LeaseState>,
    valid_until: Mutex<Instant>,
}

impl Lease {
    /// A lease whose acquire request was sent at `sent_at`.
    pub(crate) fn new(
        id: u64,
        keys: LockKeys,
        token: OwnerToken,
        fence: u64,
        ttl: Duration,
        conn: usize,
        sent_at: Instant,
    ) -> Self {
        Self {
            id,
            keys,
            token,
            fence,
            ttl,
            conn,
            state: watch::Sender::new(LeaseState::Held),
            valid_until: Mutex::new(validity_end(sent_at, ttl)),
        }
    }

    /// The state now.
    pub(crate) fn state(&self) -> LeaseState {
        *self.state.borrow()
    }

    /// Held and still inside its local validity window.
    pub(crate) fn is_held(&self) -> bool {
        self.state() == LeaseState::Held && Instant::now() < self.valid_until()
    }

    /// The instant after which the holder can no longer trust the lock.
    pub(crate) fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A renewal sent at `sent_at` was confirmed.
    pub(crate) fn renewed(&self, sent_at: Instant) -> Instant {
        let end = validity_end(sent_at, self.ttl);
        let mut valid_until = self.valid_until.lock().unwrap_or_else(|e| e.into_inner());
        *valid_until = (*valid_until).max(end);
        *valid_until
    }

    /// Marks the lease lost; true when this call made the change.
    /// `account` runs before anyone waiting on [`Self::subscribe`] is woken,
    /// so what it records is visible to them.
    pub(crate) fn mark_lost(&self, account: impl FnOnce()) -> bool {
        self.state.send_if_modified(|state| {
            let changed = *state == LeaseState::Held;
            if changed {
                *state = LeaseState::Lost;
                account();
            }
            changed
        })
    }

    /// Marks the lease released by its holder (a later loss is not news).
    pub(crate) fn mark_released(&self) {
        self.state.send_if_modified(|state| {
            let changed = *state == LeaseState::Held;
            if changed {
                *state = LeaseState::Released;
            }
            changed
        });
    }

    /// A receiver that sees every state change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<LeaseState> {
        self.state.subscribe()
    }
}

/// How long a lease whose request was sent at `sent_at` can be trusted:
/// counted from the *send* (the server may have started the lease at any
/// moment after it), the ttl less Redlock's allowance for clock drift and
/// less a reaction margin.
pub(crate) fn validity_end(sent_at: Instant, ttl: Duration) -> Instant {
    sent_at + ttl.saturating_sub(drift(ttl) + reaction_margin(ttl))
}

/// Redlock's drift allowance for a lease of `ttl`: 1 % plus 2 ms.
pub(crate) fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// 5 % of the ttl, so that the loss signal reaches the holder *with time to
/// stop* before the key can expire: on a busy machine the watchdog's timer,
/// the waking of the body's task and the body's next await each take a
/// moment, and the drift allowance alone (8 ms on a 600 ms lease) was seen
/// to be used up by them under load.
pub(crate) fn reaction_margin(ttl: Duration) -> Duration {
    ttl / 20
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_is_ttl_minus_drift_and_margin_from_the_send() {
        let sent = Instant::now();
        let end = validity_end(sent, Duration::from_secs(3));
        assert_eq!(end - sent, Duration::from_millis(3000 - 30 - 2 - 150));
    }

    #[test]
    fn a_tiny_ttl_has_no_validity_left() {
        let sent = Instant::now();
        assert_eq!(validity_end(sent, Duration::from_millis(1)), sent);
    }

    #[test]
    fn lost_and_released_are_final() {
        let lease = Lease::new(
            1,
            LockKeys::new("lock:", "k").unwrap(),
            OwnerToken::random(),
            1,
            Duration::from_secs(1),
            0,
            Instant::now(),
        );
        assert!(lease.is_held());
        lease.mark_released();
        assert!(!lease.mark_lost(|| panic!("a released lease was marked lost")));
        assert_eq!(lease.state(), LeaseState::Released);
    }
}
