//! The timer of last resort for a waiter: a capped, jittered exponential
//! backoff, for when no release message comes (listener down, or the owner
//! crashed and only its lease ending frees the lock).

use std::time::Duration;

/// Capped exponential backoff with jitter, for the case a release message
/// never comes (listener down, or the owner crashed and its lease runs out).
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self { next: min, max }
    }

    /// The next pause: uniformly between half and all of the current step,
    /// so that waiters woken together do not retry in lockstep.
    pub(crate) fn next_pause(&mut self) -> Duration {
        let step = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        let mut bytes = [0u8; 4];
        let _ = getrandom::fill(&mut bytes);
        let fraction = f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX);
        step / 2 + step.mul_f64(0.5 * fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_cap_does_not_overflow() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::MAX);
        for _ in 0..100 {
            backoff.next_pause();
        }
    }

    #[test]
    fn backoff_grows_to_its_cap_and_stays_in_range() {
        let min = Duration::from_millis(10);
        let max = Duration::from_millis(80);
        let mut backoff = Backoff::new(min, max);
        let mut step = min;
        for _ in 0..10 {
            let pause = backoff.next_pause();
            assert!(
                pause >= step / 2 && pause <= step,
                "{pause:?} outside {step:?}"
            );
            step = (step * 2).min(max);
        }
    }
}
