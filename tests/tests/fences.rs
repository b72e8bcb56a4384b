//! Fences that expire with their lock: nothing is left on the server once
//! a lock is released or its lease has passed, and fences still rise per
//! key across restarts without persistence and evictions.

use std::time::Duration;

use lock_tests::RedisServer;
use lock_tests::fixtures::{config, eventually, exists, info_field, key_count, lock_key, locker};

const DISTINCT: u64 = 10_000;

/// A service that locks per order: 10,000 distinct locks taken and
/// released leave no key behind (the counter design left one per name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_distinct_locks_leave_nothing_behind() {
    let server = RedisServer::start();
    let locker = locker(&server.url()).await;
    let tasks: Vec<_> = (0..32)
        .map(|task| {
            let locker = locker.clone();
            tokio::spawn(async move {
                for order in (task..DISTINCT).step_by(32) {
                    let guard = locker
                        .lock(format!("order:{order}"))
                        .ttl(Duration::from_secs(5))
                        .acquire()
                        .await
                        .unwrap();
                    assert!(guard.release().await.unwrap());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(locker.stats().released, DISTINCT);
    let left = key_count(&server);
    println!("keys left after {DISTINCT} distinct locks: {left}");
    assert_eq!(left, 0, "keys left after {DISTINCT} released locks");
}

/// Locks that are never released (a crashed owner) are gone once their
/// lease has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_that_run_out_leave_nothing_behind() {
    let server = RedisServer::start();
    let locker = locker(&server.url()).await;
    let mut guards = Vec::new();
    for order in 0..100 {
        guards.push(
            locker
                .lock(format!("crashed:{order}"))
                .ttl(Duration::from_millis(300))
                .watchdog(false)
                // A grant is handed out only if it comes back while the
                // lease can still be trusted (about 200 ms of it): a stall
                // in the round trip makes the library try again, which the
                // lease's own 300 ms wait left no room for.
                .wait(Duration::from_secs(10))
                .acquire()
                .await
                .unwrap(),
        );
    }
    for guard in &guards {
        tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("a fixed lease is reported lost when it ends");
    }
    eventually(
        "every lease expired on the server",
        Duration::from_secs(5),
        || key_count(&server) == 0,
    )
    .await;
    // Dropping them now releases nothing: they are gone.
    drop(guards);
}

/// A server restarted without persistence forgets every lock; fences go on
/// rising, since they come from its clock (the counter design restarted
/// them from 1, below the fences a store had already seen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_rise_across_a_restart_without_persistence() {
    let mut server = RedisServer::start();
    let locker = locker(&server.url()).await;
    let mut last = 0;
    for round in 0..3 {
        for _ in 0..5 {
            let guard = locker.lock("stock:7").acquire().await.unwrap();
            assert!(
                guard.fence() > last,
                "round {round}: {} after {last}",
                guard.fence()
            );
            last = guard.fence();
            assert!(guard.release().await.unwrap());
        }
        tokio::task::block_in_place(|| server.restart());
        assert_eq!(key_count(&server), 0, "the restarted server kept data");
    }
}

/// Under an eviction policy every key can be evicted. Fill the server
/// until everything the earlier locks left is gone: the next fence is
/// still higher (a counter evicted by then restarted from 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_rise_after_an_eviction() {
    let server =
        RedisServer::start_with(&["--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"]);
    let locker = lock_runtime::Locker::connect(config(&server.url()))
        .await
        .unwrap();
    let mut last = 0;
    for _ in 0..5 {
        let guard = locker.lock("evicted").acquire().await.unwrap();
        last = guard.fence();
        assert!(guard.release().await.unwrap());
    }
    let filler = "x".repeat(64 * 1024);
    for round in 0..2_000 {
        server.cmd(&["SET", &format!("filler:{round}"), &filler]);
        let any_lock_state = lock_state_keys(&server) > 0;
        if round >= 100 && !any_lock_state {
            break;
        }
    }
    // The fill evicted keys (so an eviction did take effect), and nothing
    // of the lock's state survived it.
    let evicted: u64 = info_field(&server, "stats", "evicted_keys")
        .parse()
        .unwrap();
    assert!(evicted > 0, "the fill evicted nothing");
    assert_eq!(lock_state_keys(&server), 0, "lock state survived the fill");
    let guard = locker.lock("evicted").acquire().await.unwrap();
    assert!(guard.fence() > last, "{} after {last}", guard.fence());
    assert!(guard.release().await.unwrap());
    assert!(!exists(&server, &lock_key("evicted")));
}

/// Keys of lock state (`lock:...`) on `server`.
fn lock_state_keys(server: &RedisServer) -> usize {
    match server.cmd(&["KEYS", "lock:*"]) {
        redis::Value::Array(keys) => keys.len(),
        other => panic!("KEYS answered {other:?}"),
    }
}
