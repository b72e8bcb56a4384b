//! The exclusive lock on Redlock: held when a majority (N/2 + 1) of
//! independent masters holds it.
//!
//! # Acquire
//! The counted round the multi-key lock runs too ([`super::counted`]).
//! Every master is asked at once: the plain commands of `super::plain`
//! (`SET NX`, `INCR` of the counter, `GET` of the up mark) take a free
//! lock, and the acquire script runs where they did not finish the grant
//! (the lock was there, the counter is not seeded, the quarantine's mark
//! is missing). Each master's call (both, when both run) is
//! bounded by `min(connect_timeout + response_timeout, ttl / 10)`: a dead
//! or frozen master must not eat the lease. The caller counts the lease
//! from the moment it *sent* the request, like every acquisition.
//!
//! - A majority granted: decided at once, without waiting for the other
//!   masters (their calls still run to the end in the background, so the
//!   lock lands on every live master). The highest counter of the majority
//!   is the fence (see below). When the counters of a majority already
//!   stand at it (they move in step while every acquisition lands on every
//!   master), that is all; otherwise a second round confirms the lock on
//!   the masters whose counters are behind and raises them to it, until a
//!   majority stands at the fence: acquired.
//! - No majority: decided once every master answered (or hit its bound).
//!   If failed masters alone make a majority impossible:
//!   `AcquireReply::NoQuorum` (the caller retries within its wait, unless
//!   a majority is *down*: refused or never reached, rather than slow);
//!   otherwise other owners are in the way: *busy*, and the waiter sleeps
//!   until enough of their leases could end.
//!
//! A round that does not end acquired first deletes our key (compare and
//! delete) on every master that may hold it, and waits for that, so a
//! failed round leaves nothing behind and a retry cannot be overtaken by
//! the clean-up of the previous try.
//!
//! # Restarts
//! A master that restarted without persistence has forgotten the locks it
//! held, whose leases still run on the masters it shared them with. For
//! the restart quarantine (counted from its start) its grants are *fresh*
//! and count only when every master granted: a majority that needs one of
//! them waits out the quarantine instead (see `votes.rs`). Every lease is
//! at most the quarantine, so by then every lease it forgot has ended.
//!
//! # Renew and release
//! A renewal is confirmed for a lease when a majority renewed it, and is
//! *gone* when so many masters refused it that no majority is possible;
//! otherwise (failed masters) it is unknown, and the watchdog retries it
//! until the lease's validity, counted from the round's send, runs out.
//! Release runs on every master and returns once a majority answered; it
//! fails when fewer answered and none of them deleted the lock (a majority
//! may still hold it: it is not reported gone).
//!
//! # Fencing tokens
//! Each master keeps one counter (`<prefix>fence-counter`) for every lock
//! of the locker: one key per master, whatever the number of distinct
//! locks. An acquisition increments it on each master that grants; a
//! missing counter (a new master, or one that lost its data) starts from
//! that master's clock in microseconds instead of from 1. The fence handed
//! out is the highest counter among the granting majority, and before the
//! acquisition returns, a majority of masters have their counters at it
//! (already, or raised there by the second round). Renewals raise the
//! counters again, on every master they reach.
//!
//! **Guaranteed**: when a lock is acquired by a request sent after another
//! acquisition of the same key *returned*, its fence is strictly greater.
//! Two majorities share a master; on that master the earlier owner raised
//! the counter to its fence before returning, and the later owner's grant
//! there increments it. No clock is involved: it holds even when a lease
//! ran out early.
//!
//! **Not guaranteed**:
//! - A master that loses its counter (restarted without persistence,
//!   `FLUSHALL`, evicted under `maxmemory`) starts it again from its own
//!   clock. Counters grow by one per acquisition, far slower than a clock
//!   in microseconds, so the restarted counter is ahead of the others,
//!   unless that master's clock is behind the master whose counter set
//!   the highest fence by more than the time since; if it is the only
//!   master two majorities share, a later fence can then be lower.
//! - Two acquisitions in flight at the same time are ordered only by who
//!   got the majority; the fence says which one got it later, not which
//!   request was sent first.
//! - Fences are not consecutive, and count the acquisitions of every lock.
//! - Mutual exclusion itself rests on leases, hence on clocks: a master
//!   whose clock jumps forward expires a key early (as with any Redlock).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::counted::Counted;
use super::votes::Vote;
use super::{plain, scripts};
use crate::backend::Route;
use crate::backend::plain::PlainCommands;
use crate::backend::redlock::{RedlockBackend, Round, quorum};
use crate::backend::script::ScriptCall;
use crate::engine;
use crate::engine::primitive::{AcquireReply, Try};
use crate::engine::wait::Seen;
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::owner::OwnerToken;
use crate::primitive::exclusive::inspect::LockInfo;

/// The exclusive lock's side of the counted round ([`super::counted`]):
/// its one key, taken with plain commands first where the attempt allows.
impl Counted for LockKeys {
    fn name(&self) -> &str {
        LockKeys::name(self)
    }

    fn send(&self, masters: &RedlockBackend, attempt: &Try<'_>) -> Round<Vec<i64>> {
        let (token, route) = (attempt.token, attempt.route);
        let quarantine = masters.quarantine();
        let bound = masters.vote_bound(attempt.ttl);
        // A free lock is taken with plain commands (see `plain`); the script
        // runs where they did not finish the grant, and is written only then.
        let tries = Arc::new(Tries {
            plain: attempt.plain_first.then(|| {
                plain::take_if_free_counted(
                    self.lock(),
                    token.as_str(),
                    super::ttl_ms(attempt.ttl),
                    self.counter(),
                    self.up_mark(),
                )
            }),
            keys: self.clone(),
            token: token.clone(),
            ttl: attempt.ttl,
            quarantine,
            script: OnceLock::new(),
        });
        let quarantine_ms = u64::try_from(quarantine.as_millis()).unwrap_or(u64::MAX);
        masters.fan_out(
            0..masters.len(),
            bound,
            "a lock script",
            Some(attempt.flight),
            move |_, master| {
                let tries = tries.clone();
                async move {
                    if let Some(pipe) = &tries.plain {
                        let answer = master.run_plain(route, pipe).await?;
                        if let Some(fence) = plain::counted_fence_of(answer, quarantine_ms) {
                            // As the script answers a grant past the quarantine.
                            return Ok(vec![1, i64::try_from(fence).unwrap_or(i64::MAX), 0]);
                        }
                    }
                    master.run::<Vec<i64>>(route, tries.script()).await
                }
            },
        )
    }

    /// `{1, fence, 0}` or `{0, pttl, now}` (see [`super::reply`]).
    fn read(&self, answer: &[i64]) -> (Vote, Seen) {
        match *answer {
            [granted, value, ..] => match super::reply::read_acquire((granted, value)) {
                AcquireReply::Acquired { fence } => (Vote::Granted(fence), Seen::Free),
                AcquireReply::Busy { pttl, .. } => {
                    let at = answer.get(2).and_then(|&now| u64::try_from(now).ok());
                    (Vote::Busy(pttl), at.map_or(Seen::Unknown, Seen::BusyAt))
                }
                _ => (Vote::Failed { down: false }, Seen::Unknown),
            },
            _ => (Vote::Failed { down: false }, Seen::Unknown),
        }
    }

    fn raise_call(&self, token: &OwnerToken, fence: u64) -> ScriptCall {
        let mut call = scripts::RAISE_COUNTER.call();
        call.key(self.lock())
            .key(self.counter())
            .arg(token.as_str())
            .arg(fence);
        call
    }

    fn release_call(&self, token: &OwnerToken) -> ScriptCall {
        let mut call = scripts::RELEASE.call();
        call.key(self.lock())
            .arg(token.as_str())
            .arg(self.channel())
            .arg("PUBLISH");
        call
    }

    fn granted(&self, fence: u64) -> AcquireReply {
        AcquireReply::Acquired { fence }
    }
}

/// What each master of an acquire round is sent: the plain commands, and
/// the acquire script where they did not finish the grant (written at its
/// first use: a free lock on masters in step never needs it).
struct Tries {
    plain: Option<PlainCommands>,
    keys: LockKeys,
    token: OwnerToken,
    ttl: Duration,
    quarantine: Duration,
    script: OnceLock<ScriptCall>,
}

impl Tries {
    /// The acquire script's call.
    fn script(&self) -> &ScriptCall {
        self.script.get_or_init(|| {
            let mut call = scripts::ACQUIRE_COUNTED.call();
            call.key(self.keys.lock())
                .key(self.keys.counter())
                .key(self.keys.up_mark())
                .arg(self.token.as_str())
                .arg(self.ttl.as_millis())
                .arg(self.quarantine.as_millis());
            call
        })
    }
}

/// The lock as a majority of masters sees it: held when one owner's token
/// is on a majority; its lease runs until the majority's shortest ends.
/// Asks every master (each within its bound). Fails when the masters that
/// answered cannot tell: none held it on a majority, yet the silent ones
/// could make one (for an owner seen on some, or one nobody answering
/// showed). "Free" would then be a guess about a lock a frozen majority
/// may hold, as `Ok(false)` would be for a release.
pub(crate) async fn inspect(
    masters: &RedlockBackend,
    route: Route,
    keys: &LockKeys,
) -> Result<LockInfo, LockError> {
    let total = masters.len();
    let bound = masters.vote_bound(Duration::MAX);
    let mut call = scripts::INSPECT.call();
    call.key(keys.lock());
    let mut round = engine::quorum::run_everywhere::<(String, i64)>(
        masters,
        0..total,
        route,
        call,
        bound,
        None,
    )
    .decisive_from(usize::MAX);
    let (mut values, mut first_error) = (Vec::new(), None);
    while let Some((_, answer)) = round.recv().await {
        match answer {
            Ok(value) => values.push(value),
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    let view = majority_view(keys.name(), &values, quorum(total));
    if !view.held
        && could_be_held_unseen(&values, total, quorum(total))
        && let Some(err) = first_error
    {
        return Err(err);
    }
    Ok(view)
}

/// Whether the `total - values.len()` masters that did not answer could
/// complete a majority of `needed` for some owner: one seen on some of
/// `values`, or one none of them shows.
fn could_be_held_unseen(values: &[(String, i64)], total: usize, needed: usize) -> bool {
    use crate::owner::owner_of;
    let silent = total.saturating_sub(values.len());
    silent >= needed
        || values
            .iter()
            .filter(|(value, _)| !value.is_empty())
            .any(|(value, _)| {
                let owner = owner_of(value);
                let seen = values
                    .iter()
                    .filter(|(v, _)| !v.is_empty() && owner_of(v) == owner)
                    .count();
                seen + silent >= needed
            })
}

/// What `needed` of the masters' `(value, pttl)` agree on.
fn majority_view(name: &str, values: &[(String, i64)], needed: usize) -> LockInfo {
    use crate::owner::owner_of;
    for (value, _) in values.iter().filter(|(value, _)| !value.is_empty()) {
        let owner = owner_of(value);
        let mut same: Vec<&(String, i64)> = values
            .iter()
            .filter(|(v, _)| !v.is_empty() && owner_of(v) == owner)
            .collect();
        if same.len() < needed {
            continue;
        }
        // The lock stays on a majority until the needed-th longest lease ends.
        same.sort_by_key(|&&(_, pttl)| std::cmp::Reverse(pttl));
        let (_, pttl) = same[needed - 1];
        // Contended when a waiter marked it anywhere.
        let marked = same
            .iter()
            .find(|(value, _)| value.ends_with(crate::owner::WAITED))
            .map_or(value.as_str(), |(value, _)| value.as_str());
        return LockInfo::held(name, marked, *pttl);
    }
    LockInfo::free(name)
}

/// Deletes the lock on every master whoever holds it, and wakes waiters;
/// true when any master that answered deleted it. Returns once a majority
/// answered, as [`super::counted::release`] does.
pub(crate) async fn force_release(
    masters: &RedlockBackend,
    route: Route,
    keys: &LockKeys,
) -> Result<bool, LockError> {
    let mut call = scripts::FORCE_RELEASE.call();
    call.key(keys.lock()).arg(keys.channel()).arg("PUBLISH");
    let needed = quorum(masters.len());
    engine::quorum::let_go_everywhere(masters, route, call, None, needed).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(label: &str, secret: char) -> String {
        format!("{label}/{}", secret.to_string().repeat(32))
    }

    #[test]
    fn a_lock_is_held_when_one_owner_is_on_a_majority() {
        let a = value("web-1", 'a');
        let split = majority_view(
            "k",
            &[
                (a.clone(), 900),
                (value("web-2", 'b'), 950),
                (String::new(), -2),
            ],
            2,
        );
        assert!(!split.held, "no owner on two of three masters: {split:?}");
        let marked = format!("{a}~");
        let held = majority_view(
            "k",
            &[(a.clone(), 900), (marked, 400), (String::new(), -2)],
            2,
        );
        assert_eq!(held.holder.as_deref(), Some("web-1"));
        assert!(held.contended, "a waiter marked it on one master");
        assert_eq!(held.remaining, Some(Duration::from_millis(400)));
        let free = majority_view("k", &[(String::new(), -2), (a, 900)], 2);
        assert_eq!(free, LockInfo::free("k"));
    }

    #[test]
    fn a_lock_is_free_only_when_the_silent_masters_cannot_make_a_majority() {
        let (a, none) = (value("web-1", 'a'), (String::new(), -2));
        let b = value("web-2", 'b');
        // Every master answered: whatever they show is the whole story.
        let all = [(a.clone(), 900), (b.clone(), 900), none.clone()];
        assert!(!could_be_held_unseen(&all, 3, 2));
        // One of three answered: the other two are a majority.
        assert!(could_be_held_unseen(std::slice::from_ref(&none), 3, 2));
        assert!(could_be_held_unseen(&[(a.clone(), 900)], 3, 2));
        // Two answered: only an owner seen on one could be on the third too.
        assert!(!could_be_held_unseen(&[none.clone(), none.clone()], 3, 2));
        assert!(could_be_held_unseen(
            &[(a.clone(), 900), none.clone()],
            3,
            2
        ));
        assert!(could_be_held_unseen(
            &[(a.clone(), 900), (b.clone(), 900)],
            3,
            2
        ));
        // Four of five: two owners seen once each, one silent: no majority.
        let four = [(a, 900), (b, 900), none.clone(), none];
        assert!(!could_be_held_unseen(&four, 5, 3));
    }
}
