//! The parent process: seeds the stock, starts the workers, shows
//! progress, adds up their reports and prints the summary.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lock_examples::{DemoRedis, data_connection, forget_demo_lock};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tokio::task::JoinSet;

use crate::options::{Mode, Options};
use crate::progress::{Progress, Snapshot};
use crate::purchase::Keys;
use crate::summary::Summary;
use crate::tally::Tally;
use crate::worker::{Assignment, Worker};

/// Longest a worker may take to connect and say it is ready.
const READY_LIMIT: Duration = Duration::from_secs(15);
/// How often the progress line is refreshed.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// Longest one progress read may take; a slow one is skipped.
const PROGRESS_READ_LIMIT: Duration = Duration::from_millis(500);

/// Runs the demo; `Ok` carries the exit code (non-zero if the lock oversold).
pub async fn run(args: Vec<String>) -> Result<ExitCode, String> {
    let options = Options::parse(args)?;
    // Kept alive to the end: a throwaway server stops when this drops.
    let server = DemoRedis::find_or_start()?;
    // The address, not the URL: a URL may carry a password.
    let address = server.address();
    let text = |e: redis::RedisError| format!("redis at {address}: {e}");
    let mut redis = data_connection(server.url()).await.map_err(text)?;
    // Unique per run, so that runs against a shared Redis never mix.
    let sku = format!("demo-{}", std::process::id());
    let keys = Keys::new(&sku);
    let () = redis::pipe()
        .set(&keys.stock, options.stock)
        .set(&keys.buyers, 0)
        .set(&keys.sold, 0)
        .query_async(&mut redis)
        .await
        .map_err(text)?;

    let raced = race(&options, server.url(), &sku, &keys, &mut redis).await;
    let remaining: Result<u64, _> = redis.get(&keys.stock).await;
    let mut cleanup: Result<(), _> = redis.del(&[&keys.stock, &keys.buyers, &keys.sold]).await;
    if cleanup.is_ok() {
        cleanup = forget_demo_lock(&mut redis, &format!("stock:{sku}")).await;
    }
    let (tally, elapsed) = raced?;
    let remaining = remaining.map_err(text)?;
    cleanup.map_err(text)?;

    let summary = Summary {
        options,
        tally,
        remaining,
        elapsed,
    };
    print!("{summary}");
    let correct = summary.is_correct();
    Ok(match summary.options.mode {
        Mode::Lock if !correct => {
            eprintln!("stock: the lock failed to prevent an oversell or a lost write");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    })
}

/// Starts the workers, lets them race, and adds up their tallies. On any
/// error the workers still running are killed (dropping a [`Worker`]
/// kills its process).
async fn race(
    options: &Options,
    url: &str,
    sku: &str,
    keys: &Keys,
    redis: &mut MultiplexedConnection,
) -> Result<(Tally, Duration), String> {
    let deadline = Instant::now() + options.timeout;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let assignment = Assignment {
        url,
        sku,
        mode: options.mode.name(),
        buyers: options.buyers,
        tasks: options.tasks,
    };
    let mut workers = Vec::new();
    for index in 0..options.processes {
        workers.push(Worker::spawn(&exe, index, &assignment)?);
    }
    // Everyone connected before anyone buys: the race starts at one moment.
    let ready_by = deadline.min(Instant::now() + READY_LIMIT);
    for worker in &mut workers {
        tokio::time::timeout_at(ready_by.into(), worker.ready())
            .await
            .map_err(|_| format!("workers not ready within {READY_LIMIT:?}"))??;
    }
    for worker in &mut workers {
        worker.go().await?;
    }
    let started = Instant::now();
    let mut running = JoinSet::new();
    for worker in workers {
        running.spawn(worker.finish());
    }

    let mut progress = Progress::new(options.buyers);
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    let mut total = Tally::default();
    while !running.is_empty() {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(now) = snapshot(redis, keys).await {
                    progress.show(now, started.elapsed());
                }
            }
            Some(done) = running.join_next() => {
                total += done.map_err(|e| e.to_string())??;
            }
            () = tokio::time::sleep_until(deadline.into()) => {
                progress.finish(None, started.elapsed());
                return Err(format!(
                    "the run took longer than {:?} (--timeout); workers stopped",
                    options.timeout
                ));
            }
        }
    }
    let elapsed = started.elapsed();
    progress.finish(snapshot(redis, keys).await, elapsed);
    Ok((total, elapsed))
}

/// The counters of the run, or `None` if Redis did not answer in time
/// (the progress line is not worth stalling the run for).
async fn snapshot(redis: &mut MultiplexedConnection, keys: &Keys) -> Option<Snapshot> {
    let mut mget = redis::cmd("MGET");
    mget.arg(&keys.buyers).arg(&keys.sold).arg(&keys.stock);
    let read = mget.query_async::<(Option<u64>, Option<u64>, Option<u64>)>(redis);
    let (buyers, sold, remaining) = tokio::time::timeout(PROGRESS_READ_LIMIT, read)
        .await
        .ok()?
        .ok()?;
    Some(Snapshot {
        buyers: buyers.unwrap_or(0),
        sold: sold.unwrap_or(0),
        remaining: remaining.unwrap_or(0),
    })
}
