//! `lock_worker chaos`: tasks that take locks through `#[distributed_lock]`
//! and write to the fenced store while the test injects faults, recording
//! every section for the checker (`lock_tests::chaos`).

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, distributed_lock};
use lock_tests::chaos::{Outcome, Record, STORE_SCRIPT, Write, store_keys};
use lock_tests::monotonic_ns;
use redis::aio::ConnectionManager;

/// What one section did so far; read back when the section is cancelled.
#[derive(Default)]
struct Progress {
    fence: Option<u64>,
    start_ns: u64,
    end_ns: Option<u64>,
    /// Whether the lock was still held when the body ended (timestamp first,
    /// then the check, so a held lock covers the whole recorded interval).
    held_to_end: bool,
    write: Option<Write>,
}

/// Everything a section needs: where to write and where to note progress.
struct Section {
    store: ConnectionManager,
    script: redis::Script,
    writer: String,
    progress: Mutex<Progress>,
    pause: Duration,
}

impl Section {
    fn note(&self, update: impl FnOnce(&mut Progress)) {
        update(&mut self.progress.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The critical section: some work, one fenced write, a little more work.
    async fn run(&self, key: &str) -> Result<(), LockError> {
        let Some(lock) = lock_runtime::current() else {
            return Err(LockError::Config("chaos section ran without a lock".into()));
        };
        self.note(|p| {
            p.fence = Some(lock.fence());
            p.start_ns = monotonic_ns();
        });
        tokio::time::sleep(self.pause).await;
        let (highest, log) = store_keys(key);
        let mut store = self.store.clone();
        let accepted: i64 = self
            .script
            .key(highest)
            .key(log)
            .arg(lock.fence())
            .arg(&self.writer)
            .invoke_async(&mut store)
            .await?;
        let write = if accepted == 1 {
            Write::Accepted
        } else {
            Write::Rejected
        };
        self.note(|p| p.write = Some(write));
        tokio::time::sleep(self.pause / 2).await;
        self.note(|p| p.end_ns = Some(monotonic_ns()));
        let held = lock.is_held();
        self.note(|p| p.held_to_end = held);
        Ok(())
    }
}

/// Cancelled at the next await once the lock is known lost (the default).
#[distributed_lock(key = "chaos:<key>", ttl = "500ms", wait = "2s")]
async fn cancelled_on_loss(key: &str, section: &Section) -> Result<(), LockError> {
    section.run(key).await
}

/// Finishes even after a loss, so that its late write reaches the store,
/// which must turn it away.
#[distributed_lock(key = "chaos:<key>", ttl = "500ms", wait = "2s", on_lost = "continue")]
async fn finished_after_loss(key: &str, section: &Section) -> Result<(), LockError> {
    section.run(key).await
}

/// Runs `tasks` tasks on `keys` resources for `seconds`, appending one
/// record line per acquisition to `record_file`.
pub async fn run(
    url: &str,
    keys: u32,
    tasks: u32,
    seconds: u64,
    record_file: &str,
) -> Result<(), String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let config = LockConfig::from_url(url)
        .map_err(|e| text(&e))?
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(300));
    lock_runtime::init(config).await.map_err(|e| text(&e))?;
    let client = redis::Client::open(url).map_err(|e| text(&e))?;
    let store = ConnectionManager::new(client).await.map_err(|e| text(&e))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(record_file)
        .map_err(|e| text(&e))?;
    let file = Arc::new(Mutex::new(file));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (store, file) = (store.clone(), file.clone());
        handles.push(tokio::spawn(async move {
            let mut random = Xorshift::new(u64::from(std::process::id()) << 16 | u64::from(task));
            while Instant::now() < deadline {
                let key = format!("r{}", random.below(u64::from(keys)));
                let section = Section {
                    store: store.clone(),
                    script: redis::Script::new(STORE_SCRIPT),
                    writer: format!("{}/{task}", std::process::id()),
                    progress: Mutex::new(Progress::default()),
                    pause: Duration::from_millis(1 + random.below(4)),
                };
                // One task in four writes even after a loss.
                let result = if task % 4 == 3 {
                    finished_after_loss(&key, &section).await
                } else {
                    cancelled_on_loss(&key, &section).await
                };
                if let Some(record) = record_of(&key, &section, &result) {
                    let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
                    // One write per line, so a kill -9 tears at most one.
                    let _ = file.write_all(format!("{record}\n").as_bytes());
                }
                if result.is_err() {
                    // Not a busy loop while the server is down or frozen.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }
    for handle in handles {
        handle.await.map_err(|e| text(&e))?;
    }
    println!("done");
    Ok(())
}

/// The record of one acquisition; None when no lock was granted.
fn record_of(key: &str, section: &Section, result: &Result<(), LockError>) -> Option<Record> {
    let progress = section.progress.lock().unwrap_or_else(|e| e.into_inner());
    let fence = progress.fence?;
    let outcome = match result {
        // A finished-after-loss section returns Ok either way; whether it
        // held the lock to its end is what it recorded.
        Ok(()) if progress.held_to_end => Outcome::Completed,
        Ok(()) | Err(LockError::Lost { .. }) => Outcome::Lost,
        Err(_) => Outcome::Failed,
    };
    Some(Record {
        writer: section.writer.clone(),
        key: key.to_owned(),
        fence,
        start_ns: progress.start_ns,
        end_ns: progress.end_ns.unwrap_or_else(monotonic_ns),
        outcome,
        write: progress.write.unwrap_or(Write::Unknown),
    })
}

/// A small, seedable random source: each task draws keys and pauses from
/// its own, so runs differ per process without any shared state.
struct Xorshift(u64);

impl Xorshift {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// Uniform-enough in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}
