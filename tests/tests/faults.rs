//! Real faults: a holder killed with -9, a frozen server, a restarted
//! server, a server that is not there at all.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::fixtures::{
    CONNECT_TIMEOUT, RESPONSE_TIMEOUT, STALL_PROOF_TTL, STALL_ROOM, TOLD_IN_TIME_TTL, config,
};
use lock_tests::{RedisServer, SilentListener, Worker, closed_port};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// Short timeouts, for the tests of a server that never answers: only
/// calls that are meant to fail use them (a call that must succeed within
/// 300 ms fails whenever a stall catches it in flight).
const SHORT_CONNECT: Duration = Duration::from_millis(500);
const SHORT_RESPONSE: Duration = Duration::from_millis(300);

fn short_timeouts(url: &str) -> LockConfig {
    LockConfig::from_url(url)
        .unwrap()
        .connect_timeout(SHORT_CONNECT)
        .response_timeout(SHORT_RESPONSE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_killed_with_sigkill_frees_the_lock_after_its_ttl() {
    let server = RedisServer::start();
    // A lease the holder's watchdog keeps through a stall.
    let ttl = STALL_PROOF_TTL;
    let ttl_ms = ttl.as_millis().to_string();
    let mut holder = Worker::spawn(WORKER, &["hold", &server.url(), "crashy", &ttl_ms]);
    holder.expect_line("acquired", Duration::from_secs(10));
    let locker = Locker::connect(config(&server.url())).await.unwrap();
    // Renewed by the holder's watchdog: still busy well past one ttl.
    tokio::time::sleep(ttl + ttl / 2).await;
    assert!(locker.lock("crashy").try_acquire().await.unwrap().is_none());
    holder.kill9();
    let killed_at = Instant::now();
    let guard = locker
        .lock("crashy")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let freed_after = killed_at.elapsed();
    // The lease runs out at most a ttl after the kill; the waiter wakes on
    // the lease's end (the PTTL it was told), with room for a stall.
    assert!(
        freed_after <= ttl + STALL_ROOM,
        "freed after {freed_after:?}"
    );
    assert!(guard.fence() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_reported_lost_before_the_ttl_runs_out() {
    let server = RedisServer::start();
    let locker = Locker::connect(config(&server.url())).await.unwrap();
    // "Before the key could expire" is asserted exactly: the lease's
    // reaction margin must cover a stall at the very moment the loss is due
    // (a 1.5 s lease leaves 92 ms).
    let ttl = TOLD_IN_TIME_TTL;
    let guard = locker.lock("frozen").ttl(ttl).acquire().await.unwrap();
    // Freeze right after a renewal, so that none can land between reading
    // the server's PTTL and the freeze (it would move the expiry).
    let renewed = locker.stats().renewed;
    while locker.stats().renewed == renewed {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // What the server itself says is left of the lease; frozen, nothing
    // renews it. A lower bound of the expiry: the server read its PTTL
    // (whole ms, rounded down) after `asked_at`.
    let asked_at = Instant::now();
    let pttl = match server.cmd(&["PTTL", "lock:{frozen}"]) {
        redis::Value::Int(ms) => Duration::from_millis(u64::try_from(ms).unwrap()),
        other => panic!("PTTL: {other:?}"),
    };
    let expires_at = asked_at + pttl;
    server.pause();
    let reported = tokio::time::timeout(ttl * 2, guard.lost()).await;
    let reported_at = Instant::now();
    server.resume();
    reported.expect("no loss reported for a frozen server");
    assert!(
        reported_at < expires_at,
        "loss reported {:?} after the key could expire",
        reported_at - expires_at
    );
    assert!(!guard.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_server_restart_the_locker_is_back_within_one_call_bound() {
    let mut server = RedisServer::start();
    let locker = Locker::connect(config(&server.url())).await.unwrap();
    let guard = locker.lock("restart").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
    // Returns once the new process answers PING: from here on, the locker
    // has a server to reconnect to.
    server.restart();
    let back_at = Instant::now();
    let mut errors = 0;
    loop {
        match locker.lock("restart").try_acquire().await {
            Ok(Some(guard)) => {
                assert!(guard.release().await.unwrap());
                break;
            }
            Ok(None) => panic!("nobody holds the lock after a restart"),
            Err(LockError::Redis(_)) => errors += 1,
            Err(other) => panic!("unexpected error {other:?}"),
        }
        // One reconnect and one answer, each bounded by its timeout, with
        // room for a stall: not a guess of how fast a restart is.
        assert!(
            back_at.elapsed() < CONNECT_TIMEOUT + RESPONSE_TIMEOUT + STALL_ROOM,
            "still failing ({errors} errors)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("acquired after {errors} errors, {:?}", back_at.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_fails_to_connect_with_a_redis_error_at_once() {
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    // A connect timeout far beyond the bound: a failure within the bound
    // came from the refusal, not from the timeout.
    let patient = config(&url).connect_timeout(Duration::from_secs(30));
    let started = Instant::now();
    let err = Locker::connect(patient).await.unwrap_err();
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    assert!(
        started.elapsed() < STALL_ROOM,
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_within_the_connect_timeout() {
    let silent = SilentListener::start();
    let started = Instant::now();
    let err = Locker::connect(short_timeouts(&silent.url()))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    assert!(
        took < SHORT_CONNECT + SHORT_RESPONSE + STALL_ROOM,
        "took {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_on_a_dead_server_fails_with_a_typed_error_and_does_not_hang() {
    let mut server = RedisServer::start();
    let locker = Locker::connect(config(&server.url())).await.unwrap();
    server.kill();
    let wait = Duration::from_secs(30);
    let started = Instant::now();
    let err = locker.lock("dead").wait(wait).acquire().await.unwrap_err();
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    // The documented bound of a call that fails (two round trips, each at
    // most connect + response timeout), with room for a stall: far below
    // the 30 s wait.
    let bound = 2 * (CONNECT_TIMEOUT + RESPONSE_TIMEOUT) + STALL_ROOM;
    assert!(bound < wait / 2);
    assert!(started.elapsed() < bound, "took {:?}", started.elapsed());
}

/// Every lock a locker acquired ends counted once, as released or as lost
/// (`LockerStats`), also one whose release failed: the server went away
/// under it, so neither the release nor the guard's retry in the background
/// could reach it. Its holder gave it up (nothing will ever declare it
/// lost), and its lease runs out on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_release_failed_is_still_counted_once() {
    let mut server = RedisServer::start();
    let locker = Locker::connect(short_timeouts(&server.url()))
        .await
        .unwrap();
    let guard = locker
        .lock("unreleased")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    server.kill();
    let released = guard.release().await;
    assert!(matches!(released, Err(LockError::Redis(_))), "{released:?}");
    // The guard's drop tries once more, in the background, within two
    // call bounds.
    let retry_bound = (SHORT_CONNECT + SHORT_RESPONSE) * 2;
    lock_tests::fixtures::eventually(
        "the lock counted as released or lost",
        retry_bound + STALL_ROOM,
        || {
            let stats = locker.stats();
            stats.released + stats.lost == 1
        },
    )
    .await;
    let stats = locker.stats();
    assert_eq!(
        (stats.acquired, stats.released + stats.lost),
        (1, 1),
        "{stats:?}"
    );
}
