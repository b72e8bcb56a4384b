//! Where locks are stored. Each backend offers the same three atomic steps
//! (acquire, release, extend a batch) and a way to hear about releases.

pub(crate) mod redis;

use std::time::Duration;

/// What one acquire step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The caller owns the lock now; `fence` is its fencing token.
    Acquired {
        /// Strictly increasing per key across all owners.
        fence: u64,
    },
    /// Someone else owns it, for `pttl` more (None when the server did not
    /// say, e.g. a key written without expiry by something other than us).
    Busy {
        /// Remaining lease of the current owner.
        pttl: Option<Duration>,
    },
}
