//! e. `watchdog_scale`: many locks held at once on a short lease, kept
//! alive by each implementation's own renewal mechanism.
//!
//! Once every lock is taken, the scenario measures, over the hold: renewal
//! commands and renewal rounds (commands sent together, one round trip per
//! connection) per renewal interval (ttl/3, a "tick"), the server's command
//! rate and CPU (from `INFO`), this process's CPU, and the latency of
//! lock+unlock pairs a foreground task does meanwhile. Then it releases
//! every lock and counts those that were lost on the way.
//!
//! `ops_per_s` is how fast the locks were taken (64 tasks at a time), and
//! the percentiles are those of the foreground pairs.

use std::time::Duration;

use tokio::time::Instant;

use super::uncontended::pair;
use crate::meter::Meter;
use crate::server::Admin;
use crate::{BenchResult, Contender, RunResult, Samples};

/// Tasks taking (and releasing) the locks concurrently.
const CONCURRENCY: usize = 64;
/// Pause between two foreground pairs during the hold.
const PROBE_PAUSE: Duration = Duration::from_millis(5);
/// Most foreground pairs in one hold (a bound; the hold's end comes first).
const MAX_PROBES: u32 = 100_000;

/// Sizes of one run.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Locks held at once.
    pub locks: usize,
    /// Their lease.
    pub ttl: Duration,
    /// How long they are held and measured (best a whole number of
    /// renewal intervals, ttl/3).
    pub hold: Duration,
    /// Pooled connections of the contender (1 for one connection).
    pub connections: usize,
}

/// Holds `sizes.locks` locks for `sizes.hold`, measuring as described above.
pub async fn run<C: Contender>(
    contender: &C,
    admin: &Admin,
    sizes: Sizes,
    tag: &str,
) -> BenchResult<RunResult> {
    let taking = Instant::now();
    let held = take_all(contender, sizes, tag).await?;
    let take_rate = sizes.locks as f64 / taking.elapsed().as_secs_f64();

    let renewals_before = contender.renewal_commands();
    let rounds_before = contender.renewal_rounds();
    let meter = Meter::start(admin).await?;
    let started = Instant::now();
    let end = started + sizes.hold;
    let mut samples = Samples::default();
    for i in 0..MAX_PROBES {
        if Instant::now() >= end {
            break;
        }
        let sent = Instant::now();
        pair(contender, format!("e:{tag}:probe:{i}")).await?;
        samples.push(sent.elapsed());
        tokio::time::sleep(PROBE_PAUSE.min(end.saturating_duration_since(Instant::now()))).await;
    }
    let renewals = contender.renewal_commands() - renewals_before;
    let rounds = match (rounds_before, contender.renewal_rounds()) {
        (Some(before), Some(after)) => (after - before) as f64,
        // Each renewal is a round of its own.
        _ => renewals as f64,
    };
    let cost = meter.stop(admin).await?;

    let lost = release_all(contender, held).await?;
    let seconds = cost.elapsed.as_secs_f64();
    let ticks = seconds / (sizes.ttl / 3).as_secs_f64();
    let per_tick = renewals as f64 / ticks;
    Ok(RunResult::from_samples(take_rate, &mut samples)
        .with("locks", sizes.locks as f64)
        .with("renewal_cmds_per_tick", per_tick)
        .with(
            "renewal_cmds_per_conn_tick",
            per_tick / sizes.connections as f64,
        )
        .with("renewal_rounds_per_tick", rounds / ticks)
        .with("redis_cmds_per_s", cost.redis_commands as f64 / seconds)
        .with("redis_scripts_per_s", cost.redis_scripts as f64 / seconds)
        .with("redis_cpu_pct", cost.redis_cpu_s / seconds * 100.0)
        .with("client_cpu_pct", cost.client_cpu_s / seconds * 100.0)
        .with("lost", lost as f64))
}

/// Takes every lock, `CONCURRENCY` at a time.
async fn take_all<C: Contender>(
    contender: &C,
    sizes: Sizes,
    tag: &str,
) -> BenchResult<Vec<Vec<C::Held>>> {
    let mut tasks = Vec::with_capacity(CONCURRENCY);
    for task in 0..CONCURRENCY {
        let contender = contender.clone();
        let keys: Vec<String> = (task..sizes.locks)
            .step_by(CONCURRENCY)
            .map(|i| format!("e:{tag}:{i}"))
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut held = Vec::with_capacity(keys.len());
            for key in keys {
                held.push(contender.hold(key, sizes.ttl).await?);
            }
            Ok::<_, crate::BenchError>(held)
        }));
    }
    let mut all = Vec::with_capacity(CONCURRENCY);
    for task in tasks {
        all.push(task.await??);
    }
    Ok(all)
}

/// Releases every lock, `CONCURRENCY` at a time; the number lost.
async fn release_all<C: Contender>(contender: &C, held: Vec<Vec<C::Held>>) -> BenchResult<usize> {
    let mut tasks = Vec::with_capacity(held.len());
    for locks in held {
        let contender = contender.clone();
        tasks.push(tokio::spawn(async move {
            let mut lost = 0;
            for lock in locks {
                if !contender.release_held(lock).await? {
                    lost += 1;
                }
            }
            Ok::<_, crate::BenchError>(lost)
        }));
    }
    let mut lost = 0;
    for task in tasks {
        lost += task.await??;
    }
    Ok(lost)
}
