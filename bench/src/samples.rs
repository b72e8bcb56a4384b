//! [`Samples`]: latencies of one run, and their percentiles, in an HDR
//! histogram (`hdrhistogram`): memory and merging do not grow with the
//! number of samples, and every percentile is within 0.1 % of the
//! recorded value.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Significant digits kept of each latency: a value is known to 0.1 %.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latencies recorded in one run, in nanoseconds.
#[derive(Clone, Debug)]
pub struct Samples {
    nanos: Histogram<u64>,
}

impl Default for Samples {
    fn default() -> Self {
        Self {
            // Auto-resizing from 1 ns: any latency a run can see fits.
            nanos: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is in range"),
        }
    }
}

impl Samples {
    /// Records one latency.
    pub fn push(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        // `record` grows the histogram to fit; only a value past what any
        // histogram can hold is clamped.
        if self.nanos.record(nanos).is_err() {
            self.nanos.saturating_record(nanos);
        }
    }

    /// Adds every sample of `other`.
    pub fn extend(&mut self, other: Samples) {
        self.nanos
            .add(&other.nanos)
            .expect("auto-resizing histograms of the same precision always add");
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        usize::try_from(self.nanos.len()).unwrap_or(usize::MAX)
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.nanos.is_empty()
    }

    /// The `q`-quantile (0.0..=1.0) in microseconds; NaN when empty.
    pub fn quantile_us(&mut self, q: f64) -> f64 {
        if self.nanos.is_empty() {
            return f64::NAN;
        }
        self.nanos.value_at_quantile(q.clamp(0.0, 1.0)) as f64 / 1_000.0
    }

    /// The mean in microseconds; NaN when empty.
    pub fn mean_us(&self) -> f64 {
        if self.nanos.is_empty() {
            return f64::NAN;
        }
        self.nanos.mean() / 1_000.0
    }

    /// The distribution for the chart: for each recorded value, ascending,
    /// (value in microseconds, fraction of the samples at or below it).
    pub fn cdf_us(&self) -> Vec<(f64, f64)> {
        self.nanos
            .iter_recorded()
            .map(|step| {
                (
                    step.value_iterated_to() as f64 / 1_000.0,
                    step.quantile_iterated_to(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within the histogram's stated precision of `expected`.
    fn close(value: f64, expected: f64) -> bool {
        (value - expected).abs() <= expected * 0.001
    }

    #[test]
    fn quantiles_within_a_tenth_of_a_percent() {
        let mut samples = Samples::default();
        for us in (1..=100).rev() {
            samples.push(Duration::from_micros(us));
        }
        assert_eq!(samples.len(), 100);
        for (q, expected) in [(0.5, 50.0), (0.99, 99.0), (1.0, 100.0), (0.0, 1.0)] {
            let value = samples.quantile_us(q);
            assert!(close(value, expected), "q {q}: {value} against {expected}");
        }
        assert!(close(samples.mean_us(), 50.5), "{}", samples.mean_us());
    }

    #[test]
    fn merged_runs_keep_every_sample() {
        let (mut fast, mut slow) = (Samples::default(), Samples::default());
        for _ in 0..90 {
            fast.push(Duration::from_micros(200));
        }
        for _ in 0..10 {
            slow.push(Duration::from_millis(80));
        }
        fast.extend(slow);
        assert_eq!(fast.len(), 100);
        assert!(close(fast.quantile_us(0.5), 200.0));
        assert!(close(fast.quantile_us(0.95), 80_000.0));
        let cdf = fast.cdf_us();
        assert_eq!(cdf.len(), 2);
        assert!(
            close(cdf[0].0, 200.0) && (cdf[0].1 - 0.9).abs() < 1e-9,
            "{cdf:?}"
        );
        assert!((cdf[1].1 - 1.0).abs() < 1e-9, "{cdf:?}");
    }

    #[test]
    fn empty_is_nan() {
        assert!(Samples::default().quantile_us(0.5).is_nan());
        assert!(Samples::default().mean_us().is_nan());
        assert!(Samples::default().cdf_us().is_empty());
    }
}
