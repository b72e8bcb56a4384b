//! One hot key on three Redlock masters: a few lockers (each stands for a
//! process: its own connections, release listeners and line of tasks),
//! each with a few tasks that take the lock, hold it for a short body and
//! give it back, for a few seconds. Prints grants per second and what each
//! grant cost: commands and scripts per master, and the wake-ups behind
//! it (release messages, timers).
//!
//! ```text
//! cargo run --release -p lock-bench --example redlock_contention
//! cargo run --release -p lock-bench --example redlock_contention -- --lockers 3 --tasks 16 --body-ms 2
//! ```
//!
//! Arguments (all optional): `--lockers N` (default 2), `--tasks N` per
//! locker (8), `--body-ms N` (1), `--secs N` (4). The masters are its own,
//! past their restart quarantine, stopped at the end.

use std::process::ExitCode;
use std::time::Duration;

use lock_bench::BenchResult;
use lock_bench::server::{self, Admin};
use lock_bench::setup::REDLOCK_MASTERS;
use lock_runtime::{LockConfig, Locker, LockerStats};
use lock_servers::RedisServer;
use tokio::time::Instant;

/// The lease: long enough that no body outlives it.
const TTL: Duration = Duration::from_secs(3);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("redlock_contention: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The number after `flag` on the command line, or `default`.
fn number(args: &[String], flag: &str, default: u64) -> BenchResult<u64> {
    match args.iter().position(|a| a == flag) {
        Some(at) => Ok(args
            .get(at + 1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{flag} needs a number"))?),
        None => Ok(default),
    }
}

fn run() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let lockers = number(&args, "--lockers", 2)?;
    let tasks = number(&args, "--tasks", 8)?;
    let body = Duration::from_millis(number(&args, "--body-ms", 1)?);
    let run_for = Duration::from_secs(number(&args, "--secs", 4)?);
    let masters: Vec<RedisServer> = (0..REDLOCK_MASTERS)
        .map(|_| server::settled_master())
        .collect();
    let addresses: Vec<String> = masters
        .iter()
        .map(|m| format!("127.0.0.1:{}", m.port()))
        .collect();
    let url = format!("redis+redlock://{}", addresses.join(","));
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let admin = Admin::connect_all(&urls).await?;
        let mut all = Vec::new();
        for _ in 0..lockers {
            all.push(Locker::connect(LockConfig::from_url(&url)?.default_ttl(TTL)).await?);
        }
        let before = admin.counters().await?;
        let end = Instant::now() + run_for;
        let mut running = Vec::new();
        for locker in &all {
            for _ in 0..tasks {
                let locker = locker.clone();
                running.push(tokio::spawn(async move {
                    let mut grants = 0u64;
                    while Instant::now() < end {
                        let guard = locker.lock("hot").wait(TTL * 4).acquire().await?;
                        tokio::time::sleep(body).await;
                        guard.release().await?;
                        grants += 1;
                    }
                    Ok::<_, lock_runtime::LockError>(grants)
                }));
            }
        }
        let mut grants = 0;
        for task in running {
            grants += task.await??;
        }
        let after = admin.counters().await?;
        let stats: Vec<LockerStats> = all.iter().map(Locker::stats).collect();
        let per_grant = |n: u64| n as f64 / grants.max(1) as f64;
        let per_master_grant = |n: u64| per_grant(n) / REDLOCK_MASTERS as f64;
        println!(
            "{lockers} lockers x {tasks} tasks, body {body:?}: {:.0} grants/s",
            grants as f64 / run_for.as_secs_f64()
        );
        println!(
            "per grant and master: {:.2} commands, {:.2} scripts, {:.2} SET",
            per_master_grant(after.commands - before.commands),
            per_master_grant(after.scripts - before.scripts),
            per_master_grant(after.sets - before.sets),
        );
        println!(
            "per grant: {:.2} release wake-ups, {:.2} timer wake-ups; grants per locker: {:?}",
            per_grant(stats.iter().map(|s| s.release_wakeups).sum()),
            per_grant(stats.iter().map(|s| s.timer_wakeups).sum()),
            stats.iter().map(|s| s.acquired).collect::<Vec<_>>(),
        );
        Ok(())
    })
}
