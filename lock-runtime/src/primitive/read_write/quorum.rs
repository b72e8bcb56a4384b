//! The read/write lock on Redlock: a read, and a write, are held when a
//! majority of independent masters holds them. Each master keeps its own
//! writer, readers, intents and waiting readers; a reader's majority and
//! a writer's share a master, whose script refused the later one, so a
//! writer overlaps no reader and no other writer. A writer's intent, and
//! a waiting reader's place, are kept on the masters that refused the try
//! and renewed by a majority, as any place.
//!
//! A try runs as the engine's round ([`crate::engine::quorum::round`]):
//! decided as soon as a majority of masters out of their restart
//! quarantine granted (a master in it may have forgotten readers or a
//! writer still held on the others: its grant is recorded, not counted);
//! otherwise the masters that may have granted let go before the try
//! answers, and the busy ones keep the place they gave.
//!
//! Fences are the highest of the deciding masters' clocks (µs), so a
//! write's fence is above the reads and writes before it as far as the
//! masters' clocks agree to within the time between them.

use std::sync::Arc;
use std::time::Duration;

use super::{Mode, ReadWrite, scripts};
use crate::backend::Route;
use crate::backend::flights::Landing;
use crate::backend::redlock::{RedlockBackend, quorum};
use crate::backend::script::ScriptCall;
use crate::engine::primitive::{AcquireReply, Try};
use crate::engine::quorum::round::{Ballot, grant_round};
use crate::engine::quorum::votes::Vote;
use crate::engine::quorum::{let_go_everywhere, run_everywhere};
use crate::error::LockError;
use crate::primitive::shared::ms;

/// One master's `{1, fence, quarantine left}` or `{0, pttl, place kept}`
/// as a vote.
fn vote(answer: &[i64]) -> Option<Vote> {
    match *answer {
        [1, fence, left, ..] => Some(Vote::Granted {
            fence: u64::try_from(fence).unwrap_or(0),
            terms: Vec::new(),
            counted: left == 0,
        }),
        [0, pttl, ref place @ ..] => Some(Vote::Busy {
            pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
            place: place.first() == Some(&1),
        }),
        _ => None,
    }
}

/// One try on every master (see the module docs).
pub(super) async fn acquire(
    lock: &ReadWrite,
    masters: &RedlockBackend,
    attempt: &Try<'_>,
) -> Result<AcquireReply, LockError> {
    let quarantine = ms(masters.quarantine());
    let (token, ttl, waits) = (attempt.token.clone(), attempt.ttl, attempt.waits);
    let trying = lock.clone();
    let refusal =
        |_| LockError::config("the read/write lock's scripts refuse nothing of their own");
    let ballot = Ballot {
        name: lock.keys.name(),
        needed: quorum(masters.len()),
        call: Arc::new(move |_: &[u32]| {
            let script = match trying.mode {
                Mode::Read => &scripts::READ_COUNTED,
                Mode::Write => &scripts::WRITE_COUNTED,
            };
            let mut call = trying.call(script);
            call.key(trying.keys.up_mark())
                .arg(token.as_str())
                .arg(ms(ttl))
                .arg(ms(trying.intent_lease))
                .arg(if waits { "1" } else { "0" })
                .arg(quarantine);
            call
        }),
        read: vote,
        undo: lock.release_call(attempt.token, "?", "PUBLISH"),
        leave: Some(lock.release_call(attempt.token, "p", "PUBLISH")),
        refusal: &refusal,
    };
    let (reply, _) = grant_round(masters, attempt, ballot).await?;
    Ok(reply)
}

/// Lets go, as `what` says, on every master, each after the acquisition's
/// calls there landed; answers once a majority answered (see
/// [`let_go_everywhere`]).
pub(super) async fn let_go(
    masters: &RedlockBackend,
    route: Route,
    call: ScriptCall,
    landing: Option<&Landing>,
) -> Result<bool, LockError> {
    let_go_everywhere(masters, route, call, landing, quorum(masters.len())).await
}

/// Turns the write into a read on every master; the read's fence (the
/// highest of a majority's) when a majority turned it, None when so many
/// no longer held the write that no majority can, and an error when too
/// few answered to tell.
pub(super) async fn downgrade(
    masters: &RedlockBackend,
    route: Route,
    name: &str,
    call: ScriptCall,
) -> Result<Option<u64>, LockError> {
    let total = masters.len();
    let needed = quorum(total);
    let bound = masters.vote_bound(Duration::MAX);
    let mut round = run_everywhere::<Vec<i64>>(masters, 0..total, route, call, bound, None)
        .decisive_from(needed.min(total + 1 - needed));
    let (mut turned, mut refused, mut fence) = (0, 0, 0);
    while let Some((_, answer)) = round.recv().await {
        match answer.as_deref() {
            Ok([1, read, ..]) => {
                turned += 1;
                fence = fence.max(u64::try_from(*read).unwrap_or(0));
            }
            Ok(_) => refused += 1,
            Err(_) => {}
        }
        if turned >= needed || refused > total - needed {
            break;
        }
    }
    if turned >= needed {
        Ok(Some(fence))
    } else if refused > total - needed {
        Ok(None)
    } else {
        Err(LockError::QuorumNotReached {
            key: name.to_owned(),
            granted: turned,
            needed,
        })
    }
}

/// Masters a waiter needs to hear a release from before it tries.
pub(super) fn told_by(masters: &RedlockBackend) -> usize {
    quorum(masters.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_votes() {
        assert_eq!(
            vote(&[1, 17, 0]),
            Some(Vote::Granted {
                fence: 17,
                terms: Vec::new(),
                counted: true
            })
        );
        assert!(matches!(
            vote(&[1, 17, 30]),
            Some(Vote::Granted { counted: false, .. })
        ));
        assert_eq!(
            vote(&[0, 40, 1]),
            Some(Vote::Busy {
                pttl: Some(Duration::from_millis(40)),
                place: true
            })
        );
        assert!(matches!(
            vote(&[0, -1, 0]),
            Some(Vote::Busy {
                pttl: None,
                place: false
            })
        ));
        assert_eq!(vote(&[7]), None);
    }
}
