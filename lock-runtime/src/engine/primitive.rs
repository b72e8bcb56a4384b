//! The seam between the engine and a primitive: what the engine asks of a
//! primitive ([`Primitive`]), and the words both speak ([`Try`],
//! [`AcquireReply`], [`PassCall`], [`Passed`]).
//!
//! The engine does what is the same for every primitive: it takes a turn
//! in its locker's line, tries, listens for a release and tries again
//! within one bound, keeps a clean-up armed while a try may hold
//! something, turns a grant into a lease that the watchdog renews and that
//! is told when it is lost, passes a hold to the next task of the locker
//! or lets it go for the callers outside it, and releases it now or on
//! drop. A primitive says what a try, a release and a pass *are* on the
//! server: its scripts (with their in-memory twins), how their answers
//! read, and, on Redlock, how many masters make a decision. Each
//! primitive is a value of a type implementing [`Primitive`], made per
//! request: it carries what the request names (the resource's
//! [`LockKeys`], and for the family to come a mode, a limit, a count of
//! permits).

use std::future::Future;
use std::time::Duration;

use crate::backend::flights::{InFlight, Landing};
use crate::backend::{Backend, NodeBackend, Route};
use crate::config::ReplicaAck;
use crate::engine::handover::GiveBack;
use crate::engine::lease::Leased;
use crate::engine::wait::Sightings;
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::owner::{LineId, OwnerToken};

/// One primitive of the lock family, as the engine drives it.
pub(crate) trait Primitive: Clone + Send + Sync + 'static {
    /// Its name in metrics (`primitive = ..`) and traces.
    const NAME: &'static str;

    /// How it gives back what an owner token holds on a resource, on the
    /// route the hold was taken on (an untaken hand-over is undone with
    /// it; see [`crate::engine::handover`]).
    const GIVE_BACK: GiveBack;

    /// The resource it takes. Its line in the locker is its lock key
    /// ([`LockKeys::lock`]), its release messages come on
    /// [`LockKeys::channel`], and errors name it by [`LockKeys::name`].
    fn keys(&self) -> &LockKeys;

    /// Further resources one hold takes under the same token and lease,
    /// besides [`Self::keys`], each leased as [`Self::leased`] says (a hold
    /// of several keys at once): the watchdog renews them all in its
    /// batches, and the loss of any is the loss of the hold. None by
    /// default.
    fn also(&self) -> &[LockKeys] {
        &[]
    }

    /// The channel of the resource that kept the last try from its grant,
    /// when it is not always [`Self::channel`] (a hold of several
    /// resources waits on the one that was busy): a waiter listens there
    /// from its next wait on. By default, [`Self::channel`].
    fn busy_channel(&self) -> &str {
        self.channel()
    }

    /// What a holder's lease is on the server (the exclusive lock's: the
    /// lock key holds the token).
    fn leased(&self) -> Leased {
        Leased::KEY
    }

    /// Where this locker's tasks that want it queue (one line per key).
    fn line(&self) -> &str {
        self.keys().lock()
    }

    /// The channel its release messages come on.
    fn channel(&self) -> &str {
        self.keys().channel()
    }

    /// Whether an acquisition that may wait takes its turn in its locker's
    /// line, so that one task at a time contends on the server for the
    /// key: yes for a lock one holder holds at a time; no where many may
    /// hold at once and all of them should try (readers of a read/write
    /// lock).
    fn takes_turn(&self) -> bool {
        true
    }

    /// How many of the resource's units one waiter of it waits for (a
    /// semaphore's permits): a release message that says how many units
    /// are free wakes, in each process, its longest waiters only as long
    /// as what they wait for fits (see [`crate::engine::wait`]).
    fn wants(&self) -> usize {
        1
    }

    /// How many masters tell one of its releases that name their releaser
    /// (`;by=`) before the release wakes a waiter: on Redlock, as many as
    /// its grant needs, so that the try it wakes for finds the release
    /// landed where it can win; one elsewhere.
    fn told_by(&self, backend: &Backend) -> usize {
        let _ = backend;
        1
    }

    /// Whether a hold is passed to the next task of the locker in line
    /// ([`Self::pass`], or in process) and, after the line's share, let go
    /// for the callers outside it ([`Self::yield_to_others`]); otherwise
    /// it is released and the next in line tries as anyone else.
    const PASSES: bool = true;

    /// Whether its release hands the lock to the first of its waiters
    /// inside the release, and names it (by the digest of its token) in
    /// the release message: that waiter then holds the lock without a try
    /// of its own, counted from its own last request. The message also
    /// names the waiters behind it ([`crate::engine::wait::Behind`]): a
    /// holder whose next in line waits in the same locker hands it the
    /// lock in process (see [`Self::release_served`]).
    const HANDS_OVER: bool = false;

    /// What a waiting attempt keeps while it waits, when a busy answer
    /// says its token holds a place ([`AcquireReply::Busy`]'s `place`):
    /// what it is on the server and how long its lease runs between
    /// renewals. None for a primitive whose waiters keep nothing.
    fn place(&self) -> Option<Place> {
        None
    }

    /// Gives up the place `token` holds (the attempt ended without the
    /// hold), if it still holds it; true when it did. Only called for a
    /// primitive with a [`Self::place`].
    fn leave_place<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        let _ = (backend, route, token);
        std::future::ready(Ok(false))
    }

    /// One try at taking it for `attempt.token`. Idempotent for that
    /// token: a retry after a lost reply finds the hold already its own.
    fn try_acquire<'a>(
        &'a self,
        backend: &'a Backend,
        attempt: &'a Try<'a>,
    ) -> impl Future<Output = Result<AcquireReply, LockError>> + Send + 'a;

    /// Lets go of what `token` holds, if it still holds it, and tells the
    /// waiters what that freed; true when it held something. `fence` is
    /// the hold's (0 for the clean-up of a try, which does not know it): a
    /// primitive that hands the hold over in its release gives the next
    /// owner a higher one. On Redlock, on each master after `landing`
    /// landed there (the calls of the acquisition still running on it).
    fn release<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
        fence: u64,
        landing: Option<&'a Landing>,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a;

    /// [`Self::release`] of a hold that waiters of the locker took in
    /// process, one after another, since a release last handed it over
    /// on the server: their places (`served`, their tokens) leave the line
    /// with it. Only a primitive whose releases hand the hold over
    /// ([`Self::HANDS_OVER`]) passes it so; by default, the release.
    fn release_served<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
        fence: u64,
        served: &'a [OwnerToken],
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        let _ = served;
        self.release(backend, route, token, fence, None)
    }

    /// Hands the giver's hold to the taker's token in one step on its node
    /// (the next task in the locker's line), without letting go of it.
    /// Never called for a primitive that passes nothing ([`Self::PASSES`]
    /// false): by default, it changes nothing.
    fn pass<'a>(
        &'a self,
        node: &'a NodeBackend,
        pass: &'a PassCall<'a>,
    ) -> impl Future<Output = Result<Passed, LockError>> + Send + 'a {
        let _ = (node, pass);
        std::future::ready(Ok(Passed::NotOurs))
    }

    /// Lets go of `token`'s hold for the callers outside the locker: the
    /// locker's `line` keeps off it for `grace` (see
    /// [`crate::engine::handover`]). True when it still held it. Never
    /// called for a primitive that passes nothing: by default, it lets go
    /// of nothing.
    fn yield_to_others<'a>(
        &'a self,
        node: &'a NodeBackend,
        route: Route,
        token: &'a OwnerToken,
        line: LineId,
        grace: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        let _ = (node, route, token, line, grace);
        std::future::ready(Ok(false))
    }
}

/// A place a waiting attempt keeps: a lease its token holds while it
/// waits, renewed by the watchdog, given up when the attempt ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) leased: Leased,
    pub(crate) ttl: Duration,
}

/// One try at taking a primitive's resource.
pub(crate) struct Try<'a> {
    /// Where the try goes; its clean-up goes the same way.
    pub(crate) route: Route,
    pub(crate) token: &'a OwnerToken,
    /// The lease, in the whole milliseconds Redis takes.
    pub(crate) ttl: Duration,
    /// Wait for that many replicas after a grant (one node topologies).
    pub(crate) replicas: Option<ReplicaAck>,
    /// Carried by calls the try leaves running in the background.
    pub(crate) flight: &'a InFlight,
    /// The acquisition has not met a busy resource yet: a primitive may
    /// try plain commands first (where a busy answer needs its script
    /// anyway).
    pub(crate) plain_first: bool,
    /// The line the try is made for, when it takes turns with its
    /// locker's other tasks: a resource that line let go of for others is
    /// busy to it (see [`crate::engine::handover`]).
    pub(crate) line: Option<LineId>,
    /// The acquisition may wait: a primitive whose waiters keep a place
    /// ([`Primitive::place`]) takes one; a single try takes none.
    pub(crate) waits: bool,
}

/// What one try found.
#[derive(Clone, Debug)]
pub(crate) enum AcquireReply {
    /// The caller holds it now; `fence` is its fencing token.
    Acquired {
        /// Strictly increasing per key across all owners.
        fence: u64,
    },
    /// Someone else holds it, for `pttl` more (None when the server did
    /// not say, e.g. a key written without expiry by something other than
    /// us). Proves that no earlier try of this acquisition holds it.
    Busy {
        /// Remaining lease of the current owner.
        pttl: Option<Duration>,
        /// What a Redlock round saw on each master, which tells the release
        /// messages that follow apart (none elsewhere: every one is news).
        sightings: Option<Sightings>,
        /// The try left the attempt's token holding a place while it waits
        /// (see [`Primitive::place`]).
        place: bool,
    },
    /// Nothing is known: the call did not run this time (a cluster slot in
    /// mid-migration), but an earlier try of the same acquisition may hold
    /// it. Try again; a clean-up may still be owed.
    Unknown,
    /// Redlock: too few masters granted it, and the round has cleaned up
    /// after itself. `down` when the masters that failed did so at the
    /// connection (refused, dropped, never reached) rather than by being
    /// slow: one more round at once may find them reconnected, and waiting
    /// longer will not help.
    NoQuorum {
        /// Masters that granted it in that round.
        granted: usize,
        /// Masters a decision needs.
        needed: usize,
        /// A majority is known down, not merely slow.
        down: bool,
    },
}

/// One hand-over of a held resource to the next task in line.
pub(crate) struct PassCall<'a> {
    pub(crate) route: Route,
    pub(crate) giver: &'a OwnerToken,
    pub(crate) given_fence: u64,
    pub(crate) taker: &'a OwnerToken,
    pub(crate) ttl: Duration,
}

/// What a pass did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Passed {
    /// The taker holds it now, with `fence`; `marked` when someone
    /// outside the giver's locker wants it.
    To { fence: u64, marked: bool },
    /// It was no longer the giver's: nothing changed.
    NotOurs,
}
