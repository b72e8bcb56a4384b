//! A guard dropped as the process ends normally (at the end of `main`, as
//! `#[tokio::main]` and cron jobs do) is released before the process
//! exits; the exit waits for that at most the release's bound (see
//! `lock-runtime/src/at_exit.rs`). A `kill -9` still leaves the lock to
//! its lease: `faults.rs` kills holders.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lock_runtime::LockConfig;
use lock_tests::RedisServer;
use lock_tests::fixtures::{exists, lock_key};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// Runs the worker's `drop-at-exit` once on `flavour` for lock `name`:
/// it took the lock and exited cleanly.
fn acquire_and_drop_at_exit(server: &RedisServer, name: &str, flavour: &str) {
    let output = Command::new(WORKER)
        .args(["drop-at-exit", &server.url(), name, "30000", flavour])
        .output()
        .expect("run the worker");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("acquired"),
        "{flavour}: {:?} {stdout} {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_guard_dropped_at_the_end_of_main_is_released_before_the_process_exits() {
    let server = RedisServer::start();
    for flavour in ["current-thread", "multi-thread"] {
        let mut left = Vec::new();
        for run in 0..40 {
            let name = format!("job-{flavour}-{run}");
            acquire_and_drop_at_exit(&server, &name, flavour);
            // The process is gone: whatever it did not release stays.
            if exists(&server, &lock_key(&name)) {
                left.push(run);
            }
        }
        assert!(
            left.is_empty(),
            "{flavour}: runs whose lock outlived the process: {left:?}"
        );
    }
}

/// With the server frozen, the release cannot finish: the process still
/// exits, once the release failed or its bound (two bounded calls) ran
/// out, whichever is first.
#[test]
fn the_exit_waits_for_a_release_no_longer_than_its_bound() {
    let server = RedisServer::start();
    let mut worker = Command::new(WORKER)
        .args([
            "drop-at-exit",
            &server.url(),
            "frozen",
            "30000",
            "multi-thread",
            "--after-input",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the worker");
    let mut stdout = std::io::BufReader::new(worker.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line.trim(), "acquired");
    server.pause();
    let started = Instant::now();
    worker.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let bound = (LockConfig::DEFAULT_CONNECT_TIMEOUT + LockConfig::DEFAULT_RESPONSE_TIMEOUT) * 2;
    // Generous beside the bound: process start-up and exit on a busy host.
    let limit = bound + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = worker.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = worker.kill();
            server.resume();
            panic!("the process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    server.resume();
    assert!(status.success(), "{status:?}");
    // It waited for the release, which could not finish: until its call
    // timed out (the connection's response timeout, within the bound).
    let waited = started.elapsed();
    assert!(
        waited >= LockConfig::DEFAULT_RESPONSE_TIMEOUT / 2,
        "exited after {waited:?}, before the release's call could fail"
    );
}
