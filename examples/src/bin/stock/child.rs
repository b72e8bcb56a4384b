//! A worker process: `stock --child <i> --sku <sku> --mode <m> --buyers <n>
//! --tasks <n>` with the Redis URL in `REDIS_URL`, started by the parent,
//! never by hand.
//!
//! It connects, prints `ready`, waits for `go` on stdin (so that every
//! process starts racing at the same moment), runs its buyer tasks until
//! the shared budget of buyers is spent, and prints its [`Tally`] line.

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lock_examples::{Flags, data_connection};
use lock_runtime::{LockConfig, LockError, Locker};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::options::Mode;
use crate::purchase::{Keys, buy_locked, take_one};
use crate::tally::Tally;

/// The first argument of a worker's command line.
pub const FLAG: &str = "--child";
/// The environment variable with the Redis URL (the parent's, even if the
/// parent found or started its server some other way).
pub const URL_VAR: &str = "REDIS_URL";
/// What a worker prints once connected.
pub const READY: &str = "ready";
/// What the parent writes to start the buyers.
pub const GO: &str = "go";
/// Longest a worker waits for `go`.
const GO_LIMIT: Duration = Duration::from_secs(30);

/// Everything a worker needs to know.
struct Job {
    index: u64,
    mode: Mode,
    buyers: u64,
    tasks: u64,
    sku: String,
    keys: Keys,
}

/// Runs one worker process.
pub async fn run(args: Vec<String>) -> Result<ExitCode, String> {
    let known = ["child", "sku", "mode", "buyers", "tasks"];
    let flags = Flags::parse(args, &known)?;
    let url = std::env::var(URL_VAR).map_err(|_| format!("{URL_VAR} is not set"))?;
    let url = url.as_str();
    let sku = flags.text("sku").ok_or("--sku is missing")?.to_owned();
    let job = Arc::new(Job {
        index: flags.number("child", 0)?,
        mode: Mode::parse(flags.text("mode").unwrap_or("lock"))?,
        buyers: flags.number("buyers", 0)?,
        tasks: flags.number("tasks", 1)?.max(1),
        keys: Keys::new(&sku),
        sku,
    });
    let text = |e: LockError| format!("worker {}: {e}", job.index);
    let locker = Locker::connect(LockConfig::from_url(url).map_err(text)?)
        .await
        .map_err(text)?;
    let redis = data_connection(url).await.map_err(|e| text(e.into()))?;

    let go = watch_parent(job.index);
    println!("{READY}");
    match tokio::time::timeout(GO_LIMIT, go).await {
        Ok(Ok(())) => {}
        _ => return Err(format!("worker {}: no `go` from the parent", job.index)),
    }

    let mut buyers = JoinSet::new();
    for _ in 0..job.tasks {
        buyers.spawn(buy_until_done(job.clone(), locker.clone(), redis.clone()));
    }
    let mut tally = Tally::default();
    while let Some(done) = buyers.join_next().await {
        tally += done.map_err(|e| e.to_string())?.map_err(text)?;
    }
    tally.waits = locker.stats().contended;
    println!("{}", tally.to_line());
    Ok(ExitCode::SUCCESS)
}

/// One buyer task: takes buyer numbers from the shared counter until the
/// budget is spent, and buys one unit for each.
async fn buy_until_done(
    job: Arc<Job>,
    locker: Locker,
    mut redis: MultiplexedConnection,
) -> Result<Tally, LockError> {
    let mut tally = Tally::default();
    // Bounded: the counter only grows, and every turn takes a number.
    while redis.incr::<_, _, u64>(&job.keys.buyers, 1).await? <= job.buyers {
        let bought = match job.mode {
            Mode::Lock => buy_locked(&locker, &job.sku, &mut redis, &job.keys).await,
            Mode::None => take_one(&mut redis, &job.keys).await,
        };
        match bought {
            Ok(true) => {
                tally.sold += 1;
                let () = redis.incr(&job.keys.sold, 1).await?;
            }
            Ok(false) => tally.sold_out += 1,
            Err(LockError::Timeout { .. }) => tally.busy += 1,
            Err(LockError::Lost { .. }) => tally.lost += 1,
            Err(other) => return Err(other),
        }
    }
    Ok(tally)
}

/// Reads the parent's stdin on a thread of its own: `go` completes the
/// returned receiver; end of input means the parent is gone (however it
/// died: its end of the pipe closes with it), and this process exits at
/// once, so no worker outlives its parent.
fn watch_parent(index: u64) -> oneshot::Receiver<()> {
    let (go, started) = oneshot::channel();
    std::thread::spawn(move || {
        let mut go = Some(go);
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(line) if line.trim() == GO => {
                    if let Some(go) = go.take() {
                        let _ = go.send(());
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        eprintln!("stock worker {index}: the parent process is gone; stopping");
        std::process::exit(1);
    });
    started
}
