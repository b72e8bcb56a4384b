//! The performance targets, as ratios computed from the results.
//! Reported, never asserted: a missed target is a finding, not a failure.

use crate::Results;
use crate::scenarios::{HANDOFF, MACRO_OVERHEAD, PARALLEL_64, UNCONTENDED_PAIR, WATCHDOG_SCALE};
use crate::setup::{REDLOCK_MASTERS, Setup};

/// One target and how the run measured up to it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The scenario's letter in the first performance issue (`a` to
    /// `e`), or `16` for the bars of issue 16.
    pub id: &'static str,
    /// What is compared.
    pub what: &'static str,
    /// The measured ratio or value.
    pub value: f64,
    /// The goal, as text (`<= 1.05`).
    pub goal: &'static str,
    /// Whether it was met (`None`: not measured in this run, or a
    /// reference value without a goal).
    pub met: Option<bool>,
}

impl Target {
    fn new(
        id: &'static str,
        what: &'static str,
        value: f64,
        goal: &'static str,
        ok: fn(f64) -> bool,
    ) -> Self {
        Self {
            id,
            what,
            value,
            goal,
            met: (!value.is_nan()).then(|| ok(value)),
        }
    }
}

/// The loopback round trip, measured two ways (see
/// [`Admin::round_trip_us`](crate::server::Admin::round_trip_us)).
#[derive(Clone, Copy, Debug)]
pub struct RoundTrips {
    /// Back to back, in microseconds.
    pub warm_us: f64,
    /// After an idle pause as long as the handoff's hold.
    pub idle_us: f64,
}

/// Every target of the issue, evaluated on `results`.
pub fn evaluate(results: &Results, rtt: RoundTrips) -> Vec<Target> {
    let median = |scenario: &str, implementation: &str, field: fn(&crate::Summary) -> f64| {
        results
            .summary(scenario, implementation)
            .map_or(f64::NAN, |summary| field(&summary))
    };
    let p50 = |s: &str, i: &str| median(s, i, |m| m.p50_us.median);
    let ops = |s: &str, i: &str| median(s, i, |m| m.ops_per_s.median);
    let extra = |s: &str, i: &str, name: &'static str| {
        results
            .summary(s, i)
            .map_or(f64::NAN, |summary| summary.extra(name))
    };
    let redlock = |scenario: &str| {
        Setup::Redlock {
            masters: REDLOCK_MASTERS,
        }
        .key(scenario)
    };
    let lost_max = |s: &str, i: &str| {
        results
            .summary(s, i)
            .and_then(|summary| summary.extra.get("lost").map(|stat| stat.max))
            .unwrap_or(f64::NAN)
    };
    // Issue 16 sets its own bars on the same two ratios as `b`.
    let parallel_vs_raw = ops(PARALLEL_64, "project") / ops(PARALLEL_64, "raw");
    let parallel_vs_rslock = ops(PARALLEL_64, "project") / ops(PARALLEL_64, "rslock");
    vec![
        Target::new(
            "a",
            "uncontended p50: project / raw",
            p50(UNCONTENDED_PAIR, "project") / p50(UNCONTENDED_PAIR, "raw"),
            "<= 1.05",
            |v| v <= 1.05,
        ),
        Target::new(
            "b",
            "parallel_64 pairs/s: project / raw",
            parallel_vs_raw,
            ">= 1.0",
            |v| v >= 1.0,
        ),
        Target::new(
            "b",
            "parallel_64 pairs/s: project / rslock",
            parallel_vs_rslock,
            ">= 1.5",
            |v| v >= 1.5,
        ),
        Target::new(
            "16",
            "parallel_64 pairs/s: project / raw",
            parallel_vs_raw,
            ">= 0.85",
            |v| v >= 0.85,
        ),
        Target::new(
            "16",
            "parallel_64 pairs/s: project / rslock",
            parallel_vs_rslock,
            ">= 1.3",
            |v| v >= 1.3,
        ),
        Target::new(
            "16",
            "redlock-3/uncontended_pair p50: project / rslock",
            p50(&redlock(UNCONTENDED_PAIR), "project") / p50(&redlock(UNCONTENDED_PAIR), "rslock"),
            "<= 1.0",
            |v| v <= 1.0,
        ),
        Target::new(
            "16",
            "redlock-3/parallel_64 pairs/s: project / rslock",
            ops(&redlock(PARALLEL_64), "project") / ops(&redlock(PARALLEL_64), "rslock"),
            ">= 1.0",
            |v| v >= 1.0,
        ),
        Target::new(
            "c",
            "handoff p50: project, in idle round trips",
            p50(HANDOFF, "project") / rtt.idle_us,
            "<= 3",
            |v| v <= 3.0,
        ),
        Target::new(
            "c",
            "handoff p50: project, in warm round trips (reference)",
            p50(HANDOFF, "project") / rtt.warm_us,
            "–",
            |_| true,
        )
        .reference(),
        Target::new(
            "c",
            "handoff p50: project, in microseconds",
            p50(HANDOFF, "project"),
            "< 1000",
            |v| v < 1_000.0,
        ),
        Target::new(
            "c",
            "handoff p50: fair, in idle round trips (the release's own, then the message)",
            p50(HANDOFF, "fair") / rtt.idle_us,
            "<= 2",
            |v| v <= 2.0,
        ),
        Target::new(
            "c",
            "handoff p50: fair / project (no try of its own after the release)",
            p50(HANDOFF, "fair") / p50(HANDOFF, "project"),
            "< 1",
            |v| v < 1.0,
        ),
        Target::new(
            "c",
            "handoff p50: rslock / project",
            p50(HANDOFF, "rslock") / p50(HANDOFF, "project"),
            ">= 100",
            |v| v >= 100.0,
        ),
        Target::new(
            "d",
            "call p50: macro / handwritten",
            p50(MACRO_OVERHEAD, "macro") / p50(MACRO_OVERHEAD, "handwritten"),
            "<= 1.02",
            |v| v <= 1.02,
        ),
        Target::new(
            "e",
            "renewal round trips per pool connection per tick (project)",
            extra(WATCHDOG_SCALE, "project", "renewal_rounds_per_tick"),
            "<= 1",
            |v| v <= 1.0,
        ),
        Target::new(
            "e",
            "renewal commands per pool connection per tick (project, reference)",
            extra(WATCHDOG_SCALE, "project", "renewal_cmds_per_conn_tick"),
            "–",
            |_| true,
        )
        .reference(),
        Target::new(
            "e",
            "locks lost, worst run (project)",
            lost_max(WATCHDOG_SCALE, "project"),
            "= 0",
            |v| v == 0.0,
        ),
    ]
}

impl Target {
    /// Marks a number that is shown for reference, with no goal.
    fn reference(mut self) -> Self {
        self.met = None;
        self
    }
}

/// What the `parallel_64` pool-size sweep suggests.
#[derive(Clone, Debug)]
pub struct PoolAdvice {
    /// The suggested default.
    pub size: usize,
    /// Each swept size with its median throughput relative to the best
    /// size of the same repetition (1.0 = the best).
    pub relative: Vec<(usize, f64)>,
}

/// The smallest pool size whose median relative throughput (against the
/// best size of the same repetition) is within 0.05 of the highest one.
/// Comparing sizes within each repetition (they run back to back) cancels
/// most of the drift between repetitions. `None` without a sweep.
pub fn recommended_pool(results: &Results, pool_sizes: &[usize]) -> Option<PoolAdvice> {
    let runs: Vec<(usize, Vec<f64>)> = pool_sizes
        .iter()
        .filter_map(|&size| {
            let runs = results.runs(PARALLEL_64, &pool_name(size))?;
            Some((size, runs.iter().map(|run| run.ops_per_s).collect()))
        })
        .collect();
    let reps = runs.iter().map(|(_, rates)| rates.len()).min()?;
    let best: Vec<f64> = (0..reps)
        .map(|rep| runs.iter().map(|(_, rates)| rates[rep]).fold(0.0, f64::max))
        .collect();
    let relative: Vec<(usize, f64)> = runs
        .iter()
        .map(|(size, rates)| {
            let ratios = (0..reps).map(|rep| rates[rep] / best[rep]);
            (*size, crate::Stat::of(ratios).median)
        })
        .collect();
    let top = relative.iter().map(|&(_, ratio)| ratio).fold(0.0, f64::max);
    let size = relative.iter().find(|&&(_, ratio)| ratio >= top - 0.05)?.0;
    Some(PoolAdvice { size, relative })
}

/// The implementation name of the project with `size` pooled connections.
pub fn pool_name(size: usize) -> String {
    format!("project_pool{size}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunResult;

    fn rate(ops_per_s: f64) -> RunResult {
        RunResult {
            ops_per_s,
            ..RunResult::default()
        }
    }

    #[test]
    fn pool_advice_compares_within_each_repetition() {
        let mut results = Results::default();
        // Repetition 2 is slower for every size; size 2 is always within 5 %.
        // (Size 4 wins both, so its relative throughput is 1.)
        for (size, rates) in [(1, [80.0, 40.0]), (2, [97.0, 49.0]), (4, [100.0, 50.0])] {
            for ops in rates {
                results.record(PARALLEL_64, &pool_name(size), rate(ops));
            }
        }
        let advice = recommended_pool(&results, &[1, 2, 4]).unwrap();
        assert_eq!(advice.size, 2);
        assert_eq!(advice.relative[2], (4, 1.0));
        assert!(recommended_pool(&Results::default(), &[1, 2]).is_none());
    }

    #[test]
    fn redlock_bars_compare_the_redlock_rows_only() {
        let mut results = Results::default();
        // The single server's rows would meet the bar; the Redlock rows do not.
        results.record(PARALLEL_64, "project", rate(300.0));
        results.record(PARALLEL_64, "rslock", rate(100.0));
        results.record("redlock-3/parallel_64", "project", rate(50.0));
        results.record("redlock-3/parallel_64", "rslock", rate(100.0));
        let rtt = RoundTrips {
            warm_us: 30.0,
            idle_us: 300.0,
        };
        let targets = evaluate(&results, rtt);
        let find = |what: &str| targets.iter().find(|t| t.what == what).unwrap();
        let redlock = find("redlock-3/parallel_64 pairs/s: project / rslock");
        assert_eq!((redlock.value, redlock.met), (0.5, Some(false)));
        let single = find("parallel_64 pairs/s: project / rslock");
        assert_eq!(single.value, 3.0);
        assert!(
            find("redlock-3/uncontended_pair p50: project / rslock")
                .met
                .is_none()
        );
    }

    #[test]
    fn targets_not_run_are_unmet_and_unknown() {
        let targets = evaluate(
            &Results::default(),
            RoundTrips {
                warm_us: 30.0,
                idle_us: 300.0,
            },
        );
        assert!(targets.iter().all(|t| t.met.is_none()));
    }
}
