//! The flash sale: `cargo bench -p lock-bench --bench hot_key` (add
//! `-- --quick` for a short run).
//!
//! Buyers in two worker processes (copies of this binary) deduct the
//! stock of one SKU on a private `redis-server`: read it, take a 1 ms
//! payment, write it back, as many times as they can for a few seconds.
//! Five ways of keeping two deductions apart, side by side, at 8, 64 and
//! 256 buyers (`hot_key/8`, ...): this project's attribute and its fair
//! lock, rslock, the `SET NX` spin loop people write by hand, and
//! optimistic `WATCH`/`MULTI` with no lock at all. Prints a table and the
//! targets, and writes `target/bench/hot_key.json`. See
//! `lock_bench::hot_key`.
//!
//! The payment is a 1 ms `tokio::time::sleep`, which tokio's timer ends
//! on a tick, so how long it lasts depends on the runtime (see
//! `lock_bench::hot_key::Work`); `-- --thread-sleep-work` takes it as a
//! `std::thread::sleep` instead, which lasts 1 ms plus the kernel's slack
//! whatever the runtime does, and writes `hot_key-thread_sleep.json`.
//!
//! Each buyer asks again as its deduction ends (a closed loop); with
//! `-- --paused-buyers` it pauses up to about one deduction first (see
//! `lock_bench::hot_key::Arrivals`), and the file's name ends in
//! `-paused`.

mod worker;

use std::process::{ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_bench::hot_key::{
    Arrivals, INITIAL_STOCK, PROCESSES, Row, SIZES, STOCK_KEY, WORK, Way, Work, WorkerArgs,
    WorkerReport, cost, verdict,
};
use lock_bench::project::ProjectContender;
use lock_bench::scenarios::handoff;
use lock_bench::server::Admin;
use lock_bench::{BenchResult, Samples};
use lock_servers::RedisServer;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = if args.first().is_some_and(|a| a == "--hot-key-worker") {
        worker::main(&args[1..])
    } else if args.iter().any(|arg| arg == "--bench") {
        drive(&args)
    } else {
        println!("hot_key: run it with `cargo bench -p lock-bench --bench hot_key`");
        Ok(())
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("hot_key: {err}");
            ExitCode::FAILURE
        }
    }
}

/// How long each run lasts, how many runs of each row, and what the
/// buyers do.
struct Sizes {
    run_for: Duration,
    reps: usize,
    work: Work,
    arrivals: Arrivals,
}

fn drive(args: &[String]) -> BenchResult<()> {
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("LOCK_BENCH_QUICK").is_ok_and(|v| v == "1");
    let work = if args.iter().any(|a| a == "--thread-sleep-work") {
        Work::ThreadSleep
    } else {
        Work::TokioSleep
    };
    let arrivals = if args.iter().any(|a| a == "--paused-buyers") {
        Arrivals::Paused
    } else {
        Arrivals::BackToBack
    };
    let sizes = if quick {
        Sizes {
            run_for: Duration::from_secs(2),
            reps: 1,
            work,
            arrivals,
        }
    } else {
        Sizes {
            run_for: Duration::from_secs(5),
            reps: 3,
            work,
            arrivals,
        }
    };
    // Started from the main thread: a server dies with the thread that spawned it.
    let server = RedisServer::start_with(&["--maxclients", "4096"]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (rows, bound) = runtime.block_on(measure(&server.url(), &sizes))?;
    print(&rows, bound);
    write_json(&rows, bound, quick, &sizes)
}

async fn measure(url: &str, sizes: &Sizes) -> BenchResult<(Vec<Row>, f64)> {
    let admin = Admin::connect(url).await?;
    let mut rows: Vec<Row> = Vec::new();
    let mut bodies = Vec::new();
    for buyers in SIZES {
        for rep in 0..sizes.reps {
            // The order of the ways rotates, so none always runs first.
            for step in 0..Way::ALL.len() {
                let way = Way::ALL[(step + rep) % Way::ALL.len()];
                eprintln!("hot_key/{buyers}: {} (run {})", way.name(), rep + 1);
                let row = run(&admin, url, way, buyers, sizes).await?;
                if way == Way::Project {
                    bodies.push(row.body_us);
                }
                rows.push(row);
            }
        }
    }
    let rows = medians(rows);
    // The bound: one deduction's own time, then one handoff to the next
    // buyer, back to back. Handoff: a waiter woken by the release.
    let handoff_us = idle_handoff_us(url).await?;
    bodies.sort_by(f64::total_cmp);
    let body_us = bodies.get(bodies.len() / 2).copied().unwrap_or(f64::NAN);
    let bound = 1e6 / (body_us + handoff_us);
    eprintln!("hot_key: body {body_us:.0} µs + handoff {handoff_us:.0} µs: bound {bound:.0} ops/s");
    Ok((rows, bound))
}

/// One run: two workers, `buyers` between them, for `sizes.run_for`.
async fn run(admin: &Admin, url: &str, way: Way, buyers: usize, sizes: &Sizes) -> BenchResult<Row> {
    let run_for = sizes.run_for;
    admin.flush().await?;
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    redis::cmd("SET")
        .arg(STOCK_KEY)
        .arg(INITIAL_STOCK)
        .query_async::<()>(&mut conn)
        .await?;
    let now_ms = u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
    // Room for the workers to start and connect before the clock starts.
    let start_at_ms = now_ms + 2_000;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for _ in 0..PROCESSES {
        let args = WorkerArgs {
            way,
            work: sizes.work,
            arrivals: sizes.arrivals,
            url: url.to_owned(),
            tasks: buyers / PROCESSES,
            start_at_ms,
            run_for,
        };
        children.push(
            tokio::process::Command::new(&exe)
                .args(args.to_args())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()?,
        );
    }
    // Counters from just before the start: the workers' connects fall
    // before it.
    let wait_for_start = start_at_ms.saturating_sub(now_ms) - 200;
    tokio::time::sleep(Duration::from_millis(wait_for_start)).await;
    let before = admin.counters().await?;
    let mut total = WorkerReport::default();
    for (worker, child) in children.iter_mut().enumerate() {
        let stdout = child.stdout.take().ok_or("a worker without stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let limit = run_for + Duration::from_secs(60);
        let report = tokio::time::timeout(limit, async {
            while let Some(line) = lines.next_line().await? {
                if line.starts_with("hot_key_report ") {
                    return WorkerReport::parse(&line);
                }
            }
            Err::<WorkerReport, lock_bench::BenchError>("a worker ended without a report".into())
        })
        .await
        .map_err(|_| "a worker did not report in time")??;
        let mut report = report;
        report.set_worker(worker);
        total.merge(report);
    }
    for mut child in children {
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("a {} worker failed: {status}", way.name()).into());
        }
    }
    // The server's work is read once the workers ended, over the same span
    // as the deductions written: buyers still in line at the deadline
    // finish theirs, and their commands count with them (per deduction).
    let after = admin.counters().await?;
    let stock_left: u64 = redis::cmd("GET")
        .arg(STOCK_KEY)
        .query_async(&mut conn)
        .await?;
    Ok(Row::new(
        buyers,
        way,
        &total,
        &cost(&before, &after),
        run_for,
        stock_left,
    ))
}

/// The median row of each (size, way) by throughput.
fn medians(rows: Vec<Row>) -> Vec<Row> {
    let mut out = Vec::new();
    for buyers in SIZES {
        for way in Way::ALL {
            let mut same: Vec<Row> = rows
                .iter()
                .filter(|r| r.buyers == buyers && r.way == way)
                .cloned()
                .collect();
            same.sort_by(|a, b| a.ops_per_s.total_cmp(&b.ops_per_s));
            let worst_oversold = same.iter().map(|r| r.oversold).max_by_key(|o| o.abs());
            if let Some(mut median) = same.get(same.len() / 2).cloned() {
                // Safety is judged on the worst run, not the median.
                median.oversold = worst_oversold.unwrap_or(0);
                out.push(median);
            }
        }
    }
    out
}

/// The median gap, in µs, from a holder's release to a blocked waiter's
/// grant (two lockers: two processes, as far as the lock can tell).
async fn idle_handoff_us(url: &str) -> BenchResult<f64> {
    let holder = ProjectContender::connect(url, None).await?;
    let waiter = ProjectContender::connect(url, None).await?;
    let result = handoff::run(
        &holder,
        &waiter,
        30,
        WORK * 2,
        Duration::from_secs(5),
        "hot-key-bound",
    )
    .await?;
    let mut samples: Samples = result.samples.ok_or("handoff: no samples")?;
    Ok(samples.quantile_us(0.5))
}

fn print(rows: &[Row], bound: f64) {
    println!(
        "\n| scenario | impl | ops/s | of bound | wait p50 µs | wait p99 µs | max wait ms | redis cmds/op | redis CPU µs/op | attempts/op | oversold | body µs (of it the 1 ms work; the read) | gap µs: mean; within / across (share across) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let us = |median: Option<f64>| median.map_or("–".to_owned(), |us| format!("{us:.0}"));
        let gaps = row.gaps.map_or("–".to_owned(), |g| {
            format!(
                "{:.0}; {} / {} ({:.0}%)",
                g.mean_us,
                us(g.within_p50_us),
                us(g.across_p50_us),
                g.across_share * 100.0
            )
        });
        println!(
            "| hot_key/{} | {} | {:.0} | {:.2} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.2} | {} | {:.0} ({:.0}; {:.0}) | {gaps} |",
            row.buyers,
            row.way.name(),
            row.ops_per_s,
            row.ops_per_s / bound,
            row.wait_p50_us,
            row.wait_p99_us,
            row.wait_max_us / 1e3,
            row.redis_cmds_per_op,
            row.redis_cpu_us_per_op,
            row.attempts_per_op,
            row.oversold,
            row.body_us,
            row.work_us,
            row.read_us,
        );
    }
    println!("\nbound: {bound:.0} deductions/s (one deduction's own time plus one idle handoff)\n");
    println!("| target | measured | goal | met |");
    println!("|---|---:|---|---|");
    for (what, measured, goal, met) in verdict(rows, bound) {
        println!(
            "| {what} | {measured} | {goal} | {} |",
            if met { "yes" } else { "**no**" }
        );
    }
}

fn write_json(rows: &[Row], bound: f64, quick: bool, sizes: &Sizes) -> BenchResult<()> {
    let dir = lock_bench::output_dir();
    std::fs::create_dir_all(&dir)?;
    let verdict: Vec<_> = verdict(rows, bound)
        .into_iter()
        .map(|(what, measured, goal, met)| {
            json!({ "target": what, "measured": measured, "goal": goal, "met": met })
        })
        .collect();
    let document = json!({
        "mode": if quick { "quick" } else { "full" },
        "work": sizes.work.name(),
        "arrivals": sizes.arrivals.name(),
        "bound_ops_per_s": bound,
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "verdict": verdict,
    });
    let work = match sizes.work {
        Work::TokioSleep => String::new(),
        other => format!("-{}", other.name()),
    };
    let arrivals = match sizes.arrivals {
        Arrivals::BackToBack => "",
        Arrivals::Paused => "-paused",
    };
    let path = dir.join(format!("hot_key{work}{arrivals}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&document)?)?;
    eprintln!("hot_key: wrote {}", path.display());
    Ok(())
}
