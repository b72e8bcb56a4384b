//! The multi-key lock: several keys held at once by one owner, all of
//! them or none, without deadlock whatever order callers name them in.
//!
//! - Each key is the exclusive lock's own key, value and lease (see
//!   [`scripts`]): a multi-key hold on `a` and `b` excludes
//!   `locker.lock("a")`, and the release of either wakes the other.
//! - Keys of one hash slot (every key on one server or Sentinel, and on a
//!   Cluster keys whose lock keys share a slot) are taken by one script:
//!   all or none in one atomic step, one round trip.
//! - Across a Cluster's slots, the keys are taken in groups, one script
//!   per slot, all sent at once (one parallel round when nothing is
//!   busy), in one global order ([`order`]). When a group is busy, every
//!   group after it is let go of before the attempt waits, and it waits
//!   for the release of the key that blocked it: what a waiting caller
//!   holds is always a prefix of the order, so it waits only for keys
//!   ordered after all it holds, and no two callers wait for each other.
//!   The prefix is kept as the attempt's place (see
//!   [`Primitive::place`]), given back if the attempt ends without the
//!   hold, and refreshed by each try. The caller is granted only when
//!   one round found every group its own, and its lease counts from that
//!   round's send.
//! - The hold is one lease of several keys ([`Primitive::also`]): the
//!   watchdog renews every key in its batches, and the loss of any is the
//!   loss of the hold, told before any of them can expire. Every key has
//!   its fence (the server's clock in its slot's grant).
//! - Many tasks of one locker may hold distinct sets at once, so none
//!   takes a turn in its locker's line (whose lines are per key), and no
//!   hold is passed in process.
//! - On Redlock ([`quorum`]): one script per master over every key, all
//!   or none there, and a majority of masters as for the exclusive lock,
//!   whose vote counting and fence counters it shares.

pub(crate) mod guard;
pub(crate) mod order;
mod quorum;
pub(crate) mod request;
pub(crate) mod scripts;
mod twins;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;

use crate::backend::flights::Landing;
use crate::backend::{Backend, NodeBackend, Route, slot_in_flux};
use crate::engine::handover::GiveBack;
use crate::engine::lease::Leased;
use crate::engine::primitive::{AcquireReply, Place, Primitive, Try};
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::owner::OwnerToken;
use crate::primitive::exclusive::counted;
use crate::primitive::shared::{self, GIVE_BACK_NOTHING, ms};

/// The most keys one multi-key request may name: each is read by the
/// acquire script and renewed in the watchdog's batches.
pub const MULTI_MAX_KEYS: usize = 1024;

/// Several keys of the exclusive lock's layout, for one request.
#[derive(Clone)]
pub(crate) struct Multi {
    /// Every key once, in the global order ([`order`]).
    keys: Arc<[LockKeys]>,
    /// Runs of `keys` taken by one script each (one per Cluster slot; one
    /// run of all elsewhere).
    groups: Arc<[Range<usize>]>,
    /// What the attempt learned, shared with the hold it becomes.
    state: Arc<State>,
}

/// What the tries of one attempt leave for the next step.
#[derive(Default)]
struct State {
    /// Each key's fence, in the order of `keys`, from the latest grant (a
    /// grant given back because its answer came too late is followed by
    /// another).
    fences: Mutex<Vec<u64>>,
    /// The key that kept the last try from its grant.
    busy: AtomicUsize,
    /// The lease the tries ask for, in ms: the place a waiting attempt
    /// keeps (its prefix of groups) is renewed with it.
    ttl_ms: AtomicU64,
}

/// What one group's acquire script answered.
enum GroupAnswer {
    Granted(u64),
    /// `pttl` of the key at `index` (in `keys`).
    Busy {
        pttl: Option<Duration>,
        index: usize,
    },
}

impl Multi {
    /// The keys named `names` under `prefix`, each once; refused when
    /// there is none, or too many.
    pub(crate) fn new(
        prefix: &str,
        names: &[String],
        backend: &Backend,
    ) -> Result<Self, LockError> {
        if names.is_empty() {
            return Err(LockError::config(
                "a multi-key lock needs at least one key; `lock_all` was given none",
            ));
        }
        if names.len() > MULTI_MAX_KEYS {
            return Err(LockError::config(format!(
                "a multi-key lock of {} keys; name at most {MULTI_MAX_KEYS}",
                names.len()
            )));
        }
        let keys = names
            .iter()
            .map(|name| LockKeys::new(prefix, name))
            .collect::<Result<Vec<_>, _>>()?;
        let (keys, groups) = order::arrange(keys, by_slot(backend));
        Ok(Self {
            state: Arc::new(State {
                fences: Mutex::new(vec![0; keys.len()]),
                ..State::default()
            }),
            keys: keys.into(),
            groups: groups.into(),
        })
    }

    /// Every key, in the order taken.
    pub(crate) fn all_keys(&self) -> &[LockKeys] {
        &self.keys
    }

    /// Each key's fence from the latest grant, in the order of
    /// [`Self::all_keys`].
    pub(crate) fn fences(&self) -> Vec<u64> {
        self.state
            .fences
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn node<'a>(&self, backend: &'a Backend) -> Result<&'a NodeBackend, LockError> {
        match backend {
            Backend::Node(node) => Ok(node),
            Backend::Redlock(_) => Err(LockError::config(
                "a multi-key lock keeps no waiting place on Redlock",
            )),
        }
    }

    /// One group's acquire script.
    async fn acquire_group(
        &self,
        node: &NodeBackend,
        route: Route,
        group: Range<usize>,
        token: &OwnerToken,
        ttl_ms: u64,
    ) -> Result<GroupAnswer, LockError> {
        let mut call = scripts::ACQUIRE.call();
        for keys in &self.keys[sent(group.clone())] {
            call.key(keys.lock());
        }
        call.arg(token.as_str()).arg(ttl_ms);
        let answer: Vec<i64> = node.run(route, &call).await.map_err(not_permitted)?;
        read_acquire(&answer, group)
    }

    /// One group's release script; true when the token held any key of it.
    async fn release_group(
        &self,
        node: &NodeBackend,
        route: Route,
        group: Range<usize>,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let mut call = scripts::RELEASE.call();
        let keys = &self.keys[group];
        for keys in keys {
            call.key(keys.lock());
        }
        call.arg(token.as_str()).arg(node.publish_command());
        for keys in keys {
            call.arg(keys.channel());
        }
        let released: i64 = node.run(route, &call).await.map_err(not_permitted)?;
        Ok(released == 1)
    }

    /// Lets go of the groups `from..` of `token`'s (all of them at once);
    /// true when any key was its own.
    async fn release_from(
        &self,
        node: &NodeBackend,
        route: Route,
        token: &OwnerToken,
        from: usize,
    ) -> Result<bool, LockError> {
        let calls = self.groups[from.min(self.groups.len())..]
            .iter()
            .map(|group| self.release_group(node, route, group.clone(), token));
        let mut released = false;
        for answer in join_all(calls).await {
            released |= answer?;
        }
        Ok(released)
    }

    fn granted(&self, fences: Vec<u64>) -> AcquireReply {
        let fence = fences.first().copied().unwrap_or(0);
        *self.state.fences.lock().unwrap_or_else(|e| e.into_inner()) = fences;
        AcquireReply::Acquired { fence }
    }

    fn busy(&self, pttl: Option<Duration>, index: usize, place: bool) -> AcquireReply {
        self.state.busy.store(index, Ordering::SeqCst);
        AcquireReply::Busy {
            pttl,
            sightings: None,
            place,
        }
    }

    /// One try over the groups of several slots, all sent at once: granted
    /// when every group was; otherwise the first busy group in the order
    /// keeps the groups before it (the attempt's place) and every group
    /// after it is let go of.
    async fn try_groups(
        &self,
        node: &NodeBackend,
        attempt: &Try<'_>,
        ttl_ms: u64,
    ) -> Result<AcquireReply, LockError> {
        let calls = self.groups.iter().map(|group| {
            self.acquire_group(node, attempt.route, group.clone(), attempt.token, ttl_ms)
        });
        let answers = join_all(calls).await;
        let mut fences = vec![0; self.keys.len()];
        for (position, (group, answer)) in self.groups.iter().zip(answers).enumerate() {
            match answer {
                Ok(GroupAnswer::Granted(fence)) => fences[group.clone()].fill(fence),
                Ok(GroupAnswer::Busy { pttl, index }) => {
                    // Holds stay a prefix of the order: what was taken
                    // after the busy group goes back before the wait. An
                    // attempt that will not wait keeps nothing.
                    let keep = position > 0 && attempt.waits;
                    let from = if keep { position + 1 } else { 0 };
                    if let Err(err) = self
                        .release_from(node, attempt.route, attempt.token, from)
                        .await
                    {
                        tracing::debug!(error = %err, "letting go of the groups after a busy one failed; trying again");
                        return Ok(AcquireReply::Unknown);
                    }
                    return Ok(self.busy(pttl, index, keep));
                }
                // Nothing is known of this group; the attempt stays armed,
                // so whatever it holds is let go of if it ends here.
                Err(err) if slot_in_flux(&err) => return Ok(AcquireReply::Unknown),
                Err(err) => return Err(err),
            }
        }
        Ok(self.granted(fences))
    }

    /// One try over keys of one slot: one script.
    async fn try_one_group(
        &self,
        node: &NodeBackend,
        attempt: &Try<'_>,
        ttl_ms: u64,
    ) -> Result<AcquireReply, LockError> {
        let all = 0..self.keys.len();
        let Some(ack) = attempt.replicas else {
            return match self
                .acquire_group(node, attempt.route, all, attempt.token, ttl_ms)
                .await
            {
                Ok(answer) => Ok(self.reply(answer)),
                Err(err) if slot_in_flux(&err) => Ok(AcquireReply::Unknown),
                Err(err) => Err(err),
            };
        };
        let mut call = scripts::ACQUIRE.call();
        for keys in &self.keys[sent(all.clone())] {
            call.key(keys.lock());
        }
        call.arg(attempt.token.as_str()).arg(ttl_ms);
        // A grant too few replicas confirmed is given back (on the same
        // connection, after the WAIT) before the error.
        let (answer, acked) = node
            .run_then_wait::<Vec<i64>>(attempt.route, &call, ack)
            .await
            .map_err(not_permitted)?;
        let reply = self.reply(read_acquire(&answer, all)?);
        if !matches!(reply, AcquireReply::Acquired { .. }) || acked >= ack.replicas {
            return Ok(reply);
        }
        let blocking = Route {
            blocking: true,
            ..attempt.route
        };
        self.release_from(node, blocking, attempt.token, 0).await?;
        Err(LockError::NotReplicated {
            key: self.keys[0].name().to_owned(),
            acked,
            wanted: ack.replicas,
            timeout: ack.timeout,
        })
    }

    fn reply(&self, answer: GroupAnswer) -> AcquireReply {
        match answer {
            GroupAnswer::Granted(fence) => self.granted(vec![fence; self.keys.len()]),
            GroupAnswer::Busy { pttl, index } => self.busy(pttl, index, false),
        }
    }
}

/// The keys of `group` its acquire script is sent (only the first under
/// the `partial-multi` sabotage, for the tests that must catch it).
fn sent(group: Range<usize>) -> Range<usize> {
    #[cfg(feature = "sabotage")]
    if crate::sabotage::active() == Some(crate::sabotage::Sabotage::PartialMulti) {
        return group.start..group.start + 1;
    }
    group
}

/// Whether keys are taken in groups by hash slot: on a Cluster only.
fn by_slot(backend: &Backend) -> bool {
    match backend {
        #[cfg(feature = "cluster")]
        Backend::Node(NodeBackend::Cluster(_)) => true,
        _ => false,
    }
}

/// Reads the acquire script's `{1, fence}` or `{0, pttl, i}` for the keys
/// at `group`.
fn read_acquire(answer: &[i64], group: Range<usize>) -> Result<GroupAnswer, LockError> {
    match *answer {
        [1, fence, ..] => Ok(GroupAnswer::Granted(u64::try_from(fence).unwrap_or(0))),
        [0, pttl, busy] => {
            let index = usize::try_from(busy - 1)
                .ok()
                .filter(|i| *i < group.len())
                .map_or(group.start, |i| group.start + i);
            Ok(GroupAnswer::Busy {
                pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                index,
            })
        }
        _ => Err(LockError::Redis(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "the multi-key acquire script answered neither {1, fence} nor {0, pttl, key}",
            format!("{answer:?}"),
        )))),
    }
}

/// A script refused one of its commands.
fn not_permitted(err: LockError) -> LockError {
    shared::not_permitted(
        err,
        "the multi-key lock",
        "+get +set +append +pexpire +pttl +del +time +publish",
    )
}

impl Primitive for Multi {
    const NAME: &'static str = "multi";

    const GIVE_BACK: GiveBack = GIVE_BACK_NOTHING;

    const PASSES: bool = false;

    fn keys(&self) -> &LockKeys {
        &self.keys[0]
    }

    fn also(&self) -> &[LockKeys] {
        &self.keys[1..]
    }

    fn busy_channel(&self) -> &str {
        let busy = self.state.busy.load(Ordering::SeqCst);
        self.keys.get(busy).unwrap_or(&self.keys[0]).channel()
    }

    fn leased(&self) -> Leased {
        Leased::KEY
    }

    fn takes_turn(&self) -> bool {
        false
    }

    /// Across a Cluster's slots, the groups held while a later one is busy
    /// (their first key is the first of all).
    fn place(&self) -> Option<Place> {
        let ttl_ms = self.state.ttl_ms.load(Ordering::SeqCst);
        (self.groups.len() > 1 && ttl_ms > 0).then(|| Place {
            leased: Leased::KEY,
            ttl: Duration::from_millis(ttl_ms),
        })
    }

    async fn leave_place<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
    ) -> Result<bool, LockError> {
        self.release_from(self.node(backend)?, route, token, 0)
            .await
    }

    async fn try_acquire<'a>(
        &'a self,
        backend: &'a Backend,
        attempt: &'a Try<'a>,
    ) -> Result<AcquireReply, LockError> {
        let node = match backend {
            Backend::Node(node) => node,
            Backend::Redlock(masters) => return counted::acquire(masters, self, attempt).await,
        };
        let ttl_ms = ms(attempt.ttl);
        self.state.ttl_ms.store(ttl_ms, Ordering::SeqCst);
        if self.groups.len() == 1 {
            self.try_one_group(node, attempt, ttl_ms).await
        } else {
            self.try_groups(node, attempt, ttl_ms).await
        }
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
            Backend::Node(node) => self.release_from(node, route, token, 0).await,
            Backend::Redlock(masters) => {
                counted::release(masters, self, route, token, landing).await
            }
        }
    }
}
