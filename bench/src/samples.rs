//! [`Samples`]: latencies of one run, and their percentiles.

use std::time::Duration;

/// Latencies recorded in one run, in nanoseconds.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    nanos: Vec<u64>,
    sorted: bool,
}

impl Samples {
    /// An empty set with room for `capacity` samples.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            nanos: Vec::with_capacity(capacity),
            sorted: true,
        }
    }

    /// Records one latency.
    pub fn push(&mut self, latency: Duration) {
        self.nanos
            .push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
        self.sorted = false;
    }

    /// Adds every sample of `other`.
    pub fn extend(&mut self, other: Samples) {
        self.nanos.extend(other.nanos);
        self.sorted = false;
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.nanos.is_empty()
    }

    /// The `q`-quantile (0.0..=1.0, nearest rank) in microseconds; NaN when empty.
    pub fn quantile_us(&mut self, q: f64) -> f64 {
        if self.nanos.is_empty() {
            return f64::NAN;
        }
        self.sort();
        let last = self.nanos.len() - 1;
        // Nearest rank: the smallest sample with at least q of all at or below it.
        let rank = (q.clamp(0.0, 1.0) * self.nanos.len() as f64).ceil() as usize;
        let index = rank.saturating_sub(1).min(last);
        self.nanos[index] as f64 / 1_000.0
    }

    /// Every sample in microseconds, ascending (for the chart).
    pub fn sorted_us(&mut self) -> Vec<f64> {
        self.sort();
        self.nanos.iter().map(|&n| n as f64 / 1_000.0).collect()
    }

    fn sort(&mut self) {
        if !self.sorted {
            self.nanos.sort_unstable();
            self.sorted = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let mut samples = Samples::default();
        for us in (1..=100).rev() {
            samples.push(Duration::from_micros(us));
        }
        assert_eq!(samples.quantile_us(0.5), 50.0);
        assert_eq!(samples.quantile_us(0.99), 99.0);
        assert_eq!(samples.quantile_us(1.0), 100.0);
        assert_eq!(samples.quantile_us(0.0), 1.0);
    }

    #[test]
    fn empty_is_nan() {
        assert!(Samples::default().quantile_us(0.5).is_nan());
    }
}
