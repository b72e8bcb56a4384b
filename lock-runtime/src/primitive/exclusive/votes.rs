//! Counting the masters' answers: when a round is decided, and what it
//! decided. Pure bookkeeping, no I/O.

use std::time::Duration;

use crate::backend::redlock::quorum;

/// One master's answer to an acquire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vote {
    /// The lock is ours there; its counter stands at `fence`.
    Granted(u64),
    /// Granted by a master still in its restart quarantine for `left`: it
    /// may have restarted empty and forgotten a lease that still runs on
    /// other masters, so its grant counts only where it cannot complete a
    /// second majority.
    Fresh {
        /// Its counter.
        fence: u64,
        /// The quarantine still to run.
        left: Duration,
    },
    /// Someone else holds it there, for `pttl` more.
    Busy(Option<Duration>),
    /// No answer: `down` when the master refused the connection or was
    /// never reached, else an error or a timeout (maybe only slow).
    Failed {
        /// Known down rather than slow.
        down: bool,
    },
}

/// What an acquire round decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A majority granted; `fence` is the highest of their counters,
    /// `at_fence` how many granting masters' counters already stand there,
    /// and `behind` the granting masters whose counters are lower.
    Granted {
        fence: u64,
        at_fence: usize,
        behind: Vec<usize>,
    },
    /// Other owners hold too many masters for a majority now; it may
    /// become possible after `pttl`.
    Busy { pttl: Option<Duration> },
    /// Too many masters failed for a majority, whatever the owners do;
    /// `down` when the masters known down alone make a majority impossible.
    Failed { granted: usize, down: bool },
}

/// The answers of one acquire round so far.
#[derive(Debug)]
pub(crate) struct AcquireVotes {
    total: usize,
    /// Masters out of quarantine that granted, with their counters.
    granted: Vec<(usize, u64)>,
    /// Masters in quarantine that granted, with their counters and the
    /// quarantine left.
    fresh: Vec<(usize, u64, Duration)>,
    /// Masters that answered busy, with the owner's remaining lease.
    busy: Vec<(usize, Option<Duration>)>,
    failed: usize,
    /// Of the failed, those known down.
    down: usize,
}

impl AcquireVotes {
    /// A round over `total` masters, nobody answered yet.
    pub(crate) fn new(total: usize) -> Self {
        Self {
            total,
            granted: Vec::new(),
            fresh: Vec::new(),
            busy: Vec::new(),
            failed: 0,
            down: 0,
        }
    }

    /// Records master `index`'s answer.
    pub(crate) fn add(&mut self, index: usize, vote: Vote) {
        match vote {
            Vote::Granted(fence) => self.granted.push((index, fence)),
            Vote::Fresh { fence, left } => self.fresh.push((index, fence, left)),
            Vote::Busy(pttl) => self.busy.push((index, pttl)),
            Vote::Failed { down } => {
                self.failed += 1;
                self.down += usize::from(down);
            }
        }
    }

    /// The outcome, once the answers so far settle it: at once when a
    /// majority out of quarantine granted; otherwise only when every master
    /// answered, so that a failed round's clean-up is ordered after every
    /// one of its calls and its count of grants is exact.
    pub(crate) fn decided(&self) -> Option<Verdict> {
        let needed = quorum(self.total);
        let answered = self.granted.len() + self.fresh.len() + self.busy.len() + self.failed;
        if self.granted.len() >= needed || answered == self.total {
            return Some(self.verdict(0));
        }
        None
    }

    /// The outcome when no more answers will come; the `missing` masters
    /// count as failed.
    ///
    /// Grants of masters in quarantine count only when *every* master
    /// granted: then no lease of another owner is left on any master,
    /// unless a majority lost its data at once, which Redlock does not
    /// survive in any case. This lets a fresh deployment lock at once,
    /// while a restarted master cannot join the masters the previous owner
    /// never held to form a second majority.
    pub(crate) fn verdict(&self, missing: usize) -> Verdict {
        let needed = quorum(self.total);
        if self.granted.len() >= needed {
            return Self::granted(self.granted.iter().copied());
        }
        if missing == 0 && self.granted.len() + self.fresh.len() == self.total {
            let all = self.granted.iter().copied();
            return Self::granted(
                all.chain(self.fresh.iter().map(|&(index, fence, _)| (index, fence))),
            );
        }
        if self.failed + missing > self.total - needed {
            return Verdict::Failed {
                granted: self.granted.len() + self.fresh.len(),
                down: self.down > self.total - needed,
            };
        }
        // A majority is possible once other owners let go and quarantines
        // end: wait until `still_needed` of them have.
        let still_needed = needed - self.granted.len();
        let busy = self.busy.iter().map(|&(_, pttl)| pttl);
        let fresh = self.fresh.iter().map(|&(_, _, left)| Some(left));
        let mut waits: Vec<_> = busy.chain(fresh).collect();
        waits.sort_by_key(|wait| wait.unwrap_or(Duration::MAX));
        Verdict::Busy {
            pttl: waits.get(still_needed - 1).copied().flatten(),
        }
    }

    /// A majority's grants: the fence is the highest of their counters.
    fn granted(grants: impl Iterator<Item = (usize, u64)> + Clone) -> Verdict {
        let fence = grants.clone().map(|(_, fence)| fence).max().unwrap_or(0);
        let (at, behind): (Vec<_>, Vec<_>) = grants.partition(|&(_, at)| at == fence);
        Verdict::Granted {
            fence,
            at_fence: at.len(),
            behind: behind.into_iter().map(|(index, _)| index).collect(),
        }
    }

    /// Masters that may hold our key: all but those that answered busy
    /// (a grant, a failure or a missing answer may each have left it set).
    pub(crate) fn maybe_ours(&self) -> Vec<usize> {
        (0..self.total)
            .filter(|index| !self.busy.iter().any(|&(busy, _)| busy == *index))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(votes: &[Vote]) -> AcquireVotes {
        let mut round = AcquireVotes::new(5);
        for (index, &vote) in votes.iter().enumerate() {
            round.add(index, vote);
        }
        round
    }

    const MS: fn(u64) -> Option<Duration> = |ms| Some(Duration::from_millis(ms));

    #[test]
    fn majority_is_half_plus_one() {
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(4), 3);
        assert_eq!(quorum(5), 3);
    }

    #[test]
    fn a_majority_down_is_told_apart_from_slow_masters() {
        let down = Vote::Failed { down: true };
        let slow = Vote::Failed { down: false };
        let votes = round(&[down, down, down, Vote::Granted(1), Vote::Granted(1)]);
        assert_eq!(
            votes.decided(),
            Some(Verdict::Failed {
                granted: 2,
                down: true
            })
        );
        // Three failures, but only two known down: the third may be slow.
        let votes = round(&[down, down, slow, Vote::Granted(1), Vote::Granted(1)]);
        assert_eq!(
            votes.decided(),
            Some(Verdict::Failed {
                granted: 2,
                down: false
            })
        );
    }

    #[test]
    fn three_grants_of_five_decide_at_once_with_the_highest_fence() {
        let votes = round(&[Vote::Granted(4), Vote::Granted(9), Vote::Granted(7)]);
        assert_eq!(
            votes.decided(),
            Some(Verdict::Granted {
                fence: 9,
                at_fence: 1,
                behind: vec![0, 2]
            })
        );
    }

    #[test]
    fn counters_in_step_need_no_raise() {
        let votes = round(&[
            Vote::Granted(7),
            Vote::Failed { down: false },
            Vote::Granted(7),
            Vote::Granted(7),
        ]);
        assert_eq!(
            votes.decided(),
            Some(Verdict::Granted {
                fence: 7,
                at_fence: 3,
                behind: vec![]
            })
        );
    }

    #[test]
    fn three_owners_of_five_are_busy_once_all_answered() {
        let mut votes = round(&[
            Vote::Busy(MS(900)),
            Vote::Granted(1),
            Vote::Busy(MS(100)),
            Vote::Busy(MS(500)),
        ]);
        assert_eq!(votes.decided(), None);
        votes.add(4, Vote::Granted(2));
        // One more master needed: the shortest owner lease.
        assert_eq!(votes.decided(), Some(Verdict::Busy { pttl: MS(100) }));
        assert_eq!(
            round(&[
                Vote::Busy(MS(900)),
                Vote::Busy(MS(100)),
                Vote::Busy(MS(500))
            ])
            .verdict(2),
            // Three more needed, two never answered: all three owners.
            Verdict::Busy { pttl: MS(900) }
        );
    }

    #[test]
    fn three_failures_of_five_decide_failed_once_all_answered() {
        let mut votes = round(&[
            Vote::Failed { down: false },
            Vote::Granted(1),
            Vote::Failed { down: false },
            Vote::Failed { down: false },
        ]);
        assert_eq!(votes.decided(), None);
        votes.add(4, Vote::Granted(3));
        assert_eq!(
            votes.decided(),
            Some(Verdict::Failed {
                granted: 2,
                down: false
            })
        );
    }

    #[test]
    fn a_mixed_loss_waits_for_the_last_answer_and_then_for_the_owners() {
        let mut votes = round(&[
            Vote::Granted(1),
            Vote::Busy(MS(300)),
            Vote::Busy(MS(200)),
            Vote::Failed { down: false },
        ]);
        assert_eq!(votes.decided(), None);
        votes.add(4, Vote::Failed { down: false });
        // Two failures of five: a majority is possible once both owners
        // let go, the later at 300 ms.
        assert_eq!(votes.decided(), Some(Verdict::Busy { pttl: MS(300) }));
        assert_eq!(votes.maybe_ours(), [0, 3, 4]);
    }

    #[test]
    fn missing_answers_count_as_failures() {
        let votes = round(&[
            Vote::Granted(1),
            Vote::Failed { down: false },
            Vote::Busy(MS(5)),
        ]);
        assert_eq!(votes.decided(), None);
        assert_eq!(
            votes.verdict(2),
            Verdict::Failed {
                granted: 1,
                down: false
            }
        );
        // Two missing of five still leave a majority once the owner lets go.
        let votes = round(&[Vote::Granted(1), Vote::Granted(2), Vote::Busy(MS(5))]);
        assert_eq!(votes.decided(), None);
        assert_eq!(votes.verdict(2), Verdict::Busy { pttl: MS(5) });
    }

    #[test]
    fn an_owner_without_expiry_gives_no_pttl() {
        let votes = round(&[
            Vote::Busy(None),
            Vote::Busy(None),
            Vote::Busy(MS(5)),
            Vote::Granted(1),
            Vote::Granted(1),
        ]);
        assert_eq!(votes.decided(), Some(Verdict::Busy { pttl: MS(5) }));
        // Three owners, one of them for good: a majority needs that one too.
        let votes = round(&[Vote::Busy(None), Vote::Busy(None), Vote::Busy(MS(5))]);
        assert_eq!(votes.verdict(2), Verdict::Busy { pttl: None });
    }

    fn fresh(fence: u64, left_ms: u64) -> Vote {
        Vote::Fresh {
            fence,
            left: Duration::from_millis(left_ms),
        }
    }

    fn round_of_three(votes: &[Vote]) -> AcquireVotes {
        let mut round = AcquireVotes::new(3);
        for (index, &vote) in votes.iter().enumerate() {
            round.add(index, vote);
        }
        round
    }

    #[test]
    fn a_restarted_master_cannot_complete_a_second_majority() {
        // The previous owner held masters 0 and 1; 1 restarted empty and
        // grants again, 2 never held it: 1 and 2 would be a majority.
        let votes = round_of_three(&[Vote::Busy(MS(700)), fresh(50, 2_000), Vote::Granted(9)]);
        // One more settled grant is needed: the owner's lease ends first.
        assert_eq!(votes.decided(), Some(Verdict::Busy { pttl: MS(700) }));
        // The restarted master's grant is cleaned up with the rest.
        assert_eq!(votes.maybe_ours(), [1, 2]);
    }

    #[test]
    fn fresh_grants_count_when_every_master_granted() {
        // A new deployment: every master is in quarantine.
        let mut votes = round_of_three(&[fresh(5, 900), fresh(7, 900)]);
        assert_eq!(votes.decided(), None);
        votes.add(2, fresh(6, 900));
        assert_eq!(
            votes.decided(),
            Some(Verdict::Granted {
                fence: 7,
                at_fence: 1,
                behind: vec![0, 2]
            })
        );
        // With one master down, both quarantines are waited out.
        let votes = round_of_three(&[fresh(5, 900), Vote::Failed { down: true }, fresh(6, 400)]);
        assert_eq!(votes.decided(), Some(Verdict::Busy { pttl: MS(900) }));
        // A majority of settled masters needs no fresh one.
        let votes = round_of_three(&[Vote::Granted(3), Vote::Granted(3)]);
        assert_eq!(
            votes.decided(),
            Some(Verdict::Granted {
                fence: 3,
                at_fence: 2,
                behind: vec![]
            })
        );
        let votes = round_of_three(&[Vote::Granted(3), fresh(99, 10), Vote::Granted(3)]);
        assert_eq!(
            votes.decided(),
            Some(Verdict::Granted {
                fence: 3,
                at_fence: 2,
                behind: vec![]
            })
        );
    }
}
