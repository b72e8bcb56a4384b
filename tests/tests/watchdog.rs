//! The watchdog keeps held locks alive, and reports a loss in time.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::RedisServer;

async fn locker(server: &RedisServer) -> Locker {
    let config = LockConfig::from_url(&server.url())
        .unwrap()
        .response_timeout(Duration::from_millis(300));
    Locker::connect(config).await.unwrap()
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    match server.cmd(&["PTTL", key]) {
        redis::Value::Int(ms) => ms,
        other => panic!("PTTL {key}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_lock_for_five_times_its_ttl() {
    let server = RedisServer::start();
    let (holder, other) = (locker(&server).await, locker(&server).await);
    let ttl = Duration::from_millis(400);
    let guard = holder.lock("long-job").ttl(ttl).acquire().await.unwrap();
    let started = Instant::now();
    while started.elapsed() < ttl * 5 {
        tokio::time::sleep(ttl / 4).await;
        assert!(guard.is_held(), "lost after {:?}", started.elapsed());
        assert!(
            other
                .lock("long-job")
                .try_acquire()
                .await
                .unwrap()
                .is_none()
        );
        assert!(pttl(&server, "lock:{long-job}") > 0);
    }
    let stats = holder.stats();
    assert!(stats.renewed >= 10, "{stats:?}");
    assert_eq!(stats.lost, 0);
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_delete_is_reported_lost_within_a_third_of_the_ttl() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let ttl = Duration::from_millis(900);
    let guard = locker.lock("deleted").ttl(ttl).acquire().await.unwrap();
    // Delete between two renewals rather than right at the grant: the
    // bound below must hold from any point of the renewal cycle.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(server.cmd(&["DEL", "lock:{deleted}"]), redis::Value::Int(1));
    let deleted_at = Instant::now();
    tokio::time::timeout(ttl, guard.lost())
        .await
        .expect("the loss was not reported within the ttl");
    let noticed = deleted_at.elapsed();
    assert!(
        noticed <= ttl / 3 + Duration::from_millis(150),
        "noticed after {noticed:?}"
    );
    assert!(!guard.is_held());
    assert_eq!(locker.stats().lost, 1);
    // Not ours any more: release must not pretend otherwise.
    assert!(!guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_is_not_renewed_and_ends_with_a_loss_signal() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let ttl = Duration::from_millis(300);
    let started = Instant::now();
    let guard = locker
        .lock("fixed")
        .ttl(ttl)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .unwrap();
    let ended = started.elapsed();
    assert!(ended < ttl, "reported after the lease, at {ended:?}");
    assert!(ended >= ttl / 2, "reported too early, at {ended:?}");
    assert_eq!(locker.stats().renewed, 0);
    // The key runs out on the server by itself.
    tokio::time::sleep(ttl).await;
    assert_eq!(
        server.cmd(&["EXISTS", "lock:{fixed}"]),
        redis::Value::Int(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_of_many_locks_share_commands() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let ttl = Duration::from_millis(600);
    let mut guards = Vec::new();
    for i in 0..200 {
        guards.push(
            locker
                .lock(format!("many:{i}"))
                .ttl(ttl)
                .acquire()
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(ttl * 2).await;
    let stats = locker.stats();
    assert!(stats.renewed >= 200 * 3, "{stats:?}");
    // One command per lease would be >= 600 calls; batching needs far fewer.
    assert!(stats.renewal_calls * 10 <= stats.renewed, "{stats:?}");
    assert!(guards.iter().all(|g| g.is_held()));
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
}
