//! The fair lock: one owner at a time, granted in the order the server
//! saw its waiters' first tries, handed to the next waiter inside the
//! release.
//!
//! - A waiter keeps a place in line ([`scripts`]): a lease the watchdog
//!   renews while it waits, so a waiter that dies, is dropped or whose
//!   wait runs out leaves the line within that lease (at once when it can
//!   say so), and a live waiter that waits however long keeps its place.
//! - The release hands the lock to the first live waiter in the same
//!   script, and its message names that waiter (the digest of its token)
//!   with its fence: the new owner holds the lock with no try of its own.
//!   On the server, the lock's first lease is what was left of that
//!   waiter's place; the new owner trusts it as it trusted its place,
//!   counted from its own last request (never from the message), and its
//!   first renewal, due when the place's would have been, sets its ttl (a
//!   short hold ends before: no renewal at all). A waiter whose message was
//!   lost learns it holds the lock when its place's next renewal finds the
//!   place gone, and its try finds the lock its own.
//! - The other waiters hear each hand-over and try only if the new owner
//!   could have died with it: when its first lease may have ended
//!   unreleased. A line that moves costs one try per grant.
//! - Every waiter of a locker keeps its own place (no turns in the
//!   process: the server's line is the order). A release's message also
//!   names the waiters it saw behind the new owner (up to
//!   [`crate::engine::wait::Behind`]'s eight): when the first of them
//!   waits in the same locker, the owner's release hands it the lock in
//!   process, with no server call (it continues the owner's hold, with
//!   the owner's fence plus one, as the exclusive lock's passes do), and
//!   its place leaves the line in the background. That overtakes nobody:
//!   a line only grows at its end, so whoever a release saw right behind
//!   the owner is still next while its place lives. When the next one
//!   waits elsewhere, or is not known, the release goes through the
//!   server, which hands the lock on and names the next ones.
//! - Not on Redlock: each master would keep a line of its own, with its
//!   own first waiter; a request there is a [`LockError::Config`].

pub(crate) mod guard;
pub(crate) mod request;
pub(crate) mod scripts;
mod twins;

use std::future::Future;

use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::backend::flights::Landing;
use crate::backend::{Backend, Route, slot_in_flux};
use crate::engine::handover::GiveBack;
use crate::engine::lease::Leased;
use crate::engine::primitive::{AcquireReply, Place, Primitive, Try};
use crate::engine::renewal::LeaseKind;
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::owner::OwnerToken;
use crate::primitive::shared::{self, ms};

/// The longest a waiter's place lasts between two renewals: a waiter that
/// dies blocks the line behind it at most this long.
pub(crate) const PLACE_LEASE: Duration = Duration::from_secs(2);

/// What follows the resource's lock key in each of the fair lock's keys.
const LOCK: &str = ":fair";
const LINE: &str = ":fair:q";
const CHANNEL: &str = ":fair:released";

/// The fair lock of one resource, for one request.
#[derive(Clone)]
pub(crate) struct Fair {
    keys: LockKeys,
    /// Its lock key, its line of waiters on the server, and its channel
    /// (three strings per request are what a fair lock costs).
    lock: String,
    waiting: String,
    channel: String,
    /// How long a waiter's place lasts: [`PLACE_LEASE`], or the ttl if
    /// shorter (a place is never longer than what it waits for).
    place_lease: Duration,
    /// When the server first saw this request wait in line (µs on its
    /// clock; 0 until it did), as its last busy answer said: shared by the
    /// attempt and the hold it becomes.
    arrival: Arc<AtomicU64>,
}

impl Fair {
    /// The fair lock of `keys`, for leases of `ttl`; refused on Redlock.
    pub(crate) fn new(keys: LockKeys, backend: &Backend, ttl: Duration) -> Result<Self, LockError> {
        if matches!(backend, Backend::Redlock(_)) {
            return Err(LockError::config(format!(
                "lock `{}`: a fair lock needs one line of waiters, and each Redlock master would keep its own, each with its own first waiter; use one server, Sentinel or a Cluster",
                keys.name()
            )));
        }
        let base = keys.lock();
        Ok(Self {
            lock: format!("{base}{LOCK}"),
            waiting: format!("{base}{LINE}"),
            channel: format!("{base}{CHANNEL}"),
            place_lease: PLACE_LEASE.min(ttl),
            arrival: Arc::default(),
            keys,
        })
    }

    /// When the server first saw this request wait in line (µs since the
    /// Unix epoch, on its clock), if it did.
    pub(crate) fn arrival(&self) -> Option<u64> {
        Some(self.arrival.load(Ordering::Relaxed)).filter(|&at| at > 0)
    }

    fn call(
        &self,
        script: &'static crate::backend::script::LuaScript,
    ) -> crate::backend::script::ScriptCall {
        let mut call = script.call();
        call.key(&self.lock).key(&self.waiting);
        call
    }
}

/// What the fair lock's scripts run beyond the exclusive lock's: its line
/// is a sorted set.
const COMMANDS: &str = "+zadd +zrem +zscore +zrange +zrangebyscore";

/// A script refused one of its commands.
fn not_permitted(err: LockError) -> LockError {
    shared::not_permitted(err, "the fair lock", COMMANDS)
}

impl Primitive for Fair {
    const NAME: &'static str = "fair";

    const GIVE_BACK: GiveBack = give_back;

    const PASSES: bool = false;

    const HANDS_OVER: bool = true;

    fn keys(&self) -> &LockKeys {
        &self.keys
    }

    fn leased(&self) -> Leased {
        Leased::one_holder(LeaseKind::Key, LOCK)
    }

    fn line(&self) -> &str {
        &self.lock
    }

    fn channel(&self) -> &str {
        &self.channel
    }

    fn takes_turn(&self) -> bool {
        false
    }

    fn place(&self) -> Option<Place> {
        Some(Place {
            leased: Leased::one_holder(LeaseKind::Member, LINE),
            ttl: self.place_lease,
        })
    }

    async fn try_acquire<'a>(
        &'a self,
        backend: &'a Backend,
        attempt: &'a Try<'a>,
    ) -> Result<AcquireReply, LockError> {
        let Backend::Node(node) = backend else {
            return Err(LockError::config("a fair lock is not taken on Redlock"));
        };
        let mut call = self.call(&scripts::ACQUIRE);
        call.arg(attempt.token.as_str())
            .arg(ms(attempt.ttl))
            .arg(ms(self.place_lease))
            .arg(if attempt.waits { "1" } else { "0" });
        let Some(ack) = attempt.replicas else {
            return match node.run::<Vec<i64>>(attempt.route, &call).await {
                Ok(answer) => Ok(self.read_acquire(&answer)),
                Err(err) if slot_in_flux(&err) => Ok(AcquireReply::Unknown),
                Err(err) => Err(not_permitted(err)),
            };
        };
        // A grant too few replicas confirmed is handed on again (on the
        // same connection, after the WAIT) before the error.
        let (answer, acked) = node
            .run_then_wait::<Vec<i64>>(attempt.route, &call, ack)
            .await
            .map_err(not_permitted)?;
        let reply = self.read_acquire(&answer);
        let AcquireReply::Acquired { fence } = reply else {
            return Ok(reply);
        };
        if acked >= ack.replicas {
            return Ok(reply);
        }
        let blocking = Route {
            blocking: true,
            ..attempt.route
        };
        self.let_go(backend, blocking, attempt.token, fence, &[])
            .await?;
        Err(LockError::NotReplicated {
            key: self.keys.name().to_owned(),
            acked,
            wanted: ack.replicas,
            timeout: ack.timeout,
        })
    }

    fn release<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
        fence: u64,
        _landing: Option<&'a Landing>,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        self.let_go(backend, route, token, fence, &[])
    }

    fn release_served<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
        fence: u64,
        served: &'a [OwnerToken],
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        self.let_go(backend, route, token, fence, served)
    }

    fn leave_place<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        // The same script: a lock handed to a waiter that leaves goes on
        // to the next.
        self.let_go(backend, route, token, 0, &[])
    }
}

impl Fair {
    /// Lets go of what `token` holds: the lock (handed to the first live
    /// waiter, with a fence above `fence`), or its place in line; the
    /// places of `served` (waiters that took the lock in process since it
    /// was last handed over here) leave the line first.
    async fn let_go(
        &self,
        backend: &Backend,
        route: Route,
        token: &OwnerToken,
        fence: u64,
        served: &[OwnerToken],
    ) -> Result<bool, LockError> {
        let Backend::Node(node) = backend else {
            return Err(LockError::config("a fair lock is not taken on Redlock"));
        };
        let mut call = self.call(&scripts::RELEASE);
        #[cfg(feature = "sabotage")]
        if crate::sabotage::active() == Some(crate::sabotage::Sabotage::LifoLine) {
            call = self.call(&scripts::LIFO_RELEASE);
        }
        call.arg(token.as_str())
            .arg(fence)
            .arg(&self.channel)
            .arg(node.publish_command());
        for place in served {
            call.arg(place.as_str());
        }
        let released: i64 = node.run(route, &call).await.map_err(not_permitted)?;
        Ok(released == 1)
    }
}

/// Gives back a hold passed in process and not taken: its release on the
/// server, which takes out of the line the places of the waiters that
/// took the hold in process before (`served`) and hands the lock to the
/// first live waiter there.
fn give_back(
    backend: Backend,
    route: Route,
    keys: LockKeys,
    token: OwnerToken,
    served: Vec<OwnerToken>,
) -> BoxFuture<'static, Result<bool, LockError>> {
    Box::pin(async move {
        // The place lease is not read by a release.
        let fair = Fair::new(keys, &backend, PLACE_LEASE)?;
        fair.let_go(&backend, route, &token, 0, &served).await
    })
}

impl Fair {
    /// Reads the acquire script's `{1, fence}`, `{0, pttl, 0}` or
    /// `{0, pttl, 1, arrival}`, keeping the arrival.
    fn read_acquire(&self, answer: &[i64]) -> AcquireReply {
        match *answer {
            [1, fence, ..] => {
                // Granted at its try: in line (its arrival), or with
                // nobody alive in line before it (0: it did not wait). A
                // lock found its own (handed over) keeps the arrival its
                // wait had.
                if let Some(&arrival) = answer.get(2) {
                    let arrival = u64::try_from(arrival).unwrap_or(0);
                    self.arrival.store(arrival, Ordering::Relaxed);
                }
                AcquireReply::Acquired {
                    fence: u64::try_from(fence).unwrap_or(0),
                }
            }
            [_, pttl, placed, ..] => {
                if let Some(&arrival) = answer.get(3) {
                    let arrival = u64::try_from(arrival).unwrap_or(0);
                    self.arrival.store(arrival, Ordering::Relaxed);
                }
                AcquireReply::Busy {
                    pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                    sightings: None,
                    place: placed == 1,
                }
            }
            _ => AcquireReply::Busy {
                pttl: None,
                sightings: None,
                place: false,
            },
        }
    }
}
