//! Redlock's count of one renewal round: per lease, renewed where as
//! many masters renewed it as its grant needed, gone where that is no
//! longer possible.

use super::Renewed;

/// The answers of one renewal round, per lease.
#[derive(Debug)]
pub(super) struct RenewalVotes {
    total: usize,
    answered: usize,
    /// Per lease, the masters that must renew it.
    needed: Vec<usize>,
    yes: Vec<usize>,
    no: Vec<usize>,
}

impl RenewalVotes {
    /// A round over `total` masters of one renewal per entry of `needed`,
    /// each needing that many masters.
    pub(super) fn new(total: usize, needed: Vec<usize>) -> Self {
        let leases = needed.len();
        Self {
            total,
            answered: 0,
            needed,
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

    /// One outcome per lease: renewed on as many masters as it needs;
    /// refused by so many that this is not possible; or neither (retried
    /// by the watchdog while the lease is valid).
    pub(super) fn answers(&self) -> Vec<Renewed> {
        (0..self.yes.len())
            .map(|lease| self.answer(lease))
            .collect()
    }

    fn answer(&self, lease: usize) -> Renewed {
        let needed = self.needed[lease];
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
        let mut votes = RenewalVotes::new(5, vec![3; 3]);
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

    #[test]
    fn a_lease_that_needs_every_master_is_gone_at_the_first_refusal() {
        // A semaphore of limit 2 on 3 masters needs all 3; a lock, 2.
        let mut votes = RenewalVotes::new(3, vec![3, 2]);
        votes.add(Some(&[true, true]));
        votes.add(Some(&[false, true]));
        assert!(votes.all_decided());
        assert_eq!(votes.answers(), [Renewed::Gone, Renewed::Yes]);
    }
}
