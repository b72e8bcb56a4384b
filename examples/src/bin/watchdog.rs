//! A lease shorter than the job: the watchdog keeps it alive, and when the
//! lock is lost anyway, the job is stopped and told so.
//!
//! ```text
//! cargo run -p lock-examples --bin watchdog
//! ```
//! - Run 1: a job of 5 steps (2.5 s) holds a lock whose lease is 500 ms.
//!   The watchdog renews the lease every ttl/3; the job finishes, and the
//!   key's TTL on the server never exceeds 500 ms, so a crashed holder
//!   would block others for half a second at most.
//! - Run 2: the same job, but 1.2 s in, another connection deletes the lock
//!   key (as a careless `DEL`, or a failover that lost the key, would). The
//!   next renewal is refused, the job is cancelled mid-step, and the call
//!   returns `LockError::Lost`.
//!
//! Redis: `REDIS_URL`, else a throwaway `redis-server`, else the in-memory
//! store (where `MemoryStore::expire` stands in for the `DEL`).
//! Exits 0 when both runs behaved as described, non-zero otherwise.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use lock_examples::Backing;
use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// A 2.5 s job under a 500 ms lease, kept alive by the watchdog; then the
/// same job with its lock deleted behind its back, cancelled with
/// `LockError::Lost`. Exits non-zero unless both runs behave so.
///
/// The lock lives in the Redis `REDIS_URL` names, else in a throwaway
/// redis-server of its own, else in the in-memory store.
#[derive(Parser)]
struct Cli {}

/// Where the lock lives, seen from behind the locker's back.
#[derive(Clone)]
enum Server {
    /// A connection of its own to the Redis server.
    Redis(MultiplexedConnection),
    /// The in-memory store.
    Memory(MemoryStore),
}

impl Server {
    /// Milliseconds left on the lock `job:<name>`'s lease (-2: no lock).
    async fn pttl(&mut self, name: &str) -> Result<i64, LockError> {
        match self {
            Server::Redis(redis) => Ok(redis.pttl(lock_key(name)).await?),
            Server::Memory(store) => Ok(store
                .holders()
                .into_iter()
                .find(|held| held.name == format!("job:{name}"))
                .map_or(-2, |held| {
                    i64::try_from(held.remaining.as_millis()).unwrap_or(i64::MAX)
                })),
        }
    }

    /// Deletes the lock `job:<name>` whoever holds it; how many keys went.
    async fn delete(&mut self, name: &str) -> Result<u64, LockError> {
        match self {
            Server::Redis(redis) => Ok(redis.del(lock_key(name)).await?),
            Server::Memory(store) => Ok(store.expire(&format!("job:{name}")) as u64),
        }
    }
}

/// The lease, as in the attribute below.
const TTL: Duration = Duration::from_millis(500);
/// The job: this many steps of this long, five leases in all.
const STEPS: u32 = 5;
const STEP: Duration = Duration::from_millis(500);
/// When, in run 2, the other connection deletes the key.
const DELETE_AFTER: Duration = Duration::from_millis(1200);

/// The job. Each step reports how far it got, the key's remaining TTL as
/// the server sees it, and how many renewals the watchdog has made.
#[distributed_lock(key = "job:<name>", ttl = "500ms", wait = "1s", on_lost = "cancel", locker = locker)]
async fn nightly_job(
    locker: &Locker,
    name: &str,
    server: &mut Server,
    done: &AtomicU32,
) -> Result<u64, LockError> {
    let fence = lock_runtime::current().map_or(0, |lock| lock.fence());
    println!("  job: holding `job:{name}`, fencing token {fence}");
    let started = Instant::now();
    for step in 1..=STEPS {
        tokio::time::sleep(STEP).await;
        done.store(step, Ordering::SeqCst);
        let pttl = server.pttl(name).await?;
        println!(
            "  job: step {step}/{STEPS} done at {:.1} s; key expires in {pttl} ms; renewals so far {}",
            started.elapsed().as_secs_f64(),
            locker.stats().renewed
        );
    }
    Ok(fence)
}

/// The Redis key of the lock `job:<name>` (default prefix), for the demo's
/// look at the server and for the other connection's `DEL`.
fn lock_key(name: &str) -> String {
    format!("{}{{job:{name}}}", LockConfig::DEFAULT_KEY_PREFIX)
}

#[tokio::main]
async fn main() -> ExitCode {
    Cli::parse();
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("watchdog: something did not behave as described (see above)");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("watchdog: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let backing = Backing::choose()?;
    println!("{}", backing.describe());
    let config = backing.lock_config().map_err(|e| text(&e))?;
    let locker = Locker::connect(config).await.map_err(|e| text(&e))?;
    let mut server = match (backing.url(), backing.store()) {
        (Some(url), _) => {
            let connection = redis::Client::open(url)
                .map_err(|e| text(&e))?
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| text(&e))?;
            Server::Redis(connection)
        }
        (None, Some(store)) => Server::Memory(store.clone()),
        (None, None) => unreachable!("a backing is Redis or the in-memory store"),
    };
    // Unique per run, so that runs against a shared Redis never meet.
    let name = format!("report-{}", std::process::id());

    let first = renewed_run(&locker, &name, &mut server).await?;
    println!();
    let second = lost_run(&locker, &name, &mut server).await?;
    let stats = locker.stats();
    println!();
    println!(
        "locker stats: {} acquired, {} renewals, {} lost",
        stats.acquired, stats.renewed, stats.lost
    );
    Ok(first && second)
}

/// Run 1: the job outlives five leases and finishes.
async fn renewed_run(locker: &Locker, name: &str, server: &mut Server) -> Result<bool, String> {
    println!(
        "run 1: a {:.1} s job under a {} ms lease; the watchdog renews it every ttl/3",
        (STEP * STEPS).as_secs_f64(),
        TTL.as_millis()
    );
    let renewed_before = locker.stats().renewed;
    let done = AtomicU32::new(0);
    let outcome = nightly_job(locker, name, &mut server.clone(), &done).await;
    let renewals = locker.stats().renewed - renewed_before;
    let key_left = server.pttl(name).await.map_err(|e| e.to_string())? != -2;
    let release = if key_left {
        "yet its key is still on the server"
    } else {
        "and released (the key is gone)"
    };
    match outcome {
        Ok(fence) => println!(
            "run 1: finished all {STEPS} steps with fencing token {fence}, after {renewals} renewals, {release}"
        ),
        Err(error) => println!("run 1: unexpected error: {error}"),
    }
    // A step is a whole lease, so at least two renewals per step are due.
    Ok(done.load(Ordering::SeqCst) == STEPS && renewals >= u64::from(STEPS) * 2 && !key_left)
}

/// Run 2: the key is deleted behind the holder's back; the job is cancelled.
async fn lost_run(locker: &Locker, name: &str, server: &mut Server) -> Result<bool, String> {
    println!(
        "run 2: the same job; after {:.1} s another connection deletes the lock key",
        DELETE_AFTER.as_secs_f64()
    );
    let mut other = server.clone();
    let (owned, key) = (name.to_owned(), lock_key(name));
    let intruder = tokio::spawn(async move {
        tokio::time::sleep(DELETE_AFTER).await;
        let deleted = other.delete(&owned).await;
        println!("  other connection: DEL {key} -> {deleted:?}");
        Instant::now()
    });
    let done = AtomicU32::new(0);
    let outcome = nightly_job(locker, name, &mut server.clone(), &done).await;
    let ended = Instant::now();
    let deleted_at = intruder.await.map_err(|e| e.to_string())?;
    let steps = done.load(Ordering::SeqCst);
    let noticed = ended.saturating_duration_since(deleted_at);
    match &outcome {
        Err(error @ LockError::Lost { .. }) => println!(
            "run 2: Err(LockError::Lost): {error}\n       the job was cancelled after step {steps}/{STEPS}, {} ms after the key was deleted (renewals run every {} ms)",
            noticed.as_millis(),
            (TTL / 3).as_millis()
        ),
        Err(error) => println!("run 2: unexpected error: {error}"),
        Ok(fence) => println!("run 2: unexpectedly finished, fencing token {fence}"),
    }
    // Told within one lease of the deletion, before the job could finish.
    Ok(matches!(outcome, Err(LockError::Lost { .. })) && steps < STEPS && noticed < TTL)
}
