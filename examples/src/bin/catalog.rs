//! A catalogue many readers read and one writer changes, under a
//! read/write lock.
//!
//! ```text
//! cargo run -p lock-examples --bin catalog -- [--readers 8] [--writes 20]
//! ```
//! Readers loop, each reading a price and its copy under a read lock; a
//! writer changes both, one after the other with a pause between, under
//! the write lock. A reader that ever saw the two differ saw a write half
//! done. The last line is machine-readable:
//! `result: reads=<n> writes=<n> most_readers_at_once=<n> torn_reads=<n>`;
//! the process exits non-zero if a read was torn or readers never shared.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use clap::Parser;
use lock_examples::Backing;
use lock_runtime::{LockError, Locker};

/// Readers and a writer of one catalogue entry, under a read/write lock
/// kept in the Redis `REDIS_URL` names, else in a throwaway
/// redis-server, else in this process.
#[derive(Parser)]
struct Cli {
    /// Readers looping at once.
    #[arg(long, default_value_t = 8)]
    readers: usize,
    /// Writes the writer makes.
    #[arg(long, default_value_t = 20)]
    writes: u64,
}

/// The entry: a price and its copy, equal whenever no write is half done.
#[derive(Default)]
struct Entry {
    price: AtomicU64,
    copy: AtomicU64,
}

/// What the readers saw.
#[derive(Default)]
struct Seen {
    reads: AtomicU64,
    torn: AtomicU64,
    now: AtomicUsize,
    most: AtomicUsize,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("catalog: a read was torn, or readers never shared (see above)");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("catalog: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<bool, LockError> {
    let backing = Backing::choose().map_err(LockError::Config)?;
    println!("{}", backing.describe());
    let locker = Locker::connect(backing.lock_config()?).await?;
    // Unique per run, so runs against a shared Redis do not mix.
    let key = format!("catalog:{}", std::process::id());
    let (entry, seen) = (Arc::new(Entry::default()), Arc::new(Seen::default()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..cli.readers {
        let (locker, key, entry, seen, done) = (
            locker.clone(),
            key.clone(),
            entry.clone(),
            seen.clone(),
            done.clone(),
        );
        readers.push(tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                let read = locker.read_lock(&key).acquire().await?;
                let at_once = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
                seen.most.fetch_max(at_once, Ordering::SeqCst);
                let price = entry.price.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                if entry.copy.load(Ordering::SeqCst) != price {
                    seen.torn.fetch_add(1, Ordering::SeqCst);
                }
                seen.reads.fetch_add(1, Ordering::SeqCst);
                seen.now.fetch_sub(1, Ordering::SeqCst);
                read.release().await?;
            }
            Ok::<(), LockError>(())
        }));
    }
    for price in 1..=cli.writes {
        let write = locker.write_lock(&key).acquire().await?;
        entry.price.store(price, Ordering::SeqCst);
        // Half done: a reader beside this writer would see it.
        tokio::time::sleep(Duration::from_millis(5)).await;
        entry.copy.store(price, Ordering::SeqCst);
        write.release().await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, Ordering::SeqCst);
    for reader in readers {
        reader
            .await
            .map_err(|e| LockError::Config(format!("a reader stopped: {e}")))??;
    }
    let (reads, torn) = (
        seen.reads.load(Ordering::SeqCst),
        seen.torn.load(Ordering::SeqCst),
    );
    let most = seen.most.load(Ordering::SeqCst);
    println!(
        "result: reads={reads} writes={} most_readers_at_once={most} torn_reads={torn}",
        cli.writes
    );
    Ok(torn == 0 && (most > 1 || cli.readers < 2))
}
