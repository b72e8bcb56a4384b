//! What the exclusive lock's scripts answer, read into types.

use std::time::Duration;

use crate::engine::wait::Sightings;
use crate::error::LockError;

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

/// One entry of a renewal batch.
pub(crate) struct Renewal<'a> {
    pub(crate) keys: &'a crate::keys::LockKeys,
    pub(crate) token: &'a crate::owner::OwnerToken,
    pub(crate) ttl_ms: u64,
    /// The fence the holder was given (Redlock raises counters to it).
    pub(crate) fence: u64,
}

/// What a renewal found for one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Still ours, with a fresh lease from the moment the batch was sent.
    Yes,
    /// Definitely not ours any more: the holder must be told at once.
    Gone,
    /// Could not be confirmed either way (a node failed); retried while the
    /// lease is still valid.
    Unknown,
}

impl Renewed {
    /// Reads one entry of an extend script's answer: 1 (renewed) or 0 (not ours).
    pub(crate) fn from_value(value: &redis::Value) -> Result<Self, LockError> {
        match value {
            redis::Value::Int(1) => Ok(Self::Yes),
            redis::Value::Int(0) => Ok(Self::Gone),
            other => Err(LockError::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the extend script answered neither 1 nor 0",
                format!("{other:?}"),
            )))),
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

    #[test]
    fn reads_renewals() {
        assert_eq!(
            Renewed::from_value(&redis::Value::Int(1)).unwrap(),
            Renewed::Yes
        );
        assert_eq!(
            Renewed::from_value(&redis::Value::Int(0)).unwrap(),
            Renewed::Gone
        );
        assert!(Renewed::from_value(&redis::Value::Nil).is_err());
    }
}
