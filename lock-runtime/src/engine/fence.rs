//! Fencing tokens, as the engine keeps them: every grant hands its holder a
//! fence that rises per resource (how a primitive makes one is its own:
//! the server's clock, or a Redlock master's counter), and a hold passed
//! to the next task in process, without the server, takes the last fence
//! plus one only while that stays below any fence the server can issue
//! next ([`FenceBasis`]).
//!
//! Not to be confused with owner tokens ([`crate::owner`]), which prove who
//! holds a lock and are kept secret; a fence is handed out for the holder
//! to show to the stores it writes to.

use std::time::Instant;

/// The last fence the server issued for a hold, and a moment after the
/// server issued it, on the real monotonic clock (not the locker's, which
/// tests may pause).
///
/// A primitive whose holds are passed in process issues fences from one
/// node that are at most that node's clock (`TIME`, in µs) at the moment
/// it issued them (the exclusive lock's are its clock).
/// A lock passed inside the process, without a server call, takes the
/// giver's fence plus one; that stays at most the server's clock as long
/// as a pass raises the fence by less than the µs that passed since the
/// basis, so every later grant by the server, whose fence is its clock,
/// is still higher. [`FenceBasis::next_after`] keeps a margin of two:
/// it allows one µs of fence per two µs seen, so the server's clock may
/// even run at half the client's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FenceBasis {
    fence: u64,
    seen_at: Instant,
}

impl FenceBasis {
    /// A fence the server just issued.
    pub(crate) fn issued_now(fence: u64) -> Self {
        Self {
            fence,
            seen_at: Instant::now(),
        }
    }

    /// The fence after `fence` (the last one of this hold), when the
    /// server's clock has surely passed it; `None` while it is too soon.
    pub(crate) fn next_after(&self, fence: u64) -> Option<u64> {
        let next = fence.checked_add(1)?;
        let raised = u128::from(next.checked_sub(self.fence)?);
        let room = self.seen_at.elapsed().as_micros() / 2;
        (raised <= room).then_some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_fence_raised_in_process_stays_behind_the_servers_clock() {
        let basis = FenceBasis {
            fence: 1_000,
            seen_at: Instant::now() - Duration::from_secs(1),
        };
        // At least 1 s seen: room for at least 500 000 fences (and the room
        // only grows), but not for 60 s worth.
        assert_eq!(basis.next_after(1_000), Some(1_001));
        assert_eq!(basis.next_after(500_999), Some(501_000));
        assert_eq!(basis.next_after(30_001_000), None);
        assert_eq!(basis.next_after(u64::MAX), None);
        // A fence below the basis is not this hold's.
        assert_eq!(basis.next_after(10), None);
        let fresh = FenceBasis::issued_now(7);
        assert_eq!(fresh.next_after(7), None, "no room the moment it is issued");
    }
}
