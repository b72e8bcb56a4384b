//! Counting one grant round of a primitive whose holders are leases kept
//! in each master's own data (readers, permits): a grant needs `needed`
//! masters out of their restart quarantine that agree on its *terms* (a
//! semaphore's slots; nothing for a read/write lock). Pure bookkeeping, no
//! I/O.

use std::time::Duration;

use crate::engine::primitive::AcquireReply;
use crate::error::LockError;

/// One master's answer to a try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Vote {
    /// Granted on `terms`, with the master's `fence`; `counted` unless the
    /// master is in its restart quarantine (it may have forgotten holders
    /// still held on the others: its grant is recorded, not counted).
    Granted {
        fence: u64,
        terms: Vec<u32>,
        counted: bool,
    },
    /// Held against it there, for `pttl` more at most; `place` when the
    /// try keeps a place there while it waits.
    Busy { pttl: Option<Duration>, place: bool },
    /// Refused for a reason of the primitive's own (`code`, read by the
    /// round's caller into an error).
    Refused(i64),
    /// No answer: `down` when the master refused the connection or was
    /// never reached.
    Failed { down: bool },
}

impl Vote {
    /// A grant that counts, on exactly `terms`.
    fn counts_for(&self, wanted: &[u32]) -> bool {
        matches!(self, Vote::Granted { terms, counted: true, .. } if terms == wanted)
    }
}

/// The answers of one round so far, by master.
#[derive(Debug)]
pub(crate) struct Votes {
    needed: usize,
    votes: Vec<Option<Vote>>,
}

impl Votes {
    /// A round over `total` masters whose grant needs `needed`.
    pub(crate) fn new(total: usize, needed: usize) -> Self {
        Self {
            needed,
            votes: vec![None; total],
        }
    }

    /// Masters a grant needs.
    pub(crate) fn needed(&self) -> usize {
        self.needed
    }

    pub(crate) fn add(&mut self, master: usize, vote: Vote) {
        self.votes[master] = Some(vote);
    }

    /// The terms that the most counted grants name, with how many name
    /// them (the lowest terms on a tie).
    pub(crate) fn leading(&self) -> Option<(Vec<u32>, usize)> {
        let mut best: Option<(Vec<u32>, usize)> = None;
        for vote in self.votes.iter().flatten() {
            let Vote::Granted {
                terms,
                counted: true,
                ..
            } = vote
            else {
                continue;
            };
            let count = self.agreeing(terms);
            let better = match &best {
                None => true,
                Some((leader, most)) => count > *most || (count == *most && terms < leader),
            };
            if better {
                best = Some((terms.clone(), count));
            }
        }
        best
    }

    /// Counted grants on exactly `terms`.
    pub(crate) fn agreeing(&self, terms: &[u32]) -> usize {
        self.votes
            .iter()
            .flatten()
            .filter(|vote| vote.counts_for(terms))
            .count()
    }

    /// Counted grants, whatever their terms.
    pub(crate) fn counted(&self) -> usize {
        self.votes
            .iter()
            .flatten()
            .filter(|vote| matches!(vote, Vote::Granted { counted: true, .. }))
            .count()
    }

    fn unanswered(&self) -> usize {
        self.votes.iter().filter(|vote| vote.is_none()).count()
    }

    /// Enough counted grants agree on their terms: those terms.
    pub(crate) fn agreed(&self) -> Option<Vec<u32>> {
        self.leading()
            .filter(|(_, count)| *count >= self.needed)
            .map(|(terms, _)| terms)
    }

    /// Even if every master still silent granted, too few would count.
    pub(crate) fn hopeless(&self) -> bool {
        self.counted() + self.unanswered() < self.needed
    }

    /// The highest fence among the counted grants on `terms`.
    pub(crate) fn fence_of(&self, terms: &[u32]) -> u64 {
        self.votes
            .iter()
            .flatten()
            .filter_map(|vote| match vote {
                Vote::Granted { fence, .. } if vote.counts_for(terms) => Some(*fence),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Masters whose grant names other terms than `terms`.
    pub(crate) fn elsewhere(&self, terms: &[u32]) -> Vec<usize> {
        self.votes
            .iter()
            .enumerate()
            .filter_map(|(master, vote)| match vote {
                Some(Vote::Granted { terms: theirs, .. }) if theirs != terms => Some(master),
                _ => None,
            })
            .collect()
    }

    /// Masters that answered busy and keep a place the try gave there.
    pub(crate) fn placed(&self) -> Vec<usize> {
        self.votes
            .iter()
            .enumerate()
            .filter_map(|(master, vote)| match vote {
                Some(Vote::Busy { place: true, .. }) => Some(master),
                _ => None,
            })
            .collect()
    }

    /// Masters that may hold a grant of the round: all but those that
    /// answered that they granted nothing (a busy master keeps the place
    /// it may have given).
    pub(crate) fn maybe_granted(&self) -> Vec<usize> {
        self.votes
            .iter()
            .enumerate()
            .filter_map(|(master, vote)| match vote {
                Some(Vote::Busy { .. } | Vote::Refused(_)) => None,
                _ => Some(master),
            })
            .collect()
    }

    /// The reply of a round that did not end granted; a refusal of the
    /// primitive's own is its error (`refusal`).
    pub(crate) fn refusal(
        &self,
        refusal: impl Fn(i64) -> LockError,
    ) -> Result<AcquireReply, LockError> {
        let votes = || self.votes.iter().flatten();
        if let Some(code) = votes().find_map(|vote| match vote {
            Vote::Refused(code) => Some(*code),
            _ => None,
        }) {
            return Err(refusal(code));
        }
        let total = self.votes.len();
        let busy = votes().filter(|vote| matches!(vote, Vote::Busy { .. }));
        if busy.clone().count() > total - self.needed {
            let pttl = busy
                .clone()
                .filter_map(|vote| match vote {
                    Vote::Busy { pttl, .. } => *pttl,
                    _ => None,
                })
                .min();
            let place = busy
                .clone()
                .any(|vote| matches!(vote, Vote::Busy { place: true, .. }));
            return Ok(AcquireReply::Busy {
                pttl,
                sightings: None,
                place,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(fence: u64, terms: &[u32]) -> Vote {
        Vote::Granted {
            fence,
            terms: terms.to_vec(),
            counted: true,
        }
    }

    fn busy(ms: u64, place: bool) -> Vote {
        Vote::Busy {
            pttl: Some(Duration::from_millis(ms)),
            place,
        }
    }

    #[test]
    fn a_round_is_decided_by_counted_grants_on_the_same_terms() {
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
        votes.add(0, granted(10, &[]));
        votes.add(
            1,
            Vote::Granted {
                fence: 11,
                terms: Vec::new(),
                counted: false,
            },
        );
        assert_eq!(votes.agreed(), None);
        votes.add(2, busy(5, false));
        assert!(votes.hopeless());
        assert_eq!(votes.maybe_granted(), [0, 1]);
    }

    #[test]
    fn split_terms_lead_with_the_most_named_then_the_lowest() {
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
    fn too_many_busy_masters_make_a_busy_round_that_keeps_its_places() {
        let mut votes = Votes::new(3, 2);
        votes.add(0, granted(1, &[]));
        votes.add(1, busy(30, true));
        votes.add(2, busy(20, false));
        let reply = votes.refusal(|_| unreachable!()).unwrap();
        let AcquireReply::Busy { pttl, place, .. } = reply else {
            panic!("{reply:?}");
        };
        assert_eq!(pttl, Some(Duration::from_millis(20)));
        assert!(place);
        assert_eq!(votes.maybe_granted(), [0]);
        assert_eq!(votes.placed(), [1]);
    }

    #[test]
    fn failed_masters_make_no_quorum_and_a_refusal_is_the_primitives_error() {
        let mut votes = Votes::new(3, 2);
        votes.add(0, granted(1, &[]));
        votes.add(1, Vote::Failed { down: true });
        votes.add(2, Vote::Failed { down: true });
        let reply = votes.refusal(|_| unreachable!()).unwrap();
        assert!(matches!(
            reply,
            AcquireReply::NoQuorum {
                granted: 1,
                needed: 2,
                down: true
            }
        ));
        votes.add(2, Vote::Refused(7));
        let err = votes
            .refusal(|code| LockError::config(format!("code {code}")))
            .unwrap_err();
        assert!(err.to_string().contains("code 7"), "{err}");
    }
}
