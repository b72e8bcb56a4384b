//! The semaphore across processes and faults, on one Redis server: never
//! more than its limit of permits inside at once (and the count that says
//! so catching a semaphore that grants past it), holders killed with -9
//! whose permits come back when their leases end, a frozen holder that
//! loses its permits and is told, a frozen server, and a lost reply. The
//! behaviours every node backend shares are in `semaphore.rs`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM, eventually, exists, get, lock_key};
use lock_tests::worker::Worker;
use lock_tests::{FaultProxy, RedisServer};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// A lease the watchdog keeps through a machine's stalls.
const TTL: Duration = STALL_PROOF_TTL;

/// The semaphore `name`'s key on the server.
fn semaphore_key(name: &str) -> String {
    format!("{}:sem", lock_key(name))
}

/// A worker taking `permits` of semaphore `name` (limit `limit`) `rounds`
/// times for 30 ms each (0 rounds: once, held until killed).
fn holder(server: &RedisServer, name: &str, limit: u32, permits: u32, rounds: u32) -> Worker {
    sabotaged_holder(server, name, [limit, permits, rounds], &[])
}

/// [`holder`] with `env` (a sabotage) set for the worker.
fn sabotaged_holder(
    server: &RedisServer,
    name: &str,
    [limit, permits, rounds]: [u32; 3],
    env: &[(&str, &str)],
) -> Worker {
    let (limit, permits, rounds) = (limit.to_string(), permits.to_string(), rounds.to_string());
    let ttl = TTL.as_millis().to_string();
    let args = [
        "permits",
        &server.url(),
        name,
        &limit,
        &permits,
        &ttl,
        &rounds,
        "30",
    ];
    Worker::spawn_with_env(WORKER, &args, env)
}

/// Six workers on semaphore `name` with limit 3 (four taking one permit
/// eight times, two taking two permits five times), each started with
/// `env`; once every release came back, the most permits the server
/// counted inside at once.
async fn most_inside(server: &RedisServer, name: &str, env: &[(&str, &str)]) -> u32 {
    let mut workers: Vec<(Worker, u32)> = (0..4)
        .map(|_| (sabotaged_holder(server, name, [3, 1, 8], env), 8))
        .chain((0..2).map(|_| (sabotaged_holder(server, name, [3, 2, 5], env), 5)))
        .collect();
    for (worker, rounds) in &mut workers {
        for _ in 0..*rounds {
            let released = tokio::task::block_in_place(|| {
                worker.expect_line("released", Duration::from_secs(60))
            });
            assert_eq!(released, "released true", "a holder lost its permits");
        }
    }
    assert_eq!(get(server, &format!("inside:{name}")).as_deref(), Some("0"));
    get(server, &format!("most:{name}"))
        .unwrap()
        .parse()
        .unwrap()
}

async fn locker(server: &RedisServer) -> Locker {
    Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_the_limit_inside_across_processes() {
    let server = RedisServer::start();
    let most = most_inside(&server, "render:acme", &[]).await;
    assert!(most <= 3, "{most} permits inside at once, of 3");
    assert!(
        most >= 2,
        "the holders never overlapped: the run proves nothing"
    );
    assert!(
        !exists(&server, &semaphore_key("render:acme")),
        "nothing is left"
    );
}

/// The same count catches a semaphore that grants one permit too many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_inside_catches_a_semaphore_that_grants_past_its_limit() {
    let server = RedisServer::start();
    let sabotage = [("LOCK_RUNTIME_SABOTAGE", "over-limit")];
    let most = most_inside(&server, "render:acme", &sabotage).await;
    assert!(
        most > 3,
        "a broken semaphore went unnoticed: at most {most} inside"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_holder_killed_with_minus_9_gives_its_permits_back_within_its_ttl() {
    let server = RedisServer::start();
    let name = "partner-api";
    let mut holders: Vec<Worker> = (0..3).map(|_| holder(&server, name, 3, 1, 0)).collect();
    for worker in &mut holders {
        tokio::task::block_in_place(|| worker.expect_line("acquired", Duration::from_secs(20)));
    }
    let rival = locker(&server).await;
    let full = rival.semaphore(name, 3).try_acquire().await.unwrap();
    assert!(full.is_none(), "three holders hold the three permits");
    let killed = Instant::now();
    for worker in &mut holders {
        worker.kill9();
    }
    eventually(
        "the permits of the killed come back",
        TTL + STALL_ROOM,
        || !exists(&server, &semaphore_key(name)),
    )
    .await;
    let back = killed.elapsed();
    println!("permits back {back:?} after the kill, ttl {TTL:?}");
    assert!(back <= TTL + STALL_ROOM, "{back:?}");
    let all = rival
        .semaphore(name, 3)
        .permits(3)
        .try_acquire()
        .await
        .unwrap();
    assert_eq!(all.expect("every permit is free").slots(), [0, 1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_loses_its_permits_to_the_next_and_is_told() {
    let server = RedisServer::start();
    let name = "batch";
    let mut frozen = holder(&server, name, 2, 2, 0);
    tokio::task::block_in_place(|| frozen.expect_line("acquired", Duration::from_secs(20)));
    frozen.pause();
    let next = locker(&server).await;
    let taken = next
        .semaphore(name, 2)
        .wait(TTL + STALL_ROOM * 2)
        .acquire()
        .await;
    let taken = taken.expect("the frozen holder's lease ended, and its permits with it");
    frozen.resume();
    let told = tokio::task::block_in_place(|| frozen.line_within("lost", TTL + STALL_ROOM * 2));
    if told.is_none() {
        let output = tokio::task::block_in_place(|| frozen.finish(STALL_ROOM));
        panic!(
            "the thawed holder was not told of its loss; stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(taken.is_held());
    let second = next.semaphore(name, 2).try_acquire().await.unwrap();
    assert!(second.is_some(), "the thawed holder took nothing back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_of_several_permits_whose_reply_is_lost_takes_them_once() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let config = LockConfig::from_url(&proxy.url()).unwrap().pool_size(1);
    let proxied = Locker::connect(config).await.unwrap();
    // Connected, and the script loaded, so that the cut request is the acquire.
    let warm = proxied.semaphore("batch", 3).try_acquire().await.unwrap();
    assert!(warm.expect("free").release().await.unwrap());
    proxy.drop_reply_to(b"{batch}:sem");
    let request = proxied
        .semaphore("batch", 3)
        .permits(2)
        .wait(Duration::ZERO);
    let two = request
        .acquire()
        .await
        .expect("the retry finds its own grant");
    assert_eq!(proxy.replies_dropped(), 1, "the reply was never cut");
    assert_eq!(two.slots(), [0, 1]);
    // Taken once: one permit is left, not none.
    let other = locker(&server).await;
    let last = other.semaphore("batch", 3).try_acquire().await.unwrap();
    let last = last.expect("one permit is left");
    assert_eq!(last.slots(), [2]);
    assert!(
        other
            .semaphore("batch", 3)
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_is_told_before_its_lease_ends_on_a_frozen_server() {
    let server = RedisServer::start();
    let name = "nightly";
    let holder = locker(&server).await;
    let guard = holder.semaphore(name, 2).ttl(TTL).acquire().await.unwrap();
    tokio::task::block_in_place(|| server.pause());
    let frozen = Instant::now();
    let told = tokio::time::timeout(TTL + STALL_ROOM, guard.lost()).await;
    let within = frozen.elapsed();
    tokio::task::block_in_place(|| server.resume());
    told.expect("no loss signal while the server was frozen past the lease");
    // Renewed at most a third of a ttl before the freeze: the lease it
    // trusted ended no later than a ttl after it.
    assert!(within <= TTL + STALL_ROOM, "{within:?}");
    assert!(!guard.is_held());
    // Nobody renews it any more (a renewal queued in the frozen server
    // may stretch it once): free again within a lease.
    let rival = locker(&server).await;
    let all = rival
        .semaphore(name, 2)
        .permits(2)
        .wait(TTL * 2 + STALL_ROOM);
    assert!(all.acquire().await.is_ok(), "the lost permit came back");
    assert!(
        !guard.release().await.unwrap(),
        "released someone else's permits"
    );
}
