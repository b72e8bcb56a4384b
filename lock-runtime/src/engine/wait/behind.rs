//! Who the server's line had behind a waiter a release handed the lock
//! to: what lets its holder hand the lock on in process, with no server
//! call, when the next of them waits in the same locker.
//!
//! A line on the server only grows at its end, and a waiter whose place
//! ran out never comes back ahead of anyone (it arrives again, last). So
//! the waiters a release saw behind the new owner stay, in that order,
//! the first ones behind it for as long as their places live: when the
//! first of them waits in this locker, handing it the lock overtakes
//! nobody, wherever the others wait.

use super::grantee::Grantee;
use crate::owner::OwnerToken;

/// The most waiters a release names behind the new owner: a run of hand-
/// overs in process that long, then one through the server, which names
/// the next ones (and refreshes the fence and the lease).
pub(crate) const SEEN_BEHIND: usize = 8;

/// The waiters a release saw behind the one it handed the lock to, in
/// their order in line (by the digests of their tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Behind {
    waiters: [Option<Grantee>; SEEN_BEHIND],
}

impl Behind {
    /// Reads the comma-separated digests a release script writes after
    /// `;n=`; stops at the first it cannot read (what follows could not be
    /// trusted to come right after the ones before).
    pub(crate) fn parse(list: &str) -> Self {
        let mut behind = Self::default();
        let digests = list.split(',').map(Grantee::parse);
        for (slot, digest) in behind.waiters.iter_mut().zip(digests) {
            let Some(digest) = digest else {
                break;
            };
            *slot = Some(digest);
        }
        behind
    }

    /// The first of them: the next in line.
    pub(crate) fn first(&self) -> Option<Grantee> {
        self.waiters[0]
    }

    /// The ones behind the first: what its holder sees behind it.
    pub(crate) fn rest(&self) -> Self {
        let mut rest = Self::default();
        rest.waiters[..SEEN_BEHIND - 1].copy_from_slice(&self.waiters[1..]);
        rest
    }

    /// How many it names.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.waiters.iter().take_while(|one| one.is_some()).count()
    }
}

/// What a hold a release handed over knows of the server's line: who is
/// behind it, and whose places are still there although they took the
/// hold in process since (they leave with its next release there).
#[derive(Default)]
pub(crate) struct Line {
    pub(crate) behind: Behind,
    pub(crate) served: Vec<OwnerToken>,
}

impl Line {
    /// This line, boxed, when it knows anything: most holds (every one of
    /// a lock whose releases hand nothing over) know nothing of a line,
    /// and a grant or a hold without one stays small to move.
    pub(crate) fn known(self) -> Option<Box<Line>> {
        let knows = self.behind.first().is_some() || !self.served.is_empty();
        knows.then(|| Box::new(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(token: &str) -> String {
        sha1_smol::Sha1::from(token).digest().to_string()
    }

    #[test]
    fn the_line_behind_is_read_in_order_and_moves_up_by_one() {
        let list = format!("{},{},{}", digest("a"), digest("b"), digest("c"));
        let behind = Behind::parse(&list);
        assert_eq!(behind.len(), 3);
        assert_eq!(behind.first(), Some(Grantee::of("a")));
        let rest = behind.rest();
        assert_eq!(rest.first(), Some(Grantee::of("b")));
        assert_eq!(rest.rest().rest().first(), None);
    }

    #[test]
    fn an_unreadable_digest_ends_what_is_trusted() {
        let list = format!("{},zz,{}", digest("a"), digest("c"));
        assert_eq!(Behind::parse(&list).len(), 1);
        assert_eq!(Behind::parse("").first(), None);
        let long: Vec<String> = (0..12).map(|n| digest(&n.to_string())).collect();
        assert_eq!(Behind::parse(&long.join(",")).len(), SEEN_BEHIND);
    }
}
