//! Redlock's count of one renewal round: per lease, renewed where a
//! majority renewed it, gone where no majority can renew it any more.

use super::Renewed;
use crate::backend::redlock::quorum;

/// The answers of one renewal round, per lease.
#[derive(Debug)]
pub(super) struct RenewalVotes {
    total: usize,
    answered: usize,
    yes: Vec<usize>,
    no: Vec<usize>,
}

impl RenewalVotes {
    /// A round of `leases` renewals over `total` masters.
    pub(super) fn new(total: usize, leases: usize) -> Self {
        Self {
            total,
            answered: 0,
            yes: vec![0; leases],
            no: vec![0; leases],
        }
    }

    /// Records one master's answers (one per lease, in order), or its
    /// failure (`None`).
    pub(super) fn add(&mut self, answers: Option<&[bool]>) {
        self.answered += 1;
        for (lease, &renewed) in answers.into_iter().flatten().enumerate() {
            if renewed {
                self.yes[lease] += 1;
            } else {
                self.no[lease] += 1;
            }
        }
    }

    /// Every lease's outcome is settled, whatever the missing masters say.
    pub(super) fn all_decided(&self) -> bool {
        self.answered == self.total
            || (0..self.yes.len()).all(|lease| self.answer(lease) != Renewed::Unknown)
    }

    /// One outcome per lease: renewed on a majority; refused by so many
    /// that no majority is possible; or neither (retried by the watchdog
    /// while the lease is valid).
    pub(super) fn answers(&self) -> Vec<Renewed> {
        (0..self.yes.len())
            .map(|lease| self.answer(lease))
            .collect()
    }

    fn answer(&self, lease: usize) -> Renewed {
        let needed = quorum(self.total);
        if self.yes[lease] >= needed {
            Renewed::Yes
        } else if self.no[lease] > self.total - needed {
            Renewed::Gone
        } else {
            Renewed::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_need_a_majority_and_are_gone_when_none_is_possible() {
        let mut votes = RenewalVotes::new(5, 3);
        votes.add(Some(&[true, false, true]));
        votes.add(Some(&[true, false, false]));
        assert!(!votes.all_decided());
        votes.add(Some(&[true, false, false]));
        // Lease 0: three yes. Lease 1: three no. Lease 2: open.
        assert!(!votes.all_decided());
        votes.add(None);
        votes.add(Some(&[false, false, true]));
        assert!(votes.all_decided());
        assert_eq!(
            votes.answers(),
            [Renewed::Yes, Renewed::Gone, Renewed::Unknown]
        );
    }
}
