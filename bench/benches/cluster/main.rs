//! The multi-key lock on a Redis Cluster:
//! `cargo bench -p lock-bench --features cluster --bench cluster` (about
//! half a minute; `-- --quick` for a short run, `-- --reps N` for more
//! repetitions).
//!
//! Starts a private three-node Redis Cluster (no replicas), then runs the
//! uncontended pair and 64 parallel tasks for the project's exclusive
//! lock, hand-written redis-rs code (`SET NX PX` and a Lua
//! compare-and-delete on one cluster connection) and the project's
//! multi-key lock with 2 and 8 keys, each in one slot and across slots
//! (see [`lock_bench::slots`]), interleaved and repeated. Prints a table
//! and the ratios against the exclusive lock, and writes
//! `target/bench/results-cluster.json` and `target/bench/table-cluster.md`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lock_bench::multi::MultiContender;
use lock_bench::project::ProjectContender;
use lock_bench::raw::RawContender;
use lock_bench::scenarios::{PARALLEL_64, UNCONTENDED_PAIR, parallel, uncontended};
use lock_bench::server::Admin;
use lock_bench::slots::{SlotKeys, Spread};
use lock_bench::targets::RoundTrips;
use lock_bench::{BenchResult, Contender, Plan, Results, RunResult, Stat, report};
use lock_servers::{RedisCluster, RedisServer};
use serde_json::json;

/// Safety net around one run; every scenario bounds itself well below it.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The scenarios run on the cluster, in order.
const SCENARIOS: [&str; 2] = [UNCONTENDED_PAIR, PARALLEL_64];

/// The name of the setup, before each scenario's in the table.
const SETUP: &str = "cluster-3";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lock-bench cluster: {err}");
            ExitCode::FAILURE
        }
    }
}

/// One row of the table: what takes and gives back each lock.
#[derive(Clone, Debug)]
enum Row {
    /// The project's exclusive lock, one key.
    Project,
    /// Hand-written redis-rs code on one cluster connection.
    Raw,
    /// The project's multi-key lock, names placed by slot.
    Multi(SlotKeys),
}

impl Row {
    fn name(&self) -> String {
        match self {
            Self::Project => "project".to_owned(),
            Self::Raw => "raw".to_owned(),
            Self::Multi(slots) => format!("multi_{}_{}", slots.keys(), slots.spread().name()),
        }
    }
}

/// The cluster as the runs see it.
struct Deployment {
    /// The project's `redis+cluster://` URL.
    url: String,
    /// Every node's `redis://host:port/`.
    node_urls: Vec<String>,
}

fn run() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // cargo passes --bench under `cargo bench`; under `cargo test` it does not.
    if !args.iter().any(|arg| arg == "--bench") {
        println!(
            "lock-bench cluster: run it with `cargo bench -p lock-bench --features cluster --bench cluster`"
        );
        return Ok(());
    }
    let mut plan = Plan::from_args(&args)?;
    if plan.pinned {
        return Err("--pinned is not supported here: the three cluster nodes and the client share the machine's cores (see bench/README.md)".into());
    }
    // Shorter than the single-server bench: six rows of two scenarios.
    if plan.mode == "full" {
        plan.pairs = 2_000;
        plan.parallel_for = Duration::from_secs(1);
    } else {
        plan.pairs = 300;
        plan.parallel_for = Duration::from_millis(300);
    }
    // Started from the main thread: a server dies with the thread that spawned it.
    let cluster = RedisCluster::start();
    let node_of_slot = cluster.node_of_every_slot();
    let mut rows = vec![Row::Project, Row::Raw];
    for keys in [2, 8] {
        for spread in [Spread::OneSlot, Spread::AcrossSlots] {
            let slots = SlotKeys::new(keys, spread, node_of_slot.clone());
            slots.check(&cluster)?;
            rows.push(Row::Multi(slots));
        }
    }
    let deployment = Deployment {
        url: cluster.url(),
        node_urls: cluster.nodes().iter().map(RedisServer::url).collect(),
    };
    eprintln!(
        "lock-bench cluster: {} run, {} repetitions, on {}",
        plan.mode, plan.reps, deployment.url
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    let outcome = runtime.block_on(bench(&deployment, &rows, &plan))?;
    drop(runtime);
    drop(cluster);
    publish(&plan, &outcome, started.elapsed())
}

/// Everything one run measured.
struct Outcome {
    results: Results,
    round_trips_us: Vec<f64>,
    redis_version: String,
}

async fn bench(deployment: &Deployment, rows: &[Row], plan: &Plan) -> BenchResult<Outcome> {
    // Every node: the counters are summed over them, and a flush empties each.
    let admin = Admin::connect_all(&deployment.node_urls).await?;
    let redis_version = admin.version().await?;
    let mut results = Results::default();
    let mut round_trips_us = Vec::with_capacity(plan.reps);
    for rep in 0..plan.reps {
        let rtt = admin
            .round_trip_us(plan.rtt_pings, Duration::ZERO, Duration::from_secs(5))
            .await?;
        round_trips_us.push(rtt);
        eprintln!(
            "repetition {}/{}: loopback round trip (PING p50) {rtt:.1} µs",
            rep + 1,
            plan.reps
        );
        for scenario in SCENARIOS {
            let key = format!("{SETUP}/{scenario}");
            let mut order = rows.to_vec();
            order.rotate_left(rep % rows.len());
            for row in order {
                let name = row.name();
                let run = run_row(&row, scenario, deployment, &admin, plan, rep);
                let result = tokio::time::timeout(RUN_TIMEOUT, run)
                    .await
                    .map_err(|_| format!("{key}/{name}: no result within {RUN_TIMEOUT:?}"))?
                    .map_err(|err| format!("{key}/{name}: {err}"))?;
                eprintln!(
                    "  {key:<28} {name:<22} {:>10} pairs/s  p50 {:>9} µs  p99 {:>9} µs",
                    report::number(result.ops_per_s),
                    report::number(result.p50_us),
                    report::number(result.p99_us),
                );
                results.record(&key, &name, result);
                admin.flush_cluster().await?;
            }
        }
    }
    Ok(Outcome {
        results,
        round_trips_us,
        redis_version,
    })
}

/// One run of `scenario` for `row`, on a contender of its own.
async fn run_row(
    row: &Row,
    scenario: &str,
    deployment: &Deployment,
    admin: &Admin,
    plan: &Plan,
    rep: usize,
) -> BenchResult<RunResult> {
    let url = deployment.url.as_str();
    match row {
        Row::Project => {
            let contender = ProjectContender::connect(url, None).await?;
            drive(&contender, scenario, admin, plan, rep).await
        }
        Row::Raw => {
            let contender = RawContender::connect_cluster(&deployment.node_urls).await?;
            drive(&contender, scenario, admin, plan, rep).await
        }
        Row::Multi(slots) => {
            let contender = MultiContender::connect_by_slot(url, slots.clone()).await?;
            let result = drive(&contender, scenario, admin, plan, rep).await?;
            let (touched_slots, touched_nodes) = slots.touched(&slots.names("a:0:0"));
            Ok(result
                .with("keys_per_hold", f64::from(slots.keys()))
                .with("slots_per_hold", touched_slots as f64)
                .with("nodes_per_hold", touched_nodes as f64))
        }
    }
}

async fn drive<C: Contender>(
    contender: &C,
    scenario: &str,
    admin: &Admin,
    plan: &Plan,
    rep: usize,
) -> BenchResult<RunResult> {
    let tag = rep.to_string();
    match scenario {
        UNCONTENDED_PAIR => {
            uncontended::run(contender, admin, plan.pairs, plan.run_limit, &tag).await
        }
        PARALLEL_64 => {
            let (tasks, duration) = (plan.parallel_tasks, plan.parallel_for);
            parallel::run(contender, admin, tasks, duration, &tag).await
        }
        other => Err(format!("scenario `{other}` does not run on the cluster").into()),
    }
}

/// Each row's pairs/s, p50 and p99 against the exclusive lock's
/// (`project`) in the same scenario, medians over the runs.
fn ratios(results: &Results) -> Vec<(String, String, [f64; 3])> {
    let mut out = Vec::new();
    for scenario in results.scenario_names() {
        let Some(base) = results.summary(scenario, "project") else {
            continue;
        };
        for implementation in results.implementation_names(scenario) {
            let Some(row) = results.summary(scenario, implementation) else {
                continue;
            };
            out.push((
                scenario.to_owned(),
                implementation.to_owned(),
                [
                    row.ops_per_s.median / base.ops_per_s.median,
                    row.p50_us.median / base.p50_us.median,
                    row.p99_us.median / base.p99_us.median,
                ],
            ));
        }
    }
    out
}

/// Prints the tables and writes results-cluster.json and table-cluster.md.
fn publish(plan: &Plan, outcome: &Outcome, elapsed: Duration) -> BenchResult<()> {
    let results = &outcome.results;
    let rtt = Stat::of(outcome.round_trips_us.iter().copied());
    // Only the handoff's notes read round trips; it does not run here.
    let round_trips = RoundTrips {
        warm_us: rtt.median,
        idle_us: f64::NAN,
    };
    let mut table = report::results_table(results, round_trips);
    let ratios = ratios(results);
    table.push_str("\n| scenario | impl | pairs/s ÷ project | p50 ÷ project | p99 ÷ project |\n");
    table.push_str("|---|---|---:|---:|---:|\n");
    for (scenario, implementation, [rate, p50, p99]) in &ratios {
        let _ = writeln!(
            table,
            "| {scenario} | {implementation} | {rate:.2} | {p50:.2} | {p99:.2} |"
        );
    }
    println!("\n{table}");

    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let env = json!({
        "mode": plan.mode,
        "reps": plan.reps,
        "cpus": cpus,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "redis_version": outcome.redis_version,
        "cluster_primaries": 3,
        "cluster_replicas": 0,
        "rtt_us": rtt.median,
        "rtt_us_min": rtt.min,
        "rtt_us_max": rtt.max,
        "unix_time": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "elapsed_s": elapsed.as_secs_f64(),
        "pairs_per_run": plan.pairs,
        "parallel_tasks": plan.parallel_tasks,
        "parallel_for_ms": plan.parallel_for.as_millis(),
    });
    let mut json = results.to_json(env);
    json["ratios_to_project"] = ratios
        .iter()
        .map(|(scenario, implementation, [rate, p50, p99])| {
            json!({
                "scenario": scenario,
                "impl": implementation,
                "pairs_per_s": rate,
                "p50_us": p50,
                "p99_us": p99,
            })
        })
        .collect();

    let dir = lock_bench::output_dir();
    std::fs::create_dir_all(&dir)?;
    let (json_file, table_file) = ("results-cluster.json", "table-cluster.md");
    std::fs::write(
        dir.join(json_file),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    std::fs::write(dir.join(table_file), &table)?;
    println!(
        "wrote {0}/{json_file} and {0}/{table_file} in {1:.0} s",
        dir.display(),
        elapsed.as_secs_f64()
    );
    Ok(())
}
