//! The client's instructions per lock + unlock pair:
//! `cargo bench -p lock-bench --bench client_cost` (add `-- --quick` for
//! shorter runs). See `lock_bench::client_cost`.
//!
//! Starts one server and three Redlock masters, then runs itself under
//! `valgrind --tool=cachegrind` once per implementation, setup, size and
//! repetition (`--client-cost-child`: connect, warm up, do N sequential
//! uncontended pairs, exit), and prints and writes
//! `target/bench/client_cost.json` and `target/bench/client_cost.md`.
//! Without valgrind it says so and exits successfully.

#[path = "../locks/rslock_contender.rs"]
mod rslock_contender;

use std::process::{Command, ExitCode};

use lock_bench::client_cost::{self, Cost, Sizes};
use lock_bench::project::ProjectContender;
use lock_bench::raw::RawContender;
use lock_bench::scenarios::uncontended::pair;
use lock_bench::setup::{REDLOCK_MASTERS, Setup};
use lock_bench::{BenchResult, Contender, Stat, server};
use lock_runtime::{LockError, Locker, distributed_lock};
use lock_servers::RedisServer;
use rslock_contender::RslockContender;
use serde_json::json;

/// The flag that makes this binary one measured child.
const CHILD: &str = "--client-cost-child";

/// Pairs before counting starts to matter: connections, scripts loaded,
/// buffers grown (both runs do them, so they cancel out anyway).
const WARMUP_PAIRS: u64 = 50;

/// Repetitions of each measurement.
const REPS: usize = 3;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = if args.first().is_some_and(|a| a == CHILD) {
        child(&args[1..])
    } else if args.iter().any(|arg| arg == "--bench") {
        measure(&args)
    } else {
        println!("client_cost: run it with `cargo bench -p lock-bench --bench client_cost`");
        Ok(())
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("client_cost: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Who is measured on which setup, in report order.
const CASES: [(Setup, &str); 8] = [
    (Setup::Single, "project"),
    // The same pair through `#[distributed_lock]`, as the README shows it:
    // what the attribute adds (its loss signal, its reentrancy check).
    (Setup::Single, "project_attribute"),
    // The same pair written by hand with the attribute's defaults: a
    // request that may wait, and so first takes its turn in the locker's
    // line (the `project` row tries once). Between it and the attribute is
    // the attribute's own work.
    (Setup::Single, "project_waiting"),
    (Setup::Single, "raw"),
    // The raw commands with their connection driven on a thread of its
    // own, as the project drives its connections: what is left between
    // it and the project is the project's own work.
    (Setup::Single, "raw_own_thread"),
    (Setup::Single, "rslock"),
    (
        Setup::Redlock {
            masters: REDLOCK_MASTERS,
        },
        "project",
    ),
    (
        Setup::Redlock {
            masters: REDLOCK_MASTERS,
        },
        "rslock",
    ),
];

fn measure(args: &[String]) -> BenchResult<()> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        println!(
            "client_cost: valgrind is not installed; nothing measured (apt-get install valgrind)"
        );
        return Ok(());
    }
    let quick = args.iter().any(|a| a == "--quick");
    let sizes = if quick { Sizes::QUICK } else { Sizes::FULL };
    let single = RedisServer::start();
    let masters: Vec<RedisServer> = (0..REDLOCK_MASTERS)
        .map(|_| server::settled_master())
        .collect();
    let urls_of = |setup: Setup| -> Vec<String> {
        match setup {
            Setup::Single => vec![single.url()],
            Setup::Redlock { .. } => masters.iter().map(RedisServer::url).collect(),
        }
    };
    let mut costs = Vec::with_capacity(CASES.len());
    for (setup, implementation) in CASES {
        let urls = urls_of(setup);
        let mut per_pair = Vec::with_capacity(REPS);
        for _ in 0..REPS {
            let short = (
                sizes.short,
                count(implementation, setup, sizes.short, &urls)?,
            );
            let long = (sizes.long, count(implementation, setup, sizes.long, &urls)?);
            per_pair.push(client_cost::per_pair(short, long)?);
        }
        let cost = Cost {
            setup: setup.name(),
            implementation: implementation.to_owned(),
            per_pair: Stat::of(per_pair),
        };
        eprintln!(
            "  {:<10} {:<8} {:>10.0} instructions per pair (±{:.1}%)",
            cost.setup,
            cost.implementation,
            cost.per_pair.median,
            cost.per_pair.spread() * 100.0
        );
        costs.push(cost);
    }
    publish(&costs, sizes)
}

/// Instructions counted in a child doing `pairs` pairs.
fn count(implementation: &str, setup: Setup, pairs: u64, urls: &[String]) -> BenchResult<u64> {
    let output = Command::new("valgrind")
        .args([
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
        ])
        .arg(std::env::current_exe()?)
        .args([CHILD, implementation, &setup.name(), &pairs.to_string()])
        .args(urls)
        .output()?;
    let report = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "{implementation} on {}: the child failed: {report}",
            setup.name()
        )
        .into());
    }
    client_cost::instructions_in(&report)
        .ok_or_else(|| format!("no instruction count in valgrind's report: {report}").into())
}

/// One measured child: `<implementation> <setup> <pairs> <url>...`.
fn child(args: &[String]) -> BenchResult<()> {
    let [implementation, setup, pairs, urls @ ..] = args else {
        return Err("usage: --client-cost-child <implementation> <setup> <pairs> <url>...".into());
    };
    let pairs: u64 = pairs.parse()?;
    let setup = match setup.as_str() {
        "single" => Setup::Single,
        name if name.starts_with("redlock-") => Setup::Redlock {
            masters: urls.len(),
        },
        other => return Err(format!("unknown setup `{other}`: single or redlock-N").into()),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match implementation.as_str() {
            "project" => {
                let contender = ProjectContender::connect(&setup.project_url(urls), None).await?;
                pairs_of(&contender, pairs).await
            }
            "raw" => {
                pairs_of(
                    &RawContender::connect(&setup.project_url(urls)).await?,
                    pairs,
                )
                .await
            }
            "project_attribute" => {
                let contender = ProjectContender::connect(&setup.project_url(urls), None).await?;
                annotated_calls(contender.locker(), pairs).await
            }
            "project_waiting" => {
                let contender = ProjectContender::connect(&setup.project_url(urls), None).await?;
                waiting_pairs(contender.locker(), pairs).await
            }
            "raw_own_thread" => {
                pairs_of(
                    &RawContender::connect_on_own_thread(&setup.project_url(urls)).await?,
                    pairs,
                )
                .await
            }
            "rslock" => pairs_of(&RslockContender::connect(urls).await?, pairs).await,
            other => Err(format!("unknown implementation `{other}`").into()),
        }
    })
}

/// The warm-up, then `pairs` sequential pairs on fresh keys.
async fn pairs_of<C: Contender>(contender: &C, pairs: u64) -> BenchResult<()> {
    for i in 0..WARMUP_PAIRS + pairs {
        pair(contender, format!("cost:{i}")).await?;
    }
    Ok(())
}

/// The warm-up, then `calls` sequential calls of an annotated function on
/// fresh keys.
async fn annotated_calls(locker: &Locker, calls: u64) -> BenchResult<()> {
    for i in 0..WARMUP_PAIRS + calls {
        annotated(locker, i).await?;
    }
    Ok(())
}

/// The warm-up, then `pairs` sequential pairs of requests that may wait,
/// with the ttl of [`annotated`].
async fn waiting_pairs(locker: &Locker, pairs: u64) -> BenchResult<()> {
    for i in 0..WARMUP_PAIRS + pairs {
        let request = locker.lock(format!("cost:{i}")).ttl(ANNOTATED_TTL);
        request.acquire().await?.release().await?;
    }
    Ok(())
}

/// The ttl the annotated pair's attribute names.
const ANNOTATED_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// The pair of [`pair`], written with the attribute.
#[distributed_lock(key = "cost:<i>", ttl = "10s", locker = locker)]
async fn annotated(locker: &Locker, i: u64) -> Result<(), LockError> {
    std::hint::black_box(i);
    Ok(())
}

fn publish(costs: &[Cost], sizes: Sizes) -> BenchResult<()> {
    let table = client_cost::table(costs);
    println!("\n{table}");
    let dir = lock_bench::output_dir();
    std::fs::create_dir_all(&dir)?;
    let rows: Vec<_> = costs
        .iter()
        .map(|cost| {
            json!({
                "setup": cost.setup,
                "impl": cost.implementation,
                "instructions_per_pair": cost.per_pair.median,
                "min": cost.per_pair.min,
                "max": cost.per_pair.max,
            })
        })
        .collect();
    let document = json!({
        "what": "client instructions per lock+unlock pair (valgrind cachegrind, every thread of the client process, servers excluded)",
        "pairs": { "short": sizes.short, "long": sizes.long, "warm_up": WARMUP_PAIRS },
        "repetitions": REPS,
        "rows": rows,
    });
    let json_path = dir.join("client_cost.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&document)?)?;
    std::fs::write(dir.join("client_cost.md"), &table)?;
    println!("wrote {}", json_path.display());
    Ok(())
}
