//! `wait_for_replicas`: after acquiring, the lock waits for replicas to
//! confirm it (Redis `WAIT`), on a master with one real replica.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::RedisServer;
use lock_tests::exclusion::{Load, hammer};
use lock_tests::fixtures::{STALL_ROOM, eventually, exists, master_and_replica};

async fn connect(url: &str, configure: impl FnOnce(LockConfig) -> LockConfig) -> Locker {
    let config = configure(LockConfig::from_url(url).unwrap());
    Locker::connect(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_lock_is_already_on_the_replica() {
    let (master, replica) = master_and_replica();
    let locker = connect(&master.url(), |config| {
        config.wait_for_replicas(1, Duration::from_secs(2))
    })
    .await;
    let guard = locker.lock("stock:1").acquire().await.unwrap();
    // WAIT returned only after the replica acknowledged the write, so it
    // is there now, not eventually.
    assert!(exists(&replica, "lock:{stock:1}"));
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_replica_gives_a_clear_error_and_leaves_nothing_held() {
    let (master, replica) = master_and_replica();
    let locker = connect(&master.url(), |config| {
        config.wait_for_replicas(1, Duration::from_millis(300))
    })
    .await;
    replica.pause();
    let started = Instant::now();
    let err = locker.lock("stock:2").acquire().await.unwrap_err();
    let took = started.elapsed();
    replica.resume();
    let LockError::NotReplicated {
        ref key,
        acked,
        wanted,
        timeout,
    } = err
    else {
        panic!("expected NotReplicated, got {err:?}");
    };
    assert_eq!(
        (key.as_str(), acked, wanted, timeout),
        ("stock:2", 0, 1, Duration::from_millis(300))
    );
    assert_eq!(
        err.to_string(),
        "lock `stock:2` reached 0 of the 1 replicas it waits for within 300ms; it was released"
    );
    // The WAIT's own timeout, and room for a stall.
    assert!(took < timeout + STALL_ROOM, "took {took:?}");
    // Released before the error was returned, not later in the background.
    assert!(!exists(&master, "lock:{stock:2}"));
    let other = connect(&master.url(), |config| config).await;
    let guard = other.lock("stock:2").try_acquire().await.unwrap();
    assert!(guard.is_some(), "the lock was left held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_request_can_ask_for_replicas_itself() {
    let master = RedisServer::start(); // no replica at all
    let locker = connect(&master.url(), |config| config).await;
    let err = locker
        .lock("stock:3")
        .wait_for_replicas(1, Duration::from_millis(100))
        .acquire()
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::NotReplicated { acked: 0, .. }),
        "{err:?}"
    );
    assert!(!exists(&master, "lock:{stock:3}"));
    let bad = locker
        .lock("stock:3")
        .wait_for_replicas(0, Duration::from_millis(100))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(bad, LockError::Config(_)), "{bad:?}");
    // Without the request asking, the same locker does not wait.
    let guard = locker.lock("stock:3").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
}

/// `WAIT` blocks its connection; lock traffic must not queue behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_traffic_does_not_queue_behind_a_pending_wait() {
    let (master, replica) = master_and_replica();
    let locker = connect(&master.url(), |config| config.pool_size(1)).await;
    replica.pause();
    // The replica is stopped: the WAIT can only end at its timeout, longer
    // than any stall. Queued behind it, the 20 round trips below would
    // outwait their 1 s response timeout and fail.
    let wait_timeout = Duration::from_secs(10);
    let waiting = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .lock("slow")
                .wait_for_replicas(1, wait_timeout)
                .acquire()
                .await
        })
    };
    // Let the WAIT reach the server (it is pending while the lock exists).
    eventually("the WAIT acquisition ran", Duration::from_secs(10), || {
        exists(&master, "lock:{slow}")
    })
    .await;
    for i in 0..20 {
        let guard = locker.lock(format!("fast:{i}")).acquire().await.unwrap();
        assert!(guard.release().await.unwrap());
    }
    assert!(
        !waiting.is_finished(),
        "20 lock round trips should finish long before a {wait_timeout:?} WAIT"
    );
    replica.resume();
    // Resumed, the replica catches up and acknowledges: the lock is granted.
    let guard = waiting.await.unwrap().unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_with_replica_acknowledgement() {
    let (master, _replica) = master_and_replica();
    let mut lockers = Vec::new();
    // WAIT answers as soon as the replica acknowledged; its timeout only
    // bounds a replica that does not, longer than a starved machine's
    // stalls (a live replica is the premise here, not its speed).
    for _ in 0..3 {
        lockers.push(
            connect(&master.url(), |config| {
                config.wait_for_replicas(1, Duration::from_secs(5))
            })
            .await,
        );
    }
    let load = Load::new("replicated", Duration::from_secs(3));
    let report = hammer(&lockers, &load).await;
    eprintln!("replication: {report}");
    assert!(report.entries > 50, "{report}");
    assert_eq!(report.overlaps, 0, "{report}");
    assert_eq!(report.fence_regressions, 0, "{report}");
    assert_eq!(report.error_count(), 0, "{report}");
}

/// Acquisitions that wait for replicas share their pool slot's blocking
/// connection, so the second one's script queues behind the first one's
/// `WAIT`. Cancelled while queued, its clean-up must run after its script,
/// on that same connection: sent on another one, it would run first,
/// delete nothing, and leave the lock held by nobody for its whole lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_cancelled_behind_a_wait_leaves_nothing_held() {
    let (master, replica) = master_and_replica();
    let locker = connect(&master.url(), |config| {
        config
            .pool_size(1)
            .wait_for_replicas(1, Duration::from_millis(1500))
    })
    .await;
    tokio::task::block_in_place(|| replica.pause());
    let first = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock("first").acquire().await })
    };
    // The first one's script ran: its WAIT now blocks the connection.
    lock_tests::fixtures::eventually("the first lock granted", Duration::from_secs(5), || {
        exists(&master, "lock:{first}")
    })
    .await;
    let second = locker.lock("second").ttl(Duration::from_secs(30)).acquire();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), second)
            .await
            .is_err(),
        "the second acquisition was not stuck behind the WAIT"
    );
    let first = first.await.unwrap();
    assert!(
        matches!(first, Err(LockError::NotReplicated { .. })),
        "{first:?}"
    );
    tokio::task::block_in_place(|| replica.resume());
    lock_tests::fixtures::eventually(
        "nothing held by nobody (the second lock has a 30 s lease)",
        Duration::from_secs(5),
        || !exists(&master, "lock:{second}") && !exists(&master, "lock:{first}"),
    )
    .await;
}

/// Two acquisitions that wait for replicas share their pool slot's `WAIT`
/// connection, so the second's script queues behind the first's `WAIT`.
/// With the replica frozen, each is told its lock was not replicated (and
/// nothing is left held), not that a healthy master never answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_acquisition_queued_behind_a_wait_is_told_not_replicated() {
    let (master, replica) = master_and_replica();
    // A replica timeout longer than one call's bound (connect + response
    // timeout): the second's script waits that long for its turn.
    let replicas = Duration::from_millis(3500);
    let locker = connect(&master.url(), |config| {
        config
            .pool_size(1)
            .connect_timeout(Duration::from_secs(1))
            .response_timeout(Duration::from_secs(1))
            .wait_for_replicas(1, replicas)
    })
    .await;
    // The blocking connection opened, and the replica caught up.
    let warm = locker.lock("warm").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    tokio::task::block_in_place(|| replica.pause());
    let wait = Duration::from_secs(1);
    let first = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock("first").wait(wait).acquire().await })
    };
    eventually("the first is granted", Duration::from_secs(5), || {
        exists(&master, "lock:{first}")
    })
    .await;
    let second = locker.lock("second").wait(wait).acquire().await;
    let first = first.await.unwrap();
    tokio::task::block_in_place(|| replica.resume());
    assert!(
        matches!(first, Err(LockError::NotReplicated { .. })),
        "{first:?}"
    );
    assert!(
        matches!(second, Err(LockError::NotReplicated { .. })),
        "{second:?}"
    );
    eventually("nothing is left held", Duration::from_secs(10), || {
        !exists(&master, "lock:{first}") && !exists(&master, "lock:{second}")
    })
    .await;
}
