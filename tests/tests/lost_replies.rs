//! Requests that reach the server while their replies do not reach us:
//! the acquire retry is idempotent, and an abandoned acquire leaves no lock.

use std::future::Future;
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::fixtures::{LONGEST_STALL, STALL_ROOM, command_calls, eventually, exists, get};
use lock_tests::{FaultProxy, RedisServer};

/// One-way latency for the tests that cut a call between the server and
/// its reply: longer than any stall of the machine, so that the reply is
/// still on its way when the server is seen to have run the call.
const LEG: Duration = Duration::from_millis(450);

/// Polls `call` until the server shows it ran (`ran`), then drops it: cut
/// after it reached the server, with its reply a whole [`LEG`] away. (A
/// cut at a fixed time is not: after a stall of the whole machine across
/// both, the cut and the reply are due together, and a `timeout` looks at
/// the reply first.) Panics if the call answers first.
async fn cut_once_run<F>(call: F, mut ran: impl FnMut() -> bool)
where
    F: Future,
    F::Output: std::fmt::Debug,
{
    assert!(LEG > LONGEST_STALL);
    let started = Instant::now();
    let call = std::pin::pin!(call);
    let mut call = call;
    while !ran() {
        // Nothing is due from the call for a whole leg after it ran.
        if let Ok(answer) = tokio::time::timeout(Duration::from_millis(1), &mut call).await {
            panic!("the call answered before the server was seen to run it: {answer:?}");
        }
        assert!(
            started.elapsed() < LEG * 2 + STALL_ROOM * 5,
            "the call never reached the server"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_reply_is_lost_is_retried_and_succeeds_once() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let config = LockConfig::from_url(&proxy.url()).unwrap().pool_size(1);
    let locker = Locker::connect(config).await.unwrap();
    // Connect and warm up first, so the cut request below is the acquire.
    let warm = locker.lock("retried").acquire().await.unwrap();
    let warm_fence = warm.fence();
    assert!(warm.release().await.unwrap());

    let refreshes = command_calls(&server, "pexpire");
    let accepted = proxy.connections_accepted();
    // A free lock is taken by SET NX and TIME, sent together.
    proxy.drop_reply_to(b"TIME");
    let guard = locker
        .lock("retried")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .unwrap();
    assert!(
        proxy.connections_accepted() > accepted,
        "the reply was never cut"
    );
    // The first try took the lock; the retry's SET NX found the key, and
    // the script found it ours (its refresh branch ran, once) and answered
    // the clock then, a fence above the lost grant's.
    assert!(guard.fence() > warm_fence);
    assert_eq!(command_calls(&server, "pexpire") - refreshes, 1);
    let stored = get(&server, "lock:{retried}").expect("the lock is held");
    let (_, secret) = stored.rsplit_once('/').expect("<label>/<secret>");
    assert_eq!(secret.len(), 32, "the token, unmarked: {stored}");
    assert!(guard.release().await.unwrap());
    assert!(!exists(&server, "lock:{retried}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_abandoned_in_flight_leaves_no_lock_behind() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let locker = Locker::connect(LockConfig::from_url(&proxy.url()).unwrap())
        .await
        .unwrap();
    let warm = locker.lock("abandoned").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());

    // The request reaches the server after a leg, its reply would come back
    // a leg later: cancel in between, when the lock is set but not ours yet
    // (its SET ran: a count, which no race with the clean-up can hide).
    proxy.set_latency(LEG);
    let sets = command_calls(&server, "set");
    let acquire = locker
        .lock("abandoned")
        .ttl(Duration::from_secs(30))
        .acquire();
    cut_once_run(acquire, || command_calls(&server, "set") > sets).await;
    // The background cleanup follows the acquire on the same connection.
    eventually(
        "the abandoned lock released; it would block everyone for its 30 s lease",
        Duration::from_secs(10),
        || !exists(&server, "lock:{abandoned}"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_arrives_after_its_lease_could_have_ended_is_not_handed_out() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let locker = Locker::connect(LockConfig::from_url(&proxy.url()).unwrap())
        .await
        .unwrap();
    let warm = locker.lock("slow").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    // Every answer takes 300 ms to come back; a 100 ms lease is always over
    // by then, so no guard may be handed out: someone else may hold it.
    proxy.set_latency(Duration::from_millis(150));
    let result = locker
        .lock("slow")
        .ttl(Duration::from_millis(100))
        .wait(Duration::from_millis(500))
        .acquire()
        .await;
    match result {
        Err(lock_runtime::LockError::Timeout { .. }) => {}
        Err(other) => panic!("expected a timeout, got {other}"),
        Ok(guard) => panic!("handed out a lease that had already run out: {guard:?}"),
    }
    assert_eq!(
        locker.stats().acquired,
        1,
        "only the warm-up lock was granted"
    );
}

/// Every grant comes back after its (10 ms) lease could have run out: each
/// is given back, and the next try waits a backoff step instead of asking
/// again at once (it used to ask about once per round trip until its wait
/// ran out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_that_arrive_too_late_are_given_back_and_retried_after_a_pause() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let config = lock_tests::fixtures::config(&proxy.url()).pool_size(1);
    let locker = Locker::connect(config).await.unwrap();
    // Load the scripts, then slow the path: a round trip of 10 ms is longer
    // than the 7.4 ms (at most) a 10 ms lease can be trusted for.
    drop(locker.lock("warm").acquire().await.unwrap());
    proxy.set_latency(Duration::from_millis(5));
    let before = command_calls(&server, "evalsha");
    let wait = Duration::from_millis(1_200);
    let refused = locker
        .lock("late")
        .ttl(Duration::from_millis(10))
        .wait(wait)
        .acquire()
        .await
        .unwrap_err();
    assert!(
        matches!(refused, lock_runtime::LockError::Timeout { .. }),
        "{refused:?}"
    );
    // An acquire and a give-back per try (20 ms in all), at most one try per
    // backoff step (10 ms doubling to 500 ms, each drawn from its upper
    // half): at most ten tries fit in 1.2 s; trying again at once would
    // make about sixty.
    let scripts = command_calls(&server, "evalsha") - before;
    assert!(scripts <= 2 * 10, "{scripts} scripts in {wait:?}");
    proxy.set_latency(Duration::ZERO);
    lock_tests::fixtures::eventually("nothing left held", Duration::from_secs(2), || {
        !lock_tests::fixtures::exists(&server, "lock:{late}")
    })
    .await;
}

/// A release cut by the caller's timeout after its call reached the server
/// (which deleted the lock) leaves the guard's drop to release again; that
/// second release finds the key gone, and the lock counts as released by
/// its holder, not as lost (`gone_at_release`, with a "lock lost" warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cut_after_it_deleted_is_counted_released_not_lost() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let locker = Locker::connect(LockConfig::from_url(&proxy.url()).unwrap())
        .await
        .unwrap();
    // Loads the release script: the cut call below is the EVALSHA itself.
    let warm = locker.lock("cut-release").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    let guard = locker
        .lock("cut-release")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    // The RELEASE reaches the server after a leg; its reply would come
    // back a leg later: cut the call in between, once it deleted the lock.
    proxy.set_latency(LEG);
    cut_once_run(guard.release(), || !exists(&server, "lock:{cut-release}")).await;
    // The guard's background release runs to its end (two legs each way,
    // within its bound of two calls).
    eventually(
        "the lock counted as released or lost",
        LEG * 4 + STALL_ROOM * 2,
        || {
            let stats = locker.stats();
            stats.released + stats.lost == 2
        },
    )
    .await;
    let stats = locker.stats();
    assert_eq!(stats.acquired, 2, "{stats:?}");
    assert_eq!(
        (stats.released, stats.lost),
        (2, 0),
        "the holder deleted its own lock; it was never lost: {stats:?}"
    );
}
