//! a. `uncontended_pair`: one task takes and releases locks on distinct
//! keys, one after the other. The latency of one pair is two round trips
//! plus whatever the client adds.

use std::time::{Duration, Instant};

use super::{PAIR_TTL, WARMUP_PAIRS};
use crate::meter::Meter;
use crate::server::Admin;
use crate::{BenchResult, Contender, RunResult, Samples};

/// Runs `pairs` sequential lock+unlock pairs (at most `limit` long) on
/// keys prefixed with `tag`, metering their cost through `admin`.
pub async fn run<C: Contender>(
    contender: &C,
    admin: &Admin,
    pairs: usize,
    limit: Duration,
    tag: &str,
) -> BenchResult<RunResult> {
    for i in 0..WARMUP_PAIRS {
        pair(contender, format!("a:{tag}:warm:{i}")).await?;
    }
    let mut samples = Samples::default();
    let meter = Meter::start(admin).await?;
    let started = Instant::now();
    for i in 0..pairs {
        let key = format!("a:{tag}:{i}");
        let sent = Instant::now();
        pair(contender, key).await?;
        samples.push(sent.elapsed());
        if started.elapsed() > limit {
            break;
        }
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    let cost = meter.stop(admin).await?;
    let ops = samples.len() as f64;
    Ok(cost.per_op(ops, RunResult::from_samples(rate, &mut samples)))
}

/// Takes and releases one free lock.
pub async fn pair<C: Contender>(contender: &C, key: String) -> BenchResult<()> {
    let guard = contender.lock(key, PAIR_TTL).await?;
    contender.unlock(guard).await?;
    Ok(())
}
