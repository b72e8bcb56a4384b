//! Owner tokens and fencing tokens: only the owner releases, fences only grow.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::RedisServer;
use lock_tests::fixtures::{STALL_ROOM, command_calls, key_count};

/// A test locker, with timeouts a machine that stalls can meet.
async fn locker(server: &RedisServer) -> Locker {
    lock_tests::fixtures::locker(&server.url()).await
}

/// How long a request for a very short lease may keep trying: such a grant
/// is handed out only if its answer comes back while the lease can still
/// be trusted (33 ms of a 50 ms lease, 4.9 to 7.4 ms of a 10 ms one),
/// and a stall that catches the round trip makes the library give it back
/// and try again (as a 50 ms wait, the lease's own, could not).
const SHORT_LEASE_WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_strictly_increase_across_owners() {
    let server = RedisServer::start();
    let owners = [locker(&server).await, locker(&server).await];
    let mut fences = Vec::new();
    for round in 0..20 {
        let guard = owners[round % 2].lock("fenced").acquire().await.unwrap();
        fences.push(guard.fence());
        guard.release().await.unwrap();
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    // A lock that expired (not released) still advances the fence.
    let ttl = Duration::from_millis(50);
    let fixed = owners[0]
        .lock("fenced")
        .ttl(ttl)
        .watchdog(false)
        .wait(SHORT_LEASE_WAIT)
        .acquire()
        .await
        .unwrap();
    let expired_fence = fixed.fence();
    // Let it expire on the server, as a crashed owner's lock would.
    tokio::time::timeout(ttl + STALL_ROOM, fixed.lost())
        .await
        .unwrap();
    let next = owners[1]
        .lock("fenced")
        .wait(ttl + STALL_ROOM)
        .acquire()
        .await
        .unwrap();
    assert!(next.fence() > expired_fence);
    assert!(expired_fence > *fences.last().unwrap());
    assert!(
        !fixed.release().await.unwrap(),
        "released the next owner's lock"
    );
    assert!(next.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_a_non_owner_returns_false_and_the_lock_stays() {
    let server = RedisServer::start();
    let (a, b) = (locker(&server).await, locker(&server).await);
    let ttl = Duration::from_millis(100);
    let stale = a
        .lock("owned")
        .ttl(ttl)
        .watchdog(false)
        .wait(SHORT_LEASE_WAIT)
        .acquire()
        .await
        .unwrap();
    tokio::time::timeout(ttl + STALL_ROOM, stale.lost())
        .await
        .unwrap();
    assert!(!stale.is_held());
    let current = b
        .lock("owned")
        .wait(ttl + STALL_ROOM)
        .acquire()
        .await
        .unwrap();
    assert!(
        !stale.release().await.unwrap(),
        "a stale owner released the lock"
    );
    assert!(current.is_held());
    assert!(
        b.lock("owned").try_acquire().await.unwrap().is_none(),
        "the lock is gone"
    );
    assert!(current.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_is_busy_for_others_and_free_after_release() {
    let server = RedisServer::start();
    let (a, b) = (locker(&server).await, locker(&server).await);
    let guard = a.lock("busy").acquire().await.unwrap();
    assert!(b.lock("busy").try_acquire().await.unwrap().is_none());
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    let err = b.lock("busy").wait(wait).acquire().await.unwrap_err();
    let waited = started.elapsed();
    match err {
        LockError::Timeout {
            key,
            waited: reported,
        } => {
            assert_eq!(key, "busy");
            assert!(reported >= wait, "{reported:?}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // Its own wait (the holder never lets go), then the answer of the try
    // in flight, with room for a stall: not 2 s of a calm machine.
    assert!(
        waited < wait + STALL_ROOM,
        "waited {waited:?} for a {wait:?} wait"
    );
    assert_eq!(b.stats().timeouts, 1);
    assert!(guard.release().await.unwrap());
    assert!(b.lock("busy").try_acquire().await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_is_released_in_the_background() {
    let server = RedisServer::start();
    let (a, b) = (locker(&server).await, locker(&server).await);
    drop(a.lock("dropped").acquire().await.unwrap());
    let got = b
        .lock("dropped")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    // Long before the 30 s default lease could have run out.
    assert!(got.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_use_the_prefix_and_one_hash_tag() {
    let server = RedisServer::start();
    let config = LockConfig::from_url(&server.url())
        .unwrap()
        .key_prefix("app:");
    let locker = Locker::connect(config).await.unwrap();
    let guard = locker
        .lock("stock:42")
        .ttl(Duration::from_secs(3))
        .acquire()
        .await
        .unwrap();
    assert_eq!(
        server.cmd(&["EXISTS", "app:{stock:42}"]),
        redis::Value::Int(1)
    );
    // One key: the owner's token (its holder label and 128 random bits
    // in hex), nothing else; the fence is the server's clock at the grant.
    let value = lock_tests::fixtures::get(&server, "app:{stock:42}").unwrap();
    let (label, secret) = value.rsplit_once('/').expect("<label>/<secret>");
    assert!(
        label.ends_with(&format!(":{}", std::process::id())),
        "{label}"
    );
    assert_eq!(secret.len(), 32, "a 128-bit secret in hex");
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()), "{secret}");
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let fence = u128::from(guard.fence());
    assert!(fence <= now_us && fence + 60_000_000 > now_us, "{fence}");
    assert_eq!(lock_tests::fixtures::key_count(&server), 1);
    match server.cmd(&["PTTL", "app:{stock:42}"]) {
        redis::Value::Int(pttl) => assert!(pttl > 0 && pttl <= 3000, "{pttl}"),
        other => panic!("{other:?}"),
    }
    assert!(guard.release().await.unwrap());
    assert_eq!(
        server.cmd(&["EXISTS", "app:{stock:42}"]),
        redis::Value::Int(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_config_errors() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let empty = locker.lock("").acquire().await.unwrap_err();
    assert!(matches!(empty, LockError::Config(_)), "{empty:?}");
    let zero = locker
        .lock("k")
        .ttl(Duration::ZERO)
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(zero, LockError::Config(_)), "{zero:?}");
    let sub_ms = locker
        .lock("k")
        .ttl(Duration::from_micros(10))
        .try_acquire()
        .await
        .unwrap_err();
    assert!(matches!(sub_ms, LockError::Config(_)), "{sub_ms:?}");
    let endless = locker
        .lock("k")
        .ttl(Duration::MAX)
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(endless, LockError::Config(_)), "{endless:?}");
    // A name rendered from hostile request data: 1 MiB.
    let huge = locker
        .lock("x".repeat(1 << 20))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(huge, LockError::Config(_)), "{huge:?}");
    assert_eq!(key_count(&server), 0);
    // Every other name locks exactly its own key.
    let mut held = Vec::new();
    for name in ["{", "}", "{}", "a b", "line\nbreak", "*?[]", "%7D", "\u{0}"] {
        let guard = locker.lock(name).try_acquire().await.unwrap();
        held.push(guard.unwrap_or_else(|| panic!("{name:?} was busy")));
    }
    assert_eq!(key_count(&server), 8, "eight names, eight keys");
}

/// A lease too short to use and renew after the drift allowance and the
/// reaction margin is refused before anything is sent (it used to run about
/// 1,800 acquire scripts in 300 ms and then time out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_too_short_to_use_is_a_config_error_and_sends_nothing() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let scripts = command_calls(&server, "evalsha") + command_calls(&server, "eval");
    for ttl in [
        Duration::from_millis(2),
        Duration::from_millis(3),
        Duration::from_micros(9_999),
    ] {
        let refused = locker
            .lock("tiny")
            .ttl(ttl)
            .wait(Duration::from_millis(300))
            .acquire()
            .await
            .unwrap_err();
        let LockError::Config(message) = &refused else {
            panic!("{refused:?}");
        };
        assert!(message.contains("at least 10ms"), "{message}");
    }
    assert_eq!(
        command_calls(&server, "evalsha") + command_calls(&server, "eval"),
        scripts,
        "a refused request reached the server"
    );
    // The same for the config's default, checked at connect. (That the
    // shortest lease, 10 ms, can be granted: see the next test.)
    let tiny_default =
        lock_tests::fixtures::config(&server.url()).default_ttl(Duration::from_millis(9));
    assert!(matches!(
        Locker::connect(tiny_default).await,
        Err(LockError::Config(_))
    ));
}

/// The shortest lease the config accepts (10 ms) can be granted: its grant
/// is trusted for 4.9 to 7.4 ms after the request was sent, so a try whose
/// round trip a stall catches is given back, and the wait lets the library
/// try again. Alone in a process of its own, as it was for the 3 ms lease
/// that was the shortest before: a stall the library saw in the last
/// minute (while other tests of this binary held locks on a busy machine)
/// widens every lease's margin by up to a quarter of its ttl.
#[test]
fn the_shortest_usable_lease_can_be_granted() {
    if !lock_tests::fixtures::alone("the_shortest_usable_lease_can_be_granted") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = RedisServer::start();
        let locker = locker(&server).await;
        let guard = locker
            .lock("tiny")
            .ttl(Duration::from_millis(10))
            .watchdog(false)
            .wait(SHORT_LEASE_WAIT)
            .acquire()
            .await
            .unwrap();
        drop(guard);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbounded_wait_is_accepted_and_still_cancellable() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let guard = locker
        .lock("forever")
        .wait(Duration::MAX)
        .acquire()
        .await
        .unwrap();
    let waiting = locker.lock("forever").wait(Duration::MAX).acquire();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), waiting)
            .await
            .is_err()
    );
    assert!(guard.release().await.unwrap());
}
