//! The semaphore on Redlock: permits are held when enough independent
//! masters hold them, on the same slots.
//!
//! # How many masters
//! With a limit of K permits over N masters, a plain majority is not
//! enough: K + 1 holders could each win a different majority (3 masters,
//! limit 2: holders on AB, BC and AC). A grant needs
//! q = floor(N*K/(K+1)) + 1 masters ([`quorum_among`]): then any K + 1
//! grants share a master, whose script counted the others and refused
//! the extra one. Renewals need as many (the lease says so to the
//! watchdog, [`crate::engine::lease::Leased::holders`]). With 3 masters
//! and a limit of 2 or more, that is every master: one master down stops
//! the semaphore, rather than let it grant past its limit.
//!
//! # Restarts
//! A master up for less than the restart quarantine may have restarted
//! empty and forgotten permits still held on the others: its grant is
//! recorded but not counted (the engine's `quarantine.lua`). Every lease
//! is at most the quarantine, so by its end nothing it forgot is held.
//!
//! # Slots
//! Each master gives the lowest slots free in its own view; masters in
//! step agree. A round decides once q counted grants name the same slots.
//! When they differ (after a fault), the slots most of them gave are
//! asked of the others, which move the token's claims there or refuse,
//! letting go of it; q masters holding the same slots make the grant. A
//! master that answers after the decision with other slots is moved (or
//! lets go) at once, so a master that renews a holder holds it on its
//! slots.
//!
//! # Fences
//! The highest of the deciding masters' fences (each the master's clock
//! in µs): a later holder of a slot gets a higher fence as far as the
//! masters' clocks agree to within the time between the two grants.
//!
//! A round that does not end granted lets go, on every master that may
//! hold something of it, before it answers.

use std::time::Duration;

use super::Semaphore;
use crate::backend::Route;
use crate::backend::flights::{InFlight, Landing};
use crate::backend::redlock::{RedlockBackend, Round, quorum_among};
use crate::config::rules;
use crate::engine::primitive::{AcquireReply, Try};
use crate::engine::quorum::{is_down, let_go_everywhere, run_everywhere, undo_on};
use crate::error::LockError;
use crate::owner::OwnerToken;

/// One master's answer to an acquire.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Vote {
    /// Granted on `slots`, with the master's `fence`; `counted` unless the
    /// master is in its restart quarantine.
    Granted {
        fence: u64,
        slots: Vec<u32>,
        counted: bool,
    },
    /// Too few permits free there, for `pttl` more at most.
    Busy(Option<Duration>),
    /// The permits there are held under another limit.
    Mismatch(u32),
    /// No answer: `down` when the master refused the connection or was
    /// never reached.
    Failed { down: bool },
}

impl Vote {
    /// Reads `{1, fence, quarantine left, slot...}`, `{0, pttl}` or
    /// `{-1, limit}`.
    fn of(answer: Result<Vec<i64>, LockError>) -> Self {
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => {
                return Vote::Failed {
                    down: is_down(&err),
                };
            }
        };
        match *answer.as_slice() {
            [1, fence, left, ref slots @ ..] => Vote::Granted {
                fence: u64::try_from(fence).unwrap_or(0),
                slots: slots
                    .iter()
                    .map(|&slot| u32::try_from(slot).unwrap_or(u32::MAX))
                    .collect(),
                counted: left == 0,
            },
            [0, pttl, ..] => Vote::Busy(u64::try_from(pttl).ok().map(Duration::from_millis)),
            [-1, limit, ..] => Vote::Mismatch(u32::try_from(limit).unwrap_or(u32::MAX)),
            _ => Vote::Failed { down: false },
        }
    }

    /// A counted grant on exactly `slots`.
    fn counts_for(&self, wanted: &[u32]) -> bool {
        matches!(self, Vote::Granted { slots, counted: true, .. } if slots == wanted)
    }
}

/// The answers of one round so far, by master.
#[derive(Debug)]
struct Votes {
    needed: usize,
    votes: Vec<Option<Vote>>,
}

impl Votes {
    fn new(total: usize, needed: usize) -> Self {
        Self {
            needed,
            votes: vec![None; total],
        }
    }

    fn add(&mut self, master: usize, vote: Vote) {
        self.votes[master] = Some(vote);
    }

    /// The slots that the most counted grants name, with how many name
    /// them (the lowest slots on a tie).
    fn leading(&self) -> Option<(Vec<u32>, usize)> {
        let mut best: Option<(Vec<u32>, usize)> = None;
        for vote in self.votes.iter().flatten() {
            let Vote::Granted {
                slots,
                counted: true,
                ..
            } = vote
            else {
                continue;
            };
            let count = self.agreeing(slots);
            let better = match &best {
                None => true,
                Some((leader, most)) => count > *most || (count == *most && slots < leader),
            };
            if better {
                best = Some((slots.clone(), count));
            }
        }
        best
    }

    /// Counted grants on exactly `slots`.
    fn agreeing(&self, slots: &[u32]) -> usize {
        self.votes
            .iter()
            .flatten()
            .filter(|vote| vote.counts_for(slots))
            .count()
    }

    fn counted(&self) -> usize {
        self.votes
            .iter()
            .flatten()
            .filter(|vote| matches!(vote, Vote::Granted { counted: true, .. }))
            .count()
    }

    fn unanswered(&self) -> usize {
        self.votes.iter().filter(|vote| vote.is_none()).count()
    }

    /// Enough counted grants agree on their slots.
    fn agreed(&self) -> Option<Vec<u32>> {
        self.leading()
            .filter(|(_, count)| *count >= self.needed)
            .map(|(slots, _)| slots)
    }

    /// Even if every master still silent granted, too few would count.
    fn hopeless(&self) -> bool {
        self.counted() + self.unanswered() < self.needed
    }

    /// The highest fence among the counted grants on `slots`.
    fn fence_of(&self, slots: &[u32]) -> u64 {
        self.votes
            .iter()
            .flatten()
            .filter_map(|vote| match vote {
                Vote::Granted { fence, .. } if vote.counts_for(slots) => Some(*fence),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Masters whose grant names other slots than `slots`.
    fn elsewhere(&self, slots: &[u32]) -> Vec<usize> {
        self.votes
            .iter()
            .enumerate()
            .filter_map(|(master, vote)| match vote {
                Some(Vote::Granted { slots: theirs, .. }) if theirs != slots => Some(master),
                _ => None,
            })
            .collect()
    }

    /// Masters that may hold something of the round: all but those that
    /// answered that they granted nothing.
    fn maybe_holding(&self) -> Vec<usize> {
        self.votes
            .iter()
            .enumerate()
            .filter_map(|(master, vote)| match vote {
                Some(Vote::Busy(_) | Vote::Mismatch(_)) => None,
                _ => Some(master),
            })
            .collect()
    }

    /// The reply of a round that did not end granted.
    fn refusal(&self, semaphore: &Semaphore) -> Result<AcquireReply, LockError> {
        let votes = || self.votes.iter().flatten();
        if let Some(held_under) = votes().find_map(|vote| match vote {
            Vote::Mismatch(limit) => Some(*limit),
            _ => None,
        }) {
            return Err(semaphore.mismatch(held_under));
        }
        let total = self.votes.len();
        let busy: Vec<Option<Duration>> = votes()
            .filter_map(|vote| match vote {
                Vote::Busy(pttl) => Some(*pttl),
                _ => None,
            })
            .collect();
        if busy.len() > total - self.needed {
            return Ok(AcquireReply::Busy {
                pttl: busy.iter().flatten().min().copied(),
                sightings: None,
                place: false,
            });
        }
        let down = votes()
            .filter(|vote| matches!(vote, Vote::Failed { down: true }))
            .count();
        Ok(AcquireReply::NoQuorum {
            granted: self.counted(),
            needed: self.needed,
            down: down > total - self.needed,
        })
    }
}

/// One acquire round on every master (see the module docs).
pub(super) async fn acquire(
    semaphore: &Semaphore,
    masters: &RedlockBackend,
    attempt: &Try<'_>,
) -> Result<AcquireReply, LockError> {
    if attempt.replicas.is_some() {
        return Err(rules::replicas_unsupported("redlock"));
    }
    rules::check_quarantine(
        attempt.ttl,
        masters.quarantine(),
        format_args!("the ttl of semaphore `{}`", semaphore.keys.name()),
    )?;
    let total = masters.len();
    let needed = semaphore.masters_needed(total);
    let bound = masters.vote_bound(attempt.ttl);
    let call = semaphore.acquire_call(attempt.token, attempt.ttl, Some(masters.quarantine()), &[]);
    let mut round = run_everywhere::<Vec<i64>>(
        masters,
        0..total,
        attempt.route,
        call,
        bound,
        Some(attempt.flight),
    )
    .decisive_from(needed);
    let mut votes = Votes::new(total, needed);
    while let Some((master, answer)) = round.recv().await {
        votes.add(master, Vote::of(answer));
        if votes.agreed().is_some() || votes.hopeless() {
            break;
        }
    }
    if let Some(slots) = votes.agreed() {
        let fence = votes.fence_of(&slots);
        semaphore.granted_slots(slots.clone());
        // Masters still to answer may grant other slots: moved there, or
        // let go, as their answers come.
        let mover = Mover {
            semaphore: semaphore.clone(),
            masters: masters.clone(),
            route: attempt.route,
            token: attempt.token.clone(),
            ttl: attempt.ttl,
            slots,
            bound,
        };
        mover.follow(round, attempt.flight.clone());
        return Ok(AcquireReply::Acquired { fence });
    }
    // Undecided: let every call end before judging, or undoing, it.
    while let Some((master, answer)) = round.recv().await {
        votes.add(master, Vote::of(answer));
    }
    if let Some(reply) = agree_on_slots(semaphore, masters, attempt, &mut votes, bound).await {
        return Ok(reply);
    }
    let reply = votes.refusal(semaphore);
    let call = semaphore.release_call(attempt.token, "PUBLISH");
    undo_on(masters, votes.maybe_holding(), attempt.route, call, bound).await;
    reply
}

/// Enough counted grants, on different slots: asks the masters that gave
/// other slots for the leading ones; the acquisition when enough then
/// hold those.
async fn agree_on_slots(
    semaphore: &Semaphore,
    masters: &RedlockBackend,
    attempt: &Try<'_>,
    votes: &mut Votes,
    bound: Duration,
) -> Option<AcquireReply> {
    if votes.counted() < votes.needed {
        return None;
    }
    let (slots, _) = votes.leading()?;
    let call = semaphore.acquire_call(
        attempt.token,
        attempt.ttl,
        Some(masters.quarantine()),
        &slots,
    );
    let mut round = run_everywhere::<Vec<i64>>(
        masters,
        votes.elsewhere(&slots),
        attempt.route,
        call,
        bound,
        Some(attempt.flight),
    )
    .decisive_from(usize::MAX);
    while let Some((master, answer)) = round.recv().await {
        votes.add(master, Vote::of(answer));
    }
    if votes.agreeing(&slots) < votes.needed {
        return None;
    }
    let fence = votes.fence_of(&slots);
    semaphore.granted_slots(slots);
    Some(AcquireReply::Acquired { fence })
}

/// Follows a granted round's calls still running: a master that grants
/// other slots than the decided ones moves the token's claims there, or
/// refuses and lets go of it.
struct Mover {
    semaphore: Semaphore,
    masters: RedlockBackend,
    route: Route,
    token: OwnerToken,
    ttl: Duration,
    slots: Vec<u32>,
    bound: Duration,
}

impl Mover {
    /// Reads the rest of `round` in the background, carrying `flight` (a
    /// release waits for it to land).
    fn follow(self, mut round: Round<Vec<i64>>, flight: InFlight) {
        tokio::spawn(async move {
            let _flight = flight;
            let mut elsewhere = Vec::new();
            while let Some((master, answer)) = round.recv().await {
                if let Vote::Granted { slots, .. } = Vote::of(answer)
                    && slots != self.slots
                {
                    elsewhere.push(master);
                }
            }
            if elsewhere.is_empty() {
                return;
            }
            let call = self.semaphore.acquire_call(
                &self.token,
                self.ttl,
                Some(self.masters.quarantine()),
                &self.slots,
            );
            let mut moving = run_everywhere::<Vec<i64>>(
                &self.masters,
                elsewhere,
                self.route,
                call,
                self.bound,
                None,
            )
            .decisive_from(usize::MAX);
            while moving.recv().await.is_some() {}
        });
    }
}

/// Gives back the permits on every master, each after the acquisition's
/// calls there landed; answers once as many masters answered as a grant
/// needs (see [`let_go_everywhere`]).
pub(super) async fn release(
    semaphore: &Semaphore,
    masters: &RedlockBackend,
    route: Route,
    token: &OwnerToken,
    landing: Option<&Landing>,
) -> Result<bool, LockError> {
    let needed = semaphore.masters_needed(masters.len());
    let call = semaphore.release_call(token, "PUBLISH");
    let_go_everywhere(masters, route, call, landing, needed).await
}

/// Masters a grant of a semaphore of `limit` needs among `total`.
pub(super) fn masters_needed(total: usize, limit: u32) -> usize {
    quorum_among(total, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(fence: u64, slots: &[u32]) -> Vote {
        Vote::Granted {
            fence,
            slots: slots.to_vec(),
            counted: true,
        }
    }

    #[test]
    fn a_grant_needs_enough_masters_that_any_extra_holder_meets_a_refusal() {
        // 3 masters, limit 2: holders on AB, BC and AC would each have a
        // majority; every master is needed.
        assert_eq!(masters_needed(3, 2), 3);
        assert_eq!(masters_needed(3, 1), 2);
        assert_eq!(masters_needed(5, 2), 4);
        assert_eq!(masters_needed(5, 4), 5);
        assert_eq!(masters_needed(7, 2), 5);
        // Any K + 1 sets of q masters out of N share one.
        for total in 1..=7_usize {
            for limit in 1..=6_u32 {
                let q = masters_needed(total, limit);
                let k = usize::try_from(limit).unwrap();
                assert!((k + 1) * (total - q) < total, "N={total} K={limit} q={q}");
            }
        }
    }

    #[test]
    fn a_round_is_decided_by_counted_grants_on_the_same_slots() {
        let mut votes = Votes::new(3, 3);
        votes.add(0, granted(10, &[0]));
        votes.add(1, granted(12, &[0]));
        assert_eq!(votes.agreed(), None);
        assert!(!votes.hopeless());
        votes.add(2, granted(11, &[0]));
        assert_eq!(votes.agreed(), Some(vec![0]));
        assert_eq!(votes.fence_of(&[0]), 12);
    }

    #[test]
    fn a_master_in_quarantine_grants_without_counting() {
        let mut votes = Votes::new(3, 2);
        votes.add(0, granted(10, &[1]));
        votes.add(
            1,
            Vote::Granted {
                fence: 11,
                slots: vec![1],
                counted: false,
            },
        );
        assert_eq!(votes.agreed(), None);
        votes.add(2, Vote::Busy(Some(Duration::from_millis(5))));
        assert!(votes.hopeless());
        assert_eq!(votes.maybe_holding(), [0, 1]);
    }

    #[test]
    fn split_slots_lead_with_the_most_named_then_the_lowest() {
        let mut votes = Votes::new(5, 4);
        votes.add(0, granted(1, &[1]));
        votes.add(1, granted(1, &[0]));
        votes.add(2, granted(1, &[1]));
        votes.add(3, granted(1, &[0]));
        votes.add(4, granted(1, &[2]));
        assert_eq!(votes.leading(), Some((vec![0], 2)));
        assert_eq!(votes.elsewhere(&[0]), [0, 2, 4]);
    }

    #[test]
    fn too_many_busy_masters_make_a_busy_round() {
        let mut votes = Votes::new(3, 3);
        votes.add(0, granted(1, &[0]));
        votes.add(1, Vote::Busy(Some(Duration::from_millis(30))));
        assert!(votes.hopeless());
        assert_eq!(votes.maybe_holding(), [0, 2]);
    }
}
