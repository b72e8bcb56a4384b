//! The mutual-exclusion check every topology runs: many holders contend for
//! one key, and each entry into the critical section checks that nobody
//! else is inside and that its fencing token is higher than the last one.
//!
//! Two forms:
//! - [`CountRun`]: separate OS processes increment a counter
//!   with a racy read-modify-write under the lock; a lost update shows as a
//!   final count below the expected one.
//! - [`hammer`]: tasks on several [`Locker`]s (each with its own
//!   connections, as separate processes would have) enter a critical
//!   section until a deadline, while the test injects faults; the
//!   [`ExclusionReport`] counts overlaps, fence regressions and errors.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_runtime::{LockError, Locker};

use crate::{RedisServer, Worker};

/// A run of `lock_worker count` processes: each of `tasks` tasks does
/// `iterations` locked increments of a counter kept on a plain store
/// server, with the lock at `lock_url`.
#[derive(Clone, Debug)]
pub struct CountRun<'a> {
    /// Path of the `lock_worker` binary.
    pub worker: &'a str,
    /// Where the lock lives (any `LockConfig::from_url` form).
    pub lock_url: &'a str,
    /// OS processes.
    pub processes: usize,
    /// Tasks per process.
    pub tasks: usize,
    /// Increments per task.
    pub iterations: usize,
    /// More worker options (`--no-lock` for the control run).
    pub extra: &'a [&'a str],
    /// Longest a worker may take.
    pub limit: Duration,
}

impl CountRun<'_> {
    /// The increments a run should end with.
    pub fn expected(&self) -> u64 {
        (self.processes * self.tasks * self.iterations) as u64
    }

    /// Runs the workers, the counter on `store`; returns the final count.
    ///
    /// Panics (failing the test) when a worker fails or outlives `limit`.
    pub fn run(&self, store: &RedisServer) -> u64 {
        let store_url = store.url();
        let counter = "exclusion-counter";
        let (tasks, iterations) = (self.tasks.to_string(), self.iterations.to_string());
        let workers: Vec<Worker> = (0..self.processes)
            .map(|_| {
                let mut args = vec![
                    "count",
                    self.lock_url,
                    "exclusion-lock",
                    counter,
                    &tasks,
                    &iterations,
                ];
                args.extend_from_slice(self.extra);
                args.extend_from_slice(&["--store", &store_url]);
                Worker::spawn(self.worker, &args)
            })
            .collect();
        for worker in workers {
            let output = worker.finish(self.limit);
            assert!(
                output.status.success(),
                "worker failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        store.int(&["GET", counter]) as u64
    }
}

/// How [`hammer`] loads the lock.
#[derive(Clone, Debug)]
pub struct Load {
    /// The lock key every task contends for.
    pub key: String,
    /// Tasks per locker.
    pub tasks: usize,
    /// Lease of each acquisition.
    pub ttl: Duration,
    /// Longest wait of each acquisition.
    pub wait: Duration,
    /// Time spent inside the critical section (cut short if the lock is lost).
    pub hold: Duration,
    /// When the tasks stop starting new entries.
    pub until: Instant,
    /// Stop after this many entries in all, whatever the time.
    pub max_entries: u64,
    /// Replicas each acquisition waits for (Redis `WAIT`), if any.
    pub replicas: Option<(u32, Duration)>,
    /// Entries so far, shared by every clone: progress seen while it runs.
    progress: Arc<AtomicU64>,
}

impl Load {
    /// A load on `key` for `run_for`: 4 tasks per locker, 2 s leases, 10 s
    /// waits, 2 ms inside, at most 100,000 entries.
    pub fn new(key: &str, run_for: Duration) -> Self {
        Self {
            key: key.to_owned(),
            tasks: 4,
            ttl: Duration::from_secs(2),
            wait: Duration::from_secs(10),
            hold: Duration::from_millis(2),
            until: Instant::now() + run_for,
            max_entries: 100_000,
            replicas: None,
            progress: Arc::default(),
        }
    }

    /// Entries into the critical section so far, while the load runs.
    pub fn entries_so_far(&self) -> u64 {
        self.progress.load(Ordering::SeqCst)
    }
}

/// What [`hammer`] saw.
#[derive(Clone, Debug, Default)]
pub struct ExclusionReport {
    /// Entries into the critical section.
    pub entries: u64,
    /// Entries made while another holder was still inside: violations.
    pub overlaps: u64,
    /// Entries whose fence was not above the previous entry's.
    pub fence_regressions: u64,
    /// Holders told, while inside, that their lock was lost.
    pub lost: u64,
    /// Failed acquisitions and releases, by error kind (`Timeout`, `Redis`, ...).
    pub errors: BTreeMap<String, u64>,
}

impl ExclusionReport {
    /// Errors of every kind.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

impl std::fmt::Display for ExclusionReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "entries={} overlaps={} fence_regressions={} lost={} errors={:?}",
            self.entries, self.overlaps, self.fence_regressions, self.lost, self.errors
        )
    }
}

/// Shared by every task of one [`hammer`] run.
#[derive(Default)]
struct Tally {
    inside: AtomicU64,
    entries: AtomicU64,
    overlaps: AtomicU64,
    fence_regressions: AtomicU64,
    lost: AtomicU64,
    last_fence: Mutex<u64>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    fn error(&self, err: &LockError) {
        let kind = format!("{err:?}");
        let kind = kind
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("?")
            .to_owned();
        *self.errors.lock().unwrap().entry(kind).or_default() += 1;
    }
}

/// Runs `load.tasks` tasks on each of `lockers` until `load.until`, each
/// looping acquire → enter → hold (or stop at once when told the lock was
/// lost) → leave → release, and reports what it saw. Every acquisition is
/// bounded by `load.wait`, so the run ends within `until + wait + ttl`.
pub async fn hammer(lockers: &[Locker], load: &Load) -> ExclusionReport {
    let tally = Arc::new(Tally::default());
    let mut tasks = Vec::new();
    for locker in lockers {
        for _ in 0..load.tasks {
            let (locker, load, tally) = (locker.clone(), load.clone(), tally.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < load.until
                    && tally.entries.load(Ordering::SeqCst) < load.max_entries
                {
                    enter_once(&locker, &load, &tally).await;
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("a hammer task panicked");
    }
    let errors = tally.errors.lock().unwrap().clone();
    ExclusionReport {
        entries: tally.entries.load(Ordering::SeqCst),
        overlaps: tally.overlaps.load(Ordering::SeqCst),
        fence_regressions: tally.fence_regressions.load(Ordering::SeqCst),
        lost: tally.lost.load(Ordering::SeqCst),
        errors,
    }
}

async fn enter_once(locker: &Locker, load: &Load, tally: &Tally) {
    let mut request = locker.lock(load.key.as_str()).ttl(load.ttl).wait(load.wait);
    if let Some((replicas, timeout)) = load.replicas {
        request = request.wait_for_replicas(replicas, timeout);
    }
    let guard = match request.acquire().await {
        Ok(guard) => guard,
        Err(err) => {
            tally.error(&err);
            // A failing deployment answers at once; do not spin on it.
            tokio::time::sleep(Duration::from_millis(20)).await;
            return;
        }
    };
    if tally.inside.fetch_add(1, Ordering::SeqCst) > 0 {
        tally.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    tally.entries.fetch_add(1, Ordering::SeqCst);
    load.progress.fetch_add(1, Ordering::SeqCst);
    {
        let mut last = tally.last_fence.lock().unwrap();
        if guard.fence() <= *last {
            tally.fence_regressions.fetch_add(1, Ordering::SeqCst);
        }
        *last = (*last).max(guard.fence());
    }
    tokio::select! {
        () = tokio::time::sleep(load.hold) => {}
        () = guard.lost() => { tally.lost.fetch_add(1, Ordering::SeqCst); }
    }
    tally.inside.fetch_sub(1, Ordering::SeqCst);
    if let Err(err) = guard.release().await {
        tally.error(&err);
    }
}
