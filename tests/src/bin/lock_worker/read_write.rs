//! The read/write lock's worker modes (see the doc comment of `main.rs`):
//! a reader that holds until killed, and readers that loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lock_runtime::{LockConfig, Locker};

/// How long a reader waits at most: longer than any test runs.
const WAIT: Duration = Duration::from_secs(120);

async fn locker(url: &str) -> Result<Locker, String> {
    let config = LockConfig::from_url(url).map_err(|e| e.to_string())?;
    Locker::connect(config).await.map_err(|e| e.to_string())
}

/// `read-hold`: takes a read, prints `acquired <fence>`, and keeps it
/// (renewed) until killed, or for at most 60 s; prints `lost` and exits
/// as soon as a loss signal comes.
pub async fn hold(url: &str, key: &str, ttl_ms: u64) -> Result<(), String> {
    let locker = locker(url).await?;
    let read = locker.read_lock(key).ttl(Duration::from_millis(ttl_ms));
    let read = read.wait(WAIT).acquire().await.map_err(|e| e.to_string())?;
    println!("acquired {}", read.fence());
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(60)) => {}
        () = read.lost() => {
            println!("lost");
            return Ok(());
        }
    }
    read.release().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// What `read-loop` runs.
pub struct Loop<'a> {
    pub url: &'a str,
    pub key: &'a str,
    pub ttl_ms: u64,
    pub tasks: usize,
    pub hold_ms: u64,
    pub seconds: u64,
}

/// `read-loop`: `tasks` readers each take a read, hold it `hold_ms`, let
/// go and take the next, for `seconds`; prints `ready` once reads were
/// granted, then `done <grants> <most readers at once in this process>`.
pub async fn run_loop(spec: Loop<'_>) -> Result<(), String> {
    let locker = locker(spec.url).await?;
    let (ttl, hold) = (
        Duration::from_millis(spec.ttl_ms),
        Duration::from_millis(spec.hold_ms),
    );
    let until = tokio::time::Instant::now() + Duration::from_secs(spec.seconds);
    let (now, most, grants) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let mut readers = Vec::new();
    for task in 0..spec.tasks {
        let (locker, key) = (locker.clone(), spec.key.to_owned());
        let (now, most, grants) = (now.clone(), most.clone(), grants.clone());
        readers.push(tokio::spawn(async move {
            // Staggered, so that reads overlap without ending together.
            tokio::time::sleep(hold * u32::try_from(task).unwrap_or(0) / 8).await;
            while tokio::time::Instant::now() < until {
                let read = locker.read_lock(&key).ttl(ttl).wait(WAIT).acquire().await;
                let read = read.map_err(|e| e.to_string())?;
                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(at_once, Ordering::SeqCst);
                if grants.fetch_add(1, Ordering::SeqCst) + 1 == spec.tasks {
                    println!("ready");
                }
                tokio::time::sleep(hold).await;
                now.fetch_sub(1, Ordering::SeqCst);
                read.release().await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }));
    }
    for reader in readers {
        reader.await.map_err(|e| e.to_string())??;
    }
    println!(
        "done {} {}",
        grants.load(Ordering::SeqCst),
        most.load(Ordering::SeqCst)
    );
    Ok(())
}
