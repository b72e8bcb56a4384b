//! The flash sale (`cargo bench -p lock-bench --bench hot_key`): buyers in
//! two worker processes deduct the stock of one SKU, each deduction a
//! read (`GET`), a short piece of work (the payment), and a write (`SET`),
//! under one of the [`Way`]s of keeping two deductions apart. This module
//! holds what the driver and its workers share: the worker's arguments and
//! report, and how a run's numbers are read; the bench target does the
//! rest (it needs rslock, a dev-dependency).

use std::time::Duration;

use serde_json::{Value, json};

use crate::gaps::{Gaps, Section, gaps};
use crate::server::ServerCounters;
use crate::{BenchResult, Samples};

/// The key of the stock count (not a lock key of any contender).
pub const STOCK_KEY: &str = "hot:stock";
/// The SKU's name in lock keys: `hot:<sku>`.
pub const SKU: &str = "42";
/// Stock at the start of a run: never sold out within one.
pub const INITIAL_STOCK: u64 = 1_000_000_000;
/// The work between the read and the write (a payment, say).
pub const WORK: Duration = Duration::from_millis(1);
/// Lease of every lock taken (long enough never to run out mid-deduction).
pub const TTL: Duration = Duration::from_secs(3);
/// Worker processes; buyers are split evenly between them.
pub const PROCESSES: usize = 2;
/// Buyer counts, one scenario each (`hot_key/8`, ...).
pub const SIZES: [usize; 3] = [8, 64, 256];
/// Sleep of the hand-written spin loop between tries (what people write).
pub const SPIN_SLEEP: Duration = Duration::from_millis(10);

/// How buyers keep two deductions apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// `#[distributed_lock(key = "hot:<sku>")]` on the global locker.
    Project,
    /// This project's fair lock on the global locker: buyers served in
    /// the order the server saw them, each handed the lock by the release
    /// before it.
    Fair,
    /// rslock 0.10's `acquire` (retries with its own sleeps).
    Rslock,
    /// `SET NX PX`, a 10 ms sleep between tries, a Lua compare-and-delete.
    SetnxSpin,
    /// No lock: `WATCH`, read, `MULTI`/`SET`/`EXEC`, again when aborted.
    WatchMulti,
}

impl Way {
    /// Every way, in the order of the table.
    pub const ALL: [Way; 5] = [
        Way::Project,
        Way::Fair,
        Way::Rslock,
        Way::SetnxSpin,
        Way::WatchMulti,
    ];

    /// The row's name.
    pub fn name(self) -> &'static str {
        match self {
            Way::Project => "project",
            Way::Fair => "fair",
            Way::Rslock => "rslock",
            Way::SetnxSpin => "setnx_spin",
            Way::WatchMulti => "watch_multi",
        }
    }

    /// The way called `name`.
    pub fn parse(name: &str) -> BenchResult<Self> {
        by_name(&Self::ALL, name, Self::name, "way")
    }

    /// Tries sent to the server per deduction: acquire attempts for a lock
    /// (every `SET NX` or script beyond what each deduction needs anyway),
    /// transactions for `watch_multi`. `cost` covers the whole run, the
    /// deductions finished after the deadline included, as `writes` and
    /// `server_ends` do: every write is a stock `SET`.
    pub fn attempts(self, cost: &ServerCounters, report: &WorkerReport) -> f64 {
        let deductions = report.writes.max(1) as f64;
        let tries = match self {
            // Each deduction writes the stock (a `SET`); a hold that ends
            // on the server ends with a release (a script and a `DEL`) or
            // a pass to the next buyer (a script and a `SET`, which is that
            // buyer's grant, no try); a pass in process sends nothing.
            // Every try is one `SET`: a plain `SET NX`, or the one an
            // acquire script starts with. So the `SET`s and `DEL`s beyond
            // the writes and the ends on the server are the tries.
            Way::Project => (cost.sets + cost.dels)
                .saturating_sub(report.writes)
                .saturating_sub(report.server_ends),
            // Its scripts' commands tell a try from a hand-over apart no
            // better than a count kept by the locker itself does.
            Way::Fair => report.tries,
            // Each deduction: one stock `SET`, the rest `SET NX` tries.
            Way::Rslock | Way::SetnxSpin => cost.sets.saturating_sub(report.writes),
            Way::WatchMulti => cost.execs,
        };
        tries as f64 / deductions
    }
}

/// How the work between the read and the write takes its `WORK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// `tokio::time::sleep`: the runtime's timer ends it on a tick of its
    /// 1 ms wheel, and an idle runtime parks with a timeout rounded up to
    /// whole ms, so it lasts 1.9-2.2 ms here, by when it began and how
    /// busy the runtime was: a runtime kept busy (by buyers polling the
    /// server, say) ends it sooner. What most services' timers do.
    TokioSleep,
    /// `std::thread::sleep` on tokio's blocking pool: `WORK` plus the
    /// kernel's timer slack, whatever the runtime does (a payment call
    /// whose time does not depend on the caller's runtime).
    ThreadSleep,
}

impl Work {
    /// Both, the default first.
    pub const ALL: [Work; 2] = [Work::TokioSleep, Work::ThreadSleep];

    /// The name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Work::TokioSleep => "tokio_sleep",
            Work::ThreadSleep => "thread_sleep",
        }
    }

    /// The work called `name`.
    pub fn parse(name: &str) -> BenchResult<Self> {
        by_name(&Self::ALL, name, Self::name, "work")
    }
}

/// When a buyer asks for its next deduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// At once, as the one before ends (a closed loop): every buyer's next
    /// request falls on a hand-over, and a lock that lets the last owner
    /// take it again (barging) keeps it in that buyer's hands.
    BackToBack,
    /// After a random pause of up to `PAUSE_MAX` (a `tokio::time::sleep`,
    /// so whole ticks of 1 ms, 1-3 ms in all): requests that fall anywhere
    /// in the next deductions, as buyers who come back do.
    Paused,
}

/// The longest pause of [`Arrivals::Paused`] asked for: about one
/// deduction.
pub const PAUSE_MAX: Duration = Duration::from_micros(2_300);

impl Arrivals {
    /// Both, the default first.
    pub const ALL: [Arrivals; 2] = [Arrivals::BackToBack, Arrivals::Paused];

    /// The name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::BackToBack => "back_to_back",
            Arrivals::Paused => "paused",
        }
    }

    /// The arrivals called `name`.
    pub fn parse(name: &str) -> BenchResult<Self> {
        by_name(&Self::ALL, name, Self::name, "arrivals")
    }
}

/// The one of `all` whose name is `name`; an error naming `what` if none.
fn by_name<T: Copy>(
    all: &[T],
    name: &str,
    name_of: fn(T) -> &'static str,
    what: &str,
) -> BenchResult<T> {
    all.iter()
        .copied()
        .find(|&one| name_of(one) == name)
        .ok_or_else(|| format!("unknown {what} `{name}`").into())
}

/// What one worker process was asked to do.
#[derive(Clone, Debug)]
pub struct WorkerArgs {
    /// How its buyers keep deductions apart.
    pub way: Way,
    /// How the work waits.
    pub work: Work,
    /// When its buyers come back.
    pub arrivals: Arrivals,
    /// The server.
    pub url: String,
    /// Its buyers (tasks).
    pub tasks: usize,
    /// When to start, in ms since the Unix epoch (all workers at once).
    pub start_at_ms: u64,
    /// How long to run from then.
    pub run_for: Duration,
}

impl WorkerArgs {
    /// The command line of a worker: after `--hot-key-worker`.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--hot-key-worker".into(),
            self.way.name().into(),
            self.work.name().into(),
            self.arrivals.name().into(),
            self.url.clone(),
            self.tasks.to_string(),
            self.start_at_ms.to_string(),
            self.run_for.as_millis().to_string(),
        ]
    }

    /// Parses what [`WorkerArgs::to_args`] wrote (without the flag).
    pub fn parse(args: &[String]) -> BenchResult<Self> {
        let [way, work, arrivals, url, tasks, start, run] = args else {
            return Err(
                "hot-key worker: expected <way> <work> <arrivals> <url> <tasks> <start_ms> <run_ms>"
                    .into(),
            );
        };
        Ok(Self {
            way: Way::parse(way)?,
            work: Work::parse(work)?,
            arrivals: Arrivals::parse(arrivals)?,
            url: url.clone(),
            tasks: tasks.parse()?,
            start_at_ms: start.parse()?,
            run_for: Duration::from_millis(run.parse()?),
        })
    }
}

/// What one worker did.
#[derive(Clone, Debug, Default)]
pub struct WorkerReport {
    /// Deductions whose critical section began within the run.
    pub ops: u64,
    /// Deductions done, those that finished after the run included: what
    /// the stock must have lost.
    pub writes: u64,
    /// Each deduction's wait for its turn (lock acquired, or transaction
    /// committed), in µs.
    pub waits_us: Vec<u64>,
    /// Time inside the critical section (read, work, write), summed, µs.
    pub body_us: u64,
    /// Of that, time in the work (a 1 ms tokio sleep), summed, µs.
    pub work_us: u64,
    /// Of that, time in the read (the body's first round trip, which
    /// starts with the turn: beside whatever the lock does at a hand-over),
    /// summed, µs.
    pub read_us: u64,
    /// Deductions that failed (an error, not a busy lock).
    pub errors: u64,
    /// The critical section of each deduction counted in `ops`.
    pub sections: Vec<Section>,
    /// Holds of the project's lock that ended on the server (a release,
    /// or a pass by the server), from the locker's counters: the rest
    /// were passed in process.
    pub server_ends: u64,
    /// Tries the project's locker sent (its counters), for the fair lock,
    /// whose grants by release take none.
    pub tries: u64,
}

impl WorkerReport {
    /// The one line a worker prints.
    pub fn to_line(&self) -> String {
        format!(
            "hot_key_report {}",
            json!({
                "ops": self.ops,
                "writes": self.writes,
                "waits_us": self.waits_us,
                "body_us": self.body_us,
                "work_us": self.work_us,
                "read_us": self.read_us,
                "errors": self.errors,
                "server_ends": self.server_ends,
                "tries": self.tries,
                "sections_us": self
                    .sections
                    .iter()
                    .map(|s| [s.start_us, s.end_us])
                    .collect::<Vec<_>>(),
            })
        )
    }

    /// Reads a worker's line.
    pub fn parse(line: &str) -> BenchResult<Self> {
        let text = line
            .strip_prefix("hot_key_report ")
            .ok_or_else(|| format!("not a hot-key report: {line}"))?;
        let value: Value = serde_json::from_str(text)?;
        let number = |name: &str| value[name].as_u64().unwrap_or(0);
        Ok(Self {
            ops: number("ops"),
            writes: number("writes"),
            waits_us: value["waits_us"]
                .as_array()
                .map(|all| all.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default(),
            body_us: number("body_us"),
            work_us: number("work_us"),
            read_us: number("read_us"),
            errors: number("errors"),
            server_ends: number("server_ends"),
            tries: number("tries"),
            sections: value["sections_us"]
                .as_array()
                .map(|all| {
                    all.iter()
                        .filter_map(|pair| {
                            Some(Section {
                                start_us: pair.get(0)?.as_u64()?,
                                end_us: pair.get(1)?.as_u64()?,
                                worker: 0,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// Marks every section as run by worker process `worker`.
    pub fn set_worker(&mut self, worker: usize) {
        for section in &mut self.sections {
            section.worker = worker;
        }
    }

    /// Adds another worker's report.
    pub fn merge(&mut self, other: WorkerReport) {
        self.ops += other.ops;
        self.writes += other.writes;
        self.waits_us.extend(other.waits_us);
        self.body_us += other.body_us;
        self.work_us += other.work_us;
        self.read_us += other.read_us;
        self.errors += other.errors;
        self.server_ends += other.server_ends;
        self.tries += other.tries;
        self.sections.extend(other.sections);
    }
}

/// One row of the table: a way, at one size.
#[derive(Clone, Debug)]
pub struct Row {
    /// Buyers, over both processes.
    pub buyers: usize,
    /// How they kept deductions apart.
    pub way: Way,
    /// Deductions per second.
    pub ops_per_s: f64,
    /// Wait for the critical section, median, µs.
    pub wait_p50_us: f64,
    /// Wait, 99th percentile, µs.
    pub wait_p99_us: f64,
    /// The longest wait, µs: whether a buyer starved.
    pub wait_max_us: f64,
    /// Server commands per deduction (inside scripts included).
    pub redis_cmds_per_op: f64,
    /// Server CPU per deduction, µs.
    pub redis_cpu_us_per_op: f64,
    /// Tries sent to the server per deduction (see [`Way::attempts`]).
    pub attempts_per_op: f64,
    /// Deductions that did not reach the stock (lost writes: units sold
    /// twice).
    pub oversold: i64,
    /// Deductions that failed.
    pub errors: u64,
    /// Mean time inside the critical section, µs.
    pub body_us: f64,
    /// Of that, the mean time of the work, µs: a 1 ms sleep that tokio's
    /// timer ends on a tick, so it varies from row to row with the phase
    /// a critical section starts at, not with the lock.
    pub work_us: f64,
    /// Of that, the mean time of the read, µs: the body's first round trip
    /// (`WATCH` and `GET` without a lock), which overlaps what the lock's
    /// hand-over leaves to do (the previous owner's next try, for one).
    /// The write is the rest.
    pub read_us: f64,
    /// Hand-over gaps between critical sections (lock rows only).
    pub gaps: Option<Gaps>,
}

impl Row {
    /// The row of a run: the workers' merged report, the server's costs
    /// over the whole run (the deductions finished after the deadline
    /// included), and the stock left. Throughput counts the deductions
    /// that began within the run; the server's costs are per deduction
    /// written.
    pub fn new(
        buyers: usize,
        way: Way,
        report: &WorkerReport,
        cost: &ServerCounters,
        run_for: Duration,
        stock_left: u64,
    ) -> Self {
        let ops = report.ops.max(1) as f64;
        let written = report.writes.max(1) as f64;
        let mut waits = Samples::default();
        for &us in &report.waits_us {
            waits.push(Duration::from_micros(us));
        }
        let sold = INITIAL_STOCK.saturating_sub(stock_left);
        Self {
            buyers,
            way,
            ops_per_s: report.ops as f64 / run_for.as_secs_f64(),
            wait_p50_us: waits.quantile_us(0.5),
            wait_p99_us: waits.quantile_us(0.99),
            wait_max_us: waits.quantile_us(1.0),
            redis_cmds_per_op: cost.commands as f64 / written,
            redis_cpu_us_per_op: cost.cpu_s * 1e6 / written,
            attempts_per_op: way.attempts(cost, report),
            oversold: i64::try_from(report.writes).unwrap_or(i64::MAX)
                - i64::try_from(sold).unwrap_or(i64::MAX),
            errors: report.errors,
            body_us: report.body_us as f64 / ops,
            work_us: report.work_us as f64 / ops,
            read_us: report.read_us as f64 / ops,
            gaps: gaps(report.sections.clone()),
        }
    }

    /// The row as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "scenario": format!("hot_key/{}", self.buyers),
            "impl": self.way.name(),
            "ops_per_s": self.ops_per_s,
            "wait_p50_us": self.wait_p50_us,
            "wait_p99_us": self.wait_p99_us,
            "extra": {
                "wait_max_us": self.wait_max_us,
                "redis_cmds_per_op": self.redis_cmds_per_op,
                "redis_cpu_us_per_op": self.redis_cpu_us_per_op,
                "acquire_attempts_per_op": self.attempts_per_op,
                "oversold": self.oversold,
                "errors": self.errors,
                "body_us": self.body_us,
                "work_us": self.work_us,
                "read_us": self.read_us,
                "handover_gap_within_process_p50_us": self.gaps.and_then(|g| g.within_p50_us),
                "handover_gap_across_processes_p50_us": self.gaps.and_then(|g| g.across_p50_us),
                "handovers_across_processes_share": self.gaps.map(|g| g.across_share),
                "handover_gap_mean_us": self.gaps.map(|g| g.mean_us),
            },
        })
    }
}

/// The difference of two readings of the server's counters.
pub fn cost(before: &ServerCounters, after: &ServerCounters) -> ServerCounters {
    ServerCounters {
        commands: after.commands.saturating_sub(before.commands),
        scripts: after.scripts.saturating_sub(before.scripts),
        sets: after.sets.saturating_sub(before.sets),
        dels: after.dels.saturating_sub(before.dels),
        execs: after.execs.saturating_sub(before.execs),
        cpu_s: after.cpu_s - before.cpu_s,
    }
}

/// The targets of the flash sale, one line each: `(what, measured, goal, met)`.
pub fn verdict(rows: &[Row], bound_ops_per_s: f64) -> Vec<(String, String, String, bool)> {
    let mut lines = Vec::new();
    let row = |buyers: usize, way: Way| rows.iter().find(|r| r.buyers == buyers && r.way == way);
    for buyers in SIZES {
        let Some(project) = row(buyers, Way::Project) else {
            continue;
        };
        let share = project.ops_per_s / bound_ops_per_s;
        lines.push((
            format!("hot_key/{buyers}: project ops/s / bound"),
            format!("{share:.2}"),
            ">= 0.9".to_owned(),
            share >= 0.9,
        ));
        lines.push((
            format!("hot_key/{buyers}: project acquire attempts per op"),
            format!("{:.2}", project.attempts_per_op),
            "<= 2".to_owned(),
            project.attempts_per_op <= 2.0,
        ));
        if buyers < 64 {
            continue;
        }
        for other in [Way::Rslock, Way::SetnxSpin, Way::WatchMulti] {
            let Some(other_row) = row(buyers, other) else {
                continue;
            };
            let faster = project.ops_per_s / other_row.ops_per_s.max(f64::MIN_POSITIVE);
            lines.push((
                format!("hot_key/{buyers}: ops/s project / {}", other.name()),
                format!("{faster:.2}"),
                "> 1".to_owned(),
                faster > 1.0,
            ));
            // What the lock itself costs per deduction: the mean gap from
            // one critical section's end to the next one's start (the
            // deductions' own time, the payment's timer included, is not
            // in it); watch_multi has no sections apart to measure.
            if let (Some(ours), Some(theirs)) = (project.gaps, other_row.gaps) {
                let ratio = ours.mean_us / theirs.mean_us.max(f64::MIN_POSITIVE);
                lines.push((
                    format!(
                        "hot_key/{buyers}: lock µs per deduction (mean gap) project / {}",
                        other.name()
                    ),
                    format!("{ratio:.2}"),
                    "< 1".to_owned(),
                    ratio < 1.0,
                ));
            }
            let cheaper =
                project.redis_cpu_us_per_op / other_row.redis_cpu_us_per_op.max(f64::MIN_POSITIVE);
            lines.push((
                format!(
                    "hot_key/{buyers}: redis CPU per op project / {}",
                    other.name()
                ),
                format!("{cheaper:.2}"),
                "< 1".to_owned(),
                cheaper < 1.0,
            ));
        }
    }
    for buyers in SIZES.into_iter().filter(|&buyers| buyers >= 64) {
        let (Some(fair), Some(rslock)) = (row(buyers, Way::Fair), row(buyers, Way::Rslock)) else {
            continue;
        };
        let faster = fair.ops_per_s / rslock.ops_per_s.max(f64::MIN_POSITIVE);
        lines.push((
            format!("hot_key/{buyers}: ops/s fair / rslock"),
            format!("{faster:.2}"),
            "> 1".to_owned(),
            faster > 1.0,
        ));
        // Served in arrival order, nobody waits much longer than the line
        // ahead of them takes; rslock's longest waits were whole runs.
        let longest = fair.wait_max_us / rslock.wait_max_us.max(f64::MIN_POSITIVE);
        lines.push((
            format!("hot_key/{buyers}: longest wait fair / rslock"),
            format!("{longest:.2}"),
            "<= 0.25".to_owned(),
            longest <= 0.25,
        ));
        lines.push((
            format!("hot_key/{buyers}: fair tries per grant"),
            format!("{:.2}", fair.attempts_per_op),
            "<= 1".to_owned(),
            fair.attempts_per_op <= 1.0,
        ));
    }
    for row in rows {
        if row.oversold != 0 {
            lines.push((
                format!("hot_key/{}: {} oversold", row.buyers, row.way.name()),
                row.oversold.to_string(),
                "= 0".to_owned(),
                false,
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_args_and_reports_round_trip() {
        let args = WorkerArgs {
            way: Way::WatchMulti,
            work: Work::ThreadSleep,
            arrivals: Arrivals::Paused,
            url: "redis://127.0.0.1:7000/".into(),
            tasks: 32,
            start_at_ms: 1_700_000_000_000,
            run_for: Duration::from_millis(2500),
        };
        let line = args.to_args();
        let parsed = WorkerArgs::parse(&line[1..]).unwrap();
        assert_eq!((parsed.way, parsed.tasks), (Way::WatchMulti, 32));
        assert_eq!(parsed.work, Work::ThreadSleep);
        assert_eq!(parsed.arrivals, Arrivals::Paused);
        assert_eq!(parsed.run_for, args.run_for);
        let report = WorkerReport {
            ops: 3,
            writes: 4,
            waits_us: vec![1, 2, 3],
            body_us: 3_300,
            work_us: 3_000,
            read_us: 150,
            errors: 0,
            server_ends: 2,
            tries: 5,
            sections: vec![Section {
                start_us: 10,
                end_us: 20,
                worker: 0,
            }],
        };
        let mut back = WorkerReport::parse(&report.to_line()).unwrap();
        assert_eq!((back.ops, &back.waits_us), (3, &vec![1, 2, 3]));
        assert_eq!((back.server_ends, back.tries), (2, 5));
        assert_eq!(
            (back.body_us, back.work_us, back.read_us),
            (3_300, 3_000, 150)
        );
        back.set_worker(1);
        assert_eq!(
            back.sections,
            vec![Section {
                start_us: 10,
                end_us: 20,
                worker: 1,
            }]
        );
    }

    #[test]
    fn attempts_count_the_tries_beyond_each_deductions_own_commands() {
        let cost = ServerCounters {
            commands: 0,
            scripts: 250,
            sets: 300,
            dels: 50,
            execs: 120,
            cpu_s: 0.0,
        };
        // 100 stock writes; 20 releases (DEL) and 30 passes by the server
        // (SET), the other passes in process; the other 200 `SET`s and
        // `DEL`s are tries.
        let report = WorkerReport {
            ops: 100,
            writes: 100,
            server_ends: 50,
            tries: 100,
            ..WorkerReport::default()
        };
        assert_eq!(Way::Project.attempts(&cost, &report), 2.0);
        // The fair lock's locker counts its own tries: each buyer's one
        // try took the lock or queued it, and a release handed it over.
        assert_eq!(Way::Fair.attempts(&cost, &report), 1.0);
        assert_eq!(Way::SetnxSpin.attempts(&cost, &report), 2.0);
        assert_eq!(Way::WatchMulti.attempts(&cost, &report), 1.2);
    }

    /// Numbers of a run at 256 buyers: 1157 deductions written, 902 of them
    /// begun before the deadline, the rest by buyers still in line then.
    /// Over the whole run the server saw 1505 `SET`s and 116 `DEL`s; read
    /// at the deadline it had seen only 1177 and 90, fewer than the writes
    /// and ends to take off, and the tries came out as 0.
    #[test]
    fn tries_and_costs_are_per_deduction_written_over_the_whole_run() {
        let cost = ServerCounters {
            commands: 1157 * 4,
            sets: 1177 + 328,
            dels: 90 + 26,
            cpu_s: 1157.0 * 50e-6,
            ..ServerCounters::default()
        };
        let report = WorkerReport {
            ops: 902,
            writes: 1157,
            server_ends: 230,
            ..WorkerReport::default()
        };
        let tries = Way::Project.attempts(&cost, &report);
        assert!((tries - 234.0 / 1157.0).abs() < 1e-9, "{tries}");
        let row = Row::new(
            256,
            Way::Project,
            &report,
            &cost,
            Duration::from_secs(5),
            INITIAL_STOCK - 1157,
        );
        assert_eq!(row.redis_cmds_per_op, 4.0);
        assert!((row.redis_cpu_us_per_op - 50.0).abs() < 1e-6);
        assert_eq!(row.oversold, 0);
        assert!((row.ops_per_s - 902.0 / 5.0).abs() < 1e-9);
    }
}
