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

/// A task that blocks its runtime's only thread for longer than the lease
/// (a CPU-bound loop, a blocking call by mistake): renewals go on, since the
/// watchdog runs on the library's own thread (it used to share the
/// application's runtime, and the lock expired while the holder was blocked).
#[tokio::test(flavor = "current_thread")]
async fn a_blocked_application_runtime_does_not_stop_renewals() {
    let server = RedisServer::start();
    let holder = locker(&server).await;
    let ttl = Duration::from_millis(600);
    let guard = holder.lock("blocked").ttl(ttl).acquire().await.unwrap();
    // Blocks this runtime: nothing else of it runs meanwhile.
    std::thread::sleep(ttl * 3);
    assert!(
        guard.is_held(),
        "the lease was not renewed while the runtime was blocked"
    );
    assert_eq!(holder.stats().lost, 0);
    assert!(pttl(&server, "lock:{blocked}") > 0, "the key expired");
    let other = locker(&server).await;
    assert!(other.lock("blocked").try_acquire().await.unwrap().is_none());
    assert!(guard.release().await.unwrap());
}

/// An application testing with a paused clock (`start_paused`, which also
/// auto-advances it) against a real Redis: connecting, locking and renewing
/// run on real time, and the watchdog does not spin (it used to mix std
/// time and the paused tokio clock, and busy-looped).
#[tokio::test(start_paused = true)]
async fn a_paused_application_clock_neither_times_out_calls_nor_spins_the_watchdog() {
    let server = RedisServer::start();
    let holder = locker(&server).await;
    let ttl = Duration::from_millis(600);
    let guard = holder.lock("paused").ttl(ttl).acquire().await.unwrap();
    let cpu_before = lock_tests::process_cpu_time();
    // A second of real time, in which the lease needs several renewals.
    tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_secs(1)))
        .await
        .unwrap();
    let cpu = lock_tests::process_cpu_time() - cpu_before;
    assert!(
        guard.is_held(),
        "not renewed under a paused application clock"
    );
    assert!(holder.stats().renewed >= 2, "{:?}", holder.stats());
    assert!(
        cpu < Duration::from_millis(500),
        "{cpu:?} of CPU in a second of holding a lock"
    );
    assert!(guard.release().await.unwrap());
}
