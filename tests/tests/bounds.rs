//! One stated bound for every deployment: `acquire` returns within its wait
//! plus two bounded round trips (`connect_timeout + response_timeout`
//! each), plus the replica timeout when it waits for replicas, and
//! `release` within two round trips, whatever the servers do. Each
//! deployment is tested against a frozen server (SIGSTOP: connections stay
//! open, nothing is answered).

use std::future::Future;
use std::time::{Duration, Instant};

use lock_runtime::{LockError, Locker};
use lock_tests::fixtures::{
    CONNECT_TIMEOUT as CONNECT, RESPONSE_TIMEOUT as RESPONSE, STALL_ROOM, config,
};
use lock_tests::{RedisCluster, RedisServer, SentinelSetup};

// The fixtures' timeouts (2 s connect, 1 s response): the lockers must
// also connect and take their warm-up locks within them, which 500 ms and
// 300 ms did not leave a stalling machine room for.
const WAIT: Duration = Duration::from_millis(500);

/// The documented bound of an acquisition waiting `WAIT` (and `replicas`).
fn acquire_bound(replicas: Duration) -> Duration {
    WAIT + replicas + 2 * (CONNECT + RESPONSE)
}

/// Runs `acquire` against a frozen deployment: it must fail within the
/// bound, and never as a panic.
async fn within_bound(
    what: &str,
    bound: Duration,
    acquire: impl Future<Output = Result<lock_runtime::LockGuard, LockError>>,
) -> LockError {
    answer_within_bound(what, bound, acquire)
        .await
        .expect_err("acquired from a frozen deployment")
}

/// Runs `acquire`: it must answer within the bound, and never as a panic.
async fn answer_within_bound(
    what: &str,
    bound: Duration,
    acquire: impl Future<Output = Result<lock_runtime::LockGuard, LockError>>,
) -> Result<lock_runtime::LockGuard, LockError> {
    let started = Instant::now();
    let outcome = tokio::time::timeout(bound + STALL_ROOM, acquire)
        .await
        .unwrap_or_else(|_| {
            panic!("{what}: acquire still running after {bound:?} + {STALL_ROOM:?}")
        });
    let took = started.elapsed();
    println!("{what}: {took:?} (bound {bound:?}): {outcome:?}");
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server() {
    let server = RedisServer::start();
    let locker = Locker::connect(config(&server.url())).await.unwrap();
    let held = locker.lock("held").acquire().await.unwrap();
    tokio::task::block_in_place(|| server.pause());
    let request = locker.lock("frozen").wait(WAIT).acquire();
    let err = within_bound("one server", acquire_bound(Duration::ZERO), request).await;
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    let started = Instant::now();
    let released = held.release().await;
    assert!(started.elapsed() <= 2 * (CONNECT + RESPONSE) + STALL_ROOM);
    assert!(released.is_err(), "{released:?}");
    tokio::task::block_in_place(|| server.resume());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_replicas_on_a_frozen_master() {
    let (master, replica) = lock_tests::fixtures::master_and_replica();
    let replicas = Duration::from_millis(400);
    let locker = Locker::connect(config(&master.url()).wait_for_replicas(1, replicas))
        .await
        .unwrap();
    // The blocking connection is opened and the replica acknowledges a
    // lock. A stall can make one acknowledgement miss its 400 ms (the lock
    // is then given back): warm up until one is confirmed.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match locker.lock("warm").acquire().await {
            Ok(guard) => break drop(guard),
            Err(LockError::NotReplicated { .. }) if Instant::now() < deadline => {}
            Err(err) => panic!("warm-up: {err:?}"),
        }
    }
    tokio::task::block_in_place(|| master.pause());
    let request = locker.lock("frozen").wait(WAIT).acquire();
    let err = within_bound("WAIT, frozen master", acquire_bound(replicas), request).await;
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    tokio::task::block_in_place(|| master.resume());
    // A frozen replica: WAIT runs out and the lock is given back.
    tokio::task::block_in_place(|| replica.pause());
    let request = locker.lock("unreplicated").wait(WAIT).acquire();
    let err = within_bound("WAIT, frozen replica", acquire_bound(replicas), request).await;
    assert!(matches!(err, LockError::NotReplicated { .. }), "{err:?}");
    tokio::task::block_in_place(|| replica.resume());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_with_its_master_frozen() {
    let setup = SentinelSetup::start();
    let locker = Locker::connect(config(&setup.url())).await.unwrap();
    drop(locker.lock("warm").acquire().await.unwrap());
    tokio::task::block_in_place(|| setup.master.pause());
    // The sentinels still name the frozen master for a while: each failed
    // call looks it up again, and still the call returns in time. How long
    // "a while" is, is the sentinels' business (they fail over a master
    // down for 1 s, in a time no test controls): a round after the
    // failover may be granted, by the promoted replica, within the same
    // bound. The first round cannot be (its try times out at the 1 s
    // response timeout, when the master is not even down for the sentinels
    // yet, and a timed-out call is not sent again).
    for round in 0..3 {
        let name = format!("frozen:{round}");
        let request = locker.lock(name.as_str()).wait(WAIT).acquire();
        let outcome = answer_within_bound(
            "sentinel, frozen master",
            acquire_bound(Duration::ZERO),
            request,
        )
        .await;
        if let Ok(guard) = outcome {
            assert!(round > 0, "acquired from a frozen master: {guard:?}");
            assert!(
                lock_tests::fixtures::exists(&setup.replica, &format!("lock:{{{name}}}")),
                "round {round}: granted, but not by the promoted replica"
            );
        }
    }
    tokio::task::block_in_place(|| setup.master.resume());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_with_the_node_of_the_key_frozen() {
    let cluster = RedisCluster::start();
    let locker = Locker::connect(config(&cluster.url())).await.unwrap();
    // Released and answered before the node freezes: a dropped guard's
    // release runs in the background and keeps the key's turn in this
    // locker until it ends, which on a frozen node is the response
    // timeout, longer than the wait below.
    let warm = locker.lock("frozen").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    let node = cluster.node_for_key("lock:{frozen}");
    tokio::task::block_in_place(|| cluster.nodes()[node].pause());
    let request = locker.lock("frozen").wait(WAIT).acquire();
    let err = within_bound(
        "cluster, frozen node",
        acquire_bound(Duration::ZERO),
        request,
    )
    .await;
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    tokio::task::block_in_place(|| cluster.nodes()[node].resume());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_a_majority_frozen() {
    let masters = lock_tests::fixtures::settled_masters(3);
    let url = lock_tests::fixtures::redlock_url(&masters);
    let locker = Locker::connect(config(&url)).await.unwrap();
    drop(locker.lock("warm").acquire().await.unwrap());
    tokio::task::block_in_place(|| {
        masters[0].pause();
        masters[1].pause();
    });
    // Frozen masters may be only slow: rounds are retried for the whole
    // wait, then the call gives up with the last round's verdict.
    let request = locker
        .lock("frozen")
        .ttl(Duration::from_secs(3))
        .wait(WAIT)
        .acquire();
    let err = within_bound(
        "redlock, 2 of 3 frozen",
        acquire_bound(Duration::ZERO),
        request,
    )
    .await;
    assert!(matches!(err, LockError::QuorumNotReached { .. }), "{err:?}");
    tokio::task::block_in_place(|| {
        masters[0].resume();
        masters[1].resume();
    });
}
