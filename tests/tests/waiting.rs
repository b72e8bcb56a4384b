//! Waiters sleep until the release message, not on a poll interval.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::RedisServer;
use lock_tests::fixtures::{
    STALL_ROOM, command_calls, eventually, pubsub_clients, subscribers, wait_for_subscribers,
};

/// A backoff so slow that a waiter woken within seconds was woken by
/// something else: the release message, or the owner's lease ending.
const SLOW_BACKOFF: Duration = Duration::from_secs(20);

/// The test's bound on a wake-up: generous for a machine that stalls, and
/// far below [`SLOW_BACKOFF`], so a wake-up within it is not the backoff's.
const WAKE_BOUND: Duration = Duration::from_secs(5);
const _: () = assert!(WAKE_BOUND.as_secs() * 2 < SLOW_BACKOFF.as_secs());

async fn locker(server: &RedisServer, backoff: Option<Duration>) -> Locker {
    let mut config = LockConfig::from_url(&server.url()).unwrap();
    if let Some(backoff) = backoff {
        config = config.retry_backoff(backoff, backoff);
    }
    Locker::connect(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_waiter_is_woken_by_the_release_message() {
    let server = RedisServer::start();
    // A backoff of 20 s and an owner lease of 30 s: only the release message
    // can wake the waiter within the bound asserted below.
    let holder = locker(&server, None).await;
    let waiter = locker(&server, Some(SLOW_BACKOFF)).await;
    let guard = holder
        .lock("handoff")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let blocked = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            let guard = waiter
                .lock("handoff")
                .wait(Duration::from_secs(15))
                .acquire()
                .await
                .unwrap();
            guard.fence()
        })
    };
    // The waiter found the lock busy and subscribed (the server says so),
    // tried once more and sleeps (a release before that would be met by the
    // try, and wake no one).
    wait_for_subscribers(&server, "lock:{handoff}:released", 1).await;
    eventually("the waiter asleep", Duration::from_secs(10), || {
        waiter.stats().asleep == 1
    })
    .await;
    assert!(!blocked.is_finished());
    let held_fence = guard.fence();
    assert!(guard.release().await.unwrap());
    // Woken within WAKE_BOUND, far below the backoff, by the message and not
    // by a timer: proved by cause, not by a second of a calm machine.
    let fence = tokio::time::timeout(WAKE_BOUND, blocked)
        .await
        .expect("the waiter was not woken by the release")
        .unwrap();
    assert!(fence > held_fence);
    let stats = waiter.stats();
    assert_eq!(stats.timer_wakeups, 0, "{stats:?}");
    assert_eq!(stats.release_wakeups, 1, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_a_crashed_owner_wakes_when_its_lease_ends() {
    let server = RedisServer::start();
    let locker = locker(&server, Some(SLOW_BACKOFF)).await;
    // A key written by an owner that then vanished, 400 ms left. Timed from
    // before the write: the lease cannot end on the server any sooner.
    let lease = Duration::from_millis(400);
    let started = Instant::now();
    server.cmd(&["SET", "lock:{orphan}", "someone-else", "PX", "400"]);
    // Within its wait (far below the 20 s backoff): woken by its timer set
    // to the PTTL the script returned.
    let guard = locker
        .lock("orphan")
        .wait(WAKE_BOUND)
        .acquire()
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= lease,
        "granted before the lease ended: {waited:?}"
    );
    assert!(waited < lease + STALL_ROOM, "{waited:?}");
    let stats = locker.stats();
    assert!(stats.timer_wakeups >= 1, "{stats:?}");
    assert_eq!(stats.release_wakeups, 0, "{stats:?}");
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_share_one_pubsub_connection_that_comes_back_after_a_kill() {
    let server = RedisServer::start();
    let holder = locker(&server, None).await;
    let waiter = locker(&server, Some(SLOW_BACKOFF)).await;
    let mut held = Vec::new();
    let mut blocked = Vec::new();
    for i in 0..8 {
        held.push(holder.lock(format!("shared:{i}")).acquire().await.unwrap());
        let waiter = waiter.clone();
        blocked.push(tokio::spawn(async move {
            let request = waiter.lock(format!("shared:{i}"));
            request
                .wait(Duration::from_secs(15))
                .acquire()
                .await
                .unwrap()
        }));
    }
    for i in 0..8 {
        wait_for_subscribers(&server, &format!("lock:{{shared:{i}}}:released"), 1).await;
    }
    assert_eq!(
        pubsub_clients(&server),
        1,
        "one connection serves every waiter"
    );

    // Cut it: the listener must reconnect and subscribe to every channel again.
    server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    eventually("the listener came back", Duration::from_secs(10), || {
        pubsub_clients(&server) == 1
    })
    .await;
    // ...and subscribed to every channel again before anything is released.
    eventually("the listener resubscribed", Duration::from_secs(10), || {
        (0..8).all(|i| subscribers(&server, &format!("lock:{{shared:{i}}}:released")) == 1)
    })
    .await;

    for guard in held {
        assert!(guard.release().await.unwrap());
    }
    for task in blocked {
        let guard = tokio::time::timeout(WAKE_BOUND, task)
            .await
            .expect("a waiter missed its release message")
            .unwrap();
        assert!(guard.release().await.unwrap());
    }
    let stats = waiter.stats();
    assert_eq!(stats.timer_wakeups, 0, "{stats:?}");
    // Subscriptions end with their waiters.
    eventually(
        "no subscription outlived its waiters",
        Duration::from_secs(10),
        || subscribers(&server, "lock:{shared:0}:released") == 0,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_wait_a_lock_waits_up_to_its_own_ttl() {
    let server = RedisServer::start();
    let holder = locker(&server, None).await;
    let waiter = locker(&server, None).await;
    assert_eq!(waiter.config().get_default_ttl(), Duration::from_secs(30));
    let _guard = holder.lock("own-ttl").acquire().await.unwrap();
    let started = Instant::now();
    let result = waiter
        .lock("own-ttl")
        .ttl(Duration::from_millis(300))
        .acquire()
        .await;
    assert!(
        matches!(result, Err(lock_runtime::LockError::Timeout { .. })),
        "{result:?}"
    );
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(
        waited < Duration::from_secs(5),
        "waited {waited:?}, the config's 30 s ttl?"
    );
}

fn connections_received(server: &RedisServer) -> u64 {
    lock_tests::fixtures::info_field(server, "stats", "total_connections_received")
        .parse()
        .expect("total_connections_received in INFO stats")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_may_not_subscribe_waits_on_timers_without_reconnecting() {
    let server = RedisServer::start();
    server.cmd(&[
        "ACL",
        "SETUSER",
        "nosub",
        "on",
        "nopass",
        "~*",
        "&*",
        "+@all",
        "-subscribe",
    ]);
    let url = format!("redis://nosub@127.0.0.1:{}/", server.port());
    let holder = locker(&server, None).await;
    let waiter = Locker::connect(
        LockConfig::from_url(&url)
            .unwrap()
            .retry_backoff(Duration::from_millis(20), Duration::from_millis(100)),
    )
    .await
    .unwrap();
    let guard = holder.lock("acl").acquire().await.unwrap();
    let before = connections_received(&server);
    let release = async {
        // The waiter found the lock busy, was refused its subscription and
        // has woken on its timers, 20 times (1.5 s on a calm machine, and
        // long enough for a reconnect loop, 50 ms doubling, to show): seen,
        // not guessed with a sleep.
        eventually(
            "the waiter waiting on its timers",
            Duration::from_secs(20),
            || waiter.stats().timer_wakeups >= 20,
        )
        .await;
        assert!(guard.release().await.unwrap());
    };
    let wait = waiter.lock("acl").wait(Duration::from_secs(10)).acquire();
    let ((), acquired) = tokio::join!(release, wait);
    let guard = acquired.expect("the waiter never got the lock on its timers");
    assert!(guard.is_held());
    let opened = connections_received(&server) - before;
    // One refused pub/sub connection is fine; a reconnect loop is not.
    assert!(opened <= 3, "{opened} connections opened while waiting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_one_waiter_not_the_whole_line() {
    const WAITERS: u64 = 32;
    let server = RedisServer::start();
    let holder = locker(&server, None).await;
    let waiter = locker(&server, Some(SLOW_BACKOFF)).await;
    let guard = holder.lock("queue").acquire().await.unwrap();
    let mut line = Vec::new();
    for _ in 0..WAITERS {
        let waiter = waiter.clone();
        line.push(tokio::spawn(async move {
            let request = waiter.lock("queue").wait(Duration::from_secs(15));
            let guard = request.acquire().await.unwrap();
            assert!(guard.release().await.unwrap());
        }));
    }
    // The first waiter in line has tried, subscribed, tried again and
    // sleeps; the others wait for their turn in the process, without a
    // script.
    lock_tests::fixtures::eventually(
        "the first waiter asleep on the release channel",
        Duration::from_secs(10),
        || {
            waiter.stats().asleep == 1
                && subscribers(&server, &lock_tests::fixtures::release_channel("queue")) == 1
        },
    )
    .await;
    let before = command_calls(&server, "evalsha");
    assert!(guard.release().await.unwrap());
    for task in line {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("a waiter was never woken")
            .unwrap();
    }
    let calls = command_calls(&server, "evalsha") - before;
    let stats = waiter.stats();
    assert_eq!(stats.timer_wakeups, 0, "{stats:?}");
    // Each waiter: one acquire on its wake-up and one release, plus a few
    // retries when a wake-up raced a newcomer. Waking the whole line on
    // every release would take about WAITERS * WAITERS / 2 calls.
    assert!(
        calls <= 4 * WAITERS,
        "{calls} scripts for {WAITERS} handoffs"
    );
}

/// Channels `server` has subscribers on (`PUBSUB CHANNELS`).
fn channels_listened_on(server: &RedisServer) -> usize {
    match server.cmd(&["PUBSUB", "CHANNELS"]) {
        redis::Value::Array(channels) => channels.len(),
        other => panic!("PUBSUB CHANNELS: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_waiters_on_distinct_keys_is_subscribed_in_a_few_commands() {
    // A sale over many items at once: each key busy, one waiter on each.
    // Subscribing them a round trip at a time made the last waiter (and
    // every release message queued behind the subscriptions) wait for
    // hundreds of round trips.
    const KEYS: usize = 300;
    let server = RedisServer::start();
    let holder = locker(&server, None).await;
    let waiter = locker(&server, Some(SLOW_BACKOFF)).await;
    let mut guards = Vec::new();
    for n in 0..KEYS {
        let request = holder
            .lock(format!("item:{n}"))
            .ttl(Duration::from_secs(60));
        guards.push(request.acquire().await.unwrap());
    }
    let waiters: Vec<_> = (0..KEYS)
        .map(|n| {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                let request = waiter.lock(format!("item:{n}")).wait(SLOW_BACKOFF);
                request.acquire().await.map(drop)
            })
        })
        .collect();
    eventually("every waiter listening", SLOW_BACKOFF, || {
        channels_listened_on(&server) == KEYS
    })
    .await;
    // The waiters arrive while earlier subscriptions are on their way: those
    // queued meanwhile go together. One command each would be about KEYS.
    let commands = command_calls(&server, "subscribe");
    assert!(
        commands <= (KEYS / 2) as u64,
        "{commands} SUBSCRIBE commands for {KEYS} channels"
    );
    // And every one of them is woken by its release, not by its backoff.
    let released = Instant::now();
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
    for waiter in waiters {
        waiter.await.unwrap().unwrap();
    }
    assert!(released.elapsed() < WAKE_BOUND, "{:?}", released.elapsed());
}

/// A wait that found the lock busy runs on the library's runtime, whose
/// thread hears the release; the caller may let go of it at any moment,
/// the release's included. Whatever the order, nothing stays held: the
/// next acquisition gets the lock within a couple of round trips, and
/// every grant the cancelled waiter counted was given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_let_go_as_the_lock_is_released_leaves_nothing_held() {
    let server = RedisServer::start();
    let holder = locker(&server, None).await;
    let waiter = locker(&server, Some(SLOW_BACKOFF)).await;
    let next = locker(&server, None).await;
    for round in 0..40u32 {
        let key = format!("let-go-{round}");
        let guard = holder.lock(&key).acquire().await.unwrap();
        let waiting = {
            let (waiter, key) = (waiter.clone(), key.clone());
            tokio::spawn(async move { waiter.lock(&key).wait(WAKE_BOUND).acquire().await })
        };
        eventually("the waiter asleep", WAKE_BOUND, || {
            waiter.stats().asleep == 1
        })
        .await;
        // The release and the cancel race, each round a little apart.
        let releasing = tokio::spawn(guard.release());
        for _ in 0..round % 4 {
            tokio::task::yield_now().await;
        }
        waiting.abort();
        let _ = waiting.await;
        assert!(releasing.await.unwrap().unwrap());
        let taken = next.lock(&key).wait(STALL_ROOM).acquire().await;
        assert!(taken.is_ok(), "round {round}: left held: {taken:?}");
        assert!(taken.unwrap().release().await.unwrap());
        eventually("the waiter asleep no more", STALL_ROOM, || {
            waiter.stats().asleep == 0
        })
        .await;
    }
    // A grant that came before the cancel is given back with its guard.
    eventually("every grant of the waiter given back", STALL_ROOM, || {
        let stats = waiter.stats();
        stats.acquired == stats.released
    })
    .await;
}
