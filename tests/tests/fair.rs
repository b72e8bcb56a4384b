//! The fair lock across processes, on one Redis server: grants in the
//! order the server saw the waiters, waiters killed with -9 that cost at
//! most their place's lease, and the bugs Redisson's `RFairLock` users
//! filed, by name. The behaviours every backend shares are in
//! `conformance.rs`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};
use lock_tests::RedisServer;
use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM, eventually, key_count, lock_key};
use lock_tests::worker::Worker;

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// The longest a waiter's place lasts between renewals (the runtime's
/// `PLACE_LEASE`, for a ttl of at least that).
const PLACE_LEASE: Duration = Duration::from_secs(2);

/// Longer than any test runs: a holder that keeps the lock this long only
/// lets go when the test says so.
const FOREVER: Duration = Duration::from_secs(60);

/// The fair lock's release script, run by hand to hand the lock over with
/// a message nobody hears.
const RELEASE_SCRIPT: &str =
    include_str!("../../lock-runtime/src/primitive/fair/scripts/release.lua");

/// The fair lock `name`'s key and its line's.
fn fair_keys(name: &str) -> (String, String) {
    let lock = format!("{}:fair", lock_key(name));
    let line = format!("{lock}:q");
    (lock, line)
}

/// Waiters in `name`'s line as the server sees it (one arrival each).
fn arrivals(server: &RedisServer, name: &str) -> i64 {
    match server.cmd(&["ZCOUNT", &fair_keys(name).1, "-inf", "(0"]) {
        redis::Value::Int(count) => count,
        other => panic!("ZCOUNT: {other:?}"),
    }
}

/// A worker process serving waiters of fair lock `name` (`wait <label>`
/// on its stdin), each holding it `hold` once granted.
fn fair_worker(server: &RedisServer, name: &str, ttl: Duration, hold: Duration) -> Worker {
    let (ttl, hold) = (ttl.as_millis().to_string(), hold.as_millis().to_string());
    Worker::spawn_commanded(WORKER, &["fair", &server.url(), name, &ttl, &hold])
}

/// Starts waiter `label` in `worker` and returns once the server has it
/// in line: the order the server saw them is the order of the labels.
async fn arrive(server: &RedisServer, name: &str, worker: &mut Worker, label: usize) {
    joins_line(server, name, label, || {
        tokio::task::block_in_place(|| worker.tell(&format!("wait {label}")));
    })
    .await;
}

/// Runs `start`, which sets waiter `label` waiting for fair lock `name`,
/// and returns what it returned once the server has that waiter in line.
async fn joins_line<T>(
    server: &RedisServer,
    name: &str,
    label: usize,
    start: impl FnOnce() -> T,
) -> T {
    let before = arrivals(server, name);
    let started = start();
    eventually(
        &format!("waiter {label} is in line"),
        Duration::from_secs(20),
        || arrivals(server, name) == before + 1,
    )
    .await;
    started
}

/// Takes fair lock `name` on `locker`, waiting as long as any test runs.
async fn take_in_turn(locker: &Locker, name: &str) -> lock_runtime::FairGuard {
    locker
        .fair_lock(name)
        .ttl(STALL_PROOF_TTL)
        .wait(FOREVER)
        .acquire()
        .await
        .unwrap()
}

/// A grant a worker reported: `granted <label> <fence>`.
struct Granted {
    label: usize,
    fence: u64,
    at: Instant,
}

/// The next grant `worker` reports, within `limit`.
fn next_grant(worker: &mut Worker, limit: Duration) -> Granted {
    let line = worker.expect_line("granted ", limit);
    let mut words = line.split(' ').skip(1);
    let (Some(label), Some(fence)) = (words.next(), words.next()) else {
        panic!("unreadable grant `{line}`");
    };
    Granted {
        label: label.parse().expect("a label"),
        fence: fence.parse().expect("a fence"),
        at: Instant::now(),
    }
}

async fn locker(server: &RedisServer) -> Locker {
    Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap()
}

/// Lets `worker` finish the waiters it started, and exit.
async fn finish(mut worker: Worker) {
    worker.end_commands();
    let output = tokio::task::block_in_place(|| worker.finish(Duration::from_secs(30)));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && !stdout.contains("failed"),
        "{:?}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Nothing of the lock or its line stays once everyone left.
async fn nothing_left(server: &RedisServer) {
    eventually(
        "nothing is left on the server",
        Duration::from_secs(10),
        || key_count(server) == 0,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_two_processes_are_granted_in_the_order_the_server_saw_them() {
    let server = RedisServer::start();
    let name = "printer";
    let holder = locker(&server).await;
    let held = holder.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    let hold = Duration::from_millis(20);
    let mut workers = [
        fair_worker(&server, name, STALL_PROOF_TTL, hold),
        fair_worker(&server, name, STALL_PROOF_TTL, hold),
    ];
    // Arrivals alternate unevenly between the processes.
    let pattern = [0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0];
    for (label, &process) in pattern.iter().enumerate() {
        arrive(&server, name, &mut workers[process], label).await;
    }
    let first_fence = held.fence();
    assert!(held.release().await.unwrap());
    let mut grants = tokio::task::block_in_place(|| {
        let mut grants = Vec::new();
        for (process, worker) in workers.iter_mut().enumerate() {
            let count = pattern.iter().filter(|&&p| p == process).count();
            for _ in 0..count {
                grants.push(next_grant(worker, Duration::from_secs(30)));
            }
        }
        grants
    });
    // The fences say in which order the server granted the lock.
    grants.sort_by_key(|grant| grant.fence);
    let order: Vec<usize> = grants.iter().map(|grant| grant.label).collect();
    assert_eq!(order, (0..pattern.len()).collect::<Vec<_>>());
    assert!(grants[0].fence > first_fence);
    for worker in workers {
        finish(worker).await;
    }
    nothing_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_head_and_a_killed_middle_waiter_each_cost_at_most_a_place_lease() {
    let server = RedisServer::start();
    let name = "queue";
    let holder = locker(&server).await;
    let held = holder.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    let hold = Duration::from_millis(20);
    let ttl = PLACE_LEASE * 2;
    let mut head = fair_worker(&server, name, ttl, hold);
    let mut live = fair_worker(&server, name, ttl, hold);
    let mut middle = fair_worker(&server, name, ttl, hold);
    arrive(&server, name, &mut head, 0).await;
    arrive(&server, name, &mut live, 1).await;
    arrive(&server, name, &mut middle, 2).await;
    arrive(&server, name, &mut live, 3).await;
    arrive(&server, name, &mut live, 4).await;
    head.kill9();
    middle.kill9();
    let released = Instant::now();
    assert!(held.release().await.unwrap());
    let grants: Vec<Granted> = tokio::task::block_in_place(|| {
        (0..3)
            .map(|_| next_grant(&mut live, Duration::from_secs(30)))
            .collect()
    });
    let order: Vec<usize> = grants.iter().map(|grant| grant.label).collect();
    assert_eq!(order, [1, 3, 4], "the live waiters keep their order");
    // The release may hand the lock to the dead head (its place still
    // ran): it ends with what was left of that place. Waiter 2's place
    // ran out meanwhile, or costs as much once more.
    let first = grants[0].at - released;
    assert!(
        first < PLACE_LEASE + STALL_ROOM,
        "the dead head cost {first:?}"
    );
    let second = grants[1].at - grants[0].at;
    assert!(
        second < hold + PLACE_LEASE + STALL_ROOM,
        "the dead middle waiter cost {second:?}"
    );
    finish(live).await;
    nothing_left(&server).await;
}

/// redisson#3004: waiters' timeouts were estimated on the client and
/// never renewed, so a live waiter older than the estimate was purged
/// from the queue and hung. Here a live waiter waits ten times its
/// place's lease and keeps its place ahead of a later one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_3004_a_waiter_older_than_any_fixed_estimate_keeps_its_place() {
    let server = RedisServer::start();
    let name = "old-waiter";
    let holder = locker(&server).await;
    let held = holder.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    // A place's lease is the ttl when shorter than 2 s.
    let place = STALL_PROOF_TTL;
    let first = {
        let waiter = locker(&server).await;
        tokio::spawn(async move {
            waiter
                .fair_lock(name)
                .ttl(place)
                .wait(FOREVER)
                .acquire()
                .await
        })
    };
    eventually(
        "the first waiter is in line",
        Duration::from_secs(10),
        || arrivals(&server, name) == 1,
    )
    .await;
    tokio::time::sleep(place * 10).await;
    let second = {
        let waiter = locker(&server).await;
        tokio::spawn(async move {
            waiter
                .fair_lock(name)
                .ttl(place)
                .wait(FOREVER)
                .acquire()
                .await
        })
    };
    eventually(
        "the second waiter is in line",
        Duration::from_secs(10),
        || arrivals(&server, name) == 2,
    )
    .await;
    assert!(held.release().await.unwrap());
    let guard = first
        .await
        .unwrap()
        .expect("the old waiter is granted first");
    assert!(!second.is_finished(), "the later waiter overtook");
    assert!(guard.release().await.unwrap());
    let later = second.await.unwrap().unwrap();
    assert!(later.release().await.unwrap());
    nothing_left(&server).await;
}

/// redisson#6150: an application killed with waiters queued left the
/// queue blocked after its restart. Here a process with three waiters is
/// killed with -9 and started again: its new waiter is granted once the
/// dead ones' places ran out, and nothing stays behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_6150_an_app_killed_with_waiters_queued_then_restarted_is_not_blocked() {
    let server = RedisServer::start();
    let name = "restarted";
    let holder = locker(&server).await;
    let held = holder.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    let (ttl, hold) = (PLACE_LEASE * 2, Duration::from_millis(20));
    let mut app = fair_worker(&server, name, ttl, hold);
    for label in 0..3 {
        arrive(&server, name, &mut app, label).await;
    }
    app.kill9();
    let mut restarted = fair_worker(&server, name, ttl, hold);
    arrive(&server, name, &mut restarted, 3).await;
    let released = Instant::now();
    assert!(held.release().await.unwrap());
    let grant = tokio::task::block_in_place(|| next_grant(&mut restarted, Duration::from_secs(30)));
    assert_eq!(grant.label, 3);
    // The lock may go to a dead waiter whose place still ran, for what was
    // left of it; the other dead places ran out by then.
    let took = grant.at - released;
    assert!(took < PLACE_LEASE + STALL_ROOM, "{took:?}");
    finish(restarted).await;
    nothing_left(&server).await;
}

/// redisson#3730 (and #2278, #2883): a lost wake-up message deadlocked
/// the queue. Here the lock is handed over by the release script itself,
/// with its message sent where nobody listens, to a waiter that never
/// polls: it learns it holds the lock from its place's next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_3730_a_lost_hand_over_message_costs_a_place_renewal_not_a_hang() {
    let server = RedisServer::start();
    let name = "unheard";
    let holder = locker(&server).await;
    let held = holder.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    // It never polls, and the lease it would wait out is a minute away.
    let config = LockConfig::from_url(&server.url())
        .unwrap()
        .retry_backoff(FOREVER, FOREVER);
    let waiter = Locker::connect(config).await.unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .fair_lock(name)
                .ttl(FOREVER)
                .wait(FOREVER)
                .acquire()
                .await
        })
    };
    eventually("the waiter sleeps in line", Duration::from_secs(10), || {
        arrivals(&server, name) == 1 && waiter.stats().asleep == 1
    })
    .await;
    let (lock, line) = fair_keys(name);
    let owner = match server.cmd(&["GET", &lock]) {
        redis::Value::BulkString(token) => String::from_utf8(token).unwrap(),
        other => panic!("GET: {other:?}"),
    };
    let handed_over = Instant::now();
    let answer = server.cmd(&[
        "EVAL",
        RELEASE_SCRIPT,
        "2",
        &lock,
        &line,
        &owner,
        &held.fence().to_string(),
        "a-channel-nobody-listens-on",
        "PUBLISH",
    ]);
    assert_eq!(answer, redis::Value::Int(1));
    let guard = waiting.await.unwrap().unwrap();
    let took = handed_over.elapsed();
    // Renewed every third of its lease at the latest.
    assert!(took < PLACE_LEASE / 3 + STALL_ROOM, "{took:?}");
    assert!(guard.fence() > held.fence());
    let stats = waiter.stats();
    assert_eq!(stats.release_wakeups, 0, "no message woke it: {stats:?}");
    assert!(guard.release().await.unwrap());
    // The holder's own release finds the lock gone.
    assert!(!held.release().await.unwrap());
    nothing_left(&server).await;
}

/// Redlock's masters would each keep a line with its own first waiter: a
/// fair lock there is refused, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_on_redlock_is_a_config_error_that_says_why() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let url = lock_tests::fixtures::redlock_url(&masters);
    let locker = Locker::connect(LockConfig::from_url(&url).unwrap())
        .await
        .unwrap();
    let err = locker.fair_lock("orders").acquire().await.unwrap_err();
    let LockError::Config(message) = &err else {
        panic!("{err:?}");
    };
    assert!(message.contains("Redlock"), "{message}");
    assert!(message.contains("line"), "{message}");
    let once = locker.fair_lock("orders").try_acquire().await.unwrap_err();
    assert!(matches!(once, LockError::Config(_)), "{once:?}");
    for master in &masters {
        assert_eq!(key_count(master), 0);
    }
}

/// Asked to wait for replicas, a fair grant is confirmed by them, or
/// handed on again and refused with the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_grant_waits_for_replicas_when_asked() {
    let (master, replica) = lock_tests::fixtures::master_and_replica();
    let locker = locker(&master).await;
    let timeout = Duration::from_millis(300);
    let guard = locker
        .fair_lock("replicated")
        .wait_for_replicas(1, Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(lock_tests::fixtures::exists(
        &replica,
        &fair_keys("replicated").0
    ));
    assert!(guard.release().await.unwrap());
    replica.pause();
    let err = locker
        .fair_lock("replicated")
        .wait_for_replicas(1, timeout)
        .acquire()
        .await
        .unwrap_err();
    replica.resume();
    assert!(
        matches!(
            err,
            LockError::NotReplicated {
                acked: 0,
                wanted: 1,
                ..
            }
        ),
        "{err:?}"
    );
    let other = locker.fair_lock("replicated").try_acquire().await.unwrap();
    assert!(
        other
            .expect("nothing was left held")
            .release()
            .await
            .unwrap()
    );
}

/// A body of the attribute's fair lock: records its label, and runs a call
/// nested in it for the same key (it runs under the same lock).
#[distributed_lock(key = "queue:<id>", fair = true, ttl = "5s", wait = "60s", locker = locker)]
async fn served_fairly(
    locker: &Locker,
    id: u32,
    label: usize,
    served: &std::sync::Mutex<Vec<usize>>,
) -> Result<(), LockError> {
    let fence = lock_runtime::current().expect("inside the body").fence();
    assert_eq!(nested_fairly(locker, id).await?, fence, "a second lock");
    served.lock().unwrap().push(label);
    Ok(())
}

#[distributed_lock(key = "queue:<id>", fair = true, wait = "0s", locker = locker)]
async fn nested_fairly(locker: &Locker, id: u32) -> Result<u64, LockError> {
    Ok(lock_runtime::current().expect("inside the body").fence())
}

/// `fair = true` takes the fair lock: callers run in the order the server
/// saw them wait, a call nested in the body runs under the same lock, and
/// the plain lock of the same name is another lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attribute_takes_the_fair_lock_in_arrival_order() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let name = "queue:7";
    let held = locker.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    let plain = locker.lock(name).try_acquire().await.unwrap();
    assert!(plain.expect("another lock").release().await.unwrap());
    let served = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut calls = Vec::new();
    for label in 0..6 {
        let (locker, served) = (locker.clone(), served.clone());
        let call = joins_line(&server, name, label, || {
            tokio::spawn(async move { served_fairly(&locker, 7, label, &served).await })
        });
        calls.push(call.await);
    }
    assert!(held.release().await.unwrap());
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(*served.lock().unwrap(), (0..6).collect::<Vec<_>>());
    nothing_left(&server).await;
}

/// Takes fair lock `name` on `locker` as waiter `label` in the background:
/// records the label once granted, holds the lock a moment, and lets go.
fn wait_in_line(
    locker: &Locker,
    name: &str,
    label: usize,
    served: &std::sync::Arc<std::sync::Mutex<Vec<(usize, u64)>>>,
) -> tokio::task::JoinHandle<()> {
    let (locker, name, served) = (locker.clone(), name.to_owned(), served.clone());
    tokio::spawn(async move {
        let guard = take_in_turn(&locker, &name).await;
        served.lock().unwrap().push((label, guard.fence()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            guard.release().await.unwrap(),
            "waiter {label} kept its lock"
        );
    })
}

/// A holder whose next in line (as the server's line says) waits in the
/// same locker hands it the lock in process, with a higher fence; one
/// whose next waits in another locker lets the server hand it over, so
/// nobody is overtaken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_in_line_in_the_same_locker_is_handed_the_lock_in_process() {
    let server = RedisServer::start();
    let name = "counter";
    let (a, b) = (locker(&server).await, locker(&server).await);
    let held = a.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    let served = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    // In line: a, a, b, a, a.
    let mut waiters = Vec::new();
    for (label, locker) in [&a, &a, &b, &a, &a].into_iter().enumerate() {
        let waiter = joins_line(&server, name, label, || {
            wait_in_line(locker, name, label, &served)
        });
        waiters.push(waiter.await);
    }
    let first_fence = held.fence();
    assert!(held.release().await.unwrap());
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let served = served.lock().unwrap().clone();
    let labels: Vec<usize> = served.iter().map(|(label, _)| *label).collect();
    assert_eq!(labels, [0, 1, 2, 3, 4], "granted out of arrival order");
    let mut fence = first_fence;
    for (label, next) in &served {
        assert!(
            *next > fence,
            "waiter {label}'s fence {next} is not above {fence}"
        );
        fence = *next;
    }
    // 0 to 1 and 3 to 4 stay in `a`; 1 to 2 and 2 to 3 cross.
    assert_eq!(a.stats().handovers_in_process, 2, "{:?}", a.stats());
    assert_eq!(b.stats().handovers_in_process, 0, "{:?}", b.stats());
    nothing_left(&server).await;
}

/// Waits for fair lock `name` on `locker` in the background: reports its
/// fence once granted, and holds the lock until told.
fn wait_and_hold(
    locker: &Locker,
    name: &str,
) -> (
    tokio::sync::oneshot::Receiver<u64>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (granted, on_grant) = tokio::sync::oneshot::channel();
    let (let_go, on_let_go) = tokio::sync::oneshot::channel::<()>();
    let (locker, name) = (locker.clone(), name.to_owned());
    let waiter = tokio::spawn(async move {
        let guard = take_in_turn(&locker, &name).await;
        let _ = granted.send(guard.fence());
        let _ = on_let_go.await;
        assert!(guard.release().await.unwrap());
    });
    (on_grant, let_go, waiter)
}

/// A waiter that took the lock in process keeps no place it does not
/// need: once the lock goes through the server again, the places of the
/// waiters served in process have left the line with that release, and
/// the waiter of another locker behind them holds the lock at once (not
/// after their places ran out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_of_waiters_served_in_process_leave_the_line_with_the_next_release() {
    let server = RedisServer::start();
    let name = "ledger";
    let (a, b) = (locker(&server).await, locker(&server).await);
    let held = a.fair_lock(name).ttl(FOREVER).acquire().await.unwrap();
    let mut waiters = Vec::new();
    for (label, locker) in [&a, &a, &b].into_iter().enumerate() {
        waiters.push(joins_line(&server, name, label, || wait_and_hold(locker, name)).await);
    }
    let [
        (first, let_first_go, first_task),
        (second, let_second_go, second_task),
        (third, let_third_go, third_task),
    ] = <[_; 3]>::try_from(waiters).ok().unwrap();
    assert!(held.release().await.unwrap());
    let first_fence = first.await.unwrap();
    let_first_go.send(()).unwrap();
    let second_fence = second.await.unwrap();
    assert!(second_fence > first_fence);
    assert_eq!(a.stats().handovers_in_process, 1, "{:?}", a.stats());
    // Taken in process: the second waiter's place is still in line on the
    // server (not renewed), ahead of the third.
    assert_eq!(arrivals(&server, name), 2);
    let_second_go.send(()).unwrap();
    let third_fence = tokio::time::timeout(Duration::from_secs(30), third)
        .await
        .expect("the third waiter was granted")
        .unwrap();
    assert!(third_fence > second_fence);
    // Handed over by the second's release, with no try of its own after
    // its first: no stale place was handed the lock in its stead.
    assert_eq!(b.stats().tries, 1, "{:?}", b.stats());
    assert_eq!(arrivals(&server, name), 0, "a served place stayed in line");
    let_third_go.send(()).unwrap();
    for task in [first_task, second_task, third_task] {
        task.await.unwrap();
    }
    nothing_left(&server).await;
}
