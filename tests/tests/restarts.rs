//! A server that comes back serves the next call. The first call after a
//! restart meets the failure of the connection the server's death broke; it
//! is retried once, on a fresh connection, within the call's bound, on every
//! deployment.

use std::time::Duration;

use lock_runtime::{LockError, Locker, distributed_lock};
use lock_tests::fixtures::locker;
use lock_tests::{RedisCluster, RedisServer, SentinelSetup};

/// Room for a machine that stalls while a loss is signalled.
const STALL_ROOM: Duration = Duration::from_secs(1);

#[distributed_lock(key = "restart:<name>", ttl = "2s", wait = "0s", locker = locker)]
async fn annotated(locker: &Locker, name: &str) -> Result<u64, LockError> {
    Ok(lock_runtime::current().unwrap().fence())
}

/// Kills the server while a lock is held: the holder is told within its
/// lease. Then the server comes back, and the very next annotated call is
/// served (it used to fail in under a millisecond with "connection refused").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server() {
    let mut server = RedisServer::start();
    let locker = locker(&server.url()).await;
    let ttl = Duration::from_secs(2);
    let held = locker
        .lock("restart:held")
        .ttl(ttl)
        .acquire()
        .await
        .unwrap();
    tokio::task::block_in_place(|| server.kill());
    tokio::time::timeout(ttl + STALL_ROOM, held.lost())
        .await
        .expect("the holder of a lock on a dead server was not told");
    drop(held);
    tokio::task::block_in_place(|| server.start_again());
    annotated(&locker, "first")
        .await
        .expect("the first call after the restart");
    annotated(&locker, "second").await.expect("the second call");
}

/// Each operation as the first call after a restart, the lock kept across
/// it (AOF): a release, an inspection and a forced unlock are each served
/// by the server that came back, not failed with the broken connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_inspect_and_force_unlock_after_a_restart() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let config = lock_tests::fixtures::config(&server.url()).pool_size(1);
    let locker = Locker::connect(config).await.unwrap();
    let held = locker
        .lock("kept")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    tokio::task::block_in_place(|| server.restart());
    assert!(held.release().await.expect("the release after a restart"));
    let again = locker.lock("kept").acquire().await.unwrap();
    tokio::task::block_in_place(|| server.restart());
    let info = locker
        .inspect("kept")
        .await
        .expect("inspect after a restart");
    assert!(info.held, "{info:?}");
    tokio::task::block_in_place(|| server.restart());
    let forced = locker.force_unlock("kept").await;
    assert!(forced.expect("force_unlock after a restart"));
    assert!(!again.release().await.unwrap(), "forced off meanwhile");
}

/// The node that serves a key dies and comes back into the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_node() {
    let mut cluster = RedisCluster::start();
    let locker = locker(&cluster.url()).await;
    annotated(&locker, "warm").await.unwrap();
    let node = cluster.node_for_key("lock:{restart:node}");
    annotated(&locker, "node").await.unwrap();
    tokio::task::block_in_place(|| cluster.restart_node(node));
    annotated(&locker, "node")
        .await
        .expect("the first call after the node came back");
}

/// The same on Redlock, whose rounds bound each master's answer by a tenth
/// of the lease: a lease long enough that a tenth of it leaves room for a
/// reconnect on a machine that stalls.
#[distributed_lock(key = "restart:<name>", ttl = "10s", wait = "0s", locker = locker)]
async fn annotated_long(locker: &Locker, name: &str) -> Result<u64, LockError> {
    Ok(lock_runtime::current().unwrap().fence())
}

/// Every Redlock master dies and comes back (empty: no persistence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_redlock_master() {
    let mut masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let locker = locker(&lock_tests::fixtures::redlock_url(&masters)).await;
    annotated(&locker, "warm").await.unwrap();
    tokio::task::block_in_place(|| {
        for master in &mut masters {
            master.restart();
        }
    });
    annotated(&locker, "redlock")
        .await
        .expect("the first call after the masters came back");
}

/// The master Sentinel names dies and comes back before the sentinels see
/// it down: the locker stays with it, and the next call is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_master() {
    let mut setup = SentinelSetup::start();
    let locker = locker(&setup.url()).await;
    annotated(&locker, "warm").await.unwrap();
    tokio::task::block_in_place(|| setup.master.restart());
    annotated(&locker, "sentinel")
        .await
        .expect("the first call after the master came back");
}
