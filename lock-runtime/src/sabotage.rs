//! Deliberately broken lockers, for proving that the chaos checker catches
//! broken locks. Test-only: compiled in only with the `sabotage` feature
//! (which the project's own test package turns on), and inert unless the
//! environment variable `LOCK_RUNTIME_SABOTAGE` names a defect when a
//! locker connects. Never enable the feature in an application.

use std::sync::OnceLock;

/// A defect to build into the lockers of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sabotage {
    /// The watchdog neither renews nor reports losses: leases expire
    /// silently under a holder that goes on working.
    SilentWatchdog,
    /// A release deletes the key whoever holds it (a `GET`-less `DEL`),
    /// and a hand-over takes it whoever holds it.
    BlindRelease,
    /// A hand-over in process gives the taker the giver's own fence
    /// instead of the next one.
    SameFencePass,
    /// A loss found late (the process stalled well past the lease's end)
    /// is dropped without a word, and a body's end does not check its
    /// lease: a holder that was frozen finishes its stale work untold.
    SilentAfterStall,
    /// A semaphore grants one permit more than its limit.
    OverLimit,
    /// A semaphore on Redlock takes a plain majority of masters for a
    /// grant, where more are needed: limit + 1 holders can each win one.
    PlainMajority,
    /// A fair lock's release hands the lock to the newest live waiter
    /// instead of the oldest: a grant overtakes the line.
    LifoLine,
    /// A multi-key lock takes only the first key of each group it sends,
    /// and answers as if it took them all.
    PartialMulti,
}

/// The defect this process was started with, if any.
pub(crate) fn active() -> Option<Sabotage> {
    static ACTIVE: OnceLock<Option<Sabotage>> = OnceLock::new();
    *ACTIVE.get_or_init(|| match std::env::var("LOCK_RUNTIME_SABOTAGE").as_deref() {
        Ok("silent-watchdog") => Some(Sabotage::SilentWatchdog),
        Ok("blind-release") => Some(Sabotage::BlindRelease),
        Ok("same-fence-pass") => Some(Sabotage::SameFencePass),
        Ok("silent-after-stall") => Some(Sabotage::SilentAfterStall),
        Ok("over-limit") => Some(Sabotage::OverLimit),
        Ok("lifo-line") => Some(Sabotage::LifoLine),
        Ok("partial-multi") => Some(Sabotage::PartialMulti),
        Ok("plain-majority") => Some(Sabotage::PlainMajority),
        _ => None,
    })
}
