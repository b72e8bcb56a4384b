//! [`Ratio`]: the project against rslock on the setups other than one
//! server (Redlock), where raw redis-rs code has no counterpart and the
//! issue's targets do not apply. Reported without goals.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::scenarios::{PARALLEL_64, UNCONTENDED_PAIR};
use crate::setup::{self, Setup};
use crate::{Results, Summary};

/// One comparison of the project with rslock.
#[derive(Clone, Debug)]
pub struct Ratio {
    /// The setup's name (`redlock-3`).
    pub setup: String,
    /// The scenario's name on that setup (`redlock-3/parallel_64`).
    pub scenario: String,
    /// What is compared (`p50 µs`, `pairs/s`).
    pub what: &'static str,
    /// project / rslock, medians over the runs; NaN when either did not run.
    pub value: f64,
    /// Whether a higher ratio favours the project (throughput) or a lower
    /// one does (latency).
    pub higher_is_better: bool,
}

/// One number compared: in which scenario, under which label, how it is
/// read from a summary, and which way is better.
struct Measure {
    scenario: &'static str,
    what: &'static str,
    pick: fn(&Summary) -> f64,
    higher_is_better: bool,
}

/// The latency and throughput numbers compared.
const MEASURES: [Measure; 3] = [
    Measure {
        scenario: UNCONTENDED_PAIR,
        what: "p50 µs",
        pick: |s| s.p50_us.median,
        higher_is_better: false,
    },
    Measure {
        scenario: UNCONTENDED_PAIR,
        what: "p99 µs",
        pick: |s| s.p99_us.median,
        higher_is_better: false,
    },
    Measure {
        scenario: PARALLEL_64,
        what: "pairs/s",
        pick: |s| s.ops_per_s.median,
        higher_is_better: true,
    },
];

/// Project / rslock for every measure of every setup but the single
/// server, in the order of [`setup::ALL`]; scenarios not run are skipped.
pub fn evaluate(results: &Results) -> Vec<Ratio> {
    let mut ratios = Vec::new();
    for setup in setup::ALL.into_iter().filter(|s| *s != Setup::Single) {
        for measure in MEASURES {
            let key = setup.key(measure.scenario);
            let median = |implementation| {
                let summary = results.summary(&key, implementation)?;
                Some((measure.pick)(&summary))
            };
            let (Some(project), Some(rslock)) = (median("project"), median("rslock")) else {
                continue;
            };
            ratios.push(Ratio {
                setup: setup.name(),
                scenario: key,
                what: measure.what,
                value: project / rslock,
                higher_is_better: measure.higher_is_better,
            });
        }
    }
    ratios
}

/// The Markdown table of `ratios` (empty when there are none).
pub fn table(ratios: &[Ratio]) -> String {
    if ratios.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    out.push_str("| scenario | compared | project / rslock | better for the project |\n");
    out.push_str("|---|---|---:|---|\n");
    for ratio in ratios {
        let better = if ratio.higher_is_better {
            "above 1"
        } else {
            "below 1"
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.3} | {better} |",
            ratio.scenario, ratio.what, ratio.value
        );
    }
    out
}

/// `[{setup, scenario, what, project_over_rslock, higher_is_better}]` for
/// `results.json`.
pub fn to_json(ratios: &[Ratio]) -> Value {
    ratios
        .iter()
        .map(|r| {
            json!({
                "setup": r.setup,
                "scenario": r.scenario,
                "what": r.what,
                "project_over_rslock": r.value,
                "higher_is_better": r.higher_is_better,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunResult;

    #[test]
    fn compares_the_project_with_rslock_on_redlock() {
        let mut results = Results::default();
        let redlock = setup::ALL[1];
        for (implementation, ops, p50) in [("project", 300.0, 200.0), ("rslock", 200.0, 400.0)] {
            let run = RunResult {
                ops_per_s: ops,
                p50_us: p50,
                p99_us: p50 * 2.0,
                ..RunResult::default()
            };
            results.record(&redlock.key(PARALLEL_64), implementation, run.clone());
            results.record(&redlock.key(UNCONTENDED_PAIR), implementation, run.clone());
            // Single-server rows are not compared here.
            results.record(PARALLEL_64, implementation, run);
        }
        let ratios = evaluate(&results);
        let values: Vec<f64> = ratios.iter().map(|r| r.value).collect();
        assert_eq!(values, [0.5, 0.5, 1.5]);
        assert!(table(&ratios).contains("| redlock-3/parallel_64 | pairs/s | 1.500 |"));
        assert_eq!(to_json(&ratios)[2]["project_over_rslock"], 1.5);
        assert!(evaluate(&Results::default()).is_empty());
    }
}
