//! One implementation, 64 tasks of lock + unlock pairs for a few seconds,
//! nothing else in the process: the `parallel_64` load in a form a
//! profiler can watch (the benchmark interleaves every implementation in
//! one process, so their threads would mix in a profile).
//!
//! ```text
//! cargo build --release -p lock-bench --example probe
//! target/release/examples/probe project --redlock --pinned
//! perf stat -e task-clock,context-switches -- target/release/examples/probe project --pinned
//! perf sched record -- target/release/examples/probe raw_own_thread --pinned
//! ```
//!
//! Arguments: the implementation (`project`, `raw`, `raw_own_thread`,
//! `rslock`), then any of `--redlock` (three masters; `project` and
//! `rslock` only), `--pinned` (servers on the last core, this process on
//! the others, as `--pinned` in the benchmark) and `--secs N` (default 4).
//! Prints pairs per second, and what each kind of thread of the client
//! did per pair: its CPU time, how often it parked (gave up the core to
//! wait) and how often another thread preempted it. The servers are its
//! own, stopped at the end.

#[path = "../benches/locks/rslock_contender.rs"]
mod rslock_contender;

use std::process::ExitCode;
use std::time::Duration;

use lock_bench::pinning::{self, Cores};
use lock_bench::project::ProjectContender;
use lock_bench::raw::RawContender;
use lock_bench::scenarios::uncontended::pair;
use lock_bench::setup::REDLOCK_MASTERS;
use lock_bench::{BenchResult, Contender, cpu, server};
use lock_servers::RedisServer;
use rslock_contender::RslockContender;
use tokio::time::Instant;

/// As many tasks as `parallel_64`.
const TASKS: usize = 64;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("probe: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let implementation = args.first().cloned().unwrap_or_default();
    let redlock = args.iter().any(|a| a == "--redlock");
    let seconds = match args.iter().position(|a| a == "--secs") {
        Some(at) => args
            .get(at + 1)
            .and_then(|s| s.parse().ok())
            .ok_or("--secs needs a number of seconds")?,
        None => 4,
    };
    let cores = if args.iter().any(|a| a == "--pinned") {
        let cores = Cores::of_this_machine()?;
        pinning::pin(std::process::id(), &cores.client)?;
        Some(cores)
    } else {
        None
    };
    let servers: Vec<RedisServer> = if redlock {
        (0..REDLOCK_MASTERS)
            .map(|_| server::settled_master())
            .collect()
    } else {
        vec![RedisServer::start()]
    };
    if let Some(cores) = &cores {
        for pid in servers.iter().filter_map(RedisServer::pid) {
            pinning::pin(pid, &cores.server)?;
        }
    }
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let duration = Duration::from_secs(seconds);
    let window = runtime.block_on(async {
        match (implementation.as_str(), redlock) {
            ("project", false) => drive(ProjectContender::connect(&urls[0], None).await?, duration).await,
            ("project", true) => {
                let addresses: Vec<String> = servers.iter().map(|s| format!("127.0.0.1:{}", s.port())).collect();
                let url = format!("redis+redlock://{}", addresses.join(","));
                drive(ProjectContender::connect(&url, None).await?, duration).await
            }
            ("raw", false) => drive(RawContender::connect(&urls[0]).await?, duration).await,
            ("raw_own_thread", false) => {
                drive(RawContender::connect_on_own_thread(&urls[0]).await?, duration).await
            }
            ("rslock", true) => drive(RslockContender::connect(&urls).await?, duration).await,
            ("rslock", false) => drive(RslockContender::connect(&urls[..1]).await?, duration).await,
            (other, _) => Err(format!(
                "unknown implementation `{other}` (project, raw, raw_own_thread, rslock; raw ones without --redlock)"
            )
            .into()),
        }
    })?;
    println!(
        "{implementation}: {:.0} pairs/s",
        window.pairs as f64 / window.duration.as_secs_f64()
    );
    window.print_threads();
    Ok(())
}

/// What one run measured: its pairs, and its threads' work meanwhile.
struct Window {
    pairs: u64,
    duration: Duration,
    threads: Vec<cpu::ThreadsUsage>,
}

impl Window {
    /// Per pair, each kind of thread's CPU time and context switches.
    fn print_threads(&self) {
        let per_pair = |count: f64| count / self.pairs.max(1) as f64;
        println!(
            "{:<18} {:>12} {:>12} {:>16}",
            "threads", "CPU µs/pair", "parked/pair", "preempted/pair"
        );
        // The main thread only waits in `block_on`: under a millisecond.
        for usage in self
            .threads
            .iter()
            .filter(|u| u.run >= Duration::from_millis(1))
        {
            println!(
                "{:<18} {:>12.2} {:>12.3} {:>16.3}",
                usage.name,
                per_pair(usage.run.as_secs_f64() * 1e6),
                per_pair(usage.voluntary as f64),
                per_pair(usage.involuntary as f64),
            );
        }
    }
}

/// Warms up, then runs [`TASKS`] tasks of pairs on keys of their own for
/// `duration`; the pairs, and what the threads did meanwhile.
async fn drive<C: Contender>(contender: C, duration: Duration) -> BenchResult<Window> {
    for i in 0..200 {
        pair(&contender, format!("probe:warm:{i}")).await?;
    }
    let before = cpu::threads_usage();
    let end = Instant::now() + duration;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let contender = contender.clone();
            tokio::spawn(async move {
                let mut pairs = 0u64;
                while Instant::now() < end {
                    pair(&contender, format!("probe:{task}:{pairs}")).await?;
                    pairs += 1;
                }
                Ok::<_, lock_bench::BenchError>(pairs)
            })
        })
        .collect();
    let mut pairs = 0;
    for task in tasks {
        pairs += task.await??;
    }
    let threads = cpu::usage_between(&before, &cpu::threads_usage());
    Ok(Window {
        pairs,
        duration,
        threads,
    })
}
