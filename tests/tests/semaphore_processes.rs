//! The semaphore across processes, on one Redis server: never more than
//! its limit of permits inside at once, holders killed with -9 whose
//! permits come back when their leases end, and a frozen holder that
//! loses its permits and is told. The behaviours every node backend
//! shares are in `semaphore.rs`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::RedisServer;
use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM, eventually, exists, get, lock_key};
use lock_tests::worker::Worker;

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// A lease the watchdog keeps through a machine's stalls.
const TTL: Duration = STALL_PROOF_TTL;

/// The semaphore `name`'s key on the server.
fn semaphore_key(name: &str) -> String {
    format!("{}:sem", lock_key(name))
}

/// A worker taking `permits` of semaphore `name` (limit `limit`) `rounds`
/// times for `hold` each (0 rounds: once, held until killed).
fn holder(server: &RedisServer, name: &str, limit: u32, permits: u32, rounds: u32) -> Worker {
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
    Worker::spawn(WORKER, &args)
}

async fn locker(server: &RedisServer) -> Locker {
    Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_the_limit_inside_across_processes() {
    let server = RedisServer::start();
    let name = "render:acme";
    let mut workers: Vec<(Worker, u32)> = (0..4)
        .map(|_| (holder(&server, name, 3, 1, 8), 8))
        .chain((0..2).map(|_| (holder(&server, name, 3, 2, 5), 5)))
        .collect();
    for (worker, rounds) in &mut workers {
        for _ in 0..*rounds {
            let released = tokio::task::block_in_place(|| {
                worker.expect_line("released", Duration::from_secs(60))
            });
            assert_eq!(released, "released true", "a holder lost its permits");
        }
    }
    let most: u32 = get(&server, &format!("most:{name}"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(most <= 3, "{most} permits inside at once, of 3");
    assert!(
        most >= 2,
        "the holders never overlapped: the run proves nothing"
    );
    assert_eq!(
        get(&server, &format!("inside:{name}")).as_deref(),
        Some("0")
    );
    assert!(!exists(&server, &semaphore_key(name)), "nothing is left");
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
