//! At most one holder at a time, across OS processes and tasks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use lock_runtime::{LockConfig, Locker};
use lock_tests::RedisServer;
use lock_tests::exclusion::CountRun;

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// `processes` workers of 32 tasks doing 10 locked increments each, lock
/// and counter on one server.
fn count_run<'a>(server_url: &'a str, processes: usize, extra: &'a [&'a str]) -> CountRun<'a> {
    CountRun {
        worker: WORKER,
        lock_url: server_url,
        processes,
        tasks: 32,
        iterations: 10,
        extra,
        limit: Duration::from_secs(120),
    }
}

#[test]
fn two_processes_of_32_tasks_never_lose_an_increment() {
    let server = RedisServer::start();
    let url = server.url();
    let run = count_run(&url, 2, &[]);
    assert_eq!(run.run(&server), run.expected());
}

/// The control: the same workload without the lock does lose updates, so
/// the test above can fail.
#[test]
fn without_the_lock_the_same_workload_loses_increments() {
    let server = RedisServer::start();
    let url = server.url();
    let run = count_run(&url, 2, &["--no-lock"]);
    let value = run.run(&server);
    assert!(
        value < run.expected(),
        "no update was lost ({value}); the race window is too small"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_one_process_never_overlap() {
    let server = RedisServer::start();
    let locker = Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap();
    let inside = Arc::new(AtomicBool::new(false));
    let entries = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (locker, inside, entries) = (locker.clone(), inside.clone(), entries.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let guard = locker
                    .lock("shared")
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await
                    .unwrap();
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                tokio::task::yield_now().await;
                entries.fetch_add(1, Ordering::SeqCst);
                inside.store(false, Ordering::SeqCst);
                assert!(guard.release().await.unwrap());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(entries.load(Ordering::SeqCst), 160);
    let stats = locker.stats();
    assert_eq!(stats.acquired, 160);
    assert!(
        stats.contended > 0,
        "16 tasks on one key never contended: {stats:?}"
    );
}
