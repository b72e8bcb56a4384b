//! Measures what one frozen Redlock master (of three) costs the callers:
//! pairs (acquire, hold, release) per second before, during and after a
//! `SIGSTOP` of that master, and the longest acquire and release during
//! the freeze.
//!
//! ```text
//! cargo run --release -p lock-tests --bin redlock_freeze -- [--tasks N] [--keys N] [--freeze-ms MS] [--hold-ms MS]
//! ```
//!
//! `--tasks` tasks (default 8) of two lockers take `--keys` keys (default
//! as many as tasks: no contention) in a loop: acquire, hold `--hold-ms`
//! (default 5), release. After 2 s one master is frozen for `--freeze-ms`
//! (default 4500), then 2 s more. Prints one line per phase.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_runtime::Locker;
use lock_tests::RedisServer;
use lock_tests::fixtures::{locker, redlock_url, settled_masters};
use tokio::time::Instant;

/// One pair's timings, and when it ended.
#[derive(Clone, Copy)]
struct Pair {
    ended: Instant,
    acquire: Duration,
    release: Duration,
}

fn main() {
    let (mut tasks, mut keys, mut freeze_ms, mut hold_ms) = (8usize, 0usize, 4500u64, 5u64);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse::<u64>().ok());
        match (pair[0].as_str(), value) {
            ("--tasks", Some(v)) => tasks = v as usize,
            ("--keys", Some(v)) => keys = v as usize,
            ("--freeze-ms", Some(v)) => freeze_ms = v,
            ("--hold-ms", Some(v)) => hold_ms = v,
            _ => {
                eprintln!(
                    "usage: redlock_freeze [--tasks N] [--keys N] [--freeze-ms MS] [--hold-ms MS]"
                );
                std::process::exit(2);
            }
        }
    }
    if keys == 0 {
        keys = tasks;
    }
    let masters = settled_masters(3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(
        &masters,
        tasks,
        keys,
        Duration::from_millis(freeze_ms),
        Duration::from_millis(hold_ms),
    ));
}

async fn run(masters: &[RedisServer], tasks: usize, keys: usize, freeze: Duration, hold: Duration) {
    let url = redlock_url(masters);
    let lockers: Vec<Locker> = vec![locker(&url).await, locker(&url).await];
    let pairs: Arc<Mutex<Vec<Pair>>> = Arc::default();
    let started = Instant::now();
    let phases = [Duration::from_secs(2), freeze, Duration::from_secs(2)];
    let end = started + phases.iter().sum::<Duration>();
    let mut running = Vec::new();
    for task in 0..tasks {
        let locker = lockers[task % 2].clone();
        let pairs = pairs.clone();
        let key = format!("freeze-{}", task % keys);
        running.push(tokio::spawn(async move {
            while Instant::now() < end {
                let at = Instant::now();
                let guard = match locker
                    .lock(key.as_str())
                    .wait(Duration::from_secs(10))
                    .acquire()
                    .await
                {
                    Ok(guard) => guard,
                    Err(err) => {
                        eprintln!("acquire failed: {err}");
                        continue;
                    }
                };
                let acquired = Instant::now();
                tokio::time::sleep(hold).await;
                let releasing = Instant::now();
                if let Err(err) = guard.release().await {
                    eprintln!("release failed: {err}");
                }
                let ended = Instant::now();
                pairs.lock().unwrap().push(Pair {
                    ended,
                    acquire: acquired - at,
                    release: ended - releasing,
                });
            }
        }));
    }
    tokio::time::sleep(phases[0]).await;
    masters[0].pause();
    tokio::time::sleep(phases[1]).await;
    masters[0].resume();
    for task in running {
        task.await.unwrap();
    }
    let pairs = pairs.lock().unwrap().clone();
    let mut from = started;
    for (name, length) in ["before", "frozen", "after"].iter().zip(phases) {
        let to = from + length;
        let inside: Vec<&Pair> = pairs
            .iter()
            .filter(|p| p.ended >= from && p.ended < to)
            .collect();
        let longest =
            |f: fn(&Pair) -> Duration| inside.iter().map(|p| f(p)).max().unwrap_or_default();
        println!(
            "redlock_freeze: phase={name} pairs_per_s={:.0} longest_acquire_ms={} longest_release_ms={}",
            inside.len() as f64 / length.as_secs_f64(),
            longest(|p| p.acquire).as_millis(),
            longest(|p| p.release).as_millis(),
        );
        from = to;
    }
}
