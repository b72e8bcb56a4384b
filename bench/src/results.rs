//! [`Results`]: every run of every scenario and implementation, and the
//! `results.json` made of them.

use serde_json::{Map, Value, json};

use crate::{RunResult, Samples, Stat, Summary};

/// The runs of one implementation in one scenario.
type ImplementationRuns = (String, Vec<RunResult>);

/// The runs recorded so far, by scenario and implementation, in the order
/// first seen.
#[derive(Debug, Default)]
pub struct Results {
    scenarios: Vec<(String, Vec<ImplementationRuns>)>,
}

impl Results {
    /// Records one run.
    pub fn record(&mut self, scenario: &str, implementation: &str, run: RunResult) {
        let index = match self.scenarios.iter().position(|(s, _)| s == scenario) {
            Some(index) => index,
            None => {
                self.scenarios.push((scenario.to_owned(), Vec::new()));
                self.scenarios.len() - 1
            }
        };
        let implementations = &mut self.scenarios[index].1;
        match implementations
            .iter_mut()
            .find(|(i, _)| i == implementation)
        {
            Some((_, runs)) => runs.push(run),
            None => implementations.push((implementation.to_owned(), vec![run])),
        }
    }

    /// The runs of one scenario and implementation.
    pub fn runs(&self, scenario: &str, implementation: &str) -> Option<&[RunResult]> {
        self.scenarios
            .iter()
            .find(|(s, _)| s == scenario)?
            .1
            .iter()
            .find(|(i, _)| i == implementation)
            .map(|(_, runs)| runs.as_slice())
    }

    /// The summary of one scenario and implementation.
    pub fn summary(&self, scenario: &str, implementation: &str) -> Option<Summary> {
        self.runs(scenario, implementation).map(Summary::of)
    }

    /// Scenario names, in order.
    pub fn scenario_names(&self) -> Vec<&str> {
        self.scenarios.iter().map(|(s, _)| s.as_str()).collect()
    }

    /// Implementation names of one scenario, in order.
    pub fn implementation_names(&self, scenario: &str) -> Vec<&str> {
        self.scenarios
            .iter()
            .find(|(s, _)| s == scenario)
            .map(|(_, imps)| imps.iter().map(|(i, _)| i.as_str()).collect())
            .unwrap_or_default()
    }

    /// Every latency sample of every run of one scenario and implementation.
    pub fn pooled_samples(&self, scenario: &str, implementation: &str) -> Samples {
        let mut pooled = Samples::default();
        for run in self.runs(scenario, implementation).unwrap_or_default() {
            if let Some(samples) = &run.samples {
                pooled.extend(samples.clone());
            }
        }
        pooled
    }

    /// `{"scenarios": {scenario: {impl: {ops_per_s, p50_us, p99_us, runs,
    /// min, max, extra}}}, "env": env}`, with medians over the runs at the
    /// top level of each implementation.
    pub fn to_json(&self, env: Value) -> Value {
        let mut scenarios = Map::new();
        for (scenario, implementations) in &self.scenarios {
            let mut entry = Map::new();
            for (implementation, runs) in implementations {
                entry.insert(implementation.clone(), summary_json(&Summary::of(runs)));
            }
            scenarios.insert(scenario.clone(), Value::Object(entry));
        }
        json!({ "scenarios": scenarios, "env": env })
    }
}

fn summary_json(summary: &Summary) -> Value {
    let pick = |f: fn(&Stat) -> f64| {
        json!({
            "ops_per_s": f(&summary.ops_per_s),
            "p50_us": f(&summary.p50_us),
            "p99_us": f(&summary.p99_us),
        })
    };
    let extra: Map<String, Value> = summary
        .extra
        .iter()
        .map(|(name, stat)| {
            let value = json!({ "median": stat.median, "min": stat.min, "max": stat.max });
            (name.clone(), value)
        })
        .collect();
    json!({
        "ops_per_s": summary.ops_per_s.median,
        "p50_us": summary.p50_us.median,
        "p99_us": summary.p99_us.median,
        "runs": summary.runs,
        "min": pick(|s| s.min),
        "max": pick(|s| s.max),
        "extra": extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_agreed_shape() {
        let mut results = Results::default();
        for ops in [1.0, 3.0, 2.0] {
            let run = RunResult {
                ops_per_s: ops,
                p50_us: 10.0,
                p99_us: 20.0,
                ..RunResult::default()
            }
            .with("lost", 0.0);
            results.record("handoff", "project", run);
        }
        let json = results.to_json(json!({"cpus": 2}));
        let entry = &json["scenarios"]["handoff"]["project"];
        assert_eq!(entry["ops_per_s"], 2.0);
        assert_eq!(entry["p50_us"], 10.0);
        assert_eq!(entry["runs"], 3);
        assert_eq!(entry["extra"]["lost"]["median"], 0.0);
        assert_eq!(json["env"]["cpus"], 2);
    }
}
