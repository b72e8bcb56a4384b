//! d. `macro_overhead`: a `#[distributed_lock]` function against the same
//! body with hand-written `acquire`/`release` calls, on the same kind of
//! locker, one call after the other on distinct keys.

use std::time::{Duration, Instant};

use lock_runtime::{LockError, Locker, distributed_lock};

use super::WARMUP_PAIRS;
use crate::meter::Meter;
use crate::server::Admin;
use crate::{BenchResult, RunResult, Samples};

/// Which of the two versions to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The annotated function.
    Macro,
    /// The same body between hand-written acquire and release calls.
    Handwritten,
}

impl Variant {
    /// The implementation name in the results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Macro => "macro",
            Self::Handwritten => "handwritten",
        }
    }
}

/// The body both versions run: trivial, so that only the locking differs.
fn body(id: u64) -> u64 {
    std::hint::black_box(id).wrapping_mul(2)
}

#[distributed_lock(key = "d:<run>:<id>", ttl = "10s", wait = "1s", locker = locker)]
async fn annotated(locker: &Locker, run: u64, id: u64) -> Result<u64, LockError> {
    Ok(body(id))
}

async fn handwritten(locker: &Locker, run: u64, id: u64) -> Result<u64, LockError> {
    let guard = locker
        .lock(format!("d:{run}:{id}"))
        .ttl(Duration::from_secs(10))
        .wait(Duration::from_secs(1))
        .acquire()
        .await?;
    let output = body(id);
    guard.release().await?;
    Ok(output)
}

/// Calls of each variant metered apart, after the timed ones: enough for
/// CPU per call to settle, few enough to keep the scenario short.
const METERED_CALLS: u64 = 1_000;

/// Runs `calls` calls of each variant, interleaved one by one (in the
/// order macro, handwritten, handwritten, macro, ... so that neither
/// always goes first), at most `limit` long; `run` keeps the keys of
/// different runs apart. Interleaving exposes both to the same moment-to-
/// moment noise, which a 2 % comparison needs. Each variant's ops/s is its
/// calls divided by the time spent in them. Then each variant makes
/// 1,000 more calls alone, metered by `admin`: the server and
/// client CPU and commands per call of each, not of the two together.
pub async fn run(
    locker: &Locker,
    admin: &Admin,
    calls: usize,
    limit: Duration,
    run: u64,
) -> BenchResult<[(Variant, RunResult); 2]> {
    let call = |variant: Variant, id: u64| async move {
        match variant {
            Variant::Macro => annotated(locker, run, id).await,
            Variant::Handwritten => handwritten(locker, run, id).await,
        }
    };
    let warmup = u64::try_from(WARMUP_PAIRS)?;
    for id in 0..warmup {
        call(Variant::Macro, u64::MAX - 2 * id).await?;
        call(Variant::Handwritten, u64::MAX - 2 * id - 1).await?;
    }
    let variants = [Variant::Macro, Variant::Handwritten];
    let mut samples = [Samples::default(), Samples::default()];
    let mut busy = [Duration::ZERO; 2];
    let started = Instant::now();
    for i in 0..u64::try_from(calls)? {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in order {
            let sent = Instant::now();
            call(variants[index], 2 * i + index as u64).await?;
            let took = sent.elapsed();
            samples[index].push(took);
            busy[index] += took;
        }
        if started.elapsed() > limit {
            break;
        }
    }
    let mut results = Vec::with_capacity(2);
    for (index, (variant, mut samples)) in variants.into_iter().zip(samples).enumerate() {
        let rate = samples.len() as f64 / busy[index].as_secs_f64();
        let timed = RunResult::from_samples(rate, &mut samples);
        // Keys apart from the timed calls' (which reach `2 * calls`).
        let first = 2 * u64::try_from(calls)? + METERED_CALLS * index as u64;
        let meter = Meter::start(admin).await?;
        for id in first..first + METERED_CALLS {
            call(variant, id).await?;
        }
        let cost = meter.stop(admin).await?;
        results.push((variant, cost.per_op(METERED_CALLS as f64, timed)));
    }
    let [macro_result, handwritten_result]: [(Variant, RunResult); 2] = results
        .try_into()
        .map_err(|_| "macro_overhead: two variants")?;
    Ok([macro_result, handwritten_result])
}
