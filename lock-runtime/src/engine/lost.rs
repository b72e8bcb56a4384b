//! What happens when a lock is lost, from start to end.
//!
//! **How it is noticed.** A held lease is watched by the locker's watchdog
//! ([`crate::engine::watchdog`]), which renews it every ttl/3:
//!
//! - A renewal answered "not yours" (the key was deleted, expired, taken
//!   over, evicted, or missing on a new master after a failover): lost at
//!   once, [`Cause::Refused`]. After a Sentinel failover the watchdog
//!   renews every lease at once, so a lease that did not reach the new
//!   master is found within a round trip, not at its next renewal.
//! - Renewals that fail (server down, frozen, partitioned) are retried
//!   until the lease's local validity runs out ([`crate::engine::validity`]: the
//!   ttl counted from the request's send, less the drift allowance and a
//!   reaction margin that grows with the stalls the process saw): lost
//!   then, [`Cause::Unconfirmed`]. That deadline is a timer of its own, so
//!   a renewal stuck on a frozen server cannot delay it.
//! - A fixed lease (`watchdog(false)`) is lost when its validity ends,
//!   [`Cause::LeaseEnded`].
//! - On the in-memory store, a lease whose acquiring runtime shut down
//!   (taking its watchdog along) is lost then, [`Cause::Unwatched`].
//!
//! Either way the holder is told before the key can expire on the server,
//! with the reaction margin left to stop, as long as the process runs.
//!
//! **How it is told.** [`declare`] moves the lease from held to lost, once
//! (a lease released by its holder is never reported lost), counts it, logs
//! it at warn, and wakes everything waiting on [`signal`]: the guard's and
//! handles' `lost()` futures, and `is_held()` turns false.
//!
//! **What the holder does.** Through the attribute, by its `on_lost`
//! ([`OnLost`], applied by [`guarded`]): `cancel` (the default) drops the
//! body at its next `.await` and the call returns `Err(LockError::Lost)`;
//! `continue` lets the body finish (a stale write is then for the fence to
//! refuse). A body that finished while the lease was no longer valid also
//! returns `Err(LockError::Lost)` under `cancel`: a process paused past its
//! lease (GC, swap, SIGSTOP) can finish before the watchdog runs again, so
//! the end of a body checks the lease's validity itself
//! ([`declare_if_lapsed`]) and, under either `on_lost`, declares the loss
//! there if the watchdog has not yet.
//! Without the attribute, the holder races `guard.lost()` against its work.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use crate::engine::lease::{Lease, LeaseState, Role};
use crate::engine::stats::Counters;

/// Why a lease was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// A renewal was answered "not yours".
    Refused,
    /// No renewal was confirmed before the lease's validity ran out.
    Unconfirmed,
    /// A fixed lease reached the end of its validity.
    LeaseEnded,
    /// The body ended after the lease's validity, before the watchdog's
    /// timer ran: the process was paused or starved past its lease.
    Lapsed,
    /// The lease reached its hold cap (`max_hold`); the watchdog stopped
    /// renewing it.
    HoldCap,
    /// Its watchdog ended with the runtime it ran on (an in-memory store's
    /// lease kept past the runtime that acquired it): nothing renews it.
    Unwatched,
    /// Its holder released it and found it gone (expired, deleted by an
    /// operator, or taken over) before the watchdog had seen it: nobody is
    /// told any more, but it is counted and logged as a loss.
    GoneAtRelease,
}

impl Cause {
    /// The metric label (see [`crate::metrics`]).
    fn label(self) -> &'static str {
        match self {
            Cause::Refused => "refused",
            Cause::Unconfirmed => "unconfirmed",
            Cause::LeaseEnded => "lease_ended",
            Cause::Lapsed => "lapsed",
            Cause::HoldCap => "hold_cap",
            Cause::Unwatched => "unwatched",
            Cause::GoneAtRelease => "gone_at_release",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Cause::Refused => "the server no longer holds it for us",
            Cause::Unconfirmed => "its lease ran out before a renewal was confirmed",
            Cause::LeaseEnded => "its fixed lease ended",
            Cause::Lapsed => "the process ran past its lease (paused or starved)",
            Cause::HoldCap => "it was held for its whole hold cap (max_hold)",
            Cause::Unwatched => "the runtime that acquired it shut down, and its watchdog with it",
            Cause::GoneAtRelease => {
                "it was gone when its holder released it (expired, deleted or taken over)"
            }
        }
    }
}

/// Reports `lease` lost for `cause`: once, and never after a release. A
/// place a waiting attempt kept is no lock: its loss is not counted, only
/// noted (the attempt takes a new place at its next try).
pub(crate) fn declare(lease: &Lease, cause: Cause, counters: &Counters) {
    if lease.role == Role::Place {
        if lease.leave_held(LeaseState::Lost, || {}) {
            tracing::debug!(
                key = lease.keys.name(),
                cause = cause.label(),
                "a waiting place ended"
            );
        }
        return;
    }
    let account = || {
        Counters::bump(&counters.lost);
        if cause == Cause::HoldCap {
            lease.mark_capped();
        }
    };
    if lease.leave_held(LeaseState::Lost, account) {
        report(lease, cause);
    }
}

/// Counts and reports `lease`'s lock found gone by its holder's release
/// (which answered `Ok(false)`), unless a loss was declared already: a
/// lock that was acquired ends either released or lost.
pub(crate) fn found_gone_at_release(lease: &Lease, counters: &Counters) {
    if lease.state() != LeaseState::Lost {
        Counters::bump(&counters.lost);
        report(lease, Cause::GoneAtRelease);
    }
}

/// The loss's metric and its warning, in the hold's span.
fn report(lease: &Lease, cause: Cause) {
    crate::metrics::loss(lease.labels, cause.label());
    tracing::warn!(
        parent: &lease.span,
        key = lease.keys.name(),
        fence = lease.fence,
        cause = cause.label(),
        reason = cause.describe(),
        "lock lost"
    );
}

/// Declares `lease` lost if its validity ran out while it is still held:
/// the process was paused past it (GC, swap, SIGSTOP) and is running again
/// before the watchdog's own timer. Called when a body ends, so that a
/// holder that finished late is told (`lost()` completes, the loss is
/// counted and logged) before its call returns, whatever its `on_lost`.
/// Answers whether the lease is still held ([`Lease::is_held`]), so that
/// the caller need not look at the clock again.
pub(crate) fn declare_if_lapsed(lease: &Lease, counters: &Counters) -> bool {
    let held = lease.is_held();
    #[cfg(feature = "sabotage")]
    if crate::sabotage::active() == Some(crate::sabotage::Sabotage::SilentAfterStall) {
        return held;
    }
    if !held && lease.state() == LeaseState::Held {
        declare(lease, Cause::Lapsed, counters);
    }
    held
}

/// Completes when `lease` is declared lost; never for a lease released by
/// its holder. Owns what it needs (`'static`), so it can be raced against
/// the work the lock protects.
pub(crate) fn signal(lease: &Arc<Lease>) -> impl Future<Output = ()> + Send + use<> {
    lease.lost_signal()
}

/// What a body does when its lock is lost (`on_lost = ".."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnLost {
    /// Drop the body at its next await and return `LockError::Lost`.
    Cancel,
    /// Let the body finish and log the loss.
    Continue,
}

/// Runs `body` while `lease` is held, as `on_lost` says: `None` when the
/// body was cancelled because the lease was lost.
///
/// Under `cancel` the loss is looked at before each poll of the body, so a
/// body is never polled once its lease is lost. The wait on [`signal`] is
/// set up only once the body first returns pending: a body that ends in
/// its first poll (many do) would subscribe, register a waker and take it
/// back for nothing, which cost more than the look at the state it needs.
pub(crate) async fn guarded<F: Future>(
    lease: &Arc<Lease>,
    on_lost: OnLost,
    body: F,
) -> Option<F::Output> {
    match on_lost {
        OnLost::Cancel => {
            let mut body = std::pin::pin!(body);
            let mut lost = std::pin::pin!(not_yet(signal));
            std::future::poll_fn(|cx| {
                // The state itself, not only the signal: the signal's poll
                // may answer pending without looking (tokio's cooperative
                // budget), and a lost lease's body must not run on.
                let lost_now = lease.state() == LeaseState::Lost
                    || lost
                        .as_mut()
                        .as_pin_mut()
                        .is_some_and(|signal| signal.poll(cx).is_ready());
                if lost_now {
                    return Poll::Ready(None);
                }
                if let Poll::Ready(output) = body.as_mut().poll(cx) {
                    return Poll::Ready(Some(output));
                }
                if lost.is_none() {
                    lost.set(Some(signal(lease)));
                    // Looks at the state before it waits: a loss since the
                    // look above ends the body now rather than at its next
                    // wake-up.
                    if let Some(signal) = lost.as_mut().as_pin_mut()
                        && signal.poll(cx).is_ready()
                    {
                        return Poll::Ready(None);
                    }
                }
                Poll::Pending
            })
            .await
        }
        OnLost::Continue => Some(body.await),
    }
}

/// No future of `make`'s yet: the empty slot for one, typed.
fn not_yet<F>(_make: fn(&Arc<Lease>) -> F) -> Option<F> {
    None
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Context;

    use futures_util::FutureExt;
    use futures_util::task::{ArcWake, waker};

    use super::*;
    use crate::engine::lease::tests::lease;

    /// Records that it was woken.
    #[derive(Default)]
    struct Woken(AtomicBool);

    impl ArcWake for Woken {
        fn wake_by_ref(woken: &Arc<Self>) {
            woken.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_body_ended_in_its_first_poll_gives_its_output() {
        let lease = Arc::new(lease());
        let guarded = guarded(&lease, OnLost::Cancel, async { 7 });
        assert_eq!(guarded.now_or_never(), Some(Some(7)));
    }

    #[test]
    fn a_body_is_not_polled_once_its_lease_is_lost() {
        let lease = Arc::new(lease());
        assert!(lease.leave_held(LeaseState::Lost, || {}));
        let body = async { panic!("the body was polled after the loss") };
        assert_eq!(
            guarded(&lease, OnLost::Cancel, body).now_or_never(),
            Some(None)
        );
    }

    #[test]
    fn a_pending_body_is_woken_and_cancelled_by_the_loss() {
        let lease = Arc::new(lease());
        let (_never, body) = tokio::sync::oneshot::channel::<()>();
        let mut guarded = Box::pin(guarded(&lease, OnLost::Cancel, body));
        let woken = Arc::new(Woken::default());
        let waker = waker(woken.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(guarded.as_mut().poll(&mut cx).is_pending());
        assert!(lease.leave_held(LeaseState::Lost, || {}));
        assert!(woken.0.load(Ordering::SeqCst), "the loss woke nobody");
        assert!(matches!(guarded.as_mut().poll(&mut cx), Poll::Ready(None)));
    }
}
