//! The read/write lock under chaos: worker processes take reads and writes
//! of a few locks (on one server, a Cluster, behind Sentinel, or on
//! Redlock's three masters) while one of them is killed with -9, and
//! the read/write checker (`lock_tests::history::read_write`) judges the
//! run from their histories alone. A sabotaged run (leases the watchdog
//! never renews: readers and writers that outlive their lease) must be
//! caught.

use std::collections::HashMap;
use std::time::Duration;

use lock_tests::fixtures::settled_masters;
use lock_tests::history::read_write::{RwVerdict, check_read_write};
use lock_tests::worker::Worker;
use lock_tests::{RedisCluster, RedisServer, SentinelSetup, monotonic_ns};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// Workers, tasks each, resources, seconds.
const WORKERS: usize = 3;
const TASKS: &str = "6";
const RESOURCES: &str = "2";
const SECONDS: u64 = 6;

/// One run with the locks at `url` and the versions on `store`: `defect`
/// builds a broken locker into every worker; `kill` kills the last worker
/// with -9 halfway.
fn run(name: &str, url: &str, store: &RedisServer, defect: Option<&str>, kill: bool) -> RwVerdict {
    let dir = std::env::temp_dir().join(format!("lock-rw-chaos-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the history directory");
    let env: Vec<(&str, &str)> = defect
        .map(|defect| ("LOCK_RUNTIME_SABOTAGE", defect))
        .into_iter()
        .collect();
    let store_url = store.url();
    let seconds = SECONDS.to_string();
    let mut workers = Vec::new();
    for n in 0..WORKERS {
        let id = format!("w{n}");
        let history = dir.join(format!("{id}.history"));
        let history = history.to_str().expect("temp paths are UTF-8").to_owned();
        let args = [
            "rw-chaos", &id, url, &store_url, RESOURCES, TASKS, &seconds, &history,
        ];
        let mut worker = Worker::spawn_with_env(WORKER, &args, &env);
        worker.expect_line("ready", Duration::from_secs(30));
        workers.push((id, history, worker));
    }
    let mut kills = HashMap::new();
    if kill {
        std::thread::sleep(Duration::from_secs(SECONDS / 2));
        let (id, _, worker) = workers.last_mut().expect("workers");
        worker.kill9();
        kills.insert(id.clone(), monotonic_ns());
    }
    let mut histories = Vec::new();
    for (id, history, mut worker) in workers {
        if !kills.contains_key(&id) {
            worker.expect_line("done", Duration::from_secs(SECONDS * 10));
            worker.finish(Duration::from_secs(30));
        }
        let text = std::fs::read_to_string(&history).expect("read a history");
        histories.push((id, text));
    }
    let verdict = check_read_write(&histories, &kills, monotonic_ns());
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "rw chaos {name}: {} reads ({} beside another read), {} writes, {} violation(s)",
        verdict.reads,
        verdict.shared_reads,
        verdict.writes,
        verdict.violations.len()
    );
    verdict
}

/// Fails unless a clean run with a worker killed broke no rule and
/// exercised enough.
fn assert_clean(verdict: &RwVerdict) {
    assert!(
        verdict.violations.is_empty(),
        "violations:\n{}",
        verdict.violations.join("\n")
    );
    // A run that observed nothing proves nothing.
    assert!(verdict.reads >= 50, "too few reads: {}", verdict.reads);
    assert!(verdict.writes >= 10, "too few writes: {}", verdict.writes);
    assert!(
        verdict.shared_reads >= 10,
        "readers never shared: {}",
        verdict.shared_reads
    );
}

#[test]
fn on_one_server_with_a_worker_killed_no_rule_breaks() {
    let server = RedisServer::start();
    assert_clean(&run("single", &server.url(), &server, None, true));
}

#[test]
fn on_a_cluster_with_a_worker_killed_no_rule_breaks() {
    let (cluster, store) = (RedisCluster::start(), RedisServer::start());
    assert_clean(&run("cluster", &cluster.url(), &store, None, true));
}

#[test]
fn behind_sentinel_with_a_worker_killed_no_rule_breaks() {
    let (setup, store) = (SentinelSetup::start(), RedisServer::start());
    assert_clean(&run("sentinel", &setup.url(), &store, None, true));
}

#[test]
fn on_redlock_with_a_worker_killed_no_rule_breaks() {
    let (masters, store) = (settled_masters(3), RedisServer::start());
    let hosts: Vec<String> = masters
        .iter()
        .map(|master| format!("127.0.0.1:{}", master.port()))
        .collect();
    let url = format!("redis+redlock://{}", hosts.join(","));
    assert_clean(&run("redlock", &url, &store, None, true));
}

#[test]
fn leases_never_renewed_are_caught() {
    let server = RedisServer::start();
    let verdict = run(
        "silent-watchdog",
        &server.url(),
        &server,
        Some("silent-watchdog"),
        false,
    );
    assert!(
        !verdict.violations.is_empty(),
        "a locker whose leases are never renewed passed the checker"
    );
}
