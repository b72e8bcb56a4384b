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
//! step agree. The slots are the grant's *terms* in the engine's round
//! ([`crate::engine::quorum::round`]): q counted grants must name the same
//! slots, a master that gave others is asked to move the token's claims
//! there (or lets go of it), and so every master that renews a holder
//! holds it on its slots.
//!
//! # Fences
//! The highest of the deciding masters' fences (each the master's clock
//! in µs): a later holder of a slot gets a higher fence as far as the
//! masters' clocks agree to within the time between the two grants.
//!
//! A round that does not end granted lets go, on every master that may
//! hold something of it, before it answers.

use std::sync::Arc;

use super::Semaphore;
use crate::backend::Route;
use crate::backend::flights::Landing;
use crate::backend::redlock::{RedlockBackend, quorum_among};
use crate::engine::primitive::{AcquireReply, Try};
use crate::engine::quorum::let_go_everywhere;
use crate::engine::quorum::round::{Ballot, grant_round};
use crate::engine::quorum::votes::Vote;
use crate::error::LockError;
use crate::owner::OwnerToken;

/// One master's `{1, fence, quarantine left, slot...}`, `{0, pttl}` or
/// `{-1, limit held under}` as a vote.
fn vote(answer: &[i64]) -> Option<Vote> {
    match *answer {
        [1, fence, left, ref slots @ ..] => Some(Vote::Granted {
            fence: u64::try_from(fence).unwrap_or(0),
            terms: slots
                .iter()
                .map(|&slot| u32::try_from(slot).unwrap_or(u32::MAX))
                .collect(),
            counted: left == 0,
        }),
        [0, pttl, ..] => Some(Vote::Busy {
            pttl: u64::try_from(pttl)
                .ok()
                .map(std::time::Duration::from_millis),
            place: false,
        }),
        [-1, limit, ..] => Some(Vote::Refused(limit)),
        _ => None,
    }
}

/// One acquire round on every master (see the module docs).
pub(super) async fn acquire(
    semaphore: &Semaphore,
    masters: &RedlockBackend,
    attempt: &Try<'_>,
) -> Result<AcquireReply, LockError> {
    let quarantine = Some(masters.quarantine());
    let (token, ttl) = (attempt.token.clone(), attempt.ttl);
    let moving = semaphore.clone();
    let refusal = |limit: i64| semaphore.mismatch(u32::try_from(limit).unwrap_or(0));
    let ballot = Ballot {
        name: semaphore.keys.name(),
        needed: semaphore.masters_needed(masters.len()),
        call: Arc::new(move |slots: &[u32]| moving.acquire_call(&token, ttl, quarantine, slots)),
        read: vote,
        undo: semaphore.release_call(attempt.token, "PUBLISH"),
        leave: None,
        refusal: &refusal,
    };
    let (reply, slots) = grant_round(masters, attempt, ballot).await?;
    if matches!(reply, AcquireReply::Acquired { .. }) {
        semaphore.granted_slots(slots);
    }
    Ok(reply)
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
    fn answers_read_as_votes() {
        assert_eq!(
            vote(&[1, 17, 0, 0, 2]),
            Some(Vote::Granted {
                fence: 17,
                terms: vec![0, 2],
                counted: true
            })
        );
        assert!(matches!(
            vote(&[1, 17, 5, 1]),
            Some(Vote::Granted { counted: false, .. })
        ));
        assert_eq!(vote(&[-1, 4]), Some(Vote::Refused(4)));
        assert!(matches!(
            vote(&[0, -1]),
            Some(Vote::Busy { pttl: None, .. })
        ));
        assert_eq!(vote(&[]), None);
    }
}
