//! Chaos: worker processes take locks and write to a fenced store while the
//! test kills, freezes, restarts and partitions things; a checker then
//! proves from their records that no two owners ever overlapped.
//!
//! `CHAOS_SECS` sets the length of the run (default 20 s, the CI run); a
//! soak is `CHAOS_SECS=600 cargo test -p lock-tests --test chaos -- --nocapture`.
//! Both end with `chaos: acquisitions=.. faults=.. stale_rejected=.. violations=..`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::chaos::{Record, STORE_SCRIPT, StoreEntry, check, store_keys};
use lock_tests::{FaultProxy, RedisServer, Worker};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");
/// The lease the worker's annotated functions use.
const TTL: Duration = Duration::from_millis(500);
const RESOURCES: u32 = 3;
const WORKERS: usize = 3;
const TASKS_PER_WORKER: u32 = 8;

/// The worker processes of a run, replaced as faults kill them.
struct Fleet {
    url: String,
    dir: PathBuf,
    deadline: Instant,
    workers: Vec<Worker>,
    spawned: usize,
}

impl Fleet {
    fn new(url: String, dir: PathBuf, deadline: Instant) -> Self {
        let mut fleet = Self {
            url,
            dir,
            deadline,
            workers: Vec::new(),
            spawned: 0,
        };
        for _ in 0..WORKERS {
            let worker = fleet.spawn();
            fleet.workers.push(worker);
        }
        fleet
    }

    /// A worker that runs until the fleet's deadline.
    fn spawn(&mut self) -> Worker {
        let seconds = self
            .deadline
            .saturating_duration_since(Instant::now())
            .as_secs()
            .max(1)
            .to_string();
        self.spawned += 1;
        let file = self.dir.join(format!("worker-{}.records", self.spawned));
        let args = [
            "chaos",
            &self.url,
            &RESOURCES.to_string(),
            &TASKS_PER_WORKER.to_string(),
            &seconds,
            file.to_str().expect("temp paths are UTF-8"),
        ];
        Worker::spawn(WORKER, &args)
    }

    /// kill -9 one worker, as a crash would, and start a replacement.
    fn crash(&mut self, which: usize) {
        let index = which % self.workers.len();
        self.workers[index].kill9();
        self.workers[index] = self.spawn();
    }

    /// SIGSTOP one worker for longer than its leases, as a GC pause would.
    fn freeze(&mut self, which: usize, pause: Duration) {
        let worker = &mut self.workers[which % WORKERS];
        if worker.is_running() {
            worker.pause();
            std::thread::sleep(pause);
            worker.resume();
        }
    }

    fn finish(self) {
        for worker in self.workers {
            let output = worker.finish(Duration::from_secs(60));
            assert!(
                output.status.success(),
                "a chaos worker failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lock-chaos-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}

fn read_records(dir: &Path) -> Vec<Record> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the record dir") {
        let text = std::fs::read_to_string(entry.expect("dir entry").path()).unwrap_or_default();
        records.extend(text.lines().filter_map(Record::parse));
    }
    records
}

fn read_store_logs(server: &RedisServer) -> HashMap<String, Vec<StoreEntry>> {
    let mut logs = HashMap::new();
    for resource in 0..RESOURCES {
        let key = format!("r{resource}");
        let (_, log_key) = store_keys(&key);
        let entries = match server.cmd(&["LRANGE", &log_key, "0", "-1"]) {
            redis::Value::Array(items) => items
                .into_iter()
                .filter_map(|item| match item {
                    redis::Value::BulkString(bytes) => {
                        StoreEntry::parse(&String::from_utf8_lossy(&bytes))
                    }
                    _ => None,
                })
                .collect(),
            other => panic!("LRANGE {log_key}: {other:?}"),
        };
        logs.insert(key, entries);
    }
    logs
}

fn pttl(server: &RedisServer, key: &str) -> Duration {
    match server.cmd(&["PTTL", key]) {
        redis::Value::Int(ms) if ms > 0 => Duration::from_millis(ms.unsigned_abs()),
        other => panic!("PTTL {key}: {other:?}"),
    }
}

async fn locker_through(proxy: &FaultProxy, pool_size: usize) -> Locker {
    let config = LockConfig::from_url(&proxy.url())
        .unwrap()
        .pool_size(pool_size)
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(300));
    Locker::connect(config).await.unwrap()
}

/// Partitions a holder from Redis for longer than its lease: the holder
/// must hear of the loss before the key can expire on the server.
async fn partition_trial(server: &RedisServer, trial: usize) -> Result<(), String> {
    let proxy = FaultProxy::start(server.port());
    let locker = locker_through(&proxy, 2).await;
    let key = format!("partition:{trial}");
    let guard = locker
        .lock(key.as_str())
        .ttl(Duration::from_millis(600))
        .acquire()
        .await
        .map_err(|e| format!("partition trial {trial}: acquire failed: {e}"))?;
    tokio::time::sleep(Duration::from_millis(250)).await;
    proxy.blackhole(true);
    // Let anything already forwarded land; from now on nothing renews it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    // A lower bound of the expiry: the server read its PTTL (whole ms,
    // rounded down) after this instant.
    let asked_at = Instant::now();
    let expires_at = asked_at + pttl(server, &format!("lock:{{{key}}}"));
    let signalled = tokio::time::timeout(Duration::from_secs(3), guard.lost()).await;
    let signalled_at = Instant::now();
    proxy.blackhole(false);
    match signalled {
        Err(_) => Err(format!("partition trial {trial}: loss never signalled")),
        Ok(()) if signalled_at >= expires_at => Err(format!(
            "partition trial {trial}: loss signalled {:?} after the key could expire",
            signalled_at - expires_at
        )),
        Ok(()) => Ok(()),
    }
}

/// Loses the reply to an acquire: the retry must succeed on the same
/// grant, and no lock may be left behind.
async fn lost_reply_trial(server: &RedisServer, trial: usize) -> Result<(), String> {
    let proxy = FaultProxy::start(server.port());
    let locker = locker_through(&proxy, 1).await;
    let key = format!("lost-reply:{trial}");
    let fail = |what: String| format!("lost-reply trial {trial}: {what}");
    let warm = locker
        .lock(key.as_str())
        .acquire()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let first = warm.fence();
    warm.release().await.map_err(|e| fail(e.to_string()))?;
    proxy.drop_reply_to(b"EVALSHA");
    let guard = locker
        .lock(key.as_str())
        .wait(Duration::ZERO)
        .acquire()
        .await
        .map_err(|e| fail(format!("the retry did not succeed: {e}")))?;
    if guard.fence() <= first {
        return Err(fail(format!(
            "fence {} after {first}: not higher",
            guard.fence()
        )));
    }
    guard.release().await.map_err(|e| fail(e.to_string()))?;
    match server.cmd(&["EXISTS", &format!("lock:{{{key}}}")]) {
        redis::Value::Int(0) => Ok(()),
        other => Err(fail(format!("a lock was left behind: {other:?}"))),
    }
}

#[test]
fn no_two_owners_under_real_faults() {
    let seconds: u64 = std::env::var("CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    // Fsync every write, so fences stay monotonic across a restart.
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let dir = temp_dir("run");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut fleet = Fleet::new(server.url(), dir.clone(), deadline);
    let mut violations = Vec::new();
    let mut faults = 0;
    while Instant::now() + Duration::from_secs(3) < deadline {
        std::thread::sleep(Duration::from_millis(700));
        match faults % 6 {
            0 => fleet.crash(faults),
            1 => fleet.freeze(faults, TTL * 3),
            2 => {
                server.pause();
                std::thread::sleep(TTL * 2);
                server.resume();
            }
            3 => server.restart(),
            4 => violations.extend(runtime.block_on(partition_trial(&server, faults)).err()),
            _ => violations.extend(runtime.block_on(lost_reply_trial(&server, faults)).err()),
        }
        faults += 1;
    }
    fleet.finish();

    let records = read_records(&dir);
    let logs = read_store_logs(&server);
    let verdict = check(&records, &logs);
    violations.extend(verdict.violations);
    // Straight to stderr, not through `eprintln!`, which the test harness
    // captures: the summary line shows in every run, passing or not.
    let summary = format!(
        "chaos: acquisitions={} faults={faults} stale_rejected={} violations={}\n",
        verdict.acquisitions,
        verdict.stale_rejected,
        violations.len()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), summary.as_bytes());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        violations.is_empty(),
        "violations:\n{}",
        violations.join("\n")
    );
    // A run that took almost no locks proves nothing.
    assert!(
        verdict.acquisitions >= 50 * usize::try_from(seconds).unwrap_or(1),
        "only {} acquisitions in {seconds} s",
        verdict.acquisitions
    );
    assert!(faults >= 6, "only {faults} faults injected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_is_told_and_its_late_write_is_rejected() {
    let server = RedisServer::start();
    let mut victim = Worker::spawn(WORKER, &["victim", &server.url(), "paused"]);
    let line = victim.expect_line("acquired", Duration::from_secs(10));
    let victim_fence: u64 = line["acquired ".len()..].trim().parse().unwrap();
    // A GC pause three leases long.
    victim.pause();
    let locker = Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap();
    let successor = locker
        .lock("paused")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(successor.fence() > victim_fence);
    let client = redis::Client::open(server.url()).unwrap();
    let mut store = client.get_multiplexed_async_connection().await.unwrap();
    let (highest, log) = store_keys("paused");
    let accepted: i64 = redis::Script::new(STORE_SCRIPT)
        .key(highest)
        .key(log)
        .arg(successor.fence())
        .arg("successor")
        .invoke_async(&mut store)
        .await
        .unwrap();
    assert_eq!(accepted, 1);
    tokio::time::sleep(TTL).await;
    victim.resume();
    let line = victim.expect_line("late-write", Duration::from_secs(10));
    assert_eq!(
        line, "late-write accepted=false held=false",
        "the stale owner got through"
    );
    assert!(successor.release().await.unwrap());
}
