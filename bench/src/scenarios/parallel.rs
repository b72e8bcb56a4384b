//! b. `parallel_64`: many tasks, each taking and releasing locks on its own
//! keys as fast as it can for a fixed time; throughput in pairs per second.

use std::time::Duration;

use tokio::time::Instant;

use super::WARMUP_PAIRS;
use super::uncontended::pair;
use crate::meter::Meter;
use crate::server::Admin;
use crate::{BenchResult, Contender, RunResult, Samples};

/// Most pairs one task does in a run, a bound that a run never reaches.
const MAX_PAIRS_PER_TASK: usize = 1_000_000;

/// Runs `tasks` concurrent tasks doing lock+unlock pairs for `duration`,
/// on keys prefixed with `tag`, metering their cost through `admin`.
pub async fn run<C: Contender>(
    contender: &C,
    admin: &Admin,
    tasks: usize,
    duration: Duration,
    tag: &str,
) -> BenchResult<RunResult> {
    for i in 0..WARMUP_PAIRS {
        pair(contender, format!("b:{tag}:warm:{i}")).await?;
    }
    // Every task starts at the same instant, once all are spawned.
    let meter = Meter::start(admin).await?;
    let start = Instant::now() + Duration::from_millis(20);
    let end = start + duration;
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let contender = contender.clone();
        let tag = tag.to_owned();
        handles.push(tokio::spawn(async move {
            tokio::time::sleep_until(start).await;
            let mut samples = Samples::default();
            for i in 0..MAX_PAIRS_PER_TASK {
                let sent = Instant::now();
                if sent >= end {
                    break;
                }
                pair(&contender, format!("b:{tag}:{task}:{i}")).await?;
                samples.push(sent.elapsed());
            }
            Ok::<_, crate::BenchError>((samples, Instant::now()))
        }));
    }
    let mut all = Samples::default();
    let mut finished = start;
    for handle in handles {
        let (samples, done) = handle.await??;
        all.extend(samples);
        finished = finished.max(done);
    }
    let cost = meter.stop(admin).await?;
    let ops = all.len() as f64;
    let rate = ops / (finished - start).as_secs_f64();
    Ok(cost.per_op(ops, RunResult::from_samples(rate, &mut all)))
}
