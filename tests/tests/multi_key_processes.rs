//! The multi-key lock across processes (`lock_worker`): transfers between
//! accounts whose racy read-modify-write bodies keep the sum of balances
//! only while both accounts' keys are held (and the same run without the
//! keys losing money, so that the check can fail), on one server and on a
//! Cluster across slots; a holder killed with -9 frees every key within
//! its ttl. The behaviours every backend shares are in `multi_key.rs`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM, eventually, exists, get, lock_key};
use lock_tests::worker::Worker;
use lock_tests::{RedisCluster, RedisServer};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// A lease the watchdog keeps through a machine's stalls.
const TTL: Duration = STALL_PROOF_TTL;
const ACCOUNTS: u32 = 4;
const OPENING: i64 = 1000;

/// Sets every account's balance on `store`.
fn open_accounts(store: &RedisServer) {
    for n in 0..ACCOUNTS {
        store.cmd(&["SET", &format!("acct:{n}"), &OPENING.to_string()]);
    }
}

/// The sum of every balance on `store`.
fn total(store: &RedisServer) -> i64 {
    (0..ACCOUNTS)
        .map(|n| {
            get(store, &format!("acct:{n}"))
                .unwrap()
                .parse::<i64>()
                .unwrap()
        })
        .sum()
}

/// Three workers, two tasks each, moving money `rounds` times each
/// between accounts locked at `url`, kept on `store`; their moves in all.
fn transfers(url: &str, store: &RedisServer, rounds: u32, extra: &[&str]) -> u32 {
    let (ttl, rounds) = (TTL.as_millis().to_string(), rounds.to_string());
    let accounts = ACCOUNTS.to_string();
    let store_url = store.url();
    let mut args = vec!["transfer", url, &store_url, &accounts, "2", &rounds, &ttl];
    args.extend_from_slice(extra);
    let mut workers: Vec<Worker> = (0..3).map(|_| Worker::spawn(WORKER, &args)).collect();
    let mut moves = 0;
    for worker in &mut workers {
        let done =
            tokio::task::block_in_place(|| worker.expect_line("done", Duration::from_secs(120)));
        moves += done["done ".len()..].parse::<u32>().unwrap();
    }
    moves
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_across_processes_keep_the_sum_of_balances() {
    let server = RedisServer::start();
    open_accounts(&server);
    let moves = transfers(&server.url(), &server, 40, &[]);
    assert_eq!(moves, 3 * 2 * 40);
    assert_eq!(
        total(&server),
        i64::from(ACCOUNTS) * OPENING,
        "money was made or lost"
    );
    for n in 0..ACCOUNTS {
        assert!(
            !exists(&server, &lock_key(&format!("acct:{n}"))),
            "nothing is left"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_on_a_cluster_across_slots_keep_the_sum_of_balances() {
    let cluster = tokio::task::block_in_place(RedisCluster::start);
    let store = RedisServer::start();
    open_accounts(&store);
    let moves = transfers(&cluster.url(), &store, 30, &[]);
    assert_eq!(moves, 3 * 2 * 30);
    assert_eq!(
        total(&store),
        i64::from(ACCOUNTS) * OPENING,
        "money was made or lost"
    );
}

/// The control run: the same transfers without the keys held change the
/// sum, so the check above can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_without_the_keys_lose_money() {
    let server = RedisServer::start();
    open_accounts(&server);
    transfers(&server.url(), &server, 40, &["--no-lock"]);
    assert_ne!(
        total(&server),
        i64::from(ACCOUNTS) * OPENING,
        "the racy bodies never raced: the run proves nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_killed_with_minus_9_frees_every_key_within_its_ttl() {
    let server = RedisServer::start();
    let ttl = TTL.as_millis().to_string();
    let mut holder = Worker::spawn(WORKER, &["hold-all", &server.url(), &ttl, "x", "y", "z"]);
    tokio::task::block_in_place(|| holder.expect_line("acquired", Duration::from_secs(20)));
    let rival = Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap();
    for name in ["x", "y", "z"] {
        assert!(
            rival.lock(name).try_acquire().await.unwrap().is_none(),
            "{name} is held"
        );
    }
    let killed = Instant::now();
    holder.kill9();
    eventually(
        "every key of the killed holder is freed",
        TTL + STALL_ROOM,
        || {
            ["x", "y", "z"]
                .iter()
                .all(|name| !exists(&server, &lock_key(name)))
        },
    )
    .await;
    let freed = killed.elapsed();
    assert!(freed <= TTL + STALL_ROOM, "{freed:?}");
    let all = rival.lock_all(["z", "y", "x"]).try_acquire().await.unwrap();
    assert!(all.expect("every key is free").release().await.unwrap());
}
