//! The multi-key lock on Redlock: held when a majority (N/2 + 1) of
//! independent masters holds every key, the exclusive lock's rule (see
//! [`crate::primitive::exclusive::quorum`], whose vote counting this
//! shares).
//!
//! Every master is asked at once to take all the keys in one script
//! (`acquire_counted.lua`): all or none there, counted on its fence
//! counter (one per master for every lock of the locker, so that the
//! exclusive lock's grants and these rise together). A majority granted
//! (a master in its restart quarantine counts only when every master
//! granted): the fence is the highest counter of the majority, every key's;
//! when fewer of the majority's counters stand at it than a majority, a
//! second round confirms every key on the masters behind and raises their
//! counters. A round that ends without the hold deletes our keys on every
//! master that may hold any (compare and delete), and waits for that, so a
//! failed round leaves nothing behind. A release runs on every master and
//! returns once a majority answered.

use std::sync::Arc;
use std::time::Duration;

use super::{Multi, scripts};
use crate::backend::Route;
use crate::backend::flights::{InFlight, Landing};
use crate::backend::redlock::{RedlockBackend, quorum};
use crate::backend::script::ScriptCall;
use crate::engine;
use crate::engine::primitive::{AcquireReply, Try};
use crate::engine::wait::{Seen, Sightings};
use crate::error::LockError;
use crate::owner::OwnerToken;
use crate::primitive::exclusive::votes::{AcquireVotes, Verdict, Vote};
use crate::primitive::shared::ms;

/// One acquire round on every master.
pub(crate) async fn acquire(
    masters: &RedlockBackend,
    multi: &Multi,
    attempt: &Try<'_>,
) -> Result<AcquireReply, LockError> {
    if attempt.replicas.is_some() {
        return Err(crate::config::rules::replicas_unsupported("redlock"));
    }
    let (token, route) = (attempt.token, attempt.route);
    let bound = masters.vote_bound(attempt.ttl);
    let total = masters.len();
    let quarantine = masters.quarantine();
    let first = &multi.keys[0];
    crate::config::rules::check_quarantine(
        attempt.ttl,
        quarantine,
        format_args!("the ttl of lock `{}`", first.name()),
    )?;
    let mut call = scripts::ACQUIRE_COUNTED.call();
    for keys in multi.keys.iter() {
        call.key(keys.lock());
    }
    call.key(first.counter())
        .key(first.up_mark())
        .arg(token.as_str())
        .arg(ms(attempt.ttl))
        .arg(quarantine.as_millis());
    let call = Arc::new(call);
    let mut round = masters
        .fan_out(
            0..total,
            bound,
            "a lock script",
            Some(attempt.flight),
            move |_, master| {
                let call = call.clone();
                async move { master.run::<Vec<i64>>(route, &call).await }
            },
        )
        .decisive_from(quorum(total));
    let mut votes = AcquireVotes::new(total);
    let mut seen = vec![Seen::Unknown; total];
    let mut answered = 0;
    let mut busy_key = None;
    while let Some((index, answer)) = round.recv().await {
        answered += 1;
        if let Ok([0, _, _, key, ..]) = answer.as_deref() {
            busy_key.get_or_insert(*key);
        }
        let (vote, sighting) = vote(answer);
        votes.add(index, vote);
        seen[index] = sighting;
        if votes.decided().is_some() {
            break;
        }
    }
    let needed = quorum(total);
    match votes.verdict(total - answered) {
        Verdict::Granted {
            fence,
            at_fence,
            behind,
        } => {
            let raised = if at_fence >= needed {
                0
            } else {
                let raising = raise(
                    masters,
                    multi,
                    route,
                    token,
                    fence,
                    behind,
                    needed - at_fence,
                    bound,
                    attempt.flight,
                );
                tokio::pin!(raising);
                // The first round's calls on slow masters keep going while
                // the second round runs.
                loop {
                    tokio::select! {
                        raised = &mut raising => break raised,
                        Some(_) = round.recv() => {}
                    }
                }
            };
            if at_fence + raised >= needed {
                return Ok(multi.granted(vec![fence; multi.keys.len()]));
            }
            while round.recv().await.is_some() {}
            clean_up(masters, multi, route, token, 0..total, bound).await;
            Ok(AcquireReply::NoQuorum {
                granted: at_fence + raised,
                needed,
                down: false,
            })
        }
        Verdict::Busy { pttl } => {
            clean_up(masters, multi, route, token, votes.maybe_ours(), bound).await;
            let index = busy_key
                .and_then(|key| usize::try_from(key - 1).ok())
                .filter(|index| *index < multi.keys.len())
                .unwrap_or(0);
            multi
                .state
                .busy
                .store(index, std::sync::atomic::Ordering::SeqCst);
            Ok(AcquireReply::Busy {
                pttl,
                sightings: Some(Sightings::new(seen)),
                place: false,
            })
        }
        Verdict::Failed { granted, down } => {
            clean_up(masters, multi, route, token, votes.maybe_ours(), bound).await;
            Ok(AcquireReply::NoQuorum {
                granted,
                needed,
                down,
            })
        }
    }
}

/// One master's answer (`{1, fence, quarantine left}` or
/// `{0, pttl, now, key}`) as a vote, and what it showed of the master.
fn vote(answer: Result<Vec<i64>, LockError>) -> (Vote, Seen) {
    let answer = match answer {
        Ok(answer) => answer,
        Err(err) => {
            let down = engine::quorum::is_down(&err);
            return (Vote::Failed { down }, Seen::Unknown);
        }
    };
    match *answer.as_slice() {
        [1, fence, left] if left > 0 => (
            Vote::Fresh {
                fence: u64::try_from(fence).unwrap_or(0),
                left: Duration::from_millis(left.unsigned_abs()),
            },
            Seen::Free,
        ),
        [1, fence, ..] => (Vote::Granted(u64::try_from(fence).unwrap_or(0)), Seen::Free),
        [0, pttl, now, ..] => {
            let pttl = u64::try_from(pttl).ok().map(Duration::from_millis);
            let seen = u64::try_from(now).map_or(Seen::Unknown, Seen::BusyAt);
            (Vote::Busy(pttl), seen)
        }
        _ => (Vote::Failed { down: false }, Seen::Unknown),
    }
}

/// The second round of a grant whose majority's counters were out of
/// step: confirms every key on `granted` and raises their counters to the
/// fence; answers on how many both happened (counting stops once `needed`
/// did).
#[allow(clippy::too_many_arguments)]
async fn raise(
    masters: &RedlockBackend,
    multi: &Multi,
    route: Route,
    token: &OwnerToken,
    fence: u64,
    granted: Vec<usize>,
    needed: usize,
    bound: Duration,
    flight: &InFlight,
) -> usize {
    let mut pending = granted.len();
    let mut call = scripts::RAISE_COUNTER.call();
    for keys in multi.keys.iter() {
        call.key(keys.lock());
    }
    call.key(multi.keys[0].counter())
        .arg(token.as_str())
        .arg(fence);
    let decisive = needed.min(pending + 1 - needed.min(pending));
    let mut round =
        engine::quorum::run_everywhere(masters, granted, route, call, bound, Some(flight))
            .decisive_from(decisive);
    let mut confirmed = 0;
    while let Some((_, answer)) = round.recv().await {
        pending -= 1;
        confirmed += usize::from(matches!(answer, Ok(1_i64)));
        if confirmed >= needed || confirmed + pending < needed {
            break;
        }
    }
    confirmed
}

/// Deletes our keys, where they are ours, on `on`; waits for each (or its
/// bound), so a retry of this acquisition cannot overtake it.
async fn clean_up(
    masters: &RedlockBackend,
    multi: &Multi,
    route: Route,
    token: &OwnerToken,
    on: impl IntoIterator<Item = usize>,
    bound: Duration,
) {
    engine::quorum::undo_on(masters, on, route, release_call(multi, token), bound).await;
}

fn release_call(multi: &Multi, token: &OwnerToken) -> ScriptCall {
    let mut call = scripts::RELEASE.call();
    for keys in multi.keys.iter() {
        call.key(keys.lock());
    }
    call.arg(token.as_str()).arg("PUBLISH");
    for keys in multi.keys.iter() {
        call.arg(keys.channel());
    }
    call
}

/// Deletes our keys on every master where they are ours, each master
/// after the acquisition's calls there landed; returns once a majority
/// answered (see [`engine::quorum::let_go_everywhere`]).
pub(crate) async fn release(
    masters: &RedlockBackend,
    multi: &Multi,
    route: Route,
    token: &OwnerToken,
    landing: Option<&Landing>,
) -> Result<bool, LockError> {
    let needed = quorum(masters.len());
    engine::quorum::let_go_everywhere(masters, route, release_call(multi, token), landing, needed)
        .await
}
