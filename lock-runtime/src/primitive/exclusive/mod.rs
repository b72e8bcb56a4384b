//! The exclusive lock: at most one owner per key, a lease, a fence.
//!
//! Three steps, each one atomic script on the node that owns the key (or a
//! majority vote over Redlock masters, [`quorum`]):
//!
//! - [`acquire`]: take the lock (or learn how long its owner keeps it);
//!   idempotent for one owner token, so a retry after a lost reply finds
//!   the lock already ours.
//! - [`release`]: delete it only if it is still ours, and announce the
//!   release to waiters.
//! - [`pass`]: hand a held lock straight to a new owner (one node only).
//! - [`yield_to_others`]: let it go for the callers outside the holder's
//!   locker, keeping it from the holder's line for a grace.
//!
//! [`Exclusive`] puts these before the engine ([`Primitive`]).
//!
//! [`scripts`] holds the Lua and the key layout; [`reply`] reads answers.

pub(crate) mod counted;
pub(crate) mod guard;
pub(crate) mod inspect;
mod plain;
pub(crate) mod quorum;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod scripts;
mod twins;
pub(crate) mod votes;

use std::future::Future;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::backend::flights::Landing;
use crate::backend::{Backend, NodeBackend, Route, slot_in_flux};
use crate::engine::handover::GiveBack;
use crate::engine::primitive::{AcquireReply, PassCall, Passed, Primitive, Try};
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::memory::words::Word;
use crate::owner::{LineId, OwnerToken};
use crate::primitive::exclusive::inspect::LockInfo;

/// The exclusive lock of one resource, for one request.
#[derive(Clone)]
pub(crate) struct Exclusive {
    keys: LockKeys,
}

impl Exclusive {
    pub(crate) fn new(keys: LockKeys) -> Self {
        Self { keys }
    }
}

impl Primitive for Exclusive {
    const NAME: &'static str = "exclusive";

    const GIVE_BACK: GiveBack = |backend, route, keys, token, _| {
        Box::pin(async move { release(&backend, route, &keys, &token, None).await })
            as BoxFuture<'static, _>
    };

    fn keys(&self) -> &LockKeys {
        &self.keys
    }

    fn try_acquire<'a>(
        &'a self,
        backend: &'a Backend,
        attempt: &'a Try<'a>,
    ) -> impl Future<Output = Result<AcquireReply, LockError>> + Send + 'a {
        acquire(backend, &self.keys, attempt)
    }

    fn release<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
        _fence: u64,
        landing: Option<&'a Landing>,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        release(backend, route, &self.keys, token, landing)
    }

    fn pass<'a>(
        &'a self,
        node: &'a NodeBackend,
        pass_call: &'a PassCall<'a>,
    ) -> impl Future<Output = Result<Passed, LockError>> + Send + 'a {
        pass(node, &self.keys, pass_call)
    }

    fn yield_to_others<'a>(
        &'a self,
        node: &'a NodeBackend,
        route: Route,
        token: &'a OwnerToken,
        line: LineId,
        grace: Duration,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        yield_to_others(node, route, &self.keys, token, line, grace)
    }
}

/// A line as the acquire script reads it: its id, or empty for none.
struct LineArg(Option<LineId>);

impl Word for LineArg {
    fn append_to(&self, text: &mut String) {
        if let Some(line) = self.0 {
            line.append_to(text);
        }
    }
}

/// A lease's length in the whole milliseconds Redis takes.
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

/// One try at taking the lock of `keys` (see [`AcquireReply`]). With
/// replicas to wait for, a grant that too few of them confirmed is
/// released again (on the same connection) before
/// [`LockError::NotReplicated`] is returned, so a failed call leaves
/// nothing behind.
pub(crate) async fn acquire(
    backend: &Backend,
    keys: &LockKeys,
    attempt: &Try<'_>,
) -> Result<AcquireReply, LockError> {
    let node = match backend {
        Backend::Node(node) => node,
        Backend::Redlock(masters) => return counted::acquire(masters, keys, attempt).await,
    };
    let script = || {
        let mut call = scripts::ACQUIRE.call();
        call.key(keys.lock())
            .arg(attempt.token.as_str())
            .arg(ttl_ms(attempt.ttl))
            .arg(LineArg(attempt.line));
        call
    };
    let Some(ack) = attempt.replicas else {
        if attempt.plain_first {
            let pipe =
                plain::take_if_free(keys.lock(), attempt.token.as_str(), ttl_ms(attempt.ttl));
            if let Some(plain::Answer(Some(fence))) = node
                .run_plain::<plain::Answer>(attempt.route, &pipe)
                .await?
            {
                return Ok(AcquireReply::Acquired { fence });
            }
        }
        // Written only now: a free lock taken by the plain commands never
        // needs it.
        return match node.run(attempt.route, &script()).await {
            Ok(answer) => Ok(reply::read_acquire(answer)),
            Err(err) if slot_in_flux(&err) => Ok(AcquireReply::Unknown),
            Err(err) => Err(err),
        };
    };
    let (answer, acked) = node.run_then_wait(attempt.route, &script(), ack).await?;
    let reply = reply::read_acquire(answer);
    if matches!(reply, AcquireReply::Busy { .. }) || acked >= ack.replicas {
        return Ok(reply);
    }
    let blocking = Route {
        blocking: true,
        ..attempt.route
    };
    release_on_node(node, blocking, keys, attempt.token).await?;
    Err(LockError::NotReplicated {
        key: keys.name().to_owned(),
        acked,
        wanted: ack.replicas,
        timeout: ack.timeout,
    })
}

/// Deletes the lock if it is still ours and wakes its waiters; true when
/// something was deleted. On Redlock, the delete on each master comes
/// after the acquisition's calls still running there (`landing`).
pub(crate) async fn release(
    backend: &Backend,
    route: Route,
    keys: &LockKeys,
    token: &OwnerToken,
    landing: Option<&Landing>,
) -> Result<bool, LockError> {
    match backend {
        Backend::Node(node) => release_on_node(node, route, keys, token).await,
        Backend::Redlock(masters) => counted::release(masters, keys, route, token, landing).await,
    }
}

async fn release_on_node(
    node: &NodeBackend,
    route: Route,
    keys: &LockKeys,
    token: &OwnerToken,
) -> Result<bool, LockError> {
    let mut call = scripts::RELEASE.call();
    #[cfg(feature = "sabotage")]
    if crate::sabotage::active() == Some(crate::sabotage::Sabotage::BlindRelease) {
        call = scripts::BLIND_RELEASE.call();
    }
    call.key(keys.lock())
        .arg(token.as_str())
        .arg(keys.channel())
        .arg(node.publish_command());
    let deleted: i64 = node.run(route, &call).await?;
    Ok(deleted == 1)
}

/// The commands the exclusive lock's calls run (the plain ones, the
/// scripts, and the commands inside them), on one node or on Redlock
/// masters; the topology adds its own (publishing and subscribing).
pub(crate) fn commands(redlock: bool) -> Vec<&'static str> {
    let mut commands = vec![
        "EVALSHA", "EVAL", "GET", "SET", "DEL", "PEXPIRE", "PTTL", "TIME", "APPEND",
    ];
    if redlock {
        // Fences count per master; the restart quarantine reads the uptime.
        commands.extend(["INCR", "INFO"]);
    }
    commands
}

/// Lets go of the lock for the callers outside its holder's locker: the
/// key stays busy to the holder's own `line` for `grace`, free to anyone
/// else (see [`scripts::YIELD`]). True when it was still ours.
pub(crate) async fn yield_to_others(
    node: &NodeBackend,
    route: Route,
    keys: &LockKeys,
    token: &OwnerToken,
    line: LineId,
    grace: Duration,
) -> Result<bool, LockError> {
    let mut call = scripts::YIELD.call();
    call.key(keys.lock())
        .arg(token.as_str())
        .arg(line)
        .arg(grace.as_millis().max(1))
        .arg(keys.channel())
        .arg(node.publish_command());
    let yielded: i64 = node.run(route, &call).await?;
    Ok(yielded == 1)
}

/// Hands the giver's lock to the taker's token in one step, without
/// releasing it. One node only: on Redlock each master would need the
/// hand-over, and a vote on it.
pub(crate) async fn pass(
    node: &NodeBackend,
    keys: &LockKeys,
    pass: &PassCall<'_>,
) -> Result<Passed, LockError> {
    let mut call = scripts::PASS.call();
    #[cfg(feature = "sabotage")]
    if crate::sabotage::active() == Some(crate::sabotage::Sabotage::BlindRelease) {
        call = scripts::BLIND_PASS.call();
    }
    call.key(keys.lock())
        .arg(pass.giver.as_str())
        .arg(pass.taker.as_str())
        .arg(u64::try_from(pass.ttl.as_millis()).unwrap_or(u64::MAX))
        .arg(pass.given_fence);
    let (outcome, fence): (i64, i64) = node.run(pass.route, &call).await?;
    Ok(match outcome {
        0 => Passed::NotOurs,
        outcome => Passed::To {
            fence: u64::try_from(fence).unwrap_or(0),
            marked: outcome == 2,
        },
    })
}

/// The lock of `keys` as the server sees it (Redlock: a majority).
pub(crate) async fn inspect(
    backend: &Backend,
    route: Route,
    keys: &LockKeys,
) -> Result<LockInfo, LockError> {
    let node = match backend {
        Backend::Node(node) => node,
        Backend::Redlock(masters) => return quorum::inspect(masters, route, keys).await,
    };
    let mut call = scripts::INSPECT.call();
    call.key(keys.lock());
    let (value, pttl): (String, i64) = node.run(route, &call).await?;
    Ok(match value.as_str() {
        // Let go of for others, who may take it as a free lock.
        "" => LockInfo::free(keys.name()),
        value if value.ends_with(crate::owner::KEPT) => LockInfo::free(keys.name()),
        value => LockInfo::held(keys.name(), value, pttl),
    })
}

/// Deletes the lock of `keys` whoever holds it and wakes its waiters; true
/// when something was deleted (Redlock: on any master).
pub(crate) async fn force_release(
    backend: &Backend,
    route: Route,
    keys: &LockKeys,
) -> Result<bool, LockError> {
    let node = match backend {
        Backend::Node(node) => node,
        Backend::Redlock(masters) => return quorum::force_release(masters, route, keys).await,
    };
    let mut call = scripts::FORCE_RELEASE.call();
    call.key(keys.lock())
        .arg(keys.channel())
        .arg(node.publish_command());
    let deleted: i64 = node.run(route, &call).await?;
    Ok(deleted == 1)
}
