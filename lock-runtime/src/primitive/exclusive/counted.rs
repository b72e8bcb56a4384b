//! The counted Redlock round, shared by the exclusive lock (one key) and
//! the multi-key lock (every key of a request): one counted script per
//! master takes the lock there and counts the grant on the master's fence
//! counter; the answers are counted as votes ([`super::votes`]); when a
//! majority granted but fewer than a majority of counters stand at the
//! fence, a second round confirms the hold on the masters behind and
//! raises their counters. A round that ends without the hold deletes what
//! it may have taken on every master that may hold it, and waits for that,
//! so a failed round leaves nothing behind and a retry cannot be overtaken
//! by the clean-up of the previous try. Why, and what the fence
//! guarantees: [`super::quorum`].
//!
//! What differs between the two, the keys and the calls that name them, is
//! the lock's [`Counted`].

use std::time::Duration;

use super::votes::{AcquireVotes, Verdict, Vote};
use crate::backend::Route;
use crate::backend::flights::{InFlight, Landing};
use crate::backend::redlock::{RedlockBackend, Round, quorum};
use crate::backend::script::ScriptCall;
use crate::engine;
use crate::engine::primitive::{AcquireReply, Try};
use crate::engine::quorum::is_down;
use crate::engine::wait::{Seen, Sightings};
use crate::error::LockError;
use crate::owner::OwnerToken;

/// A lock taken by a counted round: its keys, and the calls that name
/// them.
pub(crate) trait Counted {
    /// The name the ttl's check against the restart quarantine gives.
    fn name(&self) -> &str;

    /// Sends the first round to every master (pool slot `attempt.route`,
    /// each call within the masters' vote bound for `attempt.ttl`,
    /// carrying `attempt.flight`); each answers `{1, fence, quarantine
    /// left}` when granted, else `{0, pttl, now in µs, ..}`.
    fn send(&self, masters: &RedlockBackend, attempt: &Try<'_>) -> Round<Vec<i64>>;

    /// One master's answer, other than a grant in quarantine, as a vote,
    /// and what it showed of the master.
    fn read(&self, answer: &[i64]) -> (Vote, Seen);

    /// The second round's call: confirms the hold of `token` on a master
    /// and raises its counter to `fence`; answers 1 when both happened.
    fn raise_call(&self, token: &OwnerToken, fence: u64) -> ScriptCall;

    /// Lets go, on a master, of what `token` holds there; answers 1 when
    /// it let go of something.
    fn release_call(&self, token: &OwnerToken) -> ScriptCall;

    /// What a grant answers, `fence` its fence.
    fn granted(&self, fence: u64) -> AcquireReply;

    /// The round ended busy; `key` is what the first busy answer named
    /// after the master's clock (its fourth number), if any.
    fn busy(&self, key: Option<i64>) {
        let _ = key;
    }
}

/// One acquire round on every master (see the module docs).
pub(crate) async fn acquire(
    masters: &RedlockBackend,
    lock: &impl Counted,
    attempt: &Try<'_>,
) -> Result<AcquireReply, LockError> {
    if attempt.replicas.is_some() {
        return Err(crate::config::rules::replicas_unsupported("redlock"));
    }
    let (token, route) = (attempt.token, attempt.route);
    let bound = masters.vote_bound(attempt.ttl);
    let total = masters.len();
    let quarantine = masters.quarantine();
    crate::config::rules::check_quarantine(
        attempt.ttl,
        quarantine,
        format_args!("the ttl of lock `{}`", lock.name()),
    )?;
    let mut round = lock.send(masters, attempt).decisive_from(quorum(total));
    let mut votes = AcquireVotes::new(total);
    let mut seen = vec![Seen::Unknown; total];
    let mut answered = 0;
    let mut busy_key = None;
    while let Some((index, answer)) = round.recv().await {
        answered += 1;
        if let Ok([0, _, _, key, ..]) = answer.as_deref() {
            busy_key.get_or_insert(*key);
        }
        let (vote, sighting) = vote(lock, answer);
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
            // Counters in step (the usual case) already stand at the
            // fence on a majority: no second round.
            let raised = if at_fence >= needed {
                0
            } else {
                let call = lock.raise_call(token, fence);
                let raising = raise(
                    masters,
                    route,
                    call,
                    behind,
                    needed - at_fence,
                    bound,
                    attempt.flight,
                );
                tokio::pin!(raising);
                // The first round's calls on slow masters keep going while
                // the second round runs: their bounds run meanwhile.
                loop {
                    tokio::select! {
                        raised = &mut raising => break raised,
                        Some(_) = round.recv() => {}
                    }
                }
            };
            if at_fence + raised >= needed {
                return Ok(lock.granted(fence));
            }
            // Decided early, so calls on slow masters may still be on their
            // way: let them end before deleting what they may have taken.
            while round.recv().await.is_some() {}
            clean_up(masters, lock, route, token, 0..total, bound).await;
            Ok(AcquireReply::NoQuorum {
                granted: at_fence + raised,
                needed,
                down: false,
            })
        }
        Verdict::Busy { pttl } => {
            clean_up(masters, lock, route, token, votes.maybe_ours(), bound).await;
            lock.busy(busy_key);
            Ok(AcquireReply::Busy {
                pttl,
                sightings: Some(Sightings::new(seen)),
                place: false,
            })
        }
        Verdict::Failed { granted, down } => {
            clean_up(masters, lock, route, token, votes.maybe_ours(), bound).await;
            Ok(AcquireReply::NoQuorum {
                granted,
                needed,
                down,
            })
        }
    }
}

/// One master's answer as a vote, and what it showed of the master: a
/// grant in quarantine (`{1, fence, left}`, `left` above 0) is fresh; the
/// lock reads the rest.
fn vote(lock: &impl Counted, answer: Result<Vec<i64>, LockError>) -> (Vote, Seen) {
    let answer = match answer {
        Ok(answer) => answer,
        Err(err) => {
            let down = is_down(&err);
            return (Vote::Failed { down }, Seen::Unknown);
        }
    };
    match *answer.as_slice() {
        [1, fence, left] if left > 0 => {
            let fresh = Vote::Fresh {
                fence: u64::try_from(fence).unwrap_or(0),
                left: Duration::from_millis(left.unsigned_abs()),
            };
            (fresh, Seen::Free)
        }
        _ => lock.read(&answer),
    }
}

/// The second round of a grant whose majority's counters were out of
/// step: runs `call` (see [`Counted::raise_call`]) on `granted`; answers
/// on how many masters it confirmed the hold and raised the counter
/// (counting stops once `needed` did).
async fn raise(
    masters: &RedlockBackend,
    route: Route,
    call: ScriptCall,
    granted: Vec<usize>,
    needed: usize,
    bound: Duration,
    flight: &InFlight,
) -> usize {
    let mut pending = granted.len();
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

/// Deletes what `token` holds of the lock, where it is its, on `on`;
/// waits for each (or its bound), so a retry of this acquisition cannot
/// overtake it.
async fn clean_up(
    masters: &RedlockBackend,
    lock: &impl Counted,
    route: Route,
    token: &OwnerToken,
    on: impl IntoIterator<Item = usize>,
    bound: Duration,
) {
    engine::quorum::undo_on(masters, on, route, lock.release_call(token), bound).await;
}

/// Deletes what `token` holds of the lock on every master where it is its;
/// true when any master that answered deleted something. On each master it
/// waits first for the calls the acquisition left running there
/// (`landing`), so that the delete comes after them, and only there: a
/// master frozen mid-acquisition delays its own delete, not the others'.
/// Returns once a majority answered (the calls on slower masters go on in
/// the background, each in its order), so a frozen master does not hold
/// up the caller. Fails when fewer than a majority answered and none of
/// them deleted anything: a majority may still hold it (see
/// [`engine::quorum::let_go_everywhere`]).
pub(crate) async fn release(
    masters: &RedlockBackend,
    lock: &impl Counted,
    route: Route,
    token: &OwnerToken,
    landing: Option<&Landing>,
) -> Result<bool, LockError> {
    let needed = quorum(masters.len());
    engine::quorum::let_go_everywhere(masters, route, lock.release_call(token), landing, needed)
        .await
}
