//! Locks behind Sentinel: the master is found through the sentinels and
//! followed across failovers, and a lock whose write did not reach the new
//! master is reported lost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::exclusion::{CountRun, ExclusionReport, Load, hammer};
use lock_tests::fixtures::{STALL_ROOM, command_calls, eventually, subscribers};
use lock_tests::{RedisServer, SentinelSetup, SilentListener, closed_port};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

async fn lockers(url: &str, count: usize) -> Vec<Locker> {
    let mut lockers = Vec::with_capacity(count);
    for _ in 0..count {
        let config = LockConfig::from_url(url).expect("sentinel URL");
        lockers.push(
            Locker::connect(config)
                .await
                .expect("connect through the sentinels"),
        );
    }
    lockers
}

fn acquired(lockers: &[Locker]) -> u64 {
    lockers.iter().map(|locker| locker.stats().acquired).sum()
}

/// Locks passed to the next task without a server call, by all `lockers`.
fn passed_in_process(lockers: &[Locker]) -> u64 {
    lockers
        .iter()
        .map(|locker| locker.stats().handovers_in_process)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_through_sentinel_exclude_each_other() {
    let setup = SentinelSetup::start();
    let url = setup.url();

    let lockers = lockers(&url, 3).await;
    let report = hammer(
        &lockers,
        &Load::new("sentinel-hammer", Duration::from_secs(3)),
    )
    .await;
    println!("hammer: {report}");
    assert!(report.entries > 0, "{report}");
    assert_eq!(report.overlaps, 0, "{report}");
    assert_eq!(report.fence_regressions, 0, "{report}");
    assert_eq!(report.error_count(), 0, "{report}");
    // The locks were taken on the master the sentinels name: every entry
    // was granted there (a `SET`, in the acquire script, the plain acquire
    // or a pass from the previous holder) and ended there (a release or a
    // pass script), but for those passed in process, which continue a
    // hold granted there.
    let master = setup.current_master();
    let (scripts, sets) = (
        command_calls(master, "evalsha"),
        command_calls(master, "set"),
    );
    let in_process = passed_in_process(&lockers);
    assert!(
        scripts + in_process >= report.entries && sets + in_process >= report.entries,
        "{scripts} scripts and {sets} sets ({in_process} passes in process) for {report}"
    );

    let store = RedisServer::start();
    // Through `#[distributed_lock]` on the global locker: the attribute is
    // the same on every topology, only the URL differs.
    let run = CountRun {
        worker: WORKER,
        lock_url: &url,
        processes: 3,
        tasks: 8,
        iterations: 10,
        extra: &["--attribute"],
        limit: Duration::from_secs(60),
    };
    let count = tokio::task::block_in_place(|| run.run(&store));
    assert_eq!(count, run.expected());

    // A master name the sentinels do not monitor is a typed error.
    let unknown = url.replace("/mymaster", "/no-such-master");
    let err = Locker::connect(LockConfig::from_url(&unknown).unwrap())
        .await
        .expect_err("no such master");
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
}

/// Runs `load` on `lockers` while the sentinels fail over by hand; then,
/// once the old master replicates from the new one, a second short run
/// must enter on the new master without errors. Returns both reports.
async fn hammer_through_failover(
    setup: Arc<SentinelSetup>,
    lockers: &[Locker],
    load: Load,
) -> (ExclusionReport, ExclusionReport) {
    let run = {
        let (lockers, load) = (lockers.to_vec(), load.clone());
        tokio::spawn(async move { hammer(&lockers, &load).await })
    };
    // The load is under way (seen, not guessed with a 2 s sleep).
    eventually(
        "20 acquisitions before the failover",
        Duration::from_secs(10),
        || acquired(lockers) >= 20,
    )
    .await;
    let took = {
        let setup = setup.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            setup.force_failover();
            started.elapsed()
        })
        .await
        .expect("failover")
    };
    let during = tokio::time::timeout(Duration::from_secs(40), run)
        .await
        .expect("the hammer ends within its bound")
        .expect("hammer task");
    println!("failover took {took:?}; through it: {during}");

    let rejoined = {
        let setup = setup.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            setup.wait_until_replicated();
            started.elapsed()
        })
        .await
        .expect("replication")
    };
    let scripts_before = command_calls(setup.current_master(), "evalsha");
    let sets_before = command_calls(setup.current_master(), "set");
    let in_process_before = passed_in_process(lockers);
    let mut after_load = load.clone();
    after_load.until = Instant::now() + Duration::from_secs(2);
    // A healthy deployment again: a waiter outlasts any queue of 12 tasks,
    // and a replica on a busy machine acknowledges well within 3 s (500 ms
    // was seen to run out once, right after the old master rejoined).
    after_load.wait = Duration::from_secs(10);
    if let Some((replicas, _)) = after_load.replicas {
        after_load.replicas = Some((replicas, Duration::from_secs(3)));
    }
    let listening = {
        let setup = setup.clone();
        let channel = format!("lock:{{{}}}:released", load.key);
        tokio::task::spawn_blocking(move || subscribed_on_master(&setup, &channel))
    };
    let after = hammer(lockers, &after_load).await;
    assert!(
        listening.await.expect("pubsub probe"),
        "no release listener subscribed on the new master"
    );
    let scripts_after = command_calls(setup.current_master(), "evalsha");
    let sets_after = command_calls(setup.current_master(), "set");
    println!(
        "old master in sync again {rejoined:?} later; then: {after}; \
         scripts on the new master {scripts_before} -> {scripts_after}"
    );
    assert!(after.entries > 0, "no entry after the failover: {after}");
    assert_eq!(after.overlaps, 0, "{after}");
    assert_eq!(after.fence_regressions, 0, "{after}");
    assert_eq!(after.error_count(), 0, "{after}");
    // A grant (a `SET`) and a release or a pass (a script) per entry, all
    // on the new master, but for those passed in process, which continue
    // a hold granted there.
    let in_process = passed_in_process(lockers) - in_process_before;
    assert!(
        scripts_after + in_process >= scripts_before + after.entries
            && sets_after + in_process >= sets_before + after.entries,
        "the entries after the failover were not all on the new master ({in_process} passes in process): {after}"
    );
    (during, after)
}

/// Whether, within 2 s (the load's run beside it) and the room for a
/// stall, some locker's release listener is subscribed to `channel` on the
/// master the sentinels name.
fn subscribed_on_master(setup: &SentinelSetup, channel: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2) + STALL_ROOM;
    while Instant::now() < deadline {
        if subscribers(setup.current_master(), channel) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn failover_load(key: &str) -> Load {
    let mut load = Load::new(key, Duration::from_secs(5));
    // Bounds how long the run outlasts `until` while no lock can be had.
    load.wait = Duration::from_secs(3);
    load
}

/// With `WAIT 1` on the only replica, every counted acquisition is on the
/// replica before the holder enters, and once the replica is promoted it
/// acknowledges nothing on the old master: the new master holds every
/// live lock, and nobody can take one there while its holder is inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_failover_under_load_keeps_exclusion_with_wait() {
    let setup = Arc::new(SentinelSetup::start());
    let lockers = lockers(&setup.url(), 3).await;
    let mut load = failover_load("failover-wait");
    load.replicas = Some((1, Duration::from_millis(500)));

    let (during, _) = hammer_through_failover(setup, &lockers, load).await;
    assert_eq!(during.overlaps, 0, "{during}");
    assert_eq!(during.fence_regressions, 0, "{during}");
    // Until the old master replicates from the new one, no master has a
    // replica to acknowledge `WAIT 1`: acquisitions are released again
    // (NotReplicated), waiters behind them may run out of time (Timeout),
    // and calls that meet the switch fail (Redis). Nothing else.
    let unexpected: Vec<_> = during
        .errors
        .keys()
        .filter(|kind| !matches!(kind.as_str(), "NotReplicated" | "Timeout" | "Redis"))
        .collect();
    assert!(unexpected.is_empty(), "unexpected errors: {during}");
}

/// The same without `WAIT`: the locker follows the failover, but
/// exclusion and fencing through it are reported, not asserted: an
/// acquisition the replica had not received when it was promoted, or one
/// made on the old master before this locker moved, is unknown to the new
/// master. Fences come from the masters' clocks, so they go on rising
/// across the switch as long as the new master's clock is not behind the
/// old one's by more than the switch took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_failover_under_load_without_wait_is_followed() {
    let setup = Arc::new(SentinelSetup::start());
    let lockers = lockers(&setup.url(), 3).await;
    let (during, _) =
        hammer_through_failover(setup, &lockers, failover_load("failover-nowait")).await;
    println!(
        "without WAIT, through the failover: overlaps={} fence_regressions={} errors={:?}",
        during.overlaps, during.fence_regressions, during.errors
    );
}

/// A lock written on the master after replication was cut is gone after
/// the failover: its holder is told at once by the first renewal on the new
/// master (well before its lease would run out), and the key is free there.
/// A lock taken while replication was healthy survives, renewed on the new
/// master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_missing_on_the_new_master_is_reported_lost() {
    let mut setup = SentinelSetup::start();
    let url = setup.url();
    let locker = Locker::connect(LockConfig::from_url(&url).unwrap())
        .await
        .unwrap();
    // Renewals every 5 to 10 s keep the healthy lock (and show it renewed
    // on the new master).
    let ttl = Duration::from_secs(30);
    // The fragile lock is first renewed by its schedule no sooner than
    // ttl/6 = 15 s after its acquisition, far later than the failover and
    // the switch take: a loss reported before then was found by the renewal
    // the switch triggered (the watchdog renews every lease at once on a
    // new master), not by the schedule.
    let fragile_ttl = Duration::from_secs(90);

    let healthy = locker
        .lock("healthy")
        .ttl(ttl)
        .wait_for_replicas(1, Duration::from_secs(2))
        .acquire()
        .await
        .expect("healthy lock");
    assert_eq!(setup.replica.int(&["EXISTS", "lock:{healthy}"]), 1);

    tokio::task::block_in_place(|| setup.cut_replication());
    let acquired_at = Instant::now();
    let fragile = locker
        .lock("fragile")
        .ttl(fragile_ttl)
        .acquire()
        .await
        .expect("fragile lock");
    assert_eq!(
        setup.replica.int(&["EXISTS", "lock:{fragile}"]),
        0,
        "the cut replica must not have the lock"
    );

    let promoted = setup.replica.port();
    tokio::task::block_in_place(|| {
        setup.master.kill();
        setup.wait_for_master(promoted);
    });
    let failover_done = Instant::now();
    println!(
        "failover done {:?} after the acquisition",
        acquired_at.elapsed()
    );
    let new_master = &setup.replica;
    let expiry_at_failover = new_master.int(&["PEXPIRETIME", "lock:{healthy}"]);
    assert!(
        expiry_at_failover > 0,
        "the healthy lock reached the new master"
    );

    // Found by the renewal the switch triggered (the locker follows the
    // sentinels within about a second), not at the next scheduled one: told
    // before the schedule could first renew it.
    let first_scheduled = acquired_at + fragile_ttl / 6;
    tokio::time::timeout_at(first_scheduled.into(), fragile.lost())
        .await
        .expect("the lost lock is reported before its first scheduled renewal");
    println!(
        "fragile lock reported lost {:?} after the failover",
        failover_done.elapsed()
    );
    assert!(!fragile.is_held());

    let other = Locker::connect(LockConfig::from_url(&url).unwrap())
        .await
        .unwrap();
    let taken = other
        .lock("fragile")
        .try_acquire()
        .await
        .expect("try_acquire on the new master");
    assert!(
        taken.is_some(),
        "the lost lock's key is free on the new master"
    );

    // The healthy lock is renewed on the new master: its expiry (absolute,
    // PEXPIRETIME) moves forward there.
    let deadline = Instant::now() + Duration::from_secs(12);
    loop {
        let expiry = new_master.int(&["PEXPIRETIME", "lock:{healthy}"]);
        if expiry > expiry_at_failover + 1000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the healthy lock was not renewed on the new master (expiry {expiry})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(healthy.is_held());
    assert!(healthy.release().await.expect("release on the new master"));
}

/// A master demoted to a replica while this locker still talks to it
/// answers READONLY; the locker asks the sentinels, moves to the new
/// master and sends the refused acquire there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_refused_by_a_demoted_master_moves_to_the_new_one() {
    let setup = SentinelSetup::start();
    let locker = Locker::connect(LockConfig::from_url(&setup.url()).unwrap())
        .await
        .unwrap();
    // The locker also asks the sentinels every second on its own; the
    // switch below takes a few milliseconds (the first try must still meet
    // the demoted master: see the READONLY count below).
    tokio::task::block_in_place(|| switch_by_hand(&setup, true));
    // One try (a wait of zero): the refused script is sent again to the
    // new master within the call itself, not by waiting for the periodic
    // re-check (proved by cause, not by < 900 ms).
    let asked = Instant::now();
    let guard = locker
        .lock("moved")
        .ttl(Duration::from_secs(10))
        .wait(Duration::ZERO)
        .acquire()
        .await
        .expect("the acquire is sent again to the new master");
    println!("switched and acquired in {:?}", asked.elapsed());
    let errors = match setup.master.cmd(&["INFO", "errorstats"]) {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO errorstats answered {other:?}"),
    };
    assert!(
        errors.contains("errorstat_READONLY:count=1"),
        "the first try did not meet the demoted master: {errors}"
    );
    assert_eq!(setup.replica.int(&["EXISTS", "lock:{moved}"]), 1);
    assert!(guard.release().await.expect("release on the new master"));
}

/// A try sent to a master that froze, and timed out there after the
/// sentinels named another one, is sent again to the new master: the
/// failure its timeout made the locker follow was the old master's, and a
/// waiter with most of its wait left must not fail for it (nor a waiter
/// whose try was in flight when its master froze, as happens right after
/// it subscribes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_that_timed_out_on_a_frozen_master_is_sent_to_the_new_one() {
    let setup = SentinelSetup::start();
    // The try's timeout outlasts the failover by far: it ends after the
    // sentinels name the new master, whatever the machine's speed.
    let config = LockConfig::from_url(&setup.url())
        .unwrap()
        .response_timeout(Duration::from_secs(8));
    let locker = Locker::connect(config).await.unwrap();
    tokio::task::block_in_place(|| setup.master.pause());
    let acquiring = {
        let locker = locker.clone();
        tokio::spawn(async move {
            let request = locker.lock("frozen-try").ttl(Duration::from_secs(10));
            request.wait(Duration::from_secs(30)).acquire().await
        })
    };
    // The try is on its way to the frozen master (no lookup can name
    // another before the failover below).
    eventually("the try is sent", Duration::from_secs(10), || {
        locker.stats().tries == 1
    })
    .await;
    tokio::task::block_in_place(|| setup.force_failover());
    let guard = acquiring
        .await
        .unwrap()
        .expect("the try that timed out is sent again to the new master");
    // Its own retry, not a later try of the wait.
    assert_eq!(locker.stats().tries, 2);
    assert_eq!(
        setup.current_master().int(&["EXISTS", "lock:{frozen-try}"]),
        1
    );
    assert!(guard.release().await.unwrap());
    setup.master.resume();
}

/// The first sentinel of the list freezes, then the others fail over:
/// each lookup waits for the frozen one only up to the connect timeout and
/// then takes the next sentinel's answer, so the locker still follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_sentinel_does_not_stop_the_locker_following() {
    let setup = SentinelSetup::start();
    // The fixtures' timeouts: a lookup waits for the frozen sentinel up to
    // the 2 s connect timeout (a 500 ms one also bounded the connect that
    // must succeed here, and a stall could make it fail).
    let locker = lock_tests::fixtures::locker(&setup.url()).await;
    tokio::task::block_in_place(|| {
        setup.sentinels()[0].pause();
        setup.force_failover_via(&[1, 2]);
    });
    // The old master goes on accepting writes for seconds after a forced
    // failover: only a lookup moves the locker to the new one.
    let failed_over = Instant::now();
    let new_master = &setup.replica;
    loop {
        let guard = locker
            .lock("probe")
            .ttl(Duration::from_secs(2))
            .acquire()
            .await;
        if let Ok(guard) = guard {
            let _ = guard.release().await;
        }
        // A replica runs no scripts: the first one it ran came from us.
        if command_calls(new_master, "evalsha") > 0 {
            break;
        }
        assert!(
            failed_over.elapsed() < Duration::from_secs(10),
            "the locker never moved to the new master"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "moved to the new master {:?} after the failover",
        failed_over.elapsed()
    );
    setup.sentinels()[0].resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_sentinels_fail_connect_within_the_timeout() {
    let timeout = Duration::from_millis(800);
    let silent = SilentListener::start();
    for (what, hosts) in [
        (
            "closed ports",
            format!("127.0.0.1:{},127.0.0.1:{}", closed_port(), closed_port()),
        ),
        (
            "a sentinel that never answers",
            format!("127.0.0.1:{}", silent.port()),
        ),
    ] {
        let config = LockConfig::from_url(&format!("redis+sentinel://{hosts}/mymaster"))
            .unwrap()
            .connect_timeout(timeout);
        let started = Instant::now();
        let outcome = tokio::time::timeout(timeout * 3 + STALL_ROOM, Locker::connect(config))
            .await
            .unwrap_or_else(|_| panic!("{what}: connect hung"));
        let took = started.elapsed();
        println!("{what}: failed after {took:?}");
        assert!(
            matches!(outcome, Err(LockError::Redis(_))),
            "{what}: {outcome:?}"
        );
        // The (short: this connect is meant to fail) connect timeout, with
        // room for a stall.
        assert!(took < timeout + STALL_ROOM, "{what}: {took:?}");
    }
}

/// The master freezes and the sentinels fail over: a waiter's release
/// listener, still connected to the frozen master (which never closes the
/// connection), leaves it as soon as its locker follows the failover and
/// subscribes on the new master, so the holder's release there wakes it.
/// (It used to stay on the frozen master, and the waiter slept until the
/// end of the holder's lease.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiters_listener_follows_a_failover_away_from_a_frozen_master() {
    let setup = SentinelSetup::start();
    let url = setup.url();
    let holder = Locker::connect(LockConfig::from_url(&url).unwrap())
        .await
        .unwrap();
    // Its own polling and the holder's lease are too far away to matter,
    // however slow the failover: only a release message wakes it (a try
    // of its own while its locker is still on the frozen master would
    // time out there).
    let slow = Duration::from_secs(180);
    let waiter = LockConfig::from_url(&url)
        .unwrap()
        .retry_backoff(slow, slow);
    let waiter = Locker::connect(waiter).await.unwrap();
    let guard = holder.lock("followed").ttl(slow).acquire().await.unwrap();
    tokio::task::block_in_place(|| setup.wait_until_replicated());
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            let request = waiter.lock("followed").wait(slow);
            request.acquire().await
        })
    };
    let channel = "lock:{followed}:released";
    let frozen_port = setup.master_port();
    eventually(
        "the waiter listens on the master",
        Duration::from_secs(10),
        || subscribers(setup.current_master(), channel) > 0,
    )
    .await;
    assert_eq!(setup.master.port(), frozen_port);
    tokio::task::block_in_place(|| {
        setup.master.pause();
        setup.force_failover();
    });
    assert_ne!(setup.master_port(), frozen_port);
    eventually(
        "the waiter listens on the new master",
        Duration::from_secs(20),
        || subscribers(setup.current_master(), channel) > 0,
    )
    .await;
    // The holder follows too (a call answered now was answered by the new
    // master: the old one is frozen), and lets go there; the waiter is
    // woken by the message.
    let follows = async {
        loop {
            let asked = tokio::time::timeout(Duration::from_secs(2), holder.inspect("followed"));
            if asked.await.is_ok_and(|info| info.is_ok()) {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), follows)
        .await
        .expect("the holder follows the failover");
    let released = Instant::now();
    let _ = guard.release().await;
    let taken = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiter was woken by the release on the new master")
        .unwrap()
        .unwrap();
    println!("taken {:?} after the release", released.elapsed());
    assert!(taken.release().await.unwrap());
    setup.master.resume();
}

/// Demotes nothing: the replica is made master by hand and the sentinels
/// told, while the old master stays a master with no replica left, and,
/// set with `min-replicas-to-write 1` as the README asks, refuses every
/// write with `NOREPLICAS`. A locker still on it takes that as "the master
/// moved", as the README says: the refused acquire is sent to the new
/// master within the call. A first try sends the plain `SET NX` and
/// `TIME`, whose refusal comes back as a pipeline's (it failed with it,
/// where the acquire script's refusal was followed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_refused_with_noreplicas_moves_to_the_new_master() {
    let setup = SentinelSetup::start();
    // On the old master only: the new one has no replica in this setup
    // made by hand (the old master would become its replica later).
    setup
        .master
        .cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    let locker = Locker::connect(LockConfig::from_url(&setup.url()).unwrap())
        .await
        .unwrap();
    tokio::task::block_in_place(|| switch_by_hand(&setup, false));
    // The old master has no replica left: it refuses writes.
    eventually(
        "the old master without a replica",
        Duration::from_secs(10),
        || {
            lock_tests::fixtures::info_field(&setup.master, "replication", "connected_slaves")
                == "0"
        },
    )
    .await;
    let asked = Instant::now();
    let outcome = locker
        .lock("refused")
        .ttl(Duration::from_secs(10))
        .wait(Duration::ZERO)
        .acquire()
        .await;
    println!("answered in {:?}: {outcome:?}", asked.elapsed());
    let errors = lock_tests::fixtures::info(&setup.master, "errorstats");
    assert!(
        errors.contains("errorstat_NOREPLICAS"),
        "the first try did not meet the refusing master: {errors}"
    );
    let guard = outcome.expect("the refused acquire is sent again to the new master");
    assert_eq!(setup.replica.int(&["EXISTS", "lock:{refused}"]), 1);
    assert!(guard.release().await.expect("release on the new master"));
}

/// Makes the replica the master by hand, without a failover, and has every
/// sentinel monitor it instead; `demote`: the old master replicates it
/// (else it stays a master the sentinels no longer name).
fn switch_by_hand(setup: &SentinelSetup, demote: bool) {
    let new_port = setup.replica.port().to_string();
    setup.replica.cmd(&["REPLICAOF", "NO", "ONE"]);
    if demote {
        setup.master.cmd(&["REPLICAOF", "127.0.0.1", &new_port]);
    }
    for sentinel in setup.sentinels() {
        sentinel.cmd(&["SENTINEL", "REMOVE", "mymaster"]);
        sentinel.cmd(&[
            "SENTINEL",
            "MONITOR",
            "mymaster",
            "127.0.0.1",
            &new_port,
            "2",
        ]);
    }
}
