//! Measures whether callers outside a busy lock's line get in: a caller
//! that tries once every 10 ms, and a waiter far from the server.
//!
//! ```text
//! cargo run --release -p lock-tests --bin starvation -- [--seconds S] [--busy-tasks N] [--distance-ms MS] [--attempts N]
//! ```
//!
//! Prints one line per scenario:
//! - `try_once`: `--busy-tasks` tasks of one locker (default 2) take a key
//!   in a loop (1 ms holds) while another locker tries it once every
//!   10 ms for `--seconds` (default 10); the same again against as many
//!   hand-written `SET NX PX` spinners whose losers sleep 10 ms. The
//!   caller's share of its tries in each, and their ratio.
//! - `distant`: 64 tasks of one locker take the key in a loop while a
//!   waiter of another locker `--distance-ms` (default 40) away from the
//!   server each way (a delaying proxy) asks for it `--attempts` times
//!   (default 6) with a 5 s wait. How many it got, how long each took,
//!   and the line's grants per second before and while it waits.

use std::time::Duration;

use lock_runtime::Locker;
use lock_tests::fixtures::{STALL_PROOF_TTL, locker};
use lock_tests::starvation::{Busy, BusyLoad, Outsider, try_once_every, wait_in_turn};
use lock_tests::{FaultProxy, RedisServer};
use tokio::time::Instant;

const HOLD: Duration = Duration::from_millis(1);
const EVERY: Duration = Duration::from_millis(10);

fn main() {
    let mut seconds = 10;
    let mut busy_tasks = 2;
    let mut distance_ms = 40;
    let mut attempts = 6;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        match (pair[0].as_str(), value) {
            ("--seconds", Some(v)) => seconds = v,
            ("--busy-tasks", Some(v)) => busy_tasks = v as usize,
            ("--distance-ms", Some(v)) => distance_ms = v,
            ("--attempts", Some(v)) => attempts = v,
            _ => {
                eprintln!(
                    "usage: starvation [--seconds S] [--busy-tasks N] [--distance-ms MS] [--attempts N]"
                );
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
    runtime.block_on(async {
        try_once(&server, busy_tasks, Duration::from_secs(seconds)).await;
        distant(&server, Duration::from_millis(distance_ms), attempts).await;
    });
}

async fn try_once(server: &RedisServer, busy_tasks: usize, run: Duration) {
    let tries = run.as_millis() as u64 / EVERY.as_millis() as u64;
    let outsider = locker(&server.url()).await;
    let mut shares = Vec::new();
    let url = server.url();
    for (name, busy) in [
        ("line", Busy::Line(locker(&url).await)),
        (
            "spin_10ms",
            Busy::Spin {
                url: url.clone(),
                pause: EVERY,
            },
        ),
    ] {
        let key = format!("try-once-{name}");
        let load = BusyLoad::start(&busy, &key, busy_tasks, HOLD, STALL_PROOF_TTL);
        load.warmed_up(20, Duration::from_secs(10)).await;
        let before = load.grants();
        // Against spinners, the outsider is a hand-written `SET NX` too:
        // the project's busy try marks a value, which a hand-written
        // release does not expect.
        let who = match busy {
            Busy::Line(_) => Outsider::Locker(&outsider),
            Busy::Spin { .. } => Outsider::Raw(&url),
        };
        let found = try_once_every(who, &key, EVERY, tries, run * 2).await;
        let busy_grants = load.grants() - before;
        load.stop().await;
        println!(
            "try_once: busy={name} tasks={busy_tasks} tried={} acquired={} share={:.3} busy_grants={busy_grants}",
            found.tried,
            found.acquired,
            found.share()
        );
        shares.push(found.share());
    }
    let ratio = if shares[1] > 0.0 {
        shares[0] / shares[1]
    } else {
        f64::NAN
    };
    println!("try_once: share line/spin = {ratio:.2}");
}

async fn distant(server: &RedisServer, one_way: Duration, attempts: u64) {
    let proxy = FaultProxy::start(server.port());
    proxy.set_latency(one_way);
    let busy = locker(&server.url()).await;
    let far: Locker = locker(&proxy.url()).await;
    let key = "distant";
    let load = BusyLoad::start(&Busy::Line(busy), key, 64, HOLD, STALL_PROOF_TTL);
    load.warmed_up(20, Duration::from_secs(10)).await;
    let alone = Duration::from_secs(2);
    let before = load.grants();
    tokio::time::sleep(alone).await;
    let rate_alone = (load.grants() - before) as f64 / alone.as_secs_f64();
    let (before, started) = (load.grants(), Instant::now());
    let (found, took) = wait_in_turn(&far, key, attempts, Duration::from_secs(5)).await;
    let rate_during = (load.grants() - before) as f64 / started.elapsed().as_secs_f64();
    load.stop().await;
    let took_ms: Vec<u128> = took.iter().map(Duration::as_millis).collect();
    println!(
        "distant: one_way_ms={} attempts={} acquired={} took_ms={took_ms:?} line_per_s_alone={rate_alone:.0} line_per_s_during={rate_during:.0}",
        one_way.as_millis(),
        found.tried,
        found.acquired,
    );
}
