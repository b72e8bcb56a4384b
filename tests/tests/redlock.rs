//! Redlock over five independent masters: exclusion, a minority of masters
//! down (at start-up, before and during a hold), a majority down, split
//! votes between owners.

use std::time::{Duration, Instant};

use lock_runtime::{LockError, Locker};
use lock_tests::exclusion::{CountRun, Load, hammer};
use lock_tests::fixtures::{
    CONNECT_TIMEOUT, RESPONSE_TIMEOUT, STALL_PROOF_TTL, STALL_ROOM, TOLD_IN_TIME_TTL,
    completes_within, config, exists, get,
};
use lock_tests::{FaultProxy, RedisServer, SilentListener};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// A short connect timeout, only for connecting to masters that never
/// answer (a connect that must succeed within it fails whenever a stall
/// catches it).
const SHORT_CONNECT: Duration = Duration::from_millis(500);

/// How long a test waits for what follows a call at once on a calm machine
/// (the last grants or releases after the majority's).
const SETTLE: Duration = Duration::from_secs(10);

fn start_masters(count: usize) -> Vec<RedisServer> {
    lock_tests::fixtures::settled_masters(count)
}

fn redlock_url(ports: impl IntoIterator<Item = u16>) -> String {
    let hosts: Vec<String> = ports
        .into_iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    format!("redis+redlock://{}", hosts.join(","))
}

fn url_of(masters: &[RedisServer]) -> String {
    redlock_url(masters.iter().map(RedisServer::port))
}

async fn locker(url: &str) -> Locker {
    Locker::connect(config(url)).await.unwrap()
}

/// Polls `condition` until it holds, within [`SETTLE`].
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    lock_tests::fixtures::eventually(what, SETTLE, condition).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_masters_keep_mutual_exclusion_across_tasks_and_processes() {
    let started = Instant::now();
    let masters = start_masters(5);
    let url = url_of(&masters);
    let mut lockers = Vec::new();
    for _ in 0..3 {
        lockers.push(locker(&url).await);
    }
    let load = Load::new("rl-hammer", Duration::from_secs(3));
    let report = hammer(&lockers, &load).await;
    println!("hammer on 5 masters: {report}");
    assert!(report.entries > 20, "too few entries: {report}");
    assert_eq!(report.overlaps, 0, "{report}");
    assert_eq!(report.error_count(), 0, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    // Each entry's acquire was sent after the previous holder's returned:
    // the documented fence guarantee makes every fence higher.
    assert_eq!(report.fence_regressions, 0, "{report}");

    let store = RedisServer::start();
    // Through `#[distributed_lock]` on the global locker: the attribute is
    // the same on every topology, only the URL differs.
    let run = CountRun {
        worker: WORKER,
        lock_url: &url,
        processes: 3,
        tasks: 4,
        iterations: 8,
        extra: &["--attribute"],
        limit: Duration::from_secs(60),
    };
    assert_eq!(run.run(&store), run.expected());
    // The control: the same workload without the lock loses updates.
    let control_store = RedisServer::start();
    let control = CountRun {
        extra: &["--no-lock"],
        ..run
    };
    let lost_some = control.run(&control_store);
    assert!(
        lost_some < control.expected(),
        "the unlocked run lost no update"
    );
    println!("took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_masters_of_five_down_change_nothing() {
    let started = Instant::now();
    let mut masters = start_masters(5);
    let url = url_of(&masters);
    let locker = locker(&url).await;
    // Renewals keep it through a stall (a 900 ms lease has ~150 ms to spare).
    let ttl = STALL_PROOF_TTL;
    let guard = locker.lock("rl-held").ttl(ttl).acquire().await.unwrap();
    // The acquire returns at a majority; the last two grants land just after.
    eventually("held on every master", || {
        masters.iter().all(|m| exists(m, "lock:{rl-held}"))
    })
    .await;

    // Two masters die during the hold: renewals still reach a majority.
    masters[0].kill();
    masters[3].kill();
    let renewed = locker.stats().renewed;
    assert!(
        !completes_within(ttl * 3, guard.lost()).await,
        "a lock held on three of five masters was reported lost"
    );
    assert!(guard.is_held());
    assert!(
        locker.stats().renewed >= renewed + 3,
        "renewals stopped: {:?}",
        locker.stats()
    );
    let live = [&masters[1], &masters[2], &masters[4]];
    for master in live {
        match master.cmd(&["PTTL", "lock:{rl-held}"]) {
            redis::Value::Int(pttl) => assert!(pttl > 0, "PTTL {pttl}"),
            other => panic!("PTTL answered {other:?}"),
        }
    }
    assert!(guard.release().await.unwrap());
    assert!(live.iter().all(|m| !exists(m, "lock:{rl-held}")));

    // With the two still down: acquisitions work and exclude each other.
    let other = Locker::connect(config(&url)).await.unwrap();
    let guard = other.lock("rl-held").try_acquire().await.unwrap().unwrap();
    assert!(
        locker
            .lock("rl-held")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    guard.release().await.unwrap();
    let load = Load::new("rl-minority-down", Duration::from_secs(2));
    let report = hammer(&[locker, other], &load).await;
    println!("hammer with 2 of 5 masters down: {report}");
    assert!(report.entries > 10, "too few entries: {report}");
    assert_eq!(report.overlaps, 0, "{report}");
    assert_eq!(report.error_count(), 0, "{report}");
    assert_eq!(report.fence_regressions, 0, "{report}");
    println!("took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_masters_of_five_down_is_quorum_not_reached_until_they_return() {
    let started = Instant::now();
    let mut masters = start_masters(5);
    let url = url_of(&masters);
    let locker = locker(&url).await;
    // Told before the lease could expire, asserted exactly: a lease whose
    // reaction margin covers a stall at that moment (2 s leaves 122 ms).
    let ttl = TOLD_IN_TIME_TTL;
    let held = locker.lock("rl-doomed").ttl(ttl).acquire().await.unwrap();

    for index in [0, 2, 4] {
        masters[index].kill();
    }
    let killed_at = Instant::now();
    // Renewals reach two of five: unconfirmed, retried, then lost before
    // the lease could have expired on the live masters.
    assert!(
        completes_within(ttl, held.lost()).await,
        "a lock on two of five masters was not reported lost within its ttl"
    );
    println!("lost {:?} after the third master died", killed_at.elapsed());
    // Told while the key still stands on the live masters.
    match masters[1].cmd(&["PTTL", "lock:{rl-doomed}"]) {
        redis::Value::Int(pttl) => assert!(pttl > 0, "told after the key expired ({pttl})"),
        other => panic!("PTTL answered {other:?}"),
    }
    assert!(!held.is_held());
    drop(held);

    // A wait far beyond the bound below: failing within the bound is
    // failing at once, not at the end of the wait.
    let wait = Duration::from_secs(10);
    let asked = Instant::now();
    let answer = locker
        .lock("rl-no-quorum")
        .ttl(ttl)
        .wait(wait)
        .acquire()
        .await;
    let took = asked.elapsed();
    println!("QuorumNotReached after {took:?}");
    match answer {
        Err(LockError::QuorumNotReached {
            key,
            granted,
            needed,
        }) => {
            assert_eq!(key, "rl-no-quorum");
            assert_eq!((granted, needed), (2, 3));
        }
        other => panic!("expected QuorumNotReached, got {other:?}"),
    }
    assert!(took < STALL_ROOM, "failing took {took:?}");
    for index in [1, 3] {
        assert!(
            !exists(&masters[index], "lock:{rl-no-quorum}"),
            "a failed attempt left its key on master {index}"
        );
    }

    // Back (empty: no persistence): locks work again once the managers
    // reconnected. Back empty, they are in quarantine, where a grant of
    // theirs counts only in a round that every master granted, and one
    // still reconnecting would make the try wait the quarantine out
    // (busy); this test is about reaching them.
    for index in [0, 2, 4] {
        masters[index].start_again();
        lock_tests::fixtures::settle(&masters[index]);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let guard = loop {
        match locker.lock("rl-no-quorum").ttl(ttl).try_acquire().await {
            Ok(Some(guard)) => break guard,
            Ok(None) => panic!("nobody else holds the lock"),
            Err(err) => {
                assert!(Instant::now() < deadline, "still failing: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let holders = masters
        .iter()
        .filter(|m| exists(m, "lock:{rl-no-quorum}"))
        .count();
    assert!(holders >= 3, "held on {holders} masters");
    assert!(guard.release().await.unwrap());
    println!("took {:?}", started.elapsed());
}

/// Keys written by hand as if by other owners, then an acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_votes_are_decided_by_the_majority() {
    let started = Instant::now();
    let mut masters = start_masters(5);
    let locker = locker(&url_of(&masters)).await;
    let lock = "lock:{rl-split}";
    let set_on = |masters: &[RedisServer], indices: &[usize], owner: &str, px: &str| {
        for &index in indices {
            assert_eq!(
                masters[index].cmd(&["SET", lock, owner, "PX", px]),
                redis::Value::Okay
            );
        }
    };

    // Two of five held by another owner: three are enough.
    set_on(&masters, &[0, 1], "other", "60000");
    let guard = locker
        .lock("rl-split")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let ours: Vec<Option<String>> = masters.iter().map(|m| get(m, lock)).collect();
    // The other owner's, marked by the single try that found it busy.
    assert_eq!(ours[0].as_deref(), Some("other~"));
    assert_eq!(ours[1].as_deref(), Some("other~"));
    // The same owner token, and nothing else, on the three free masters.
    assert!(ours[2].is_some() && ours[2] == ours[3] && ours[3] == ours[4]);
    assert_ne!(ours[2].as_deref(), Some("other"));
    assert!(guard.release().await.unwrap());
    // Release returns at a majority of answers; the rest follow.
    eventually("released on the three free masters", || {
        (2..5).all(|i| !exists(&masters[i], lock))
    })
    .await;
    assert!((0..2).all(|i| get(&masters[i], lock).as_deref() == Some("other~")));

    // Two owners, one master each: the three free masters are enough.
    set_on(&masters, &[1], "third", "60000");
    let guard = locker
        .lock("rl-split")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    eventually("released on the three free masters", || {
        (2..5).all(|i| !exists(&masters[i], lock))
    })
    .await;

    // Three of five held: busy, and the two that granted are given back.
    set_on(&masters, &[2], "other", "60000");
    assert!(
        locker
            .lock("rl-split")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    assert!(!exists(&masters[3], lock) && !exists(&masters[4], lock));
    // The try marked the owner it found (someone else wants the lock).
    assert_eq!(get(&masters[2], lock).as_deref(), Some("other~"));
    let answer = locker
        .lock("rl-split")
        .wait(Duration::from_millis(300))
        .acquire()
        .await;
    assert!(
        matches!(answer, Err(LockError::Timeout { .. })),
        "{answer:?}"
    );
    // Marked once, whoever found it busy since.
    assert_eq!(get(&masters[2], lock).as_deref(), Some("other~"));
    assert!(!exists(&masters[3], lock) && !exists(&masters[4], lock));

    // Two held and one master down: busy (the owners may let go), not a
    // failure; nothing left on the two free masters.
    masters[2].cmd(&["DEL", lock]);
    masters[2].kill();
    assert!(
        locker
            .lock("rl-split")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    assert!(!exists(&masters[3], lock) && !exists(&masters[4], lock));

    // The owners' leases end in 400 ms: a waiter gets the lock then.
    // Timed from before they are written: they cannot end any sooner.
    let lease = Duration::from_millis(400);
    let asked = Instant::now();
    set_on(&masters, &[0, 1], "other", "400");
    let guard = locker
        .lock("rl-split")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    let waited = asked.elapsed();
    assert!(
        waited >= lease,
        "granted before the leases ended: {waited:?}"
    );
    assert!(waited < lease + STALL_ROOM, "waited {waited:?}");
    guard.release().await.unwrap();
    println!("took {:?}", started.elapsed());
}

/// The previous owner holds two masters of three (the third was down when
/// it acquired), and one of its two restarts empty. That one and the third
/// would make a second majority while the lease still runs on the first:
/// the restarted master's grant must not count until its quarantine ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_restarted_empty_cannot_hand_a_held_lock_to_a_second_owner() {
    let mut masters = start_masters(3);
    let url = url_of(&masters);
    // Outlives the restarts below, however the machine stalls.
    let ttl = Duration::from_secs(20);
    let config = || config(&url).default_ttl(ttl).restart_quarantine(ttl);
    let holder = Locker::connect(config()).await.unwrap();
    tokio::task::block_in_place(|| masters[2].kill());
    let held = holder
        .lock("ledger")
        .ttl(ttl)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    tokio::task::block_in_place(|| {
        masters[2].start_again();
        masters[1].restart();
    });
    let key = lock_tests::fixtures::lock_key("ledger");
    assert!(!exists(&masters[1], &key) && !exists(&masters[2], &key));

    let rival = Locker::connect(config()).await.unwrap();
    let taken = rival.lock("ledger").ttl(ttl).try_acquire().await.unwrap();
    // The lease still ran on master 0 after the try: the try overlapped it.
    assert!(lock_tests::fixtures::pttl(&masters[0], &key) > 0);
    assert!(
        taken.is_none(),
        "a second owner (fence {}) while the first ({}) holds",
        taken.as_ref().map_or(0, |guard| guard.fence()),
        held.fence()
    );
    assert!(!exists(&masters[1], &key) && !exists(&masters[2], &key));

    // Once nobody holds it, every master grants: no quarantine can matter
    // then, and the lock is taken at once.
    held.release().await.unwrap();
    eventually("the release", || !exists(&masters[0], &key)).await;
    let guard = rival.lock("ledger").ttl(ttl).try_acquire().await.unwrap();
    assert!(guard.is_some(), "every master granted a free lock");
}

/// A waiter that never polls (only a release message can wake it).
async fn patient_waiter(url: &str) -> Locker {
    let forever = Duration::from_secs(3600);
    Locker::connect(config(url).retry_backoff(forever, forever))
        .await
        .unwrap()
}

/// `waiter` waiting for lock `name`, held for a minute by another owner on
/// `held_on`, once it is asleep and its listener is subscribed on each of
/// `listening`.
async fn waiting_for(
    waiter: &Locker,
    name: &'static str,
    held_on: &[&RedisServer],
    listening: &[&RedisServer],
) -> tokio::task::JoinHandle<Result<lock_runtime::LockGuard, LockError>> {
    let key = lock_tests::fixtures::lock_key(name);
    for master in held_on {
        assert_eq!(
            master.cmd(&["SET", &key, "other", "PX", "60000"]),
            redis::Value::Okay
        );
    }
    let waiting = {
        let waiter = waiter.clone();
        let forever = Duration::from_secs(3600);
        tokio::spawn(async move { waiter.lock(name).wait(forever).acquire().await })
    };
    let channel = format!("{key}:released");
    let subscribed = |master: &&RedisServer| {
        matches!(master.cmd(&["PUBSUB", "NUMSUB", &channel]),
            redis::Value::Array(reply) if reply.get(1) == Some(&redis::Value::Int(1)))
    };
    eventually("the waiter listens on every live master, asleep", || {
        listening.iter().all(subscribed) && waiter.stats().asleep == 1
    })
    .await;
    waiting
}

/// Frees lock `name` on `held_on` and announces it on `announcer` alone;
/// the lock `waiting` waits for, once it has it.
async fn free_and_announce(
    name: &str,
    held_on: &[&RedisServer],
    announcer: &RedisServer,
    waiting: tokio::task::JoinHandle<Result<lock_runtime::LockGuard, LockError>>,
) -> lock_runtime::LockGuard {
    let key = lock_tests::fixtures::lock_key(name);
    for master in held_on {
        master.cmd(&["DEL", &key]);
    }
    announce_release(announcer, &format!("{key}:released"));
    tokio::time::timeout(SETTLE, waiting)
        .await
        .expect("the waiter slept through the release")
        .unwrap()
        .unwrap()
}

/// Has `waiter`'s listeners on `live` masters connected: each one's first
/// connection wakes every waiter once (another may already listen), which
/// a test of wake-ups must not count.
async fn warm_up(waiter: &Locker, live: &[&RedisServer]) {
    let waiting = waiting_for(waiter, "rl-warm", live, live).await;
    let guard = free_and_announce("rl-warm", live, live[0], waiting).await;
    assert!(guard.release().await.unwrap());
}

/// A waiter listens on every master: a release message from any one of
/// them wakes it, even when the others' messages never come (a releaser
/// that reached only some masters, or deletes that land there later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_message_from_any_master_wakes_the_waiter() {
    let masters = start_masters(3);
    let all: Vec<&RedisServer> = masters.iter().collect();
    let waiter = patient_waiter(&url_of(&masters)).await;
    warm_up(&waiter, &all).await;
    let before = waiter.stats().release_wakeups;
    let waiting = waiting_for(&waiter, "rl-any", &all, &all).await;
    // Freed everywhere, and announced by the last master alone.
    let announced = Instant::now();
    let guard = free_and_announce("rl-any", &all, all[2], waiting).await;
    assert!(
        announced.elapsed() < STALL_ROOM,
        "{:?}",
        announced.elapsed()
    );
    let stats = waiter.stats();
    assert_eq!(stats.release_wakeups - before, 1, "{stats:?}");
    assert!(guard.release().await.unwrap());
}

/// Publishes a release message on `channel` of `master` as the release
/// script does: the master's clock at the delete, in µs. Answers how many
/// subscribers got it.
fn announce_release(master: &RedisServer, channel: &str) -> redis::Value {
    let redis::Value::Array(time) = master.cmd(&["TIME"]) else {
        panic!("TIME answered no array");
    };
    let part = |value: &redis::Value| match value {
        redis::Value::BulkString(digits) => String::from_utf8_lossy(digits).parse::<u64>().unwrap(),
        other => panic!("{other:?}"),
    };
    let now = format!("{}{:06}", part(&time[0]), part(&time[1]));
    master.cmd(&["PUBLISH", channel, &now])
}

/// A waiter listens once one master's listener confirmed; the others
/// subscribe as they connect. A release published on a master before its
/// listener subscribed went unheard, so that listener's first connection
/// wakes the waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_subscribes_late_wakes_the_waiter() {
    let masters = start_masters(3);
    let proxies: Vec<FaultProxy> = masters[1..]
        .iter()
        .map(|master| FaultProxy::start(master.port()))
        .collect();
    let url = redlock_url([masters[0].port(), proxies[0].port(), proxies[1].port()]);
    // Its lock connections to masters 1 and 2 are open from here on.
    let waiter = patient_waiter(&url).await;
    for proxy in &proxies {
        proxy.hold_new_connections(true);
    }
    // Held on masters 1 and 2; heard only through master 0.
    let held_on = [&masters[1], &masters[2]];
    let waiting = waiting_for(&waiter, "rl-late", &held_on, &[&masters[0]]).await;
    // Released on masters 1 and 2, which nobody here listens to yet.
    let key = lock_tests::fixtures::lock_key("rl-late");
    for master in held_on {
        master.cmd(&["DEL", &key]);
        let heard_by = announce_release(master, &format!("{key}:released"));
        assert_eq!(heard_by, redis::Value::Int(0));
    }
    for proxy in &proxies {
        proxy.hold_new_connections(false);
    }
    let guard = tokio::time::timeout(SETTLE, waiting)
        .await
        .expect("the waiter slept through the release its late listeners missed")
        .unwrap()
        .unwrap();
    assert!(guard.release().await.unwrap());
}

/// A master that stays down does not wake the waiters each time its
/// listener tries to reach it again: nothing was heard there to miss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_stays_down_wakes_no_waiter() {
    let mut masters = start_masters(3);
    let url = url_of(&masters);
    tokio::task::block_in_place(|| masters[2].kill());
    let live: Vec<&RedisServer> = masters[..2].iter().collect();
    let waiter = patient_waiter(&url).await;
    warm_up(&waiter, &live).await;
    let waiting = waiting_for(&waiter, "rl-down", &live, &live).await;
    let before = waiter.stats();
    // Its listener for the dead master fails again and again meanwhile
    // (after 50 ms, 100 ms, ... up to 2 s apart).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = waiter.stats();
    assert_eq!(
        (after.release_wakeups, after.timer_wakeups, after.asleep),
        (before.release_wakeups, before.timer_wakeups, 1),
        "{after:?}"
    );
    // The live masters are heard.
    let guard = free_and_announce("rl-down", &live, live[0], waiting).await;
    assert!(guard.release().await.unwrap());
}

/// A release reaches a waiter once per master; only news wakes it: a
/// message from a master its last try found free, or busy with a later
/// owner, tells it nothing. Two lockers take turns on one key, and each
/// wakes about once per grant of the other, not once per master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_each_waiter_once_not_once_per_master() {
    let masters = start_masters(3);
    let url = url_of(&masters);
    let lockers = [locker(&url).await, locker(&url).await];
    let load_for = Duration::from_millis(1500);
    let end = Instant::now() + load_for;
    let mut running = Vec::new();
    for locker in &lockers {
        for _ in 0..4 {
            let locker = locker.clone();
            running.push(tokio::spawn(async move {
                while Instant::now() < end {
                    let guard = locker
                        .lock("rl-turns")
                        .wait(SETTLE)
                        .acquire()
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    for task in running {
        task.await.unwrap();
    }
    let stats = [lockers[0].stats(), lockers[1].stats()];
    assert!(stats.iter().all(|s| s.acquired > 0), "{stats:?}");
    for (mine, others) in [(0, 1), (1, 0)] {
        // Three masters' messages per release would make it three times.
        let (woken, released) = (stats[mine].release_wakeups, stats[others].acquired);
        assert!(
            woken <= released * 5 / 4 + 2,
            "{woken} wake-ups for {released} releases: {stats:?}"
        );
    }
}

/// New masters are in quarantine, yet every master granting lets them lock
/// at once; each reads its uptime once, not once per acquisition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_masters_lock_at_once_and_read_their_uptime_once() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let locker = locker(&url_of(&masters)).await;
    let info_calls = || -> Vec<u64> {
        masters
            .iter()
            .map(|master| lock_tests::fixtures::command_calls(master, "info"))
            .collect()
    };
    let before = info_calls();
    let mut held = Vec::new();
    for n in 0..20 {
        let guard = locker
            .lock(format!("young:{n}"))
            .try_acquire()
            .await
            .unwrap();
        held.push(guard.expect("every master granted a free lock"));
    }
    for (after, before) in info_calls().into_iter().zip(before) {
        // One from the first acquisition, one from the reading before.
        assert!(after - before <= 2, "INFO ran {} times", after - before);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_needs_a_majority_of_masters() {
    let started = Instant::now();
    let mut masters = start_masters(5);
    let url = url_of(&masters);
    masters[1].kill();
    masters[4].kill();
    let locker = locker(&url).await;
    let guard = locker
        .lock("rl-start")
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();

    // The two come back; two others die: the locker must have reached the
    // returning ones in the background to keep a majority.
    masters[1].start_again();
    masters[4].start_again();
    // Back empty, they are in quarantine; this test is about reaching them.
    lock_tests::fixtures::settle(&masters[1]);
    lock_tests::fixtures::settle(&masters[4]);
    masters[0].kill();
    masters[2].kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match locker.lock("rl-start").try_acquire().await {
            Ok(Some(guard)) => {
                guard.release().await.unwrap();
                break;
            }
            Ok(None) => panic!("nobody else holds the lock"),
            Err(err) => {
                assert!(Instant::now() < deadline, "still failing: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    // Three of five refuse connections: a typed error, at once. With a
    // connect timeout far beyond the bound, failing within the bound is
    // failing on the refusals, not on the timeout.
    masters[1].kill();
    let patient = config(&url).connect_timeout(Duration::from_secs(30));
    let asked = Instant::now();
    let refused = Locker::connect(patient).await;
    assert!(matches!(refused, Err(LockError::Redis(_))), "{refused:?}");
    assert!(asked.elapsed() < STALL_ROOM, "{:?}", asked.elapsed());

    // Three of five accept but never answer: the error comes within the
    // connect timeout (a short one: this connect is meant to fail), with
    // room for a stall.
    let silent: Vec<SilentListener> = (0..3).map(|_| SilentListener::start()).collect();
    let ports = silent
        .iter()
        .map(SilentListener::port)
        .chain([masters[3].port(), masters[4].port()]);
    let short = config(&redlock_url(ports)).connect_timeout(SHORT_CONNECT);
    let asked = Instant::now();
    let stalled = Locker::connect(short).await;
    let took = asked.elapsed();
    match stalled {
        Err(LockError::Redis(err)) => println!("{err}"),
        other => panic!("expected a Redis error, got {other:?}"),
    }
    assert!(took < SHORT_CONNECT + STALL_ROOM, "took {took:?}");
    println!("took {:?}", started.elapsed());
}

/// Frozen masters (SIGSTOP: connections open, no answers) cost a round at
/// most a tenth of the lease, and a majority needs no answer from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_masters_do_not_eat_the_lease() {
    let started = Instant::now();
    let masters = start_masters(5);
    let locker = locker(&url_of(&masters)).await;
    // Renewals on the three live masters keep it through a stall.
    let ttl = STALL_PROOF_TTL;
    // A frozen master costs a call at most ttl/10; without that bound it
    // would cost the connect and response timeouts. The bounds below give
    // ttl/10 room for a stall and stay below those timeouts, so meeting
    // them shows that no call waited for a frozen master's timeout.
    let per_master = ttl / 10;
    assert!(2 * per_master + STALL_ROOM < CONNECT_TIMEOUT + RESPONSE_TIMEOUT);
    masters[0].pause();
    masters[1].pause();

    let asked = Instant::now();
    let guard = locker.lock("rl-frozen").ttl(ttl).acquire().await.unwrap();
    let took = asked.elapsed();
    println!("acquired with two frozen masters in {took:?}");
    assert!(took < per_master + STALL_ROOM, "took {took:?}");
    assert!(
        !completes_within(ttl * 2, guard.lost()).await,
        "renewals on three live masters of five did not keep the lock"
    );
    let asked = Instant::now();
    assert!(guard.release().await.unwrap());
    let took = asked.elapsed();
    assert!(took < per_master + STALL_ROOM, "release took {took:?}");
    assert!((2..5).all(|i| !exists(&masters[i], "lock:{rl-frozen}")));

    // A third frozen master: no majority. The vote waits for each frozen
    // master's bound (ttl/10), the clean-up as long again.
    masters[2].pause();
    let asked = Instant::now();
    let answer = locker.lock("rl-frozen-3").ttl(ttl).try_acquire().await;
    let took = asked.elapsed();
    println!("QuorumNotReached with three frozen masters after {took:?}");
    assert!(
        matches!(
            answer,
            Err(LockError::QuorumNotReached {
                granted: 2,
                needed: 3,
                ..
            })
        ),
        "{answer:?}"
    );
    assert!(took < 2 * per_master + STALL_ROOM, "took {took:?}");
    assert!(!exists(&masters[3], "lock:{rl-frozen-3}"));
    assert!(!exists(&masters[4], "lock:{rl-frozen-3}"));
    for master in &masters[..3] {
        master.resume();
    }
    println!("took {:?}", started.elapsed());
}

/// Counters out of step (failed attempts, a master that came back empty):
/// the fence is the highest of the granting majority, and before
/// `acquire` returns a majority of masters stand at it, so each later
/// acquisition's fence is higher. The counters are set by hand, differently
/// each round, so both paths run: a majority already at the fence, and a
/// raise round for the masters behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_rise_even_when_counters_are_out_of_step() {
    let masters = start_masters(5);
    let locker = locker(&url_of(&masters)).await;
    // Each master's one counter for every lock of the locker.
    let fence_key = "lock:fence-counter";
    let counter = |master: &RedisServer| master.int(&["GET", fence_key]) as u64;
    let mut last = 0;
    for round in 0..20u64 {
        // Push two masters (a different pair each round) far ahead.
        for (index, master) in masters.iter().enumerate() {
            if (index as u64 + round) % 5 < 2 {
                let ahead = (counter(master) + 50 + round).to_string();
                master.cmd(&["SET", fence_key, &ahead]);
            }
        }
        let guard = locker.lock("skewed").acquire().await.unwrap();
        let fence = guard.fence();
        assert!(fence > last, "round {round}: fence {fence} after {last}");
        let at_fence = masters.iter().filter(|m| counter(m) >= fence).count();
        assert!(
            at_fence >= 3,
            "round {round}: only {at_fence} masters stand at fence {fence}"
        );
        last = fence;
        assert!(guard.release().await.unwrap());
    }
}

/// Acquisitions dropped in the very poll that started them (a `select!`
/// whose other branch is ready): their calls go on in the background, and the clean-up
/// must reach each master after them, or a master keeps a key for the
/// whole 30 s lease, held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_cancelled_at_once_leave_nothing_held() {
    let masters = start_masters(3);
    let locker = locker(&url_of(&masters)).await;
    let mut cut = 0;
    for attempt in 0..200 {
        let acquiring = locker
            .lock(format!("gone:{attempt}"))
            .ttl(Duration::from_secs(30))
            .acquire();
        // Polled once, then dropped: the calls it started go on alone. (The
        // library's thread may answer within that poll: then the guard is
        // dropped here, which releases it.)
        if futures_util::FutureExt::now_or_never(acquiring).is_none() {
            cut += 1;
        }
    }
    assert!(
        cut >= 100,
        "only {cut} of 200 acquisitions were cut mid-flight"
    );
    let held = || {
        masters
            .iter()
            .map(|master| match master.cmd(&["KEYS", "lock:{gone:*"]) {
                redis::Value::Array(keys) => keys.len(),
                other => panic!("KEYS answered {other:?}"),
            })
            .sum::<usize>()
    };
    lock_tests::fixtures::eventually("no key held by nobody", Duration::from_secs(10), || {
        held() == 0
    })
    .await;
}

/// An acquisition whose first round met a majority of broken connections
/// retries once at once; dropped during that retry, its calls go on in the
/// background, and the clean-up must follow them there too (the retry
/// used to run disarmed, and its grants stayed for the whole lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_dropped_in_its_retry_after_a_majority_was_down_leaves_nothing_held() {
    let masters = start_masters(3);
    let proxies = [
        FaultProxy::start(masters[0].port()),
        FaultProxy::start(masters[1].port()),
    ];
    let url = redlock_url([proxies[0].port(), proxies[1].port(), masters[2].port()]);
    let locker = locker(&url).await;
    // Every connection and script warm, and released here, not in the
    // background, so that nothing of it races the resets below.
    let warm = locker.lock("warm").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    // Two masters' connections break, so the first round finds a majority
    // down and retries; the reconnected ones are slow, so the retry is
    // still out when the acquisition is dropped.
    tokio::task::block_in_place(|| {
        for proxy in &proxies {
            proxy.reset_all();
            proxy.set_latency(Duration::from_millis(300));
        }
    });
    let key = lock_tests::fixtures::lock_key("retried");
    let acquiring = locker
        .lock("retried")
        .ttl(Duration::from_secs(30))
        .acquire();
    // Either slow master: the retry may find one of them still
    // reconnecting and win its majority with the other.
    let reached_a_slow_master = async {
        loop {
            if exists(&masters[0], &key) || exists(&masters[1], &key) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::select! {
        acquired = acquiring => panic!("acquired before the retry reached a slow master: {:?}", acquired.map(|g| g.fence())),
        () = reached_a_slow_master => {}
        () = tokio::time::sleep(SETTLE) => panic!("the retry never reached a slow master"),
    }
    lock_tests::fixtures::eventually("no key held by nobody", SETTLE, || {
        masters.iter().all(|master| !exists(master, &key))
    })
    .await;
}

/// A short lease and a long one renewed in the same round, one master
/// frozen and the long lease missing on another (that master missed its
/// grant): the long lease stays undecided until the round's bound, but
/// the short one, renewed by two masters, is not held back past its own
/// validity and reported lost (the bound was the long lease's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lease_renewed_by_a_majority_is_not_held_back_by_a_long_one() {
    let masters = start_masters(3);
    let locker = locker(&url_of(&masters)).await;
    let long = locker
        .lock("long")
        .ttl(STALL_PROOF_TTL * 10)
        .acquire()
        .await
        .unwrap();
    tokio::task::block_in_place(|| {
        masters[2].cmd(&["DEL", &lock_tests::fixtures::lock_key("long")]);
    });
    let short = locker
        .lock("short")
        .ttl(STALL_PROOF_TTL)
        .acquire()
        .await
        .unwrap();
    tokio::task::block_in_place(|| masters[1].pause());
    // Several of the short lease's renewal rounds.
    tokio::time::sleep(STALL_PROOF_TTL * 3).await;
    let stats = locker.stats();
    tokio::task::block_in_place(|| masters[1].resume());
    assert!(
        short.is_held(),
        "renewed by two masters of three, yet lost: {stats:?}"
    );
    assert_eq!(stats.lost, 0, "{stats:?}");
    assert!(short.release().await.unwrap());
    drop(long);
}

/// Two of three masters slow (not down) for a while: each round gets one
/// grant of the two it needs, and is retried within the wait until the
/// masters answer in time again (it used to fail at the first round).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_masters_are_waited_out_within_the_wait() {
    let masters = start_masters(3);
    let proxies = [
        FaultProxy::start(masters[1].port()),
        FaultProxy::start(masters[2].port()),
    ];
    let url = redlock_url([masters[0].port(), proxies[0].port(), proxies[1].port()]);
    let locker = locker(&url).await;
    // Warm every connection and script, then slow two masters past the
    // per-master bound of a round (a tenth of the 1 s lease).
    drop(locker.lock("warm").acquire().await.unwrap());
    for proxy in &proxies {
        proxy.set_latency(Duration::from_millis(150));
    }
    let rounds_before = lock_tests::fixtures::command_calls(&masters[0], "del");
    let acquiring = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .lock("slow")
                .ttl(Duration::from_secs(1))
                .wait(Duration::from_secs(10))
                .acquire()
                .await
        })
    };
    // Rounds fail while the two are slow: their grant on the fast master
    // is cleaned up each time (the release script's `DEL` there).
    lock_tests::fixtures::eventually("two failed rounds", Duration::from_secs(5), || {
        lock_tests::fixtures::command_calls(&masters[0], "del") >= rounds_before + 2
    })
    .await;
    assert!(
        !acquiring.is_finished(),
        "gave up while masters were only slow"
    );
    for proxy in &proxies {
        proxy.set_latency(Duration::ZERO);
    }
    let guard = acquiring
        .await
        .unwrap()
        .expect("acquired once the masters caught up");
    assert!(guard.release().await.unwrap());
}

/// Three masters, the third behind a proxy 150 ms away each way whose
/// fence counter is gone (evicted, say): a grant there needs the script
/// after the plain commands, a second step that lands 600 ms after the
/// acquisition. The scripts are loaded.
async fn a_slow_third_master_with_two_steps() -> (Vec<RedisServer>, FaultProxy, Locker) {
    let masters = start_masters(3);
    let proxy = FaultProxy::start(masters[2].port());
    let url = redlock_url([masters[0].port(), masters[1].port(), proxy.port()]);
    let locker = locker(&url).await;
    let warm = locker.lock("warm").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    tokio::task::block_in_place(|| {
        masters[2].cmd(&["DEL", "lock:fence-counter"]);
    });
    proxy.set_latency(Duration::from_millis(150));
    (masters, proxy, locker)
}

/// Once every call long ended (two round trips of 300 ms on the slow
/// master), no master holds lock `name`.
async fn nothing_held_after_the_slow_calls(masters: &[RedisServer], name: &str) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let key = lock_tests::fixtures::lock_key(name);
    let left: Vec<bool> =
        tokio::task::block_in_place(|| masters.iter().map(|master| exists(master, &key)).collect());
    assert_eq!(
        left,
        [false, false, false],
        "a key held by nobody (pttl on the slow master: {})",
        lock_tests::fixtures::pttl(&masters[2], &key)
    );
}

/// A `release()` returns once the two quick masters deleted the lock; on
/// the slow master its delete waits for the acquisition's second step, in
/// the background. One dropped after its first poll leaves the rest to
/// the calls it started and to the guard's drop, which wait for those
/// steps too: otherwise, on the slow master, the acquisition's second
/// step would land after the delete and take the key again, held by
/// nobody for the whole lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_dropped_while_a_slow_master_is_mid_acquisition_leaves_nothing_held() {
    let (masters, _proxy, locker) = a_slow_third_master_with_two_steps().await;
    let guard = locker
        .lock("dropped-release")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    // Polled once, then dropped (a zero timeout around it).
    let _ = tokio::time::timeout(Duration::ZERO, guard.release()).await;
    nothing_held_after_the_slow_calls(&masters, "dropped-release").await;
}

/// A release returns at the quick majority's pace, long before the slow
/// master's calls end, and still leaves nothing held there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_does_not_wait_for_a_slow_master_mid_acquisition() {
    let (masters, _proxy, locker) = a_slow_third_master_with_two_steps().await;
    let guard = locker
        .lock("quick-release")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let releasing = Instant::now();
    assert!(guard.release().await.unwrap());
    let took = releasing.elapsed();
    // The slow master's two steps take 600 ms; the quick ones answer at
    // once (a stall of the machine may add to that, not 600 ms).
    assert!(
        took < Duration::from_millis(450),
        "the release took {took:?}"
    );
    nothing_held_after_the_slow_calls(&masters, "quick-release").await;
}

#[lock_runtime::distributed_lock(key = "annotated:<name>", ttl = "30s", locker = locker)]
async fn briefly(locker: &Locker, name: &str) -> Result<(), LockError> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(())
}

/// Through `#[distributed_lock]`, with a second master 150 ms away each
/// way too (so that a majority, and a release, takes a round trip to it):
/// a `timeout` around an annotated call that fires while the generated
/// code releases leaves no key held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_call_cut_during_its_release_leaves_nothing_held() {
    let masters = start_masters(3);
    let far = FaultProxy::start(masters[1].port());
    let slow = FaultProxy::start(masters[2].port());
    let url = redlock_url([masters[0].port(), far.port(), slow.port()]);
    let locker = locker(&url).await;
    let warm = locker.lock("warm").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    tokio::task::block_in_place(|| {
        masters[2].cmd(&["DEL", "lock:fence-counter"]);
    });
    far.set_latency(Duration::from_millis(150));
    slow.set_latency(Duration::from_millis(150));
    // The acquisition needs the far master (300 ms), the body takes 20 ms,
    // the release 300 ms more: the cut lands in the release.
    let cut = tokio::time::timeout(Duration::from_millis(500), briefly(&locker, "x")).await;
    assert!(cut.is_err(), "cut before its end");
    nothing_held_after_the_slow_calls(&masters, "annotated:x").await;
}

/// A renewal that reaches a master which came back empty seeds its counter
/// from the master's clock, as a grant would. Set to the renewed lock's own
/// fence instead, a long-held lock with an old fence (a leader lock) would
/// drag the counters of two masters, restarted one after the other (each
/// quarantine waited out), back below fences already handed out for
/// another key, and the next owner of that key would get a lower fence
/// with every clock in agreement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_on_a_restarted_master_seeds_its_counter_from_its_clock() {
    let mut masters = start_masters(3);
    let url = url_of(&masters);
    let ttl = Duration::from_secs(2);
    let config = || config(&url).default_ttl(ttl).restart_quarantine(ttl);
    let holder = Locker::connect(config()).await.unwrap();
    let other = Locker::connect(config()).await.unwrap();
    let fence_key = "lock:fence-counter";
    let counter = |master: &RedisServer| master.int(&["GET", fence_key]) as u64;

    // A long-held lock (renewed by the watchdog), with an early fence.
    let leader = holder.lock("leader").ttl(ttl).acquire().await.unwrap();
    let old = leader.fence();
    // Another key changes hands a few times: its fences rise past `old`.
    let mut last = 0;
    for _ in 0..20 {
        let guard = other.lock("orders").ttl(ttl).acquire().await.unwrap();
        assert!(guard.fence() > last);
        last = guard.fence();
        guard.release().await.unwrap();
    }
    assert!(last > old + 10, "orders at {last}, leader at {old}");

    // Master 0 restarts empty; the leader's next renewal sets its counter.
    tokio::task::block_in_place(|| masters[0].restart());
    eventually("a renewal reaches restarted master 0", || {
        counter(&masters[0]) != 0
    })
    .await;
    // Its quarantine passes (the leader is still held by masters 1 and 2).
    tokio::time::sleep(ttl + Duration::from_secs(2)).await;
    // Then master 1 restarts empty; the renewal (which now finds the leader
    // gone on a majority) sets its counter as well.
    tokio::task::block_in_place(|| masters[1].restart());
    eventually("a renewal reaches restarted master 1", || {
        counter(&masters[1]) != 0
    })
    .await;
    tokio::time::sleep(ttl + Duration::from_secs(2)).await;
    drop(leader);
    // A minority down, as Redlock allows.
    tokio::task::block_in_place(|| masters[2].kill());

    let next = other
        .lock("orders")
        .ttl(ttl)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(
        next.fence() > last,
        "the next owner of `orders` got fence {} after {last} (leader's: {old})",
        next.fence()
    );
}

/// The lock is held on two masters of three (the third lost its key) when
/// both freeze; the release reaches only the third, which never held it.
/// A majority may still hold the lock (the deletes wait in the frozen
/// masters' queues), so the release cannot say it was no longer ours, nor
/// count a loss: it answers an error, as for any release whose outcome is
/// unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_answered_only_by_a_master_that_never_held_it_is_not_a_loss() {
    let masters = start_masters(3);
    let locker = locker(&url_of(&masters)).await;
    let key = lock_tests::fixtures::lock_key("frozen-holders");
    let guard = locker
        .lock("frozen-holders")
        .ttl(Duration::from_secs(20))
        .acquire()
        .await
        .unwrap();
    tokio::task::block_in_place(|| {
        eventually_sync(|| exists(&masters[2], &key));
        masters[2].cmd(&["DEL", &key]);
        masters[0].pause();
        masters[1].pause();
    });
    let released = guard.release().await;
    let stats = locker.stats();
    tokio::task::block_in_place(|| {
        masters[0].resume();
        masters[1].resume();
    });
    assert!(
        !matches!(released, Ok(false)),
        "held on two frozen masters of three, yet released as not ours"
    );
    assert_eq!(
        stats.lost, 0,
        "a loss counted for a lock still held: {stats:?}"
    );
    // The deletes queued on the frozen masters land once they resume.
    eventually("the queued deletes", || {
        masters[..2].iter().all(|master| !exists(master, &key))
    })
    .await;
}

/// Polls `condition` on this thread until it holds, within [`SETTLE`].
fn eventually_sync(condition: impl Fn() -> bool) {
    let until = Instant::now() + SETTLE;
    while !condition() {
        assert!(Instant::now() < until, "not within {SETTLE:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Two masters of three killed, the third frozen, and a connect timeout
/// shorter than the response timeout (as deployments that fail fast on a
/// dead host set it): a single try meets a majority down. It is
/// `QuorumNotReached`, within its bound, not a timeout of the whole call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_down_and_one_frozen_is_quorum_not_reached_not_a_timeout() {
    let mut masters = start_masters(3);
    let url = url_of(&masters);
    let locker = Locker::connect(config(&url).connect_timeout(SHORT_CONNECT))
        .await
        .unwrap();
    drop(locker.lock("warm").acquire().await.unwrap());
    tokio::task::block_in_place(|| {
        masters[0].kill();
        masters[1].kill();
        masters[2].pause();
    });
    let answer = locker
        .lock("rl-down-frozen")
        .ttl(Duration::from_secs(30))
        .try_acquire()
        .await;
    tokio::task::block_in_place(|| masters[2].resume());
    assert!(
        matches!(answer, Err(LockError::QuorumNotReached { .. })),
        "{answer:?}"
    );
}

/// `inspect` reads a lock as a majority of masters sees it. When the
/// masters that answered cannot tell (too few answered, or the silent ones
/// could still make a majority for an owner seen on some), "free" would be
/// a guess about a lock a frozen majority may hold: it answers an error,
/// as a release whose outcome is unknown does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_never_calls_free_a_lock_the_silent_masters_may_hold() {
    let masters = start_masters(3);
    let locker = locker(&url_of(&masters)).await;
    let key = lock_tests::fixtures::lock_key("watched");
    let _guard = locker
        .lock("watched")
        .ttl(Duration::from_secs(20))
        .acquire()
        .await
        .unwrap();
    tokio::task::block_in_place(|| {
        eventually_sync(|| masters.iter().all(|master| exists(master, &key)));
        masters[0].pause();
        masters[1].pause();
    });
    // Held on all three; only the third answers.
    let minority = locker.inspect("watched").await;
    tokio::task::block_in_place(|| {
        masters[1].resume();
        masters[2].cmd(&["DEL", &key]);
    });
    // The second holds it, the third lost it, the first is silent: held
    // if the first still holds it, which nobody answering can tell.
    let undecided = locker.inspect("watched").await;
    tokio::task::block_in_place(|| masters[0].resume());
    for (what, answer) in [
        ("one master of three answered", minority),
        ("one holder, one empty, one silent", undecided),
    ] {
        assert!(
            !matches!(answer, Ok(ref info) if !info.held),
            "{what}: reported free, though a majority may hold it: {answer:?}"
        );
        println!("{what}: {answer:?}");
    }
    let info = locker.inspect("watched").await.unwrap();
    assert!(info.held, "{info:?}");
}

/// One master of three frozen (`SIGSTOP`) costs its own calls, not the
/// callers' time: eight tasks of two lockers, each on its own key, go on
/// taking and releasing at least at half their rate before the freeze,
/// and no release waits for the frozen master (the acquisition's call
/// still running there, or its own delete there, which follow in the
/// background, in order: once the master thaws, no key is left on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_minority_master_does_not_hold_up_acquire_or_release() {
    let masters = start_masters(3);
    let url = url_of(&masters);
    let lockers = [locker(&url).await, locker(&url).await];
    let pairs = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let longest_release = std::sync::Arc::new(std::sync::Mutex::new(Duration::ZERO));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for task in 0..8 {
        let locker = lockers[task % 2].clone();
        let (pairs, longest, stop) = (pairs.clone(), longest_release.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let key = format!("rl-frozen-{task}");
            // Bounded in count as well as by the stop.
            for _ in 0..100_000 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let request = locker.lock(key.as_str()).ttl(Duration::from_secs(30));
                let guard = request
                    .wait(Duration::from_secs(10))
                    .acquire()
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                let releasing = Instant::now();
                assert!(guard.release().await.unwrap());
                let took = releasing.elapsed();
                let mut longest = longest.lock().unwrap();
                *longest = (*longest).max(took);
                drop(longest);
                pairs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }));
    }
    let window = Duration::from_millis(1500);
    let count = || pairs.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = count();
    tokio::time::sleep(window).await;
    let unfrozen = count() - before;
    masters[0].pause();
    // The calls already sent to it time out meanwhile.
    tokio::time::sleep(RESPONSE_TIMEOUT).await;
    *longest_release.lock().unwrap() = Duration::ZERO;
    let before = count();
    tokio::time::sleep(window).await;
    let frozen = count() - before;
    let longest = *longest_release.lock().unwrap();
    masters[0].resume();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    println!(
        "pairs in {window:?}: {unfrozen} before the freeze, {frozen} during it; longest release during it {longest:?}"
    );
    assert!(
        frozen * 2 >= unfrozen,
        "{frozen} pairs while frozen, {unfrozen} before"
    );
    // A release that waited for the frozen master would take its
    // response timeout.
    assert!(longest < RESPONSE_TIMEOUT, "a release took {longest:?}");
    // Each master ran the acquisitions and then the deletes it was sent,
    // in order: nothing is left anywhere once the frozen one caught up.
    eventually("no lock left on any master", || {
        masters
            .iter()
            .all(|master| (0..8).all(|task| !exists(master, &format!("lock:{{rl-frozen-{task}}}"))))
    })
    .await;
}
