//! The state one held lock shares between its guard, its handles and the
//! watchdog: held, lost or released, and until when the holder may trust it.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::backend::Route;
use crate::engine::fence::FenceBasis;
pub(crate) use crate::engine::lease_state::LeaseState;
use crate::engine::lease_state::StateCell;
use crate::engine::renewal::LeaseKind;
use crate::engine::validity;
use crate::host::clock::Clock;
use crate::keys::LockKeys;
use crate::metrics;
use crate::owner::OwnerToken;

/// What a lease is on the server: its kind, its key (the resource's
/// lock key followed by `suffix`), and how many may hold the resource at
/// once beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Leased {
    pub(crate) kind: LeaseKind,
    pub(crate) suffix: &'static str,
    /// The most holders that exclude one more (1 for a lock, whose every
    /// holder excludes the next; a semaphore's limit): on Redlock, a
    /// renewal counts where as many masters renewed it as a grant needs
    /// ([`crate::backend::redlock::quorum_among`]).
    pub(crate) holders: u32,
}

impl Leased {
    /// The exclusive lock's: the resource's lock key holds the token.
    pub(crate) const KEY: Leased = Leased::one_holder(LeaseKind::Key, "");

    /// A lease of `kind` under `suffix` that excludes every other holder
    /// it conflicts with one by one (a lock, a reader against a writer, a
    /// place in a line): a majority decides on Redlock.
    pub(crate) const fn one_holder(kind: LeaseKind, suffix: &'static str) -> Self {
        Leased {
            kind,
            suffix,
            holders: 1,
        }
    }
}

/// What a lease is to its holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A hold: the lock itself, counted, measured and told when lost.
    Hold,
    /// A place a waiting attempt keeps while it waits (a writer's intent,
    /// a place in a queue): renewed like any lease, but not a lock; its
    /// loss only means the attempt takes a new place at its next try.
    Place,
}

/// What a grant is made of: everything a [`Lease`] starts from.
pub(crate) struct Grant {
    pub(crate) id: u64,
    pub(crate) keys: LockKeys,
    /// Further resources the same token holds under this lease (see
    /// [`Lease::also`]).
    pub(crate) also: Vec<LockKeys>,
    pub(crate) leased: Leased,
    pub(crate) role: Role,
    pub(crate) token: OwnerToken,
    pub(crate) fence: u64,
    /// The lease length sent to the server, in whole milliseconds.
    pub(crate) ttl: Duration,
    pub(crate) route: Route,
    /// When the request the validity counts from was sent, on `clock`:
    /// the acquire, or (a lock passed in process) the hold's last
    /// confirmed renewal.
    pub(crate) sent_at: Instant,
    /// When this holder's hold began, on `clock` (`max_hold` counts from
    /// here): `sent_at`, unless the lock was passed in process.
    pub(crate) granted_at: Instant,
    /// The last fence the server issued for this hold (see [`FenceBasis`]).
    pub(crate) fence_basis: FenceBasis,
    pub(crate) clock: Clock,
    pub(crate) max_hold: Option<Duration>,
    /// The lock's bounded names, for metrics and traces.
    pub(crate) labels: metrics::Labels,
    /// How its first lease on the server compares with its ttl.
    pub(crate) first_lease: FirstLease,
}

/// A lease's first lease on the server, and when it is first renewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstLease {
    /// Its ttl: renewed a renewal interval of it after its send.
    Ttl,
    /// Shorter than its ttl: a hold handed over inside a release runs
    /// what was left of the place its waiter kept. Renewed as a lease
    /// that long (a renewal interval of it after its send, as the place
    /// was), and that renewal sets its own ttl. A hold that ends sooner,
    /// as most do, costs no renewal at all.
    Shorter(Duration),
    /// Its ttl, renewed at once: a place renewed now to learn whether a
    /// release handed it the lock.
    RenewedAtOnce,
}

/// One acquired lock, or a place kept while waiting for one.
pub(crate) struct Lease {
    pub(crate) id: u64,
    pub(crate) keys: LockKeys,
    /// Further resources the same token holds under this one lease, each
    /// leased as `leased` says (a hold of several keys at once): renewed
    /// with it in the same batch, and the loss of any of them is the loss
    /// of the lease. Empty for a lease of one resource.
    pub(crate) also: Vec<LockKeys>,
    /// What it is on the server.
    pub(crate) leased: Leased,
    pub(crate) role: Role,
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
    /// The lock's bounded names, for metrics (see [`crate::metrics`]).
    pub(crate) labels: metrics::Labels,
    /// The hold's span: what happens to the lock while it is held (its
    /// renewals failing, its loss, its release) is recorded in it.
    pub(crate) span: tracing::Span,
    granted_at: Instant,
    /// Where its fence came from: how far a pass in process may raise it.
    pub(crate) fence_basis: FenceBasis,
    /// How long after its send the watchdog first renews it (see
    /// [`FirstLease`]).
    pub(crate) first_renewal_in: Duration,
    /// Its first lease on the server, when shorter than its ttl, and the
    /// send that lease counts from: the lease on the server until a
    /// renewal is confirmed (see [`Lease::on_server`]).
    shorter_first: Option<(Duration, Instant)>,
    /// Lost because it reached `max_hold`.
    capped: AtomicBool,
    /// The locks moved to another server (a failover) since this lease was
    /// last confirmed: until a renewal sent after the move confirms it
    /// there, it is not passed in process (see [`crate::engine::handover`]).
    unconfirmed_since_move: AtomicBool,
    state: StateCell,
    validity: Mutex<Validity>,
}

/// The latest confirmation of a lease: its request's send, and until when
/// it can be trusted.
#[derive(Clone, Copy)]
struct Validity {
    sent_at: Instant,
    until: Instant,
}

impl Lease {
    /// A lease whose acquire request was sent at `grant.sent_at`.
    pub(crate) fn new(grant: Grant) -> Self {
        let span = tracing::debug_span!(
            "lock.hold",
            key = grant.keys.name(),
            template = grant.labels.template,
            fence = grant.fence,
        );
        if grant.role == Role::Hold {
            metrics::granted(grant.labels);
        }
        let first = match grant.first_lease {
            FirstLease::Shorter(first) => first.min(grant.ttl),
            FirstLease::Ttl | FirstLease::RenewedAtOnce => grant.ttl,
        };
        let first_renewal_in = match grant.first_lease {
            FirstLease::RenewedAtOnce => Duration::ZERO,
            FirstLease::Ttl | FirstLease::Shorter(_) => validity::renewal_interval(first),
        };
        let shorter_first = match grant.first_lease {
            FirstLease::Shorter(_) if first < grant.ttl => Some((first, grant.sent_at)),
            FirstLease::Ttl | FirstLease::Shorter(_) | FirstLease::RenewedAtOnce => None,
        };
        Self {
            id: grant.id,
            shorter_first,
            validity: Mutex::new(Validity {
                sent_at: grant.sent_at,
                until: validity::validity_end(grant.sent_at, first),
            }),
            first_renewal_in,
            keys: grant.keys,
            also: grant.also,
            leased: grant.leased,
            role: grant.role,
            token: grant.token,
            fence: grant.fence,
            ttl: grant.ttl,
            route: grant.route,
            clock: grant.clock,
            max_hold: grant.max_hold,
            labels: grant.labels,
            span,
            granted_at: grant.granted_at,
            fence_basis: grant.fence_basis,
            capped: AtomicBool::new(false),
            unconfirmed_since_move: AtomicBool::new(false),
            state: StateCell::new(LeaseState::Held),
        }
    }

    /// The state now.
    pub(crate) fn state(&self) -> LeaseState {
        self.state.get()
    }

    /// Held and still inside its local validity window.
    pub(crate) fn is_held(&self) -> bool {
        self.state() == LeaseState::Held && self.clock.now() < self.valid_until()
    }

    /// The instant after which the holder can no longer trust the lock:
    /// the end of its last confirmation, with the reaction margin of then
    /// or of now, whichever is wider (a stall seen since the confirmation
    /// widens it, see [`crate::engine::validity`]).
    pub(crate) fn valid_until(&self) -> Instant {
        let Validity { sent_at, until } = self.validity();
        until.min(validity::validity_end(sent_at, self.ttl))
    }

    /// When the request behind the current validity was sent.
    pub(crate) fn confirmed_at(&self) -> Instant {
        self.validity().sent_at
    }

    /// Its lease on the server now, as a hold that continues it starts
    /// from: its shorter first lease until a renewal was confirmed, then
    /// its ttl.
    pub(crate) fn on_server(&self) -> FirstLease {
        match self.shorter_first {
            Some((first, sent_at)) if self.confirmed_at() <= sent_at => FirstLease::Shorter(first),
            _ => FirstLease::Ttl,
        }
    }

    /// How long its lease on the server lasts from its last confirmation.
    pub(crate) fn lease_on_server(&self) -> Duration {
        match self.on_server() {
            FirstLease::Shorter(first) => first,
            FirstLease::Ttl | FirstLease::RenewedAtOnce => self.ttl,
        }
    }

    /// When this holder's hold began (see [`Grant::granted_at`]).
    pub(crate) fn granted_at(&self) -> Instant {
        self.granted_at
    }

    fn validity(&self) -> Validity {
        *self.validity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A renewal sent at `sent_at` was confirmed; returns the new end. A
    /// later send always ends later, with the margin as it is now.
    pub(crate) fn renewed(&self, sent_at: Instant) -> Instant {
        let mut validity = self.validity.lock().unwrap_or_else(|e| e.into_inner());
        if sent_at > validity.sent_at {
            *validity = Validity {
                sent_at,
                until: validity::validity_end(sent_at, self.ttl),
            };
        }
        drop(validity);
        self.valid_until()
    }

    /// Moves a held lease to `to`; true when this call made the change.
    /// `account` runs under the state's lock, before anyone waiting on
    /// [`Self::lost_signal`] is woken and before anyone sees the new
    /// state, so what it records is visible to them.
    pub(crate) fn leave_held(&self, to: LeaseState, account: impl FnOnce()) -> bool {
        self.state.modify(|state| {
            if *state != LeaseState::Held {
                return false;
            }
            *state = to;
            account();
            // A place was never a lock held.
            if self.role == Role::Hold {
                metrics::ended(self.labels, || {
                    self.clock.now().saturating_duration_since(self.granted_at)
                });
            }
            true
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

    /// The locks moved to another server since this lease was confirmed.
    pub(crate) fn mark_moved(&self) {
        self.unconfirmed_since_move.store(true, Ordering::SeqCst);
    }

    /// A renewal sent after the last move was confirmed.
    pub(crate) fn confirmed_after_move(&self) {
        self.unconfirmed_since_move.store(false, Ordering::SeqCst);
    }

    /// Whether the lease awaits its confirmation on the server the locks
    /// moved to.
    pub(crate) fn unconfirmed_since_move(&self) -> bool {
        self.unconfirmed_since_move.load(Ordering::SeqCst)
    }

    /// Marks the lease released by its holder (a later loss is not news).
    pub(crate) fn mark_released(&self) {
        self.leave_held(LeaseState::Released, || {});
    }

    /// Completes once the lease is lost; never for a lease released by
    /// its holder (see [`StateCell::lost`]).
    pub(crate) fn lost_signal(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        self.state.lost()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A held lease of one second on the key `k`.
    pub(crate) fn lease() -> Lease {
        Lease::new(Grant {
            id: 1,
            keys: LockKeys::new("lock:", "k").unwrap(),
            also: Vec::new(),
            leased: Leased::KEY,
            role: Role::Hold,
            token: OwnerToken::random("test"),
            fence: 1,
            ttl: Duration::from_secs(1),
            route: Route::pooled(0),
            sent_at: Clock::Boot.now(),
            granted_at: Clock::Boot.now(),
            fence_basis: FenceBasis::issued_now(1),
            clock: Clock::Boot,
            max_hold: None,
            first_lease: FirstLease::Ttl,
            labels: metrics::Labels {
                template: "k",
                primitive: "test",
            },
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
    fn a_loss_signal_from_before_the_loss_is_woken() {
        let lease = lease();
        let mut signal = Box::pin(lease.lost_signal());
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(signal.as_mut().poll(&mut cx).is_pending());
        let mut accounted = false;
        assert!(lease.leave_held(LeaseState::Lost, || accounted = true));
        assert!(accounted);
        assert!(signal.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_loss_signal_from_after_an_unheard_loss_still_sees_it() {
        let lease = lease();
        // Nobody listens: the change is made without a wake-up.
        assert!(lease.leave_held(LeaseState::Lost, || {}));
        let signal = lease.lost_signal();
        assert_eq!(futures_util::FutureExt::now_or_never(signal), Some(()));
        assert_eq!(lease.state(), LeaseState::Lost);
    }

    #[test]
    fn a_renewal_never_shortens_validity() {
        // A lease's end follows the stall record: no other test moves it
        // between the reads compared here.
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let lease = lease();
        let before = lease.valid_until();
        let earlier = before - Duration::from_secs(5);
        assert_eq!(lease.renewed(earlier), before);
        assert!(lease.confirmed_at() < before - Duration::from_millis(500));
    }

    #[test]
    fn a_renewal_moves_the_confirmation_with_the_validity() {
        // A lease's end follows the stall record: no other test moves it
        // between the reads compared here.
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let lease = lease();
        let later = lease.confirmed_at() + Duration::from_millis(300);
        let end = lease.renewed(later);
        assert_eq!(lease.confirmed_at(), later);
        assert_eq!(lease.valid_until(), end);
    }
}
