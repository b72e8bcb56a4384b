//! `lock_worker chaos`: tasks that take locks through `#[distributed_lock]`
//! and write to a fenced store, recording a history for the checker
//! (`lock_tests::history`).
//!
//! The history is written ahead: each event is appended (one `write` per
//! line, to a file opened for appending) *before* the step it announces,
//! so a worker killed with -9 has recorded everything it began, and loses
//! at most the line being written. A record that cannot be written ends
//! the worker with an error, which fails the run.
//!
//! Each section writes twice to the store; one section in eight holds the
//! lock for one and a half leases, so that the watchdog has to renew it.
//! One task in four runs its sections with `on_lost = "continue"` (a holder
//! that ignores the signal and writes late, for the fence to refuse).
//! With `CHAOS_FAIR=1`, one task in four takes fair locks instead, on
//! resources of their own (`fair-r0`, ...), and records when the server
//! saw each section arrive in line, for the checker's order rule.
//! With `CHAOS_MULTI=1`, one task in four takes two resources at once
//! (`locker.lock_all`), of the same keys as the other tasks' locks, and
//! records its hold as one section per key (each with that key's fence),
//! so that the checker's per-key rules judge every key whichever kind of
//! call held it.

use std::fs::File;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, distributed_lock};
use lock_tests::history::{Event, Mode, Outcome, STORE_SCRIPT, store_keys};
use lock_tests::monotonic_ns;
use redis::aio::ConnectionManager;

/// The lease every section takes (the attribute's literal below).
const TTL: Duration = Duration::from_secs(1);

/// What one chaos worker was asked to do.
pub struct ChaosArgs<'a> {
    pub worker: &'a str,
    pub lock_url: &'a str,
    pub store_url: &'a str,
    pub resources: u64,
    pub tasks: u64,
    pub seconds: u64,
    pub history: &'a str,
}

/// The history file, shared by every task of the worker.
struct History {
    file: Mutex<File>,
}

impl History {
    /// Appends `event`, or ends the worker: a history with a hole in it
    /// would let the checker pass a run it should not.
    fn record(&self, event: Event) {
        let line = format!("{event}\n");
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = file.write_all(line.as_bytes()) {
            eprintln!("lock_worker: cannot record `{}`: {err}", line.trim_end());
            std::process::exit(3);
        }
    }
}

/// Everything a section needs.
struct Section {
    history: Arc<History>,
    store: ConnectionManager,
    script: redis::Script,
    sid: String,
    key: String,
    pause: Duration,
    long: bool,
    /// The loss was recorded (by the watcher or by the caller), once.
    told: Arc<AtomicBool>,
    /// The task that records the loss signal, while the section needs one.
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The lock, once granted: a loss declared as the call returned (a
    /// holder that ran past its lease) is seen through it.
    lock: Mutex<Option<lock_runtime::LockHandle>>,
}

impl Section {
    fn record_told(history: &History, told: &AtomicBool, sid: &str) {
        if !told.swap(true, Ordering::SeqCst) {
            history.record(Event::Told {
                sid: sid.to_owned(),
                t: monotonic_ns(),
            });
        }
    }

    /// The critical section under `lock` (None: not inside a lock, an
    /// error); `done` is recorded when its body returns, with or without an
    /// error (a cancelled body never records it).
    async fn run(&self, lock: Option<lock_runtime::LockHandle>) -> Result<(), LockError> {
        let result = self.body(lock).await;
        self.history.record(Event::Done {
            sid: self.sid.clone(),
            t: monotonic_ns(),
        });
        result
    }

    /// Work, a fenced write, more work (long for one section in eight),
    /// another fenced write, a little more work.
    async fn body(&self, lock: Option<lock_runtime::LockHandle>) -> Result<(), LockError> {
        let Some(lock) = lock else {
            return Err(LockError::Config(
                "a chaos section ran without a lock".into(),
            ));
        };
        self.history.record(Event::Begin {
            sid: self.sid.clone(),
            fence: lock.fence(),
            t: monotonic_ns(),
        });
        // The loss signal, observed on its own, as early as it comes.
        let watcher = {
            let (history, told, sid) = (self.history.clone(), self.told.clone(), self.sid.clone());
            let lost = lock.lost();
            tokio::spawn(async move {
                lost.await;
                Section::record_told(&history, &told, &sid);
            })
        };
        *self.watcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(watcher);
        *self.lock.lock().unwrap_or_else(|e| e.into_inner()) = Some(lock.clone());
        tokio::time::sleep(self.pause).await;
        self.write(1, lock.fence()).await?;
        let hold = if self.long {
            TTL * 3 / 2
        } else {
            self.pause / 2
        };
        tokio::time::sleep(hold).await;
        self.write(2, lock.fence()).await?;
        tokio::time::sleep(self.pause / 2).await;
        Ok(())
    }

    async fn write(&self, n: u32, fence: u64) -> Result<(), LockError> {
        self.history.record(Event::Write {
            sid: self.sid.clone(),
            n,
            t: monotonic_ns(),
        });
        let (highest, log) = store_keys(&self.key);
        let _accepted: i64 = self
            .script
            .key(highest)
            .key(log)
            .arg(fence)
            .arg(&self.sid)
            .arg(n)
            .invoke_async(&mut self.store.clone())
            .await?;
        Ok(())
    }
}

/// Cancelled at the next await once the lock is known lost (the default).
#[distributed_lock(key = "chaos:<key>", ttl = "1s", wait = "3s")]
async fn cancelled_on_loss(key: &str, section: &Section) -> Result<(), LockError> {
    section.run(lock_runtime::current()).await
}

/// Finishes even after a loss: its late writes reach the store, which must
/// refuse them once a newer owner wrote.
#[distributed_lock(key = "chaos:<key>", ttl = "1s", wait = "3s", on_lost = "continue")]
async fn finished_after_loss(key: &str, section: &Section) -> Result<(), LockError> {
    section.run(lock_runtime::current()).await
}

/// The fair lock, taken as the attribute takes a lock with
/// `on_lost = "cancel"` (its guard says when the server saw it arrive):
/// the body is dropped once the lock is known lost, and a body that
/// finished after its lease ran out answers `Lost`.
async fn fairly(section: &Section) -> Result<(), LockError> {
    let name = format!("chaos:{}", section.key);
    let guard = lock_runtime::global()?
        .fair_lock(name.as_str())
        .ttl(TTL)
        .wait(Duration::from_secs(3))
        .acquire()
        .await?;
    if let Some(arrival) = guard.arrival() {
        section.history.record(Event::Arrived {
            sid: section.sid.clone(),
            arrival,
            t: monotonic_ns(),
        });
    }
    let lock = guard.handle();
    let result = tokio::select! {
        biased;
        () = lock.lost() => Err(LockError::Lost { key: name }),
        result = section.run(Some(lock.clone())) => match result {
            Ok(()) if !lock.is_held() => Err(LockError::Lost { key: name }),
            other => other,
        },
    };
    let _ = guard.release().await;
    result
}

/// Two resources taken at once, as the attribute takes a lock with
/// `on_lost = "cancel"`: one section per key, begun, written and done
/// together, each with its key's fence; the body is dropped once the hold
/// is known lost (any key), and a body that finished after its lease ran
/// out answers `Lost`.
async fn together(pair: &[Section; 2]) -> Result<(), LockError> {
    let names: Vec<String> = pair.iter().map(|s| format!("chaos:{}", s.key)).collect();
    let guard = lock_runtime::global()?
        .lock_all(names.iter().cloned())
        .ttl(TTL)
        .wait(Duration::from_secs(3))
        .acquire()
        .await?;
    let lock = guard.handle();
    let fences: Vec<u64> = names
        .iter()
        .map(|name| guard.fence(name).unwrap_or(0))
        .collect();
    let lost = || LockError::Lost {
        key: names.join(", "),
    };
    let result = tokio::select! {
        biased;
        () = lock.lost() => Err(lost()),
        result = both(pair, &lock, &fences) => match result {
            Ok(()) if !lock.is_held() => Err(lost()),
            other => other,
        },
    };
    let _ = guard.release().await;
    result
}

/// The body of [`together`]: each section's begin, its two writes and its
/// done, as [`Section::run`] records them for one.
async fn both(
    pair: &[Section; 2],
    lock: &lock_runtime::LockHandle,
    fences: &[u64],
) -> Result<(), LockError> {
    for (section, &fence) in pair.iter().zip(fences) {
        section.history.record(Event::Begin {
            sid: section.sid.clone(),
            fence,
            t: monotonic_ns(),
        });
        let watcher = {
            let (history, told) = (section.history.clone(), section.told.clone());
            let (sid, lost) = (section.sid.clone(), lock.lost());
            tokio::spawn(async move {
                lost.await;
                Section::record_told(&history, &told, &sid);
            })
        };
        *section.watcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(watcher);
        *section.lock.lock().unwrap_or_else(|e| e.into_inner()) = Some(lock.clone());
    }
    let body = async {
        tokio::time::sleep(pair[0].pause).await;
        for (section, &fence) in pair.iter().zip(fences) {
            section.write(1, fence).await?;
        }
        let hold = if pair[0].long {
            TTL * 3 / 2
        } else {
            pair[0].pause / 2
        };
        tokio::time::sleep(hold).await;
        for (section, &fence) in pair.iter().zip(fences) {
            section.write(2, fence).await?;
        }
        tokio::time::sleep(pair[0].pause / 2).await;
        Ok(())
    };
    let result = body.await;
    for section in pair {
        section.history.record(Event::Done {
            sid: section.sid.clone(),
            t: monotonic_ns(),
        });
    }
    result
}

/// Runs the worker until its deadline.
pub async fn run(args: ChaosArgs<'_>) -> Result<(), String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let mut config = LockConfig::from_url(args.lock_url)
        .map_err(|e| text(&e))?
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        // Redlock: no lease here is longer, so a restarted master is
        // trusted again as soon as every lease it forgot has ended.
        .default_ttl(TTL)
        .restart_quarantine(TTL);
    // `CHAOS_WAIT_REPLICAS=n`: every acquisition waits for n replicas.
    if let Some(replicas) = std::env::var("CHAOS_WAIT_REPLICAS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        config = config.wait_for_replicas(replicas, Duration::from_millis(500));
    }
    lock_runtime::init(config).await.map_err(|e| text(&e))?;
    let client = redis::Client::open(args.store_url).map_err(|e| text(&e))?;
    let store = ConnectionManager::new(client).await.map_err(|e| text(&e))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(args.history)
        .map_err(|e| format!("open {}: {e}", args.history))?;
    let history = Arc::new(History {
        file: Mutex::new(file),
    });
    println!("ready");
    let fair = std::env::var("CHAOS_FAIR").is_ok_and(|on| on == "1");
    let multi = std::env::var("CHAOS_MULTI").is_ok_and(|on| on == "1");
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let sections = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..args.tasks {
        let (store, history, sections) = (store.clone(), history.clone(), sections.clone());
        let (worker, resources) = (args.worker.to_owned(), args.resources);
        tasks.push(tokio::spawn(async move {
            let mut random = Xorshift::new(u64::from(std::process::id()) << 16 | task);
            let mode = if task % 4 == 3 {
                Mode::Continue
            } else {
                Mode::Cancel
            };
            let fair = fair && task % 4 == 1;
            let multi = multi && task % 4 == 2 && resources > 1;
            let mut round = 0u64;
            while Instant::now() < deadline {
                round += 1;
                let (pause, long) = (
                    Duration::from_millis(1 + random.below(4)),
                    round.is_multiple_of(8),
                );
                let first = random.below(resources);
                let section = |resource: u64| Section {
                    history: history.clone(),
                    store: store.clone(),
                    script: redis::Script::new(STORE_SCRIPT),
                    sid: format!("{worker}.{}", sections.fetch_add(1, Ordering::SeqCst)),
                    key: format!("{}r{resource}", if fair { "fair-" } else { "" }),
                    pause,
                    long,
                    told: Arc::default(),
                    watcher: Mutex::new(None),
                    lock: Mutex::new(None),
                };
                let outcome = if multi {
                    let second = (first + 1 + random.below(resources - 1)) % resources;
                    one_pair(&[section(first), section(second)]).await
                } else {
                    one_section(&section(first), mode, fair).await
                };
                if matches!(outcome, Outcome::Error | Outcome::Timeout) {
                    // Not a busy loop while the lock service is down.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                } else if fair {
                    // A fair lock's callers come and go: between lines of
                    // several waiters, moments with fewer, so that a grant
                    // out of order is followed by the one it overtook
                    // (rather than by newer arrivals until its wait ends).
                    tokio::time::sleep(Duration::from_millis(random.below(16))).await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| text(&e))?;
    }
    // For the checker's minimums: the sections it judged include passes in
    // process (see `lock_tests::chaos`).
    let stats = lock_runtime::global().map_err(|e| text(&e))?.stats();
    println!("passed-in-process {}", stats.handovers_in_process);
    println!("done");
    Ok(())
}

/// One section, from `invoke` to `end`; of a fair lock if `fair`.
async fn one_section(section: &Section, mode: Mode, fair: bool) -> Outcome {
    invoke(section, mode);
    let result = match mode {
        _ if fair => fairly(section).await,
        Mode::Cancel => cancelled_on_loss(&section.key, section).await,
        Mode::Continue => finished_after_loss(&section.key, section).await,
    };
    end(section, &result).await
}

/// Two sections held together ([`together`]), from their `invoke` to
/// their `end`; the outcome of the first (both have the same).
async fn one_pair(pair: &[Section; 2]) -> Outcome {
    for section in pair {
        invoke(section, Mode::Cancel);
    }
    let result = together(pair).await;
    let outcome = end(&pair[0], &result).await;
    end(&pair[1], &result).await;
    outcome
}

fn invoke(section: &Section, mode: Mode) {
    section.history.record(Event::Invoke {
        sid: section.sid.clone(),
        key: section.key.clone(),
        mode,
        t: monotonic_ns(),
    });
}

/// Records how `section`'s call ended with `result`, its loss signal if
/// the call was told as it returned, and stops its watcher.
async fn end(section: &Section, result: &Result<(), LockError>) -> Outcome {
    let lock = section
        .lock
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(lock) = lock {
        // Told as the call returned (before the watcher ran): recorded now.
        let lost_already = tokio::select! {
            biased;
            () = lock.lost() => true,
            () = std::future::ready(()) => false,
        };
        if lost_already {
            Section::record_told(&section.history, &section.told, &section.sid);
        }
    }
    let outcome = match result {
        Ok(_) => Outcome::Ok,
        Err(LockError::Lost { .. }) => {
            // Being handed `Lost` is being told, if the watcher was not first.
            Section::record_told(&section.history, &section.told, &section.sid);
            Outcome::Lost
        }
        Err(LockError::Timeout { .. }) => Outcome::Timeout,
        Err(_) => Outcome::Error,
    };
    section.history.record(Event::End {
        sid: section.sid.clone(),
        outcome,
        t: monotonic_ns(),
    });
    // A lost lock's watcher records the signal and ends; any other waits
    // for a loss that a released lock never has.
    let watcher = section
        .watcher
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(watcher) = watcher.filter(|_| outcome != Outcome::Lost) {
        watcher.abort();
    }
    outcome
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
