//! Lease arithmetic: how long the holder of a lease may trust it.
//!
//! A lease of `ttl` whose request was *sent* at `sent_at` (the server may
//! have started it at any moment after that) is trusted until
//!
//! ```text
//! sent_at + ttl - drift - margin
//!     drift  = ttl/100 + 2 ms                      Redlock's allowance for clock drift
//!     margin = ttl/20 + min(recent stall, ttl/4)   time for the holder to stop
//! ```
//!
//! The margin is the time the loss signal has to reach the body and stop
//! it before the key can expire on the server: the watchdog's timer, the
//! body's task waking, and its next `.await`. On a busy machine those can
//! take far longer than a fixed share of the lease: a hypervisor that
//! stops the whole machine for 100 ms, or a starved scheduler, delays the
//! signal by that much. So the watchdog measures how late its own timers
//! fire ([`observe_lateness`]) and the margin grows by the longest delay
//! seen in the last minute (capped at a quarter of the lease, so a lease
//! always keeps most of its length). The margin that counts is the one of
//! now, or of the lease's last confirmation if that was wider: a lease
//! confirmed before a stall was seen is trusted that much less too
//! ([`Lease::valid_until`](crate::engine::lease::Lease::valid_until)), and the
//! watchdog moves its loss sooner. A holder is then told of a loss
//! before the key can expire unless the process is stalled, at that
//! moment, for longer than `ttl/20` plus the longest stall it saw recently.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long stalls are remembered.
const MEMORY: Duration = Duration::from_secs(60);

/// Until when a lease of `ttl` whose request was sent at `sent_at` can be
/// trusted (on the [`crate::host::clock`] clock).
pub(crate) fn validity_end(sent_at: Instant, ttl: Duration) -> Instant {
    sent_at + trusted_for(ttl)
}

/// How long after its request was sent a lease of `ttl` can be trusted,
/// with the margin as it is now.
pub(crate) fn trusted_for(ttl: Duration) -> Duration {
    // In whole nanoseconds: this runs several times per lock, and there
    // each division by a constant is a multiplication, where `Duration`'s
    // own division is a chain of general ones.
    let ttl = nanos(ttl);
    // Redlock's allowance for clock drift: 1 % plus 2 ms.
    let drift = ttl / 100 + 2_000_000;
    // The reaction margin: 5 %, widened by the stalls seen recently, up to
    // a quarter of the lease.
    let margin = ttl / 20 + nanos(recent_stall()).min(ttl / 4);
    Duration::from_nanos(ttl.saturating_sub(drift + margin))
}

/// `duration` in nanoseconds, saturating (584 years).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// How often the watchdog renews a lease of `ttl`: every third of it, or,
/// for a lease of a few milliseconds whose drift allowance leaves less than
/// two thirds of it to trust, twice within what is left, so that every
/// renewal is sent while the lease is still trusted.
pub(crate) fn renewal_interval(ttl: Duration) -> Duration {
    (ttl / 3).min(trusted_for(ttl) / 2)
}

/// Held by the tests that write the process-wide stall record, so that
/// none of them reads what another wrote.
#[cfg(test)]
pub(crate) static STALL_RECORD_IN_USE: Mutex<()> = Mutex::new(());

/// The longest stall observed in the last minute, in nanoseconds; read on
/// every grant and renewal, so it is a plain atomic.
static RECENT_STALL_NS: AtomicU64 = AtomicU64::new(0);

/// The stalls observed, by when: kept by whoever observes.
static OBSERVED: Mutex<Vec<(Instant, Duration)>> = Mutex::new(Vec::new());

/// The longest stall of the process observed in the last minute.
pub(crate) fn recent_stall() -> Duration {
    Duration::from_nanos(RECENT_STALL_NS.load(Ordering::Relaxed))
}

/// A timer that should have fired at `planned` fired `now`: the process
/// (or the machine) was not running for the difference. Lateness below a
/// millisecond is ordinary scheduling and is not recorded.
pub(crate) fn observe_lateness(planned: Instant, now: Instant) {
    let late = now.saturating_duration_since(planned);
    let mut observed = OBSERVED.lock().unwrap_or_else(|e| e.into_inner());
    observed.retain(|&(at, _)| now.saturating_duration_since(at) < MEMORY);
    if late >= Duration::from_millis(1) {
        // Keep only what can still be the longest: a smaller stall seen
        // before a larger one will never be the maximum again.
        observed.retain(|&(_, stall)| stall > late);
        observed.push((now, late));
    }
    let longest = observed.iter().map(|&(_, stall)| stall).max();
    let nanos = longest.map_or(0, |stall| {
        u64::try_from(stall.as_nanos()).unwrap_or(u64::MAX)
    });
    RECENT_STALL_NS.store(nanos, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The drift allowance as the module's docs write it.
    fn drift(ttl: Duration) -> Duration {
        ttl / 100 + Duration::from_millis(2)
    }

    /// The fixed part of the reaction margin, as the docs write it.
    fn base_margin(ttl: Duration) -> Duration {
        ttl / 20
    }

    /// The reaction margin now, as the docs write it.
    fn reaction_margin(ttl: Duration) -> Duration {
        base_margin(ttl) + recent_stall().min(ttl / 4)
    }

    /// How much of a lease of `ttl` is usable on a machine that never stalls.
    fn usable(ttl: Duration) -> Duration {
        ttl.saturating_sub(drift(ttl) + base_margin(ttl))
    }

    #[test]
    fn validity_is_ttl_minus_drift_and_margin_from_the_send() {
        let ttl = Duration::from_secs(3);
        assert_eq!(usable(ttl), Duration::from_millis(3000 - 30 - 2 - 150));
    }

    #[test]
    fn every_renewal_of_an_accepted_lease_is_sent_while_it_is_trusted() {
        for ms in (3..=40).chain([100, 1_000, 30_000, 3_600_000]) {
            let ttl = Duration::from_millis(ms);
            let every = renewal_interval(ttl);
            assert!(every > Duration::ZERO, "{ttl:?}");
            assert!(every < trusted_for(ttl), "{ttl:?}: every {every:?}");
            assert!(every <= ttl / 3, "{ttl:?}");
        }
        // From about 8 ms on, a third of the lease.
        assert_eq!(
            renewal_interval(Duration::from_secs(3)),
            Duration::from_secs(1)
        );
        // The shortest lease: at most 0.82 ms to trust, renewed twice in it.
        let shortest = Duration::from_millis(3);
        assert!(renewal_interval(shortest) <= usable(shortest) / 2);
    }

    #[test]
    fn the_trusted_share_is_the_duration_arithmetic_to_a_few_nanoseconds() {
        let _record = STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let start = Instant::now();
        // No stall, then one of 70 ms (below a quarter of the longer
        // leases, above it for the shorter ones).
        for stall in [Duration::ZERO, Duration::from_millis(70)] {
            observe_lateness(start, start + stall);
            for ttl in [
                Duration::from_millis(1),
                Duration::from_millis(3),
                Duration::from_nanos(7_777_777),
                Duration::from_millis(250),
                Duration::new(3, 7),
                Duration::new(3_600, 999_999_999),
                Duration::from_secs(u64::MAX / 1_000_000_000 / 2),
            ] {
                let exact = ttl.saturating_sub(drift(ttl) + reaction_margin(ttl));
                let fast = trusted_for(ttl);
                let apart = exact.abs_diff(fast);
                assert!(
                    apart <= Duration::from_nanos(3),
                    "{ttl:?}: {fast:?} vs {exact:?}"
                );
            }
        }
        observe_lateness(start + MEMORY * 2, start + MEMORY * 2);
    }

    #[test]
    fn a_tiny_ttl_has_no_validity_left() {
        assert_eq!(usable(Duration::from_millis(2)), Duration::ZERO);
        assert!(usable(Duration::from_millis(3)) > Duration::ZERO);
    }

    // One test for the process-wide record, so that no other test of this
    // file races with it.
    #[test]
    fn stalls_widen_the_margin_for_a_minute_up_to_a_quarter_of_the_lease() {
        let _record = STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let ttl = Duration::from_secs(1);
        let start = Instant::now();
        observe_lateness(start, start + Duration::from_micros(300));
        assert_eq!(
            recent_stall(),
            Duration::ZERO,
            "sub-millisecond lateness is noise"
        );
        observe_lateness(start, start + Duration::from_millis(120));
        assert_eq!(reaction_margin(ttl), Duration::from_millis(50 + 120));
        let later = start + Duration::from_secs(30);
        observe_lateness(later, later + Duration::from_millis(40));
        assert_eq!(
            recent_stall(),
            Duration::from_millis(120),
            "the larger stall still counts"
        );
        let much_later = start + Duration::from_secs(70);
        observe_lateness(much_later, much_later);
        assert_eq!(
            recent_stall(),
            Duration::from_millis(40),
            "the old stall is forgotten"
        );
        observe_lateness(much_later, much_later + Duration::from_secs(5));
        assert_eq!(
            reaction_margin(ttl),
            Duration::from_millis(50 + 250),
            "capped at ttl/4"
        );
        let forgotten = much_later + Duration::from_secs(120);
        observe_lateness(forgotten, forgotten);
        assert_eq!(recent_stall(), Duration::ZERO);
    }
}
