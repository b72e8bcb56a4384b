//! The benchmark: `cargo bench -p lock-bench` (full, a few minutes) or
//! `cargo bench -p lock-bench -- --quick` (well under a minute).
//!
//! Starts a private `redis-server` on a free loopback port, runs every
//! scenario for the project, raw redis-rs code and rslock, interleaved
//! (the order of the implementations rotates every repetition). Then, on
//! three more private servers used as Redlock masters, runs the
//! uncontended and parallel scenarios for the project (in Redlock mode) and
//! rslock (given the three servers). Repeats everything `--reps N` times
//! (at least 3), then prints a Markdown table, the Redlock ratios and the
//! targets, and writes `target/bench/results.json`,
//! `target/bench/chart.svg` and `target/bench/table.md` under the
//! workspace root. `--only handoff,redlock-3/parallel_64` runs some
//! scenarios only (the Redlock masters start only when needed).

mod rslock_contender;

use std::future::Future;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lock_bench::fair::FairContender;
use lock_bench::multi::MultiContender;
use lock_bench::pinning::{self, Cores};
use lock_bench::project::ProjectContender;
use lock_bench::raw::{self, RawContender};
use lock_bench::read_write::{ReadWriteContender, Side};
use lock_bench::scenarios::macro_overhead::{self, Variant};
use lock_bench::scenarios::{
    HANDOFF, MACRO_OVERHEAD, PARALLEL_64, UNCONTENDED_PAIR, WATCHDOG_SCALE, handoff, parallel,
    uncontended, watchdog_scale,
};
use lock_bench::semaphore::SemaphoreContender;
use lock_bench::server::{self, Admin};
use lock_bench::setup::{self, REDLOCK_MASTERS, Setup};
use lock_bench::targets::{self, RoundTrips, pool_name};
use lock_bench::{BenchResult, Contender, Plan, Results, RunResult, Stat, chart, ratios, report};
use lock_runtime::LockConfig;
use lock_servers::RedisServer;
use rslock_contender::RslockContender;
use serde_json::json;

/// Safety net around one run; every scenario bounds itself well below it.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lock-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // cargo passes --bench under `cargo bench`; under `cargo test` it does not.
    if !args.iter().any(|arg| arg == "--bench") {
        println!(
            "lock-bench: run it with `cargo bench -p lock-bench` (add `-- --quick` for a short run)"
        );
        return Ok(());
    }
    let plan = Plan::from_args(&args)?;
    // Pinned before any thread starts, so that every later one inherits it.
    let cores = if plan.pinned {
        let cores = Cores::of_this_machine()?;
        pinning::pin(std::process::id(), &cores.client)?;
        Some(cores)
    } else {
        None
    };
    // Started from the main thread: a server dies with the thread that spawned it.
    let servers: Vec<(Setup, Vec<RedisServer>)> = setup::ALL
        .into_iter()
        .filter(|setup| {
            *setup == Setup::Single || setup.scenarios().iter().any(|s| plan.runs(&setup.key(s)))
        })
        .map(|setup| {
            // Redlock masters as a running deployment's: past the restart
            // quarantine, whose uptime check a new master's grants pay for.
            let started = match setup {
                Setup::Single => vec![RedisServer::start()],
                Setup::Redlock { masters } => {
                    (0..masters).map(|_| server::settled_master()).collect()
                }
            };
            (setup, started)
        })
        .collect();
    if let Some(cores) = &cores {
        for server in servers.iter().flat_map(|(_, servers)| servers) {
            let pid = server.pid().ok_or("a benchmark server has no process id")?;
            pinning::pin(pid, &cores.server)?;
        }
        eprintln!(
            "lock-bench: pinned: client on cores {}, servers on core {}",
            cores.client, cores.server
        );
    }
    let deployments: Vec<Deployment> = servers
        .iter()
        .map(|(setup, servers)| Deployment {
            setup: *setup,
            urls: servers.iter().map(RedisServer::url).collect(),
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    let load_at_start = loadavg();
    let pressure_at_start = cpu_pressure();
    for deployment in &deployments {
        eprintln!(
            "lock-bench: {} run, {} repetitions, {} on {}",
            plan.mode,
            plan.reps,
            deployment.setup.name(),
            deployment.urls.join(" ")
        );
    }
    let outcome = runtime.block_on(bench(&deployments, &plan))?;
    drop(runtime);
    drop(servers);
    let pressure_at_end = cpu_pressure();
    let busy = [pressure_at_start, pressure_at_end]
        .iter()
        .flatten()
        .any(|&pressure| pressure > BUSY_PRESSURE);
    if busy {
        eprintln!(
            "lock-bench: other work competed for the CPUs (pressure {pressure_at_start:?} → {pressure_at_end:?} % of the last 10 s); expect noisy numbers"
        );
    }
    publish(
        &plan,
        &outcome,
        started.elapsed(),
        &load_at_start,
        [pressure_at_start, pressure_at_end],
    )
}

/// Everything one benchmark run measured.
struct Outcome {
    results: Results,
    round_trips_us: Vec<f64>,
    idle_round_trips_us: Vec<f64>,
    redis_version: String,
}

/// The servers of one setup, by URL.
struct Deployment {
    /// Which setup the servers make up.
    setup: Setup,
    /// Their `redis://host:port/` URLs.
    urls: Vec<String>,
}

/// One implementation as the orchestration sees it.
#[derive(Clone, Copy, Debug)]
enum Implementation {
    /// The project; `Some(n)` for a pool of n connections, `None` for the default.
    Project(Option<usize>),
    Raw,
    /// Raw code with its connection driven from a thread of its own.
    RawOwnThread,
    Rslock,
    /// The project's fair lock (the handoff only).
    Fair,
    /// The project through the attribute and through hand-written calls,
    /// interleaved in one run.
    MacroPair,
    /// The project's read/write lock, each pair taking this side.
    ReadWrite(Side),
    /// One permit of the project's semaphore of this many permits.
    Semaphore(u32),
    /// This many keys at once with the project's `lock_all`.
    Multi(u32),
}

impl Implementation {
    /// The read/write lock's rows, beside the exclusive lock's.
    const READ_WRITE: [Self; 2] = [Self::ReadWrite(Side::Read), Self::ReadWrite(Side::Write)];

    fn name(self) -> String {
        match self {
            Self::Project(None) => "project".to_owned(),
            Self::Project(Some(size)) => pool_name(size),
            Self::Raw => "raw".to_owned(),
            Self::RawOwnThread => "raw_own_thread".to_owned(),
            Self::Rslock => "rslock".to_owned(),
            Self::Fair => "fair".to_owned(),
            Self::MacroPair => format!("{}+{}", Variant::Macro.name(), Variant::Handwritten.name()),
            Self::ReadWrite(side) => side.name().to_owned(),
            Self::Semaphore(limit) => format!("semaphore_{limit}"),
            Self::Multi(keys) => format!("multi_{keys}"),
        }
    }

    /// Who takes part in `scenario` on `setup`, in their canonical order:
    /// on Redlock masters, the project and rslock (both implement Redlock).
    fn all_for(scenario: &str, setup: Setup, plan: &Plan) -> Vec<Self> {
        if setup != Setup::Single {
            return vec![Self::Project(None), Self::Rslock];
        }
        match scenario {
            MACRO_OVERHEAD => vec![Self::MacroPair],
            PARALLEL_64 => {
                let mut all = vec![Self::Project(None)];
                all.extend(
                    plan.pool_sizes
                        .iter()
                        .map(|&size| Self::Project(Some(size))),
                );
                all.extend([Self::Raw, Self::RawOwnThread, Self::Rslock]);
                all.extend(Self::READ_WRITE);
                all
            }
            // The read/write lock's, the semaphore's and the multi-key
            // lock's pairs beside the exclusive lock's.
            UNCONTENDED_PAIR => {
                let mut all = vec![Self::Project(None), Self::Raw, Self::Rslock];
                all.extend(Self::READ_WRITE);
                all.extend([Self::Semaphore(1), Self::Semaphore(8)]);
                all.extend([Self::Multi(2), Self::Multi(8)]);
                all
            }
            HANDOFF => vec![Self::Project(None), Self::Fair, Self::Raw, Self::Rslock],
            _ => vec![Self::Project(None), Self::Raw, Self::Rslock],
        }
    }
}

/// What a run needs besides its implementation.
struct Context<'a> {
    setup: Setup,
    /// The setup's servers.
    urls: &'a [String],
    plan: &'a Plan,
    admin: &'a Admin,
    rep: usize,
}

async fn bench(deployments: &[Deployment], plan: &Plan) -> BenchResult<Outcome> {
    let mut admins = Vec::with_capacity(deployments.len());
    for deployment in deployments {
        admins.push(Admin::connect_all(&deployment.urls).await?);
    }
    // The single server's: round trips and version.
    let admin = admins.first().ok_or("no server")?.clone();
    let redis_version = admin.version().await?;
    let mut results = Results::default();
    let mut round_trips_us = Vec::with_capacity(plan.reps);
    let mut idle_round_trips_us = Vec::with_capacity(plan.reps);
    for rep in 0..plan.reps {
        let limit = Duration::from_secs(5);
        let rtt = admin
            .round_trip_us(plan.rtt_pings, Duration::ZERO, limit)
            .await?;
        let idle = admin
            .round_trip_us(plan.idle_pings, plan.handoff_hold, limit)
            .await?;
        round_trips_us.push(rtt);
        idle_round_trips_us.push(idle);
        eprintln!(
            "repetition {}/{}: loopback round trip (PING p50) {rtt:.1} µs back to back, {idle:.1} µs after {:?} idle",
            rep + 1,
            plan.reps,
            plan.handoff_hold
        );
        for (deployment, admin) in deployments.iter().zip(&admins) {
            let context = Context {
                setup: deployment.setup,
                urls: &deployment.urls,
                plan,
                admin,
                rep,
            };
            run_setup(&context, &mut results).await?;
        }
    }
    Ok(Outcome {
        results,
        round_trips_us,
        idle_round_trips_us,
        redis_version,
    })
}

/// Every scenario of one setup in one repetition, each for every
/// implementation (in an order that rotates every repetition).
async fn run_setup(context: &Context<'_>, results: &mut Results) -> BenchResult<()> {
    let setup = context.setup;
    for scenario in setup.scenarios() {
        let key = setup.key(scenario);
        if !context.plan.runs(&key) {
            continue;
        }
        let mut implementations = Implementation::all_for(scenario, setup, context.plan);
        let len = implementations.len();
        implementations.rotate_left(context.rep % len);
        for implementation in implementations {
            let name = implementation.name();
            let runs =
                tokio::time::timeout(RUN_TIMEOUT, run_one(scenario, implementation, context))
                    .await
                    .map_err(|_| format!("{key}/{name}: no result within {RUN_TIMEOUT:?}"))?
                    .map_err(|err| format!("{key}/{name}: {err}"))?;
            for (name, result) in runs {
                eprintln!(
                    "  {key:<27} {name:<14} {:>10} ops/s  p50 {:>9} µs  p99 {:>9} µs",
                    report::number(result.ops_per_s),
                    report::number(result.p50_us),
                    report::number(result.p99_us),
                );
                results.record(&key, &name, result);
            }
            context.admin.flush().await?;
        }
    }
    Ok(())
}

/// One run of `scenario` for `implementation`: its results, by
/// implementation name (two for the interleaved macro pair).
async fn run_one(
    scenario: &str,
    implementation: Implementation,
    context: &Context<'_>,
) -> BenchResult<Vec<(String, RunResult)>> {
    let urls = context.urls;
    let url = context.setup.project_url(urls);
    let url = url.as_str();
    let single = |result: RunResult| vec![(implementation.name(), result)];
    match implementation {
        Implementation::Project(pool) => {
            let connections = pool.unwrap_or(LockConfig::DEFAULT_POOL_SIZE);
            let connect = || ProjectContender::connect(url, pool);
            drive(scenario, connect, context, connections)
                .await
                .map(single)
        }
        Implementation::Raw => {
            let connect = || RawContender::connect(url);
            drive(scenario, connect, context, 1).await.map(single)
        }
        Implementation::RawOwnThread => {
            let connect = || RawContender::connect_on_own_thread(url);
            drive(scenario, connect, context, 1).await.map(single)
        }
        Implementation::Rslock => {
            let connect = || RslockContender::connect(urls);
            drive(scenario, connect, context, 1).await.map(single)
        }
        Implementation::ReadWrite(side) => {
            let connect = || ReadWriteContender::connect(url, side);
            drive(scenario, connect, context, LockConfig::DEFAULT_POOL_SIZE)
                .await
                .map(single)
        }
        Implementation::Semaphore(limit) => {
            let connect = || SemaphoreContender::connect(url, limit);
            drive(scenario, connect, context, 1).await.map(single)
        }
        Implementation::Multi(keys) => {
            let connect = || MultiContender::connect(url, keys);
            drive(scenario, connect, context, 1).await.map(single)
        }
        Implementation::Fair => {
            let connect = || FairContender::connect(url);
            let connections = LockConfig::DEFAULT_POOL_SIZE;
            drive(scenario, connect, context, connections)
                .await
                .map(single)
        }
        Implementation::MacroPair => {
            let project = ProjectContender::connect(url, None).await?;
            let plan = context.plan;
            let pair = macro_overhead::run(
                project.locker(),
                context.admin,
                plan.pairs,
                plan.run_limit,
                u64::try_from(context.rep)?,
            )
            .await?;
            Ok(pair
                .into_iter()
                .map(|(variant, result)| (variant.name().to_owned(), result))
                .collect())
        }
    }
}

/// Runs `scenario` on contenders made by `connect` (a fresh one per run,
/// two for the handoff: holder and waiter are separate clients).
async fn drive<C, F, Fut>(
    scenario: &str,
    connect: F,
    context: &Context<'_>,
    connections: usize,
) -> BenchResult<RunResult>
where
    C: Contender,
    F: Fn() -> Fut,
    Fut: Future<Output = BenchResult<C>>,
{
    let plan = context.plan;
    let tag = context.rep.to_string();
    let contender = connect().await?;
    match scenario {
        UNCONTENDED_PAIR => {
            uncontended::run(&contender, context.admin, plan.pairs, plan.run_limit, &tag).await
        }
        PARALLEL_64 => {
            parallel::run(
                &contender,
                context.admin,
                plan.parallel_tasks,
                plan.parallel_for,
                &tag,
            )
            .await
        }
        HANDOFF => {
            let waiter = connect().await?;
            handoff::run(
                &contender,
                &waiter,
                plan.handoff_rounds,
                plan.handoff_hold,
                plan.handoff_for,
                &tag,
            )
            .await
        }
        WATCHDOG_SCALE => {
            let sizes = watchdog_scale::Sizes {
                locks: plan.watchdog_locks,
                ttl: plan.watchdog_ttl,
                hold: plan.watchdog_ttl / 3 * plan.watchdog_ticks,
                connections,
            };
            watchdog_scale::run(&contender, context.admin, sizes, &tag).await
        }
        other => Err(format!("scenario `{other}` does not take a contender").into()),
    }
}

/// Prints the tables and writes results.json, chart.svg and table.md.
fn publish(
    plan: &Plan,
    outcome: &Outcome,
    elapsed: Duration,
    load_at_start: &str,
    cpu_pressure: [Option<f64>; 2],
) -> BenchResult<()> {
    let results = &outcome.results;
    let rtt = Stat::of(outcome.round_trips_us.iter().copied());
    let idle_rtt = Stat::of(outcome.idle_round_trips_us.iter().copied());
    let round_trips = RoundTrips {
        warm_us: rtt.median,
        idle_us: idle_rtt.median,
    };
    let targets = targets::evaluate(results, round_trips);
    let recommended = targets::recommended_pool(results, &plan.pool_sizes);
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());

    let ratios = ratios::evaluate(results);
    let mut table = report::results_table(results, round_trips);
    if !ratios.is_empty() {
        table.push('\n');
        table.push_str(&ratios::table(&ratios));
    }
    table.push('\n');
    table.push_str(&report::targets_table(&targets));
    let pool_line = match &recommended {
        Some(advice) => {
            let sizes: Vec<String> = advice
                .relative
                .iter()
                .map(|(size, ratio)| format!("{size}: {ratio:.2}"))
                .collect();
            format!(
                "\nparallel_64 pool sweep (pairs/s relative to the best size of the same repetition, median): {}; suggested default pool_size = {} (the smallest within 0.05 of the best); the library default is {}.\n",
                sizes.join(", "),
                advice.size,
                LockConfig::DEFAULT_POOL_SIZE
            )
        }
        None => String::new(),
    };
    table.push_str(&pool_line);
    println!("\n{table}");

    let env = json!({
        "mode": plan.mode,
        "pinned": plan.pinned,
        "reps": plan.reps,
        "cpus": cpus,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "redis_version": outcome.redis_version,
        "rtt_us": rtt.median,
        "rtt_us_min": rtt.min,
        "rtt_us_max": rtt.max,
        "idle_rtt_us": idle_rtt.median,
        "idle_rtt_us_min": idle_rtt.min,
        "idle_rtt_us_max": idle_rtt.max,
        "loadavg_start": load_at_start,
        "loadavg_end": loadavg(),
        "cpu_pressure_pct_start": cpu_pressure[0],
        "cpu_pressure_pct_end": cpu_pressure[1],
        "unix_time": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "elapsed_s": elapsed.as_secs_f64(),
        "project_default_pool_size": LockConfig::DEFAULT_POOL_SIZE,
        "recommended_pool_size": recommended.as_ref().map(|advice| advice.size),
        "pool_sweep_relative": recommended.as_ref().map(|advice| {
            advice
                .relative
                .iter()
                .map(|(size, ratio)| (size.to_string(), json!(ratio)))
                .collect::<serde_json::Map<_, _>>()
        }),
        "pairs_per_run": plan.pairs,
        "parallel_tasks": plan.parallel_tasks,
        "parallel_for_ms": plan.parallel_for.as_millis(),
        "handoff_hold_ms": plan.handoff_hold.as_millis(),
        "raw_poll_ms": raw::POLL.as_millis(),
        "watchdog_locks": plan.watchdog_locks,
        "watchdog_ttl_ms": plan.watchdog_ttl.as_millis(),
        "watchdog_ticks": plan.watchdog_ticks,
        "redlock_masters": REDLOCK_MASTERS,
    });
    let mut json = results.to_json(env);
    json["targets"] = targets
        .iter()
        .map(|t| json!({ "id": t.id, "what": t.what, "value": t.value, "goal": t.goal, "met": t.met }))
        .collect();
    json["ratios"] = ratios::to_json(&ratios);

    let dir = lock_bench::output_dir();
    std::fs::create_dir_all(&dir)?;
    // A pinned run keeps its own files, so both modes can be compared.
    let suffix = if plan.pinned { "-pinned" } else { "" };
    let (json_file, table_file, chart_file) = (
        format!("results{suffix}.json"),
        format!("table{suffix}.md"),
        format!("chart{suffix}.svg"),
    );
    std::fs::write(
        dir.join(&json_file),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    std::fs::write(dir.join(&table_file), &table)?;
    let placement = if plan.pinned {
        ", servers pinned to a core of their own"
    } else {
        ""
    };
    let subtitle = format!(
        "{} run, {} repetitions, {cpus} CPUs{placement}, redis {}, loopback round trip {:.0} µs ({:.0} µs after {:?} idle)",
        plan.mode, plan.reps, outcome.redis_version, rtt.median, idle_rtt.median, plan.handoff_hold
    );
    std::fs::write(dir.join(&chart_file), chart::render(results, &subtitle))?;
    println!(
        "wrote {0}/{json_file}, {0}/{chart_file} and {0}/{table_file} in {1:.0} s",
        dir.display(),
        elapsed.as_secs_f64()
    );
    Ok(())
}

/// The 1, 5 and 15 minute load averages: other work on the machine skews
/// the numbers, and this says how much there was.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Share of the last 10 s in which some task waited for a CPU
/// (`/proc/pressure/cpu`, "some avg10"), in percent; `None` where the
/// kernel does not report it.
fn cpu_pressure() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|line| line.starts_with("some"))?;
    some.split_whitespace()
        .find_map(|field| field.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// CPU pressure above which the run is reported as disturbed.
const BUSY_PRESSURE: f64 = 10.0;
