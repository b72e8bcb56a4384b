//! The client's work per lock + unlock pair, in instructions: repeatable
//! on a machine whose timings are not (`cargo bench -p lock-bench --bench
//! client_cost`).
//!
//! Each implementation runs as a child process under valgrind's
//! cachegrind (`--cache-sim=no`: it counts instructions only), twice: once
//! doing [`Sizes::short`] sequential pairs and once [`Sizes::long`]. The
//! child's every thread counts (the caller's runtime, the library's own
//! thread, connection drivers), the servers do not (valgrind does not
//! follow them). The difference of the two counts divided by the
//! difference of the pairs is the cost of one more pair: start-up,
//! connecting and warming up cancel out.
//!
//! Threads under valgrind run one at a time, so what depends on timing
//! (a wake-up that finds work or not, a timer that fires) varies a little
//! between runs; the runs are repeated and the median reported with its
//! spread, which stays within a few per cent.

use crate::{BenchResult, Stat};

/// Pairs per child run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Pairs of the shorter run.
    pub short: u64,
    /// Pairs of the longer run.
    pub long: u64,
}

impl Sizes {
    /// The sizes of a full run.
    pub const FULL: Self = Self {
        short: 500,
        long: 2_500,
    };

    /// The sizes of a `--quick` run.
    pub const QUICK: Self = Self {
        short: 200,
        long: 1_000,
    };
}

/// The instructions cachegrind counted (`I refs`), from its report on
/// standard error; `None` when the report has no such line.
pub fn instructions_in(report: &str) -> Option<u64> {
    report.lines().find_map(|line| {
        let (label, counted) = line.split_once("refs:")?;
        let label = label.rsplit("==").next()?.trim();
        (label.split_whitespace().eq(["I"]))
            .then(|| counted.trim().replace(',', "").parse().ok())
            .flatten()
    })
}

/// Instructions per pair from two runs: `(pairs, instructions)` each.
pub fn per_pair(short: (u64, u64), long: (u64, u64)) -> BenchResult<f64> {
    let (short_pairs, short_count) = short;
    let (long_pairs, long_count) = long;
    if long_pairs <= short_pairs {
        return Err(format!(
            "the long run ({long_pairs} pairs) is not longer than the short one ({short_pairs})"
        )
        .into());
    }
    if long_count <= short_count {
        return Err(format!(
            "{long_pairs} pairs counted {long_count} instructions, {short_pairs} pairs {short_count}: the longer run must count more"
        )
        .into());
    }
    Ok((long_count - short_count) as f64 / (long_pairs - short_pairs) as f64)
}

/// One implementation's measured cost.
#[derive(Clone, Debug)]
pub struct Cost {
    /// Setup (`single` or `redlock-3`).
    pub setup: String,
    /// Implementation (`project`, `raw`, `raw_own_thread`, `rslock`).
    pub implementation: String,
    /// Instructions per pair over the repetitions.
    pub per_pair: Stat,
}

/// The Markdown table of `costs`: per setup, each implementation's
/// instructions per pair and its ratio to the project's.
pub fn table(costs: &[Cost]) -> String {
    let mut out = String::from(
        "| setup | impl | instructions per pair | ± | project / impl |\n|---|---|---:|---:|---:|\n",
    );
    for cost in costs {
        let project = costs
            .iter()
            .find(|c| c.setup == cost.setup && c.implementation == "project")
            .map(|c| c.per_pair.median);
        let ratio = project.map_or_else(
            || "–".to_owned(),
            |project| format!("{:.2}", project / cost.per_pair.median),
        );
        out.push_str(&format!(
            "| {} | {} | {} | {:.1}% | {ratio} |\n",
            cost.setup,
            cost.implementation,
            crate::report::number(cost.per_pair.median),
            cost.per_pair.spread() * 100.0,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cachegrinds_count() {
        let report = "==1== Cachegrind, a cache and branch-prediction profiler\n==1== \n==1== I   refs:      135,830,635\n==1== D   refs:      9,999\n";
        assert_eq!(instructions_in(report), Some(135_830_635));
        assert_eq!(instructions_in("==1== nothing here"), None);
    }

    #[test]
    fn the_cost_of_one_more_pair() {
        assert_eq!(
            per_pair((200, 12_000_000), (1_200, 66_000_000)).unwrap(),
            54_000.0
        );
        assert!(per_pair((200, 12_000_000), (200, 13_000_000)).is_err());
        assert!(per_pair((200, 12_000_000), (1_200, 11_000_000)).is_err());
    }

    #[test]
    fn the_table_compares_with_the_project_of_the_same_setup() {
        let cost = |setup: &str, implementation: &str, median: f64| Cost {
            setup: setup.to_owned(),
            implementation: implementation.to_owned(),
            per_pair: Stat::of([median]),
        };
        let table = table(&[
            cost("single", "project", 50_000.0),
            cost("single", "raw", 25_000.0),
            cost("redlock-3", "project", 90_000.0),
            cost("redlock-3", "rslock", 60_000.0),
        ]);
        assert!(
            table.contains("| single | raw | 25,000 | 0.0% | 2.00 |"),
            "{table}"
        );
        assert!(
            table.contains("| redlock-3 | rslock | 60,000 | 0.0% | 1.50 |"),
            "{table}"
        );
    }
}
