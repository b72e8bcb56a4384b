//! Handing a held lock to the next task of the same locker that waits for
//! it, without letting go of it on the server.
//!
//! # Why
//! On a hot key (a flash sale) the tasks of one process queue for the lock
//! in their locker's line (see [`crate::engine::wait::Turns`]). Releasing it and
//! having the next in line take it again costs two round trips, a release
//! message and a wake-up, and the key is free in between. A pass keeps the
//! key taken throughout: most often in process, with no server call (below);
//! otherwise in one round trip, the primitive's pass script, which swaps
//! the holder's token on the key for a fresh token of the next task in
//! line and gives it a fence from the server's clock, as any grant does
//! (the exclusive lock's `PASS`). A lock that the script finds no longer
//! the holder's is not passed, and the next in line takes it the usual
//! way.
//!
//! # In process, without the server
//! Most passes need no server call at all. The lock stays on the server
//! under the holder's token, and the taker continues the same hold: the
//! same token and lease (renewed by the watchdog as before), and the
//! giver's fence plus one. That fence is safe without the server's clock
//! while it stays below it: a fence from one node is at most the node's
//! clock in µs when issued, so a pass may raise it by one as long as at
//! least two µs passed since the server last issued one for this hold
//! (see [`FenceBasis`]); every later grant by
//! the server is then still higher. A pass in process also needs a lease
//! the giver still trusts for at least half its ttl, and a taker that
//! renews it. After [`PASSES_IN_PROCESS_IN_A_ROW`] of them, or when any
//! of this does not hold, the next pass goes through the server, which
//! refreshes the lease, issues a fence from its clock and says whether
//! someone outside the locker waits (the giver cannot see that alone).
//!
//! A pass in process frees nothing and checks nothing on the server: if
//! the key was lost without the holder knowing yet (deleted by someone
//! else), the taker learns it as the giver would have, from the
//! watchdog's next renewal, within its lease's validity. After the locks
//! moved to another server (a failover the locker followed), which the
//! watchdog answers by renewing every lease there at once, passes go
//! through the server until a renewal sent after the move confirmed the
//! hold: a lock that did not reach the new server is not passed on.
//!
//! # Fair to the other processes
//! While nobody outside the locker wants the lock, it is passed as long as
//! the line has someone. Once someone else marked it (a busy try, whether
//! it waits or tries once; see the scripts' docs), the line passes it at
//! most [`PASSES_WHILE_OTHERS_WAIT`] times in a row and then lets it go
//! for them: the key keeps, for a grace, a mark that this locker's tasks
//! treat as busy and anyone else as free (the primitive's yield script,
//! the exclusive lock's `YIELD`), and the release is announced. Whoever
//! outside takes it holds it marked, so its release wakes the line at
//! once; if nobody takes it, it ends with the
//! grace and the line takes the lock again. The next in line holds back
//! that long meanwhile (nothing it could try would succeed), and learns
//! from the outcome: a grace nobody used is twice as long the next time,
//! up to [`YIELD_GRACE_MAX`], since the one it was for may be farther away
//! (its release message, then its try, each cross the distance); a used
//! one shrinks by an eighth, down to [`YIELD_GRACE_MIN`]. A grace that is
//! used costs the line nothing beyond the other's hold: the line wakes at
//! its release, whenever that comes. Whoever tries at a moment of its own
//! (a caller that tries once every so often, a waiter's timer) finds the
//! key free for the grace too.
//!
//! The line learns of the mark from a pass through the server, at least
//! every [`PASSES_IN_PROCESS_IN_A_ROW`] + 1 passes, and by then it has had
//! its share; so a caller in another process waits for about that many
//! holds of this process, not for the whole line. Batches of a few grants
//! per process are what make the sale fast (handoffs inside a process
//! cost next to nothing, and between processes the usual release and
//! wake-up). A caller of this locker that tries once takes no turn in the
//! line: to it, as to a caller outside, the lock the line let go of is
//! free.
//!
//! # Never held by nobody
//! A pass that is not taken (the next in line gave up meanwhile, or wants
//! another ttl or replica acknowledgements) is released again; one whose
//! answer never came is released too (a compare-and-delete, harmless if
//! the pass did not happen). A taker that gives a pass back and then finds
//! the lock free takes it as the line's next hold, not as a new run: the
//! line still lets waiters outside in after its share.

use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use crate::backend::{Backend, Route};
use crate::engine::core::Core;
use crate::engine::fence::FenceBasis;
use crate::engine::lease::{FirstLease, Lease, LeaseState};
use crate::error::LockError;
use crate::host::Host;
use crate::keys::LockKeys;
use crate::owner::OwnerToken;

/// How a primitive gives back what an owner token holds on a resource
/// (its release, on the route the hold was taken on): what an untaken
/// hand-over is undone with. The last argument: the places in line of the
/// waiters that took the hold in process before (see
/// [`Handover::served`]), which leave the line with it.
pub(crate) type GiveBack = fn(
    Backend,
    Route,
    LockKeys,
    OwnerToken,
    Vec<OwnerToken>,
) -> BoxFuture<'static, Result<bool, LockError>>;

/// Passes in a row while someone outside the locker waits for the lock.
pub(crate) const PASSES_WHILE_OTHERS_WAIT: u32 = 8;

/// Passes in process in a row before one goes through the server (to
/// learn whether someone outside the locker waits, and for a fresh fence).
pub(crate) const PASSES_IN_PROCESS_IN_A_ROW: u32 = PASSES_WHILE_OTHERS_WAIT;

/// The first grace a line keeps off a lock it let go of for callers
/// outside its locker: a few round trips on one network, the time a woken
/// waiter needs to take it. If nobody outside took it, the line lost this
/// much once.
pub(crate) const YIELD_GRACE_MIN: Duration = Duration::from_millis(1);

/// The longest grace: room for a waiter 100 ms away from the server
/// (round trip; another region), whose release message and then try each
/// cross that distance, with as much again for a stall of either
/// machine. At most this much is lost per yield when the one it was for
/// has gone.
pub(crate) const YIELD_GRACE_MAX: Duration = Duration::from_millis(256);

/// The next grace after one that lasted `grace`: shorter by an eighth
/// when a caller outside `used` it, else (the lock was still free when it
/// ended, and no release was heard) twice as long.
pub(crate) fn next_yield_grace(grace: Duration, used: bool) -> Duration {
    if used {
        grace.saturating_sub(grace / 8).max(YIELD_GRACE_MIN)
    } else {
        grace.saturating_mul(2).min(YIELD_GRACE_MAX)
    }
}

/// A lock passed to the next task in line, until that task takes it.
pub(crate) struct Handover {
    /// The taker's token, now the owner's on the server.
    pub(crate) token: OwnerToken,
    /// The taker's fence.
    pub(crate) fence: u64,
    /// The lease the pass set.
    pub(crate) ttl: Duration,
    /// Where the pass ran; the taker's release goes the same way.
    pub(crate) route: Route,
    /// When the request the taker's validity counts from was sent: the
    /// pass, or in process the hold's last confirmed renewal.
    pub(crate) sent_at: Instant,
    /// The last fence the server issued: `fence` itself, or in process
    /// the hold's.
    pub(crate) fence_basis: FenceBasis,
    /// Passed without a server call: the taker continues the giver's hold.
    pub(crate) in_process: bool,
    /// The lease on the server the taker starts from: the ttl, or (a hold
    /// a release handed over, not renewed yet, passed on in process) the
    /// shorter one it began with.
    pub(crate) first_lease: FirstLease,
    /// Where the line is on the server (a lock its releases hand over):
    /// the tokens of the waiters that took the hold in process since a
    /// release last handed it over there. Their places are still in the
    /// server's line, and leave it with the hold's next release there
    /// (not one call each at every pass, on the way to the next body).
    pub(crate) served: Vec<OwnerToken>,
    undo: Option<Undo>,
}

/// What gives an untaken hand-over back.
struct Undo {
    keys: LockKeys,
    backend: Backend,
    host: Host,
    give_back: GiveBack,
    /// How long the release in the background may take.
    bound: Duration,
}

impl Undo {
    fn new(keys: &LockKeys, core: &Core, give_back: GiveBack) -> Self {
        Self {
            keys: keys.clone(),
            backend: core.backend.clone(),
            host: core.host.clone(),
            give_back,
            bound: core.config.two_calls_bound(),
        }
    }
}

impl Handover {
    /// A hand-over about to be sent to the server: until it is taken, its
    /// drop releases the taker's token (in the background, by
    /// `give_back`).
    pub(crate) fn prepare(
        keys: &LockKeys,
        core: &Core,
        give_back: GiveBack,
        token: OwnerToken,
        ttl: Duration,
        route: Route,
        sent_at: Instant,
    ) -> Self {
        Self {
            token,
            fence: 0,
            ttl,
            route,
            sent_at,
            fence_basis: FenceBasis::issued_now(0),
            in_process: false,
            first_lease: FirstLease::Ttl,
            served: Vec::new(),
            undo: Some(Undo::new(keys, core, give_back)),
        }
    }

    /// The server answered a pass with `fence`.
    pub(crate) fn passed(&mut self, fence: u64) {
        self.fence = fence;
        self.fence_basis = FenceBasis::issued_now(fence);
    }

    /// `giver`'s hold, passed in process if it may be (see the module
    /// docs): at least half its lease on the server left, and room for one
    /// more fence.
    /// Until it is taken, its drop releases the lock (by `give_back`).
    pub(crate) fn in_process(
        giver: &Lease,
        core: &Core,
        give_back: GiveBack,
        now: Instant,
    ) -> Option<Self> {
        // Released by its holder, not lost; and not awaiting confirmation
        // on the server the locks moved to (a failover): the next pass then
        // goes through that server, which tells whether the lock got there.
        if giver.state() != LeaseState::Released || giver.unconfirmed_since_move() {
            return None;
        }
        let left = giver.valid_until().saturating_duration_since(now);
        if left < giver.lease_on_server() / 2 {
            return None;
        }
        let fence = giver.fence_basis.next_after(giver.fence)?;
        #[cfg(feature = "sabotage")]
        let fence = match crate::sabotage::active() {
            Some(crate::sabotage::Sabotage::SameFencePass) => giver.fence,
            _ => fence,
        };
        Some(Self {
            token: giver.token.clone(),
            fence,
            ttl: giver.ttl,
            route: giver.route,
            sent_at: giver.confirmed_at(),
            fence_basis: giver.fence_basis,
            in_process: true,
            first_lease: giver.on_server(),
            served: Vec::new(),
            undo: Some(Undo::new(&giver.keys, core, give_back)),
        })
    }

    /// The taker took the lock: nothing is left to undo.
    pub(crate) fn taken(mut self) {
        self.undo = None;
    }

    /// The pass did not happen (the lock was no longer the giver's).
    pub(crate) fn void(mut self) {
        self.undo = None;
    }

    /// Gives an untaken hand-over back now, on its route: whether the lock
    /// was the taker's (so the pass had happened), or None when the release
    /// failed and that is unknown (the drop then tries once more, in the
    /// background).
    pub(crate) async fn give_back(mut self) -> Option<bool> {
        let undo = self.undo.as_ref()?;
        let giving_back = (undo.give_back)(
            undo.backend.clone(),
            self.route,
            undo.keys.clone(),
            self.token.clone(),
            self.served.clone(),
        );
        let released = giving_back.await;
        if released.is_ok() {
            self.undo = None;
        }
        released.ok()
    }
}

impl Drop for Handover {
    fn drop(&mut self) {
        let Some(Undo {
            keys,
            backend,
            host,
            give_back,
            bound,
        }) = self.undo.take()
        else {
            return;
        };
        let name = keys.name().to_owned();
        let served = std::mem::take(&mut self.served);
        let giving_back = give_back(backend, self.route, keys, self.token.clone(), served);
        host.detach(bound, async move {
            if let Err(err) = giving_back.await {
                tracing::debug!(key = name, error = %err, "release of an untaken hand-over failed; the lease will run out");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hold_back_doubles_until_a_waiter_uses_it_and_stays_in_bounds() {
        let mut grace = YIELD_GRACE_MIN;
        for _ in 0..3 {
            grace = next_yield_grace(grace, false);
        }
        assert_eq!(grace, YIELD_GRACE_MIN * 8);
        grace = next_yield_grace(grace, true);
        assert_eq!(grace, YIELD_GRACE_MIN * 7);
        for _ in 0..20 {
            grace = next_yield_grace(grace, false);
        }
        assert_eq!(grace, YIELD_GRACE_MAX);
        for _ in 0..80 {
            grace = next_yield_grace(grace, true);
        }
        assert_eq!(grace, YIELD_GRACE_MIN);
    }
}
