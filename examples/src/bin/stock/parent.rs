//! The parent process: seeds the stock, starts the workers, shows
//! progress, adds up their reports and prints the summary.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_examples::{Backing, Data};
use lock_runtime::Locker;
use tokio::task::JoinSet;

use crate::buyers::{self, Job};
use crate::options::{Cli, Mode};
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
pub async fn run(options: Cli) -> Result<ExitCode, String> {
    // Kept alive to the end: a throwaway server stops when this drops.
    let backing = Backing::choose()?;
    println!("{}", backing.describe());
    let place = backing
        .url()
        .map_or_else(|| "memory".to_owned(), lock_examples::backing::address);
    let text = |e: redis::RedisError| format!("redis at {place}: {e}");
    let data = backing.data().await.map_err(text)?;
    // Unique per run, so that runs against a shared Redis never mix.
    let sku = format!("demo-{}", std::process::id());
    let keys = Keys::new(&sku);
    for (key, value) in [
        (&keys.stock, options.stock),
        (&keys.buyers, 0),
        (&keys.sold, 0),
    ] {
        data.set(key, value).await.map_err(text)?;
    }

    let raced = match backing.url() {
        Some(url) => race(&options, url, &sku, &keys, &data).await,
        None => race_in_process(&options, &backing, &sku, &keys, &data).await,
    };
    let remaining = data.get(&keys.stock).await;
    let cleanup = data.del(&[&keys.stock, &keys.buyers, &keys.sold]).await;
    let (tally, elapsed) = raced?;
    let remaining = remaining.map_err(text)?.unwrap_or(0);
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

/// The race without a server: each "process" is a locker of its own on
/// the one in-memory store, with its buyer tasks, all in this process.
async fn race_in_process(
    options: &Cli,
    backing: &Backing,
    sku: &str,
    keys: &Keys,
    data: &Data,
) -> Result<(Tally, Duration), String> {
    let job = Arc::new(Job {
        mode: options.mode,
        buyers: options.buyers,
        tasks: options.tasks,
        sku: sku.to_owned(),
        keys: keys.clone(),
    });
    let mut groups = JoinSet::new();
    for _ in 0..options.processes {
        let config = backing.lock_config().map_err(|e| e.to_string())?;
        let locker = Locker::connect(config).await.map_err(|e| e.to_string())?;
        groups.spawn(buyers::run(job.clone(), locker, data.clone()));
    }
    let started = Instant::now();
    watch(options, keys, data, started, groups).await
}

/// Starts the workers, lets them race, and adds up their tallies. On any
/// error the workers still running are killed (dropping a [`Worker`]
/// kills its process).
async fn race(
    options: &Cli,
    url: &str,
    sku: &str,
    keys: &Keys,
    data: &Data,
) -> Result<(Tally, Duration), String> {
    let deadline = Instant::now() + options.timeout();
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
    watch(options, keys, data, started, running).await
}

/// Shows progress until every group of buyers is done, and adds up their
/// tallies; past the run's timeout, stops them (dropping the set aborts
/// its tasks, and a worker's process with them).
async fn watch(
    options: &Cli,
    keys: &Keys,
    data: &Data,
    started: Instant,
    mut running: JoinSet<Result<Tally, String>>,
) -> Result<(Tally, Duration), String> {
    let deadline = started + options.timeout();
    let mut progress = Progress::new(options.buyers);
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    let mut total = Tally::default();
    while !running.is_empty() {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(now) = snapshot(data, keys).await {
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
                    options.timeout()
                ));
            }
        }
    }
    let elapsed = started.elapsed();
    progress.finish(snapshot(data, keys).await, elapsed);
    Ok((total, elapsed))
}

/// The counters of the run, or `None` if they could not be read in time
/// (the progress line is not worth stalling the run for).
async fn snapshot(data: &Data, keys: &Keys) -> Option<Snapshot> {
    let read = async {
        let buyers = data.get(&keys.buyers).await?;
        let sold = data.get(&keys.sold).await?;
        let remaining = data.get(&keys.stock).await?;
        Ok::<_, redis::RedisError>((buyers, sold, remaining))
    };
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
