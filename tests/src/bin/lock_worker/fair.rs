//! `lock_worker fair <url> <lock-key> <ttl-ms> <hold-ms>`: waiters of a
//! fair lock, started one by one on command (see the doc comment of
//! `main.rs`).

use std::time::Duration;

use lock_runtime::{LockConfig, Locker};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long each waiter waits at most: longer than any test runs.
const WAIT: Duration = Duration::from_secs(120);

/// Serves `wait <label>` lines from stdin until it closes, then waits for
/// every waiter it started to finish.
pub async fn run(url: &str, key: &str, ttl_ms: u64, hold_ms: u64) -> Result<(), String> {
    let config = LockConfig::from_url(url).map_err(|e| e.to_string())?;
    let locker = Locker::connect(config).await.map_err(|e| e.to_string())?;
    let (ttl, hold) = (
        Duration::from_millis(ttl_ms),
        Duration::from_millis(hold_ms),
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut waiters = Vec::new();
    while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
        let Some(label) = line.strip_prefix("wait ") else {
            return Err(format!("unknown command `{line}`"));
        };
        let (locker, key, label) = (locker.clone(), key.to_owned(), label.to_owned());
        waiters.push(tokio::spawn(async move {
            match locker.fair_lock(key).ttl(ttl).wait(WAIT).acquire().await {
                Ok(guard) => {
                    println!("granted {label} {}", guard.fence());
                    tokio::time::sleep(hold).await;
                    match guard.release().await {
                        Ok(held) => println!("released {label} {held}"),
                        Err(err) => println!("failed {label} {err}"),
                    }
                }
                Err(err) => println!("failed {label} {err}"),
            }
        }));
    }
    for waiter in waiters {
        waiter.await.map_err(|e| e.to_string())?;
    }
    Ok(())
}
