//! The semaphore: at most `limit` permits of one resource held at once,
//! across every process, each acquisition a lease of its own.
//!
//! - An acquisition takes all the permits it asks for or none, in one
//!   script ([`scripts`]): its lease (a member of the semaphore's sorted
//!   set, scored by its deadline on the server's clock) and one claim per
//!   permit on the lowest free slots. The watchdog renews the lease in its
//!   batches like any sorted-set lease; a holder that dies gives its
//!   permits back when its lease ends, by the server's clock.
//! - No set-up step: every request carries the limit, and the first grant
//!   records it. A request naming another limit while permits are held
//!   under the recorded one is refused ([`LockError::Config`]); once none
//!   is held, the next grant records its own.
//! - A release says how many permits are free after it, and each process
//!   wakes its longest waiters as long as what they wait for fits
//!   ([`Primitive::wants`]): a release that frees one permit wakes no
//!   waiter for three.
//! - Many tasks of one locker may hold permits at once, so none takes a
//!   turn in its locker's line, and no hold is passed in process.
//! - On Redlock a grant needs more than a majority: with limit K over N
//!   masters, floor(N*K/(K+1)) + 1, and so does each renewal; the slots
//!   are agreed among them ([`quorum`]).

pub(crate) mod guard;
mod quorum;
pub(crate) mod request;
pub(crate) mod scripts;
mod twins;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::flights::Landing;
use crate::backend::{Backend, NodeBackend, Route, slot_in_flux};
use crate::engine::handover::GiveBack;
use crate::engine::lease::Leased;
use crate::engine::primitive::{AcquireReply, Primitive, Try};
use crate::engine::renewal::LeaseKind;
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::owner::OwnerToken;
use crate::primitive::shared::{self, GIVE_BACK_NOTHING, ms};

/// The largest limit a semaphore takes: every acquisition reads the
/// claims of every permit held.
pub const SEMAPHORE_MAX_LIMIT: u32 = 1024;

/// What follows the resource's lock key in each of the semaphore's keys.
const SET: &str = ":sem";
const CHANNEL: &str = ":sem:released";

/// The semaphore of one resource, for one request.
#[derive(Clone)]
pub(crate) struct Semaphore {
    keys: LockKeys,
    /// Its sorted set and its channel.
    set: String,
    channel: String,
    limit: u32,
    permits: u32,
    /// The slots of the latest grant (a grant given back because its
    /// answer came too late is followed by another): shared by the
    /// attempt and the hold it becomes.
    slots: Arc<Mutex<Vec<u32>>>,
}

impl Semaphore {
    /// `permits` of the semaphore of `keys` with `limit` permits; refused
    /// for a limit or a count of permits out of range.
    pub(crate) fn new(keys: LockKeys, limit: u32, permits: u32) -> Result<Self, LockError> {
        let name = keys.name();
        if limit == 0 || limit > SEMAPHORE_MAX_LIMIT {
            return Err(LockError::config(format!(
                "semaphore `{name}`: a limit of {limit}; it must be 1 to {SEMAPHORE_MAX_LIMIT}"
            )));
        }
        if permits == 0 || permits > limit {
            return Err(LockError::config(format!(
                "semaphore `{name}`: {permits} permits asked of a limit of {limit}; ask 1 to {limit}"
            )));
        }
        let base = keys.lock();
        Ok(Self {
            set: format!("{base}{SET}"),
            channel: format!("{base}{CHANNEL}"),
            limit,
            permits,
            slots: Arc::default(),
            keys,
        })
    }

    /// The permits of each holder at most at once.
    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// The permits this request takes.
    pub(crate) fn permits(&self) -> u32 {
        self.permits
    }

    /// The slots its latest grant holds (empty until granted).
    pub(crate) fn slots(&self) -> Vec<u32> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The limit the acquire script is told (one more under the
    /// `over-limit` sabotage, for the tests that must catch it).
    fn sent_limit(&self) -> u32 {
        #[cfg(feature = "sabotage")]
        if crate::sabotage::active() == Some(crate::sabotage::Sabotage::OverLimit) {
            return self.limit + 1;
        }
        self.limit
    }

    /// Masters of `total` a grant needs on Redlock: enough that any
    /// limit-plus-one grants share one (a plain majority under the
    /// `plain-majority` sabotage, for the tests that must catch it).
    fn masters_needed(&self, total: usize) -> usize {
        #[cfg(feature = "sabotage")]
        if crate::sabotage::active() == Some(crate::sabotage::Sabotage::PlainMajority) {
            return crate::backend::redlock::quorum(total);
        }
        quorum::masters_needed(total, self.limit)
    }

    /// The acquire script's call for `token`; on Redlock (`quarantine`
    /// given), the masters' variant, moving its claims to `slots` when
    /// some are named.
    fn acquire_call(
        &self,
        token: &OwnerToken,
        ttl: Duration,
        quarantine: Option<Duration>,
        slots: &[u32],
    ) -> crate::backend::script::ScriptCall {
        let script = match quarantine {
            Some(_) => &scripts::ACQUIRE_COUNTED,
            None => &scripts::ACQUIRE,
        };
        let mut call = script.call();
        call.key(&self.set);
        if quarantine.is_some() {
            call.key(self.keys.up_mark());
        }
        call.arg(token.as_str())
            .arg(ms(ttl))
            .arg(self.sent_limit())
            .arg(self.permits);
        if let Some(quarantine) = quarantine {
            let slots: Vec<String> = slots.iter().map(u32::to_string).collect();
            call.arg(ms(quarantine)).arg(slots.join(","));
        }
        call
    }

    /// The release script's call for `token`, published with `publish`.
    fn release_call(
        &self,
        token: &OwnerToken,
        publish: &str,
    ) -> crate::backend::script::ScriptCall {
        let mut call = scripts::RELEASE.call();
        call.key(&self.set)
            .arg(token.as_str())
            .arg(&self.channel)
            .arg(publish);
        call
    }

    /// Keeps the slots of the latest grant.
    fn granted_slots(&self, slots: Vec<u32>) {
        *self.slots.lock().unwrap_or_else(|e| e.into_inner()) = slots;
    }

    /// The error of a request naming another limit than its permits are
    /// held under.
    fn mismatch(&self, held_under: u32) -> LockError {
        LockError::config(format!(
            "semaphore `{}`: asked with a limit of {}, but its permits are held under a limit of {held_under}; every caller of one semaphore must name the same limit",
            self.keys.name(),
            self.limit
        ))
    }
}

/// What the semaphore's scripts run beyond the exclusive lock's: it is a
/// sorted set.
const COMMANDS: &str = "+zadd +zrem +zscore +zrange +zrangebyscore +zremrangebyscore +zcount";

/// A script refused one of its commands.
fn not_permitted(err: LockError) -> LockError {
    shared::not_permitted(err, "the semaphore", COMMANDS)
}

impl Primitive for Semaphore {
    const NAME: &'static str = "semaphore";

    const GIVE_BACK: GiveBack = GIVE_BACK_NOTHING;

    const PASSES: bool = false;

    fn keys(&self) -> &LockKeys {
        &self.keys
    }

    fn leased(&self) -> Leased {
        Leased {
            kind: LeaseKind::Member,
            suffix: SET,
            holders: self.limit,
        }
    }

    fn line(&self) -> &str {
        &self.set
    }

    fn channel(&self) -> &str {
        &self.channel
    }

    fn takes_turn(&self) -> bool {
        false
    }

    fn wants(&self) -> usize {
        usize::try_from(self.permits).unwrap_or(usize::MAX)
    }

    fn told_by(&self, backend: &Backend) -> usize {
        match backend {
            Backend::Node(_) => 1,
            Backend::Redlock(masters) => self.masters_needed(masters.len()),
        }
    }

    async fn try_acquire<'a>(
        &'a self,
        backend: &'a Backend,
        attempt: &'a Try<'a>,
    ) -> Result<AcquireReply, LockError> {
        let node = match backend {
            Backend::Node(node) => node,
            Backend::Redlock(masters) => return quorum::acquire(self, masters, attempt).await,
        };
        let call = self.acquire_call(attempt.token, attempt.ttl, None, &[]);
        let Some(ack) = attempt.replicas else {
            return match node.run::<Vec<i64>>(attempt.route, &call).await {
                Ok(answer) => self.read_acquire(&answer),
                Err(err) if slot_in_flux(&err) => Ok(AcquireReply::Unknown),
                Err(err) => Err(not_permitted(err)),
            };
        };
        // A grant too few replicas confirmed is given back (on the same
        // connection, after the WAIT) before the error.
        let (answer, acked) = node
            .run_then_wait::<Vec<i64>>(attempt.route, &call, ack)
            .await
            .map_err(not_permitted)?;
        let reply = self.read_acquire(&answer)?;
        if !matches!(reply, AcquireReply::Acquired { .. }) || acked >= ack.replicas {
            return Ok(reply);
        }
        let blocking = Route {
            blocking: true,
            ..attempt.route
        };
        self.give_back(node, blocking, attempt.token).await?;
        Err(LockError::NotReplicated {
            key: self.keys.name().to_owned(),
            acked,
            wanted: ack.replicas,
            timeout: ack.timeout,
        })
    }

    async fn release<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
        _fence: u64,
        landing: Option<&'a Landing>,
    ) -> Result<bool, LockError> {
        match backend {
            Backend::Node(node) => self.give_back(node, route, token).await,
            Backend::Redlock(masters) => {
                quorum::release(self, masters, route, token, landing).await
            }
        }
    }
}

impl Semaphore {
    /// Gives back what `token` holds, telling the waiters what is free.
    async fn give_back(
        &self,
        node: &NodeBackend,
        route: Route,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let call = self.release_call(token, node.publish_command());
        let released: i64 = node.run(route, &call).await.map_err(not_permitted)?;
        Ok(released == 1)
    }

    /// Reads the acquire script's `{1, fence, slot...}`, `{0, pttl}` or
    /// `{-1, limit}`, keeping the slots of a grant.
    fn read_acquire(&self, answer: &[i64]) -> Result<AcquireReply, LockError> {
        match *answer {
            [1, fence, ref slots @ ..] => {
                self.granted_slots(
                    slots
                        .iter()
                        .map(|&slot| u32::try_from(slot).unwrap_or(u32::MAX))
                        .collect(),
                );
                Ok(AcquireReply::Acquired {
                    fence: u64::try_from(fence).unwrap_or(0),
                })
            }
            [-1, held_under, ..] => Err(self.mismatch(u32::try_from(held_under).unwrap_or(0))),
            [_, pttl, ..] => Ok(AcquireReply::Busy {
                pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                sightings: None,
                place: false,
            }),
            _ => Ok(AcquireReply::Busy {
                pttl: None,
                sightings: None,
                place: false,
            }),
        }
    }
}
