//! c. `handoff`: how soon a blocked waiter gets a lock once its holder
//! gives it back.
//!
//! Each round takes a fresh key with the *holder*, starts the *waiter*'s
//! `acquire` (a separate client, as if in another process), keeps the lock
//! for `hold` so the waiter is surely blocked, then releases. The gap is
//! measured from just before the holder's release call to the moment the
//! waiter's acquire returns. A round counts only if it was a real handoff:
//! the waiter had been trying for the whole hold, its acquire returned after
//! the release call, the release deleted the holder's lock, and (where the
//! implementation lets us count) the waiter had found the lock busy.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::PAIR_TTL;
use crate::{BenchResult, Contender, RunResult, Samples};

/// Longest a waiter waits (far beyond any hold): a bound, not a setting.
const WAIT: Duration = Duration::from_secs(5);

/// Runs up to `rounds` handoffs from `holder` to `waiter` (at most `limit`
/// long), each after the holder kept the lock for `hold`.
///
/// `ops_per_s` is 1 / mean gap: how many times per second one hot key could
/// change hands if its holders did no work at all.
pub async fn run<C: Contender>(
    holder: &C,
    waiter: &C,
    rounds: usize,
    hold: Duration,
    limit: Duration,
    tag: &str,
) -> BenchResult<RunResult> {
    // One unmeasured round opens whatever the waiter opens lazily (the
    // pub/sub connection of the project).
    round(holder, waiter, hold, format!("c:{tag}:warm")).await?;
    let mut samples = Samples::default();
    let mut rejected = 0u32;
    let started = Instant::now();
    for i in 0..rounds {
        match round(holder, waiter, hold, format!("c:{tag}:{i}")).await? {
            Some(gap) => samples.push(gap),
            None => rejected += 1,
        }
        if started.elapsed() > limit {
            break;
        }
    }
    if samples.is_empty() {
        return Err(format!("handoff: none of {rejected} rounds was a real handoff").into());
    }
    let mean_s = samples.mean_us() / 1e6;
    let mut result = RunResult::from_samples(1.0 / mean_s, &mut samples)
        .with("rounds", samples.len() as f64)
        .with("rejected_rounds", f64::from(rejected));
    result.samples = Some(samples);
    Ok(result)
}

/// One handoff; the gap, or `None` when it was not a real handoff.
async fn round<C: Contender>(
    holder: &C,
    waiter: &C,
    hold: Duration,
    key: String,
) -> BenchResult<Option<Duration>> {
    let guard = holder.lock(key.clone(), PAIR_TTL).await?;
    let (started_tx, started_rx) = oneshot::channel();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            let _ = started_tx.send(Instant::now());
            let acquired = waiter.acquire(key, PAIR_TTL, WAIT).await;
            (Instant::now(), acquired)
        })
    };
    let waiting_since = started_rx.await?;
    tokio::time::sleep_until(waiting_since + hold).await;
    let released_at = Instant::now();
    let deleted = holder.unlock(guard).await?;
    let (acquired_at, acquired) =
        tokio::time::timeout(WAIT + Duration::from_secs(1), waiting).await??;
    let acquired = acquired?;
    let saw_busy = acquired.busy_tries.is_none_or(|busy| busy > 0);
    waiter.unlock(acquired.guard).await?;
    let real =
        deleted && saw_busy && acquired_at >= released_at && released_at - waiting_since >= hold;
    Ok(real.then(|| acquired_at - released_at))
}
