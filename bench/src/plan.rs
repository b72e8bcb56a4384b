//! [`Plan`]: how much of everything a run does (full or `--quick`), from
//! the command line.

use std::time::Duration;

use crate::BenchResult;

/// The sizes of one benchmark run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// `"full"` or `"quick"`.
    pub mode: &'static str,
    /// Repetitions of every scenario (at least 3 in either mode).
    pub reps: usize,
    /// Scenarios to run, by their name on each setup
    /// ([`Setup::key`](crate::setup::Setup::key)): all unless `--only`
    /// names some.
    pub scenarios: Vec<String>,
    /// Pings per repetition that measure the warm loopback round trip.
    pub rtt_pings: usize,
    /// Pings per repetition that measure the round trip after an idle
    /// pause as long as the handoff's hold.
    pub idle_pings: usize,
    /// Sequential lock+unlock pairs per run of `uncontended_pair` and
    /// calls per run of `macro_overhead`.
    pub pairs: usize,
    /// Concurrent tasks of `parallel_64`.
    pub parallel_tasks: usize,
    /// How long each run of `parallel_64` lasts.
    pub parallel_for: Duration,
    /// Pool sizes swept by `parallel_64` for the project.
    pub pool_sizes: Vec<usize>,
    /// Most handoff rounds per run.
    pub handoff_rounds: usize,
    /// How long the holder keeps the lock while the waiter is blocked.
    pub handoff_hold: Duration,
    /// Time bound of one handoff run (rslock's rounds are slow).
    pub handoff_for: Duration,
    /// Locks held at once by `watchdog_scale`.
    pub watchdog_locks: usize,
    /// Lease of those locks (renewed every ttl/3).
    pub watchdog_ttl: Duration,
    /// How long they are held and measured once all are taken, in
    /// renewal intervals (ttl/3): a whole number, so that every lock is
    /// due the same number of times in the window.
    pub watchdog_ticks: u32,
    /// Upper bound of any single run, whatever its sizes.
    pub run_limit: Duration,
    /// Servers on a core of their own, the client on the others
    /// (`--pinned`, see [`crate::pinning`]).
    pub pinned: bool,
}

impl Plan {
    /// The full benchmark: a few minutes on two cores.
    pub fn full() -> Self {
        Self {
            mode: "full",
            reps: 5,
            scenarios: crate::setup::all_keys(),
            rtt_pings: 2_000,
            idle_pings: 100,
            pairs: 4_000,
            parallel_tasks: 64,
            parallel_for: Duration::from_secs(2),
            pool_sizes: vec![1, 2, 4],
            handoff_rounds: 150,
            handoff_hold: Duration::from_millis(15),
            handoff_for: Duration::from_secs(8),
            watchdog_locks: 10_000,
            watchdog_ttl: Duration::from_secs(1),
            watchdog_ticks: 12,
            run_limit: Duration::from_secs(30),
            pinned: false,
        }
    }

    /// A short run (well under a minute) to see that everything works.
    pub fn quick() -> Self {
        Self {
            mode: "quick",
            reps: 3,
            rtt_pings: 300,
            idle_pings: 30,
            pairs: 500,
            parallel_for: Duration::from_millis(400),
            handoff_rounds: 30,
            handoff_for: Duration::from_secs(2),
            watchdog_ticks: 5,
            ..Self::full()
        }
    }

    /// The plan the arguments ask for: `--quick`, `--reps N` (at least 3),
    /// `--only a,b` (scenario names, `redlock-3/parallel_64` for a
    /// scenario on the Redlock setup), `--pinned`. `--bench`, which cargo passes, and
    /// unknown flags are ignored. `LOCK_BENCH_QUICK=1` also selects `--quick`.
    pub fn from_args(args: &[String]) -> BenchResult<Self> {
        let quick = args.iter().any(|a| a == "--quick")
            || std::env::var("LOCK_BENCH_QUICK").is_ok_and(|v| v == "1");
        let mut plan = if quick { Self::quick() } else { Self::full() };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--reps" => {
                    let value = args.next().ok_or("--reps needs a number")?;
                    let reps: usize = value
                        .parse()
                        .map_err(|_| format!("--reps {value}: not a number"))?;
                    plan.reps = reps.max(3);
                }
                "--only" => {
                    let value = args.next().ok_or("--only needs scenario names")?;
                    let wanted: Vec<String> = value.split(',').map(str::to_owned).collect();
                    let known = crate::setup::all_keys();
                    if let Some(bad) = wanted.iter().find(|w| !known.contains(w)) {
                        return Err(format!(
                            "--only: unknown scenario `{bad}`; the scenarios are {}",
                            known.join(", ")
                        )
                        .into());
                    }
                    plan.scenarios = wanted;
                }
                "--pinned" => plan.pinned = true,
                _ => {}
            }
        }
        Ok(plan)
    }

    /// Whether `scenario` (a name as in [`Plan::scenarios`]) is part of
    /// this run.
    pub fn runs(&self, scenario: &str) -> bool {
        self.scenarios.iter().any(|s| s == scenario)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn quick_reps_and_only() {
        let plan = Plan::from_args(&args(&[
            "--bench", "--quick", "--reps", "1", "--only", "handoff",
        ]))
        .unwrap();
        assert_eq!(plan.mode, "quick");
        assert_eq!(plan.reps, 3);
        assert!(plan.runs("handoff") && !plan.runs("parallel_64"));
        assert!(Plan::from_args(&args(&["--only", "nope"])).is_err());
        let redlock = Plan::from_args(&args(&["--only", "redlock-3/parallel_64"])).unwrap();
        assert!(redlock.runs("redlock-3/parallel_64") && !redlock.runs("parallel_64"));
        assert!(Plan::full().runs("redlock-3/uncontended_pair"));
        assert!(!plan.pinned);
        assert!(Plan::from_args(&args(&["--pinned"])).unwrap().pinned);
    }
}
