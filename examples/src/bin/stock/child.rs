//! A worker process: `stock --child <i> --sku <sku> --mode <m> --buyers <n>
//! --tasks <n>` with the Redis URL in `REDIS_URL`, started by the parent,
//! never by hand.
//!
//! It connects, prints `ready`, waits for `go` on stdin (so that every
//! process starts racing at the same moment), runs its buyer tasks until
//! the shared budget of buyers is spent, and prints its [`Tally`] line.
//!
//! [`Tally`]: crate::tally::Tally

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lock_examples::Data;
use lock_runtime::{LockConfig, Locker};
use tokio::sync::oneshot;

use crate::buyers::{self, Job};
use crate::options::Cli;
use crate::purchase::Keys;

/// The environment variable with the Redis URL (the parent's, even if the
/// parent started its server itself).
pub const URL_VAR: &str = "REDIS_URL";
/// What a worker prints once connected.
pub const READY: &str = "ready";
/// What the parent writes to start the buyers.
pub const GO: &str = "go";
/// Longest a worker waits for `go`.
const GO_LIMIT: Duration = Duration::from_secs(30);

/// Runs worker number `index`.
pub async fn run(index: u64, cli: Cli) -> Result<ExitCode, String> {
    let url = std::env::var(URL_VAR).map_err(|_| format!("{URL_VAR} is not set"))?;
    let sku = cli.sku.ok_or("--sku is missing")?;
    let job = Arc::new(Job {
        mode: cli.mode,
        buyers: cli.buyers,
        tasks: cli.tasks,
        keys: Keys::new(&sku),
        sku,
    });
    let text = |e: &dyn std::fmt::Display| format!("worker {index}: {e}");
    let config = LockConfig::from_url(&url).map_err(|e| text(&e))?;
    let locker = Locker::connect(config).await.map_err(|e| text(&e))?;
    let data = Data::connect(&url).await.map_err(|e| text(&e))?;

    let go = watch_parent(index);
    println!("{READY}");
    match tokio::time::timeout(GO_LIMIT, go).await {
        Ok(Ok(())) => {}
        _ => return Err(format!("worker {index}: no `go` from the parent")),
    }
    let tally = buyers::run(job, locker, data).await.map_err(|e| text(&e))?;
    println!("{}", tally.to_line());
    Ok(ExitCode::SUCCESS)
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
