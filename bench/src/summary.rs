//! One run's numbers ([`RunResult`]) and their summary over repetitions
//! ([`Summary`]: median and spread).

use std::collections::BTreeMap;

use crate::Samples;

/// What one run of one scenario for one implementation measured.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// Operations per second (what counts as one operation depends on the
    /// scenario: a lock+unlock pair, a handoff, a renewed lease).
    pub ops_per_s: f64,
    /// Median latency of one operation, in microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, in microseconds.
    pub p99_us: f64,
    /// Scenario-specific numbers (round trips per tick, lost locks, ...).
    pub extra: BTreeMap<String, f64>,
    /// The latencies themselves, kept where the chart shows them.
    pub samples: Option<Samples>,
}

impl RunResult {
    /// A result with throughput and the percentiles of `samples`.
    pub fn from_samples(ops_per_s: f64, samples: &mut Samples) -> Self {
        Self {
            ops_per_s,
            p50_us: samples.quantile_us(0.50),
            p99_us: samples.quantile_us(0.99),
            ..Self::default()
        }
    }

    /// Adds a scenario-specific number.
    pub fn with(mut self, name: &str, value: f64) -> Self {
        self.extra.insert(name.to_owned(), value);
        self
    }
}

/// Median and range of one number over the repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    /// The median (mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Stat {
    /// The statistic of `values`, ignoring NaNs; all NaN when none is left.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut values: Vec<f64> = values.into_iter().filter(|v| !v.is_nan()).collect();
        if values.is_empty() {
            return Self {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
            };
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Self {
            median,
            min: values[0],
            max: values[n - 1],
        }
    }

    /// Half the range as a fraction of the median: the "±" of the table.
    pub fn spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / 2.0 / self.median.abs()
        }
    }
}

/// Every repetition of one scenario for one implementation, summarised.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Operations per second.
    pub ops_per_s: Stat,
    /// Median latency per run.
    pub p50_us: Stat,
    /// 99th percentile latency per run.
    pub p99_us: Stat,
    /// Number of runs.
    pub runs: usize,
    /// Scenario-specific numbers.
    pub extra: BTreeMap<String, Stat>,
}

impl Summary {
    /// Summarises `runs` (at least one).
    pub fn of(runs: &[RunResult]) -> Self {
        let mut names: Vec<&String> = runs.iter().flat_map(|r| r.extra.keys()).collect();
        names.sort();
        names.dedup();
        let extra = names
            .into_iter()
            .map(|name| {
                let values = runs.iter().filter_map(|r| r.extra.get(name).copied());
                (name.clone(), Stat::of(values))
            })
            .collect();
        Self {
            ops_per_s: Stat::of(runs.iter().map(|r| r.ops_per_s)),
            p50_us: Stat::of(runs.iter().map(|r| r.p50_us)),
            p99_us: Stat::of(runs.iter().map(|r| r.p99_us)),
            runs: runs.len(),
            extra,
        }
    }

    /// The median of a scenario-specific number, NaN when absent.
    pub fn extra(&self, name: &str) -> f64 {
        self.extra.get(name).map_or(f64::NAN, |stat| stat.median)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let stat = Stat::of([3.0, 1.0, 2.0]);
        assert_eq!((stat.median, stat.min, stat.max), (2.0, 1.0, 3.0));
        assert_eq!(stat.spread(), 0.5);
        assert_eq!(Stat::of([1.0, 2.0, 3.0, 10.0]).median, 2.5);
        assert!(Stat::of([f64::NAN]).median.is_nan());
    }
}
