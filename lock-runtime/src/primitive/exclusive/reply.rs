//! What the exclusive lock's scripts answer, read into types.

use std::time::Duration;

use crate::engine::primitive::AcquireReply;

/// Reads the acquire script's `{granted, fence or pttl}` answer.
pub(crate) fn read_acquire((granted, value): (i64, i64)) -> AcquireReply {
    if granted == 1 {
        AcquireReply::Acquired {
            fence: u64::try_from(value).unwrap_or(0),
        }
    } else {
        // A negative PTTL: no expiry (-1) or gone meanwhile (-2).
        AcquireReply::Busy {
            pttl: u64::try_from(value).ok().map(Duration::from_millis),
            sightings: None,
            place: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_grants_and_busy_answers() {
        assert!(matches!(
            read_acquire((1, 1_763_812_345_678_901)),
            AcquireReply::Acquired {
                fence: 1_763_812_345_678_901
            }
        ));
        assert!(matches!(
            read_acquire((0, 250)),
            AcquireReply::Busy {
                pttl: Some(pttl),
                sightings: None,
                place: false,
            } if pttl == Duration::from_millis(250)
        ));
        assert!(matches!(
            read_acquire((0, -1)),
            AcquireReply::Busy {
                pttl: None,
                sightings: None,
                place: false,
            }
        ));
    }
}
