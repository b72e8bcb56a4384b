//! What the exclusive lock's scripts answer, read into types.

use std::time::Duration;

use crate::engine::wait::Sightings;

/// What one acquire step found.
#[derive(Clone, Debug)]
pub(crate) enum AcquireReply {
    /// The caller owns the lock now; `fence` is its fencing token.
    Acquired {
        /// Strictly increasing per key across all owners.
        fence: u64,
    },
    /// Someone else owns it, for `pttl` more (None when the server did not
    /// say, e.g. a key written without expiry by something other than us).
    /// Proves that no earlier try of this acquisition holds the lock.
    Busy {
        /// Remaining lease of the current owner.
        pttl: Option<Duration>,
        /// What a Redlock round saw on each master, which tells the release
        /// messages that follow apart (none elsewhere: every one is news).
        sightings: Option<Sightings>,
    },
    /// Nothing is known: the call did not run this time (a cluster slot in
    /// mid-migration), but an earlier try of the same acquisition may hold
    /// the lock. Try again; a clean-up may still be owed.
    Unknown,
    /// Redlock: too few masters granted it, and the round has cleaned up
    /// after itself. `down` when the masters that failed did so at the
    /// connection (refused, dropped, never reached) rather than by being
    /// slow: one more round at once may find them reconnected, and waiting
    /// longer will not help.
    NoQuorum {
        /// Masters that granted the lock in that round.
        granted: usize,
        /// Masters a majority needs.
        needed: usize,
        /// A majority is known down, not merely slow.
        down: bool,
    },
}

impl AcquireReply {
    /// Reads the acquire script's `{granted, fence or pttl}` answer.
    pub(crate) fn from_script((granted, value): (i64, i64)) -> Self {
        if granted == 1 {
            AcquireReply::Acquired {
                fence: u64::try_from(value).unwrap_or(0),
            }
        } else {
            // A negative PTTL: no expiry (-1) or gone meanwhile (-2).
            AcquireReply::Busy {
                pttl: u64::try_from(value).ok().map(Duration::from_millis),
                sightings: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_grants_and_busy_answers() {
        assert!(matches!(
            AcquireReply::from_script((1, 1_763_812_345_678_901)),
            AcquireReply::Acquired {
                fence: 1_763_812_345_678_901
            }
        ));
        assert!(matches!(
            AcquireReply::from_script((0, 250)),
            AcquireReply::Busy {
                pttl: Some(pttl),
                sightings: None,
            } if pttl == Duration::from_millis(250)
        ));
        assert!(matches!(
            AcquireReply::from_script((0, -1)),
            AcquireReply::Busy {
                pttl: None,
                sightings: None
            }
        ));
    }
}
