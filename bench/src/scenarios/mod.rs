//! The five scenarios of the benchmark, one file each. Every scenario is
//! generic over the [`Contender`](crate::Contender) it drives, takes its
//! sizes from the [`Plan`](crate::Plan), and is bounded in count and time.

pub mod handoff;
pub mod macro_overhead;
pub mod parallel;
pub mod uncontended;
pub mod watchdog_scale;

use std::time::Duration;

/// a. One task, sequential lock+unlock on distinct keys.
pub const UNCONTENDED_PAIR: &str = "uncontended_pair";
/// b. 64 tasks on distinct keys for a fixed time.
pub const PARALLEL_64: &str = "parallel_64";
/// c. Release-to-acquire gap for a waiter blocked on a held lock.
pub const HANDOFF: &str = "handoff";
/// d. An annotated fn against the same body with hand-written calls.
pub const MACRO_OVERHEAD: &str = "macro_overhead";
/// e. 10,000 locks held and renewed at once.
pub const WATCHDOG_SCALE: &str = "watchdog_scale";

/// Every scenario, in the order they run and are reported.
pub const ALL: [&str; 5] = [
    UNCONTENDED_PAIR,
    PARALLEL_64,
    HANDOFF,
    MACRO_OVERHEAD,
    WATCHDOG_SCALE,
];

/// Lease of the locks that are taken and given back at once: long enough
/// never to run out (or be renewed) during one pair.
pub const PAIR_TTL: Duration = Duration::from_secs(10);

/// Lock+unlock pairs each contender does before a measured run, so that
/// connections and scripts are warm.
pub const WARMUP_PAIRS: usize = 50;
