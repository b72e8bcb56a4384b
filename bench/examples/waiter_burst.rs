//! Many keys busy at once, one waiter on each (a sale over many items, a
//! batch job's shards): how soon every waiter gets its key once all of
//! them are given back together, and what the waiting cost the server.
//!
//! ```text
//! cargo run --release -p lock-bench --example waiter_burst
//! cargo run --release -p lock-bench --example waiter_burst -- --keys 100,2000 --reps 5 --ways project,rslock
//! ```
//!
//! For each way (the project's locker, the raw `SET NX` loop polling every
//! millisecond, rslock's `acquire`) and each number of keys: a holder
//! client takes every key, a second client starts one waiter per key, and
//! once they have all been waiting for a while the holder releases every
//! key at once. Each waiter's latency runs from the start of the releases
//! to its grant. Prints a table (median run of `--reps`, 3 by default) and
//! writes `target/bench/waiter_burst.json`. On the project's row, `listen`
//! is the time from the first waiter's start until every waiter listened
//! for its release (subscribed, tried again, asleep).

#[path = "../benches/locks/rslock_contender.rs"]
mod rslock_contender;

use std::process::ExitCode;
use std::time::Duration;

use lock_bench::project::ProjectContender;
use lock_bench::raw::RawContender;
use lock_bench::server::{Admin, ServerCounters};
use lock_bench::{BenchResult, Contender, Samples};
use lock_servers::RedisServer;
use rslock_contender::RslockContender;
use serde_json::json;
use tokio::time::Instant;

/// The ways compared, in the order of the table.
const WAYS: [&str; 3] = ["project", "raw_poll_1ms", "rslock"];

/// Leases: far longer than a run, so no key frees itself.
const TTL: Duration = Duration::from_secs(60);
/// Longest a waiter waits (a bound, never reached).
const WAIT: Duration = Duration::from_secs(60);
/// How long the waiters wait before the releases, beyond what the project
/// needs to have them all listening: every way's waiters are then in
/// their steady waiting (the pollers polling, rslock in its sleeps).
const SETTLE: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("waiter_burst: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The value after `flag` on the command line, or `default`.
fn arg(args: &[String], flag: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == flag)
        .and_then(|at| args.get(at + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

fn run() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let keys: Vec<usize> = arg(&args, "--keys", "100,1000")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let reps: usize = arg(&args, "--reps", "3").parse()?;
    let ways: Vec<String> = arg(&args, "--ways", &WAYS.join(","))
        .split(',')
        .map(str::to_owned)
        .collect();
    if let Some(unknown) = ways.iter().find(|way| !WAYS.contains(&way.as_str())) {
        return Err(format!("unknown way `{unknown}` (ways: {})", WAYS.join(", ")).into());
    }
    // Started from the main thread: a server dies with the thread that spawned it.
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rows = runtime.block_on(measure(&server.url(), &keys, &ways, reps.max(1)))?;
    println!(
        "\n| keys | way | p50 ms | p99 ms | max ms | listen ms | redis cmds / waiter | redis CPU µs / waiter |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let listen = row
            .listen_ms
            .map_or("–".to_owned(), |ms| format!("{ms:.0}"));
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {listen} | {:.1} | {:.0} |",
            row.keys,
            row.way,
            row.p50_ms,
            row.p99_ms,
            row.max_ms,
            row.commands_per_waiter,
            row.cpu_us_per_waiter
        );
    }
    let dir = lock_bench::output_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("waiter_burst.json");
    let rows: Vec<_> = rows.iter().map(Row::to_json).collect();
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "rows": rows }))?,
    )?;
    eprintln!("waiter_burst: wrote {}", path.display());
    Ok(())
}

/// One run's outcome for one way and number of keys.
#[derive(Clone, Debug)]
struct Row {
    keys: usize,
    way: &'static str,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// The project only: until every waiter listened.
    listen_ms: Option<f64>,
    /// Commands the server ran from the waiters' start to the last grant
    /// (their tries, listening, and 0.5 s more of waiting; the releases
    /// and the grants), per waiter.
    commands_per_waiter: f64,
    cpu_us_per_waiter: f64,
}

impl Row {
    fn to_json(&self) -> serde_json::Value {
        json!({
            "keys": self.keys,
            "way": self.way,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
            "listen_ms": self.listen_ms,
            "redis_cmds_per_waiter": self.commands_per_waiter,
            "redis_cpu_us_per_waiter": self.cpu_us_per_waiter,
        })
    }
}

async fn measure(
    url: &str,
    sizes: &[usize],
    ways: &[String],
    reps: usize,
) -> BenchResult<Vec<Row>> {
    let admin = Admin::connect(url).await?;
    let mut rows = Vec::new();
    for &keys in sizes {
        let mut runs: Vec<Vec<Row>> = vec![Vec::new(); 3];
        for rep in 0..reps {
            // The order rotates, so no way always runs first.
            for step in 0..3 {
                let way = (step + rep) % 3;
                if !ways.iter().any(|name| name == WAYS[way]) {
                    continue;
                }
                admin.flush().await?;
                let row = match way {
                    0 => {
                        let holder = ProjectContender::connect(url, None).await?;
                        let waiter = ProjectContender::connect(url, None).await?;
                        let asleep = {
                            let waiter = waiter.clone();
                            move || waiter.locker().stats().asleep
                        };
                        burst(WAYS[0], &admin, &holder, &waiter, keys, Some(&asleep)).await?
                    }
                    1 => {
                        let (holder, waiter) = (
                            RawContender::connect(url).await?,
                            RawContender::connect(url).await?,
                        );
                        burst(WAYS[1], &admin, &holder, &waiter, keys, None).await?
                    }
                    _ => {
                        let urls = [url.to_owned()];
                        let holder = RslockContender::connect(&urls).await?;
                        let waiter = RslockContender::connect(&urls).await?;
                        burst(WAYS[2], &admin, &holder, &waiter, keys, None).await?
                    }
                };
                eprintln!(
                    "waiter_burst: {keys} keys, {}: max {:.1} ms",
                    row.way, row.max_ms
                );
                runs[way].push(row);
            }
        }
        for mut same in runs {
            same.sort_by(|a, b| a.max_ms.total_cmp(&b.max_ms));
            if let Some(median) = same.get(same.len() / 2) {
                rows.push(median.clone());
            }
        }
    }
    Ok(rows)
}

/// One burst: `keys` keys held by `holder`, a waiter of `waiter` on each,
/// all released at once. `asleep` counts the waiters listening (the
/// project), to wait for them all instead of guessing.
async fn burst<C: Contender>(
    way: &'static str,
    admin: &Admin,
    holder: &C,
    waiter: &C,
    keys: usize,
    asleep: Option<&(dyn Fn() -> u64 + Sync)>,
) -> BenchResult<Row> {
    let names: Vec<String> = (0..keys).map(|n| format!("burst:{n}")).collect();
    let mut guards = Vec::with_capacity(keys);
    for name in &names {
        guards.push(holder.lock(name.clone(), TTL).await?);
    }
    let before = admin.counters().await?;
    let started = Instant::now();
    let waiters: Vec<_> = names
        .iter()
        .map(|name| {
            let (waiter, name) = (waiter.clone(), name.clone());
            tokio::spawn(async move {
                let acquired = waiter.acquire(name, TTL, WAIT).await?;
                let at = Instant::now();
                waiter.unlock(acquired.guard).await?;
                BenchResult::Ok(at)
            })
        })
        .collect();
    let mut listen_ms = None;
    if let Some(asleep) = asleep {
        let deadline = started + WAIT;
        while asleep() < keys as u64 {
            if Instant::now() > deadline {
                return Err(format!("{way}: the waiters never all listened").into());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        listen_ms = Some(started.elapsed().as_secs_f64() * 1e3);
    }
    tokio::time::sleep(SETTLE).await;
    let released = Instant::now();
    let releases: Vec<_> = guards
        .into_iter()
        .map(|guard| {
            let holder = holder.clone();
            tokio::spawn(async move { holder.unlock(guard).await })
        })
        .collect();
    for deleted in releases {
        if !deleted.await?? {
            return Err(format!("{way}: a key was no longer the holder's").into());
        }
    }
    let mut samples = Samples::default();
    for waiter in waiters {
        let at = waiter.await??;
        samples.push(at.saturating_duration_since(released));
    }
    let cost = cost(&before, &admin.counters().await?, keys);
    Ok(Row {
        keys,
        way,
        p50_ms: samples.quantile_us(0.5) / 1e3,
        p99_ms: samples.quantile_us(0.99) / 1e3,
        max_ms: samples.quantile_us(1.0) / 1e3,
        listen_ms,
        commands_per_waiter: cost.0,
        cpu_us_per_waiter: cost.1,
    })
}

/// Server commands and CPU µs per waiter between two readings.
fn cost(before: &ServerCounters, after: &ServerCounters, waiters: usize) -> (f64, f64) {
    let per = |total: f64| total / waiters.max(1) as f64;
    (
        per(after.commands.saturating_sub(before.commands) as f64),
        per((after.cpu_s - before.cpu_s) * 1e6),
    )
}
