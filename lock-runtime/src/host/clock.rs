//! The clock leases are measured on.
//!
//! A lease runs on the server's clock, which does not stop while this
//! machine sleeps (suspend, hibernate). `std::time::Instant` on Linux is
//! `CLOCK_MONOTONIC`, which does: after a suspend a holder would trust a
//! lease the server has long expired. [`now`] is an `Instant` that
//! advances with `CLOCK_BOOTTIME` instead, which counts suspended time, so
//! validity checks ([`crate::LockHandle::is_held`]) are right the moment
//! the machine wakes. Timers still run on the monotonic clock;
//! [`timer_deadline`] converts a deadline on this clock into one for them.
//! Elsewhere than Linux both clocks are the same.
//!
//! A locker on the in-memory store measures its leases on tokio's clock
//! instead ([`Clock::Tokio`]): its "server" lives in the process, so it
//! runs on the application's time, and an application testing with
//! `tokio::time::pause()` sees a 30 s lease pass in no real time at all.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where both clocks stood when the process first asked.
struct Origin {
    monotonic: Instant,
    boot: Duration,
}

fn origin() -> &'static Origin {
    static ORIGIN: OnceLock<Origin> = OnceLock::new();
    ORIGIN.get_or_init(|| Origin {
        monotonic: Instant::now(),
        boot: since_boot().unwrap_or_default(),
    })
}

/// The clock a locker measures its leases on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The machine's own time, suspended time included ([`now`]): a Redis
    /// server's leases run on, whatever the application does with tokio's
    /// clock.
    #[default]
    Boot,
    /// The tokio clock of the runtime the caller is on (paused, or
    /// advanced by hand, in tests): the in-memory store's.
    Tokio,
}

impl Clock {
    /// Now, on this clock.
    pub(crate) fn now(self) -> Instant {
        match self {
            Clock::Boot => now(),
            Clock::Tokio => tokio::time::Instant::now().into_std(),
        }
    }

    /// Sleeps until `deadline` on this clock.
    pub(crate) async fn sleep_until(self, deadline: Instant) {
        let at = match self {
            Clock::Boot => timer_deadline(deadline),
            Clock::Tokio => deadline,
        };
        tokio::time::sleep_until(at.into()).await;
    }

    /// Whether a timer that fires late on this clock means the process
    /// stalled. Not on tokio's clock: a test that advances it by hand makes
    /// every timer late without any stall.
    pub(crate) fn shows_stalls(self) -> bool {
        self == Clock::Boot
    }
}

/// Now, counting time the machine spent suspended.
pub(crate) fn now() -> Instant {
    let origin = origin();
    match since_boot() {
        Some(boot) => origin.monotonic + boot.saturating_sub(origin.boot),
        None => Instant::now(),
    }
}

/// How much time the machine spent suspended since the process first asked.
fn suspended() -> Duration {
    now().saturating_duration_since(Instant::now())
}

/// The monotonic instant at which a timer must fire to wake at `deadline`
/// on this clock (earlier by the time spent suspended so far).
pub(crate) fn timer_deadline(deadline: Instant) -> Instant {
    deadline.checked_sub(suspended()).unwrap_or(deadline)
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn since_boot() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call's duration.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    if status != 0 {
        return None;
    }
    let secs = u64::try_from(now.tv_sec).ok()?;
    let nanos = u32::try_from(now.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

#[cfg(not(target_os = "linux"))]
fn since_boot() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_with_the_monotonic_clock_while_the_machine_is_awake() {
        let (a, a_mono) = (now(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (b, b_mono) = (now(), Instant::now());
        let elapsed = b - a;
        let elapsed_mono = b_mono - a_mono;
        let skew = elapsed.abs_diff(elapsed_mono);
        assert!(
            skew < Duration::from_millis(5),
            "{elapsed:?} vs {elapsed_mono:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_tokio_clock_follows_a_paused_runtime() {
        let before = Clock::Tokio.now();
        Clock::Tokio
            .sleep_until(before + Duration::from_secs(3600))
            .await;
        assert!(Clock::Tokio.now() - before >= Duration::from_secs(3600));
        assert!(Clock::Boot.now() - before < Duration::from_secs(60));
    }

    #[test]
    fn a_timer_deadline_is_never_later_than_asked() {
        let deadline = now() + Duration::from_secs(1);
        assert!(timer_deadline(deadline) <= deadline);
    }
}
