//! Measures how often a holder cut off from Redis is told of the loss
//! before its key can expire on the server.
//!
//! ```text
//! loss_timing [--trials N] [--ttl-ms MS] [--block-ms MS]
//! ```
//!
//! Each trial starts from a fresh renewal, cuts the holder's network path
//! (a fault proxy holds every byte back), reads the key's remaining lease
//! from the server itself, and waits for the holder's `lost()` signal. With
//! `--block-ms`, a task of the holder's runtime meanwhile blocks its thread
//! that long (a blocking call by mistake). Run it under
//! `../shared/tools/under-load` to see a starved machine. Prints one line:
//! `loss_timing: trials=.. before_expiry=.. rate=.. margin_ms_min=.. margin_ms_p50=..`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::{FaultProxy, RedisServer};

fn main() {
    let mut trials = 30;
    let mut ttl_ms = 600;
    let mut block_ms = 0;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        match (pair[0].as_str(), value) {
            ("--trials", Some(v)) => trials = v,
            ("--ttl-ms", Some(v)) => ttl_ms = v,
            ("--block-ms", Some(v)) => block_ms = v,
            _ => {
                eprintln!("usage: loss_timing [--trials N] [--ttl-ms MS] [--block-ms MS]");
                std::process::exit(2);
            }
        }
    }
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let ttl = Duration::from_millis(ttl_ms);
    let block = Duration::from_millis(block_ms);
    let mut margins = Vec::new();
    for trial in 0..trials {
        let margin = runtime.block_on(trial_once(&server, trial, ttl, block));
        margins.push(margin);
    }
    let before = margins.iter().filter(|&&m| m > 0.0).count();
    margins.sort_by(f64::total_cmp);
    println!(
        "loss_timing: trials={trials} before_expiry={before} rate={:.3} margin_ms_min={:.1} margin_ms_p50={:.1} (ttl {ttl_ms} ms, blocking {block_ms} ms)",
        before as f64 / trials as f64,
        margins[0],
        margins[margins.len() / 2]
    );
}

/// One trial: milliseconds from the loss signal to the earliest moment the
/// key could expire (negative: told too late).
async fn trial_once(server: &RedisServer, trial: u64, ttl: Duration, block: Duration) -> f64 {
    let proxy = FaultProxy::start(server.port());
    let config = LockConfig::from_url(&proxy.url())
        .expect("a proxy URL")
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500));
    let locker = Locker::connect(config)
        .await
        .expect("connect through the proxy");
    let key = format!("timing:{trial}");
    let guard = locker
        .lock(key.as_str())
        .ttl(ttl)
        .acquire()
        .await
        .expect("acquire");
    // Start right after a renewal, so that none lands between reading the
    // server's lease and the cut (it would move the expiry).
    let renewed = locker.stats().renewed;
    while locker.stats().renewed == renewed {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    proxy.blackhole(true);
    // A lower bound of the expiry: the server read its PTTL (whole ms,
    // rounded down) after this instant.
    let asked_at = Instant::now();
    let pttl = server.int(&["PTTL", &format!("lock:{{{key}}}")]);
    let expires_at = asked_at + Duration::from_millis(u64::try_from(pttl.max(0)).unwrap_or(0));
    if !block.is_zero() {
        tokio::spawn(async move { std::thread::sleep(block) });
    }
    guard.lost().await;
    let told_at = Instant::now();
    proxy.blackhole(false);
    drop(guard);
    if told_at <= expires_at {
        (expires_at - told_at).as_secs_f64() * 1000.0
    } else {
        -((told_at - expires_at).as_secs_f64() * 1000.0)
    }
}
