//! One try on Redlock for a primitive whose holders are leases kept in
//! each master's own data (a read/write lock's readers and writer, a
//! semaphore's permits): the try's script on every master, counted by
//! [`Votes`], the grant decided once enough masters out of their restart
//! quarantine agree on its terms.
//!
//! - A round is decided as soon as `needed` counted grants agree, without
//!   waiting for the other masters: their calls run on in the background,
//!   and one that grants other terms is moved to the decided ones (or lets
//!   go), so that every master that later renews the holder holds it on
//!   those terms. A master that answered busy and kept a place for the
//!   try gives it up (the holder waits no more).
//! - Enough counted grants on different terms (after a fault): the terms
//!   most of them name are asked of the others, and the try holds when
//!   enough then hold those.
//! - Otherwise, once every master answered (or its bound passed), the
//!   masters that may hold a grant of the round let go before the try
//!   answers (the busy ones keep the place they may have given), so a
//!   failed try leaves nothing held and a retry is not overtaken by its
//!   clean-up.
//!
//! The fence is the highest of the deciding masters' fences.

use std::sync::Arc;
use std::time::Duration;

use super::votes::{Vote, Votes};
use super::{is_down, run_everywhere, undo_on};
use crate::backend::Route;
use crate::backend::flights::InFlight;
use crate::backend::redlock::{RedlockBackend, Round};
use crate::backend::script::ScriptCall;
use crate::config::rules;
use crate::engine::primitive::{AcquireReply, Try};
use crate::error::LockError;

/// The try's call on one master, moving a grant there to the terms given
/// when there are some (a master that cannot lets go, and refuses).
pub(crate) type TryCall = Arc<dyn Fn(&[u32]) -> ScriptCall + Send + Sync>;

/// Reads one master's answer as a vote; None for an answer it cannot
/// read.
pub(crate) type Reader = fn(&[i64]) -> Option<Vote>;

/// One master's answer, or its failure, as a vote.
fn vote_of(read: Reader, answer: Result<Vec<i64>, LockError>) -> Vote {
    match answer {
        Ok(answer) => read(&answer).unwrap_or(Vote::Failed { down: false }),
        Err(err) => Vote::Failed {
            down: is_down(&err),
        },
    }
}

/// What a primitive brings to a round.
pub(crate) struct Ballot<'a> {
    /// Its resource's name, for errors.
    pub(crate) name: &'a str,
    /// Masters a grant needs.
    pub(crate) needed: usize,
    pub(crate) call: TryCall,
    /// One master's answer as a vote (None: an answer it cannot read,
    /// counted as a failed master).
    pub(crate) read: Reader,
    /// The call that lets go of whatever the try may hold on a master.
    pub(crate) undo: ScriptCall,
    /// The call that gives up only the place a try kept on a master that
    /// answered busy, once the others granted (None: tries keep none).
    pub(crate) leave: Option<ScriptCall>,
    /// A refusal of the primitive's own, as its error.
    pub(crate) refusal: &'a (dyn Fn(i64) -> LockError + Sync),
}

/// One try on every master (see the module docs): the reply, and the
/// terms of a grant.
pub(crate) async fn grant_round(
    masters: &RedlockBackend,
    attempt: &Try<'_>,
    ballot: Ballot<'_>,
) -> Result<(AcquireReply, Vec<u32>), LockError> {
    if attempt.replicas.is_some() {
        return Err(rules::replicas_unsupported("redlock"));
    }
    rules::check_quarantine(
        attempt.ttl,
        masters.quarantine(),
        format_args!("the ttl of `{}`", ballot.name),
    )?;
    let total = masters.len();
    let bound = masters.vote_bound(attempt.ttl);
    let mut round = run_everywhere::<Vec<i64>>(
        masters,
        0..total,
        attempt.route,
        (ballot.call)(&[]),
        bound,
        Some(attempt.flight),
    )
    .decisive_from(ballot.needed);
    let mut votes = Votes::new(total, ballot.needed);
    while let Some((master, answer)) = round.recv().await {
        votes.add(master, vote_of(ballot.read, answer));
        if votes.agreed().is_some() || votes.hopeless() {
            break;
        }
    }
    if let Some(terms) = votes.agreed() {
        let fence = votes.fence_of(&terms);
        let mover = Mover {
            masters: masters.clone(),
            route: attempt.route,
            call: ballot.call.clone(),
            read: ballot.read,
            terms: terms.clone(),
            bound,
            leave: ballot.leave,
            placed: votes.placed(),
        };
        mover.follow(Some(round), attempt.flight.clone());
        return Ok((AcquireReply::Acquired { fence }, terms));
    }
    // Undecided: let every call end before judging, or undoing, it.
    while let Some((master, answer)) = round.recv().await {
        votes.add(master, vote_of(ballot.read, answer));
    }
    if let Some(terms) = agree_on_terms(masters, attempt, &ballot, &mut votes, bound).await {
        let fence = votes.fence_of(&terms);
        let mover = Mover {
            masters: masters.clone(),
            route: attempt.route,
            call: ballot.call.clone(),
            read: ballot.read,
            terms: terms.clone(),
            bound,
            leave: ballot.leave,
            placed: votes.placed(),
        };
        mover.follow(None, attempt.flight.clone());
        return Ok((AcquireReply::Acquired { fence }, terms));
    }
    let reply = votes.refusal(ballot.refusal);
    undo_on(
        masters,
        votes.maybe_granted(),
        attempt.route,
        ballot.undo,
        bound,
    )
    .await;
    reply.map(|reply| (reply, Vec::new()))
}

/// Enough counted grants, on different terms: asks the masters that gave
/// other terms for the leading ones; those terms when enough then hold
/// them.
async fn agree_on_terms(
    masters: &RedlockBackend,
    attempt: &Try<'_>,
    ballot: &Ballot<'_>,
    votes: &mut Votes,
    bound: Duration,
) -> Option<Vec<u32>> {
    if votes.counted() < votes.needed() {
        return None;
    }
    let (terms, _) = votes.leading()?;
    let mut round = run_everywhere::<Vec<i64>>(
        masters,
        votes.elsewhere(&terms),
        attempt.route,
        (ballot.call)(&terms),
        bound,
        Some(attempt.flight),
    )
    .decisive_from(usize::MAX);
    while let Some((master, answer)) = round.recv().await {
        votes.add(master, vote_of(ballot.read, answer));
    }
    (votes.agreeing(&terms) >= votes.needed()).then_some(terms)
}

/// Follows a granted round's calls still running: a master that grants
/// other terms than the decided ones is moved to those, or lets go; a
/// master that kept a place for the try gives it up.
struct Mover {
    masters: RedlockBackend,
    route: Route,
    call: TryCall,
    read: Reader,
    terms: Vec<u32>,
    bound: Duration,
    leave: Option<ScriptCall>,
    /// Masters known to keep a place for the try.
    placed: Vec<usize>,
}

impl Mover {
    /// Reads the rest of `round` (if any) in the background, then moves
    /// and leaves where needed, carrying `flight` (a release waits for it
    /// to land).
    fn follow(mut self, round: Option<Round<Vec<i64>>>, flight: InFlight) {
        tokio::spawn(async move {
            let _flight = flight;
            let mut elsewhere = Vec::new();
            if let Some(mut round) = round {
                while let Some((master, answer)) = round.recv().await {
                    match vote_of(self.read, answer) {
                        Vote::Granted { terms, .. } if terms != self.terms => {
                            elsewhere.push(master)
                        }
                        Vote::Busy { place: true, .. } => self.placed.push(master),
                        _ => {}
                    }
                }
            }
            if !elsewhere.is_empty() {
                let call = (self.call)(&self.terms);
                self.run_on(elsewhere, call).await;
            }
            if let Some(leave) = self.leave.take()
                && !self.placed.is_empty()
            {
                let placed = std::mem::take(&mut self.placed);
                self.run_on(placed, leave).await;
            }
        });
    }

    /// Runs `call` on `on`, and waits for each (or its bound).
    async fn run_on(&self, on: Vec<usize>, call: ScriptCall) {
        let mut round =
            run_everywhere::<redis::Value>(&self.masters, on, self.route, call, self.bound, None)
                .decisive_from(usize::MAX);
        while round.recv().await.is_some() {}
    }
}
