//! The read/write lock across processes, on one Redis server: a reader
//! killed with -9 while another keeps renewing, a writer behind sixteen
//! looping readers in two processes, and a read lost behind its holder's
//! back. The behaviours every backend shares are in `read_write.rs`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::RedisServer;
use lock_tests::fixtures::{STALL_ROOM, eventually, lock_key};
use lock_tests::worker::Worker;
use tokio::sync::oneshot;

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

async fn locker(server: &RedisServer) -> Locker {
    let config = LockConfig::from_url(&server.url()).expect("a server URL");
    Locker::connect(config).await.expect("connect")
}

/// The server's clock, in ms.
fn server_ms(server: &RedisServer) -> i64 {
    let redis::Value::Array(time) = server.cmd(&["TIME"]) else {
        panic!("TIME answered no array");
    };
    let part = |at: usize| -> i64 {
        match &time[at] {
            redis::Value::BulkString(text) => String::from_utf8_lossy(text).parse().unwrap(),
            other => panic!("TIME: {other:?}"),
        }
    };
    part(0) * 1000 + part(1) / 1000
}

/// Readers of lock `name` whose lease is alive on the server's clock.
fn live_readers(server: &RedisServer, name: &str) -> i64 {
    let now = format!("({}", server_ms(server));
    let readers = format!("{}:rw:r", lock_key(name));
    server.int(&["ZCOUNT", &readers, &now, "+inf"])
}

/// Waiting writers of lock `name` whose intent is alive, as stored.
fn intents(server: &RedisServer, name: &str) -> i64 {
    server.int(&["ZCARD", &format!("{}:rw:i", lock_key(name))])
}

/// Redisson's crashed reader kept alive by a live reader's renewal (fixed
/// there only in PR #7098): here each reader's lease is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_killed_with_9_frees_its_share_while_another_renews() {
    let server = tokio::task::block_in_place(RedisServer::start);
    let ttl = Duration::from_secs(3);
    let ttl_ms = ttl.as_millis().to_string();
    let mut dead = Worker::spawn(WORKER, &["read-hold", &server.url(), "shelf", &ttl_ms]);
    tokio::task::block_in_place(|| dead.expect_line("acquired ", Duration::from_secs(20)));
    let live = locker(&server).await;
    let live = live.read_lock("shelf").ttl(ttl).acquire().await.unwrap();
    let writer = locker(&server).await;
    let (tell, granted) = oneshot::channel();
    let writing = tokio::spawn(async move {
        let write = writer
            .write_lock("shelf")
            .ttl(ttl)
            .wait(ttl * 20)
            .acquire()
            .await;
        let write = write.expect("the writer gets in");
        let _ = tell.send(Instant::now());
        write.release().await.expect("release the write");
    });
    eventually("the writer waits", Duration::from_secs(20), || {
        intents(&server, "shelf") == 1
    })
    .await;
    assert_eq!(live_readers(&server, "shelf"), 2);
    tokio::task::block_in_place(|| dead.kill9());
    eventually(
        "the killed reader's lease ends on the server",
        ttl + STALL_ROOM * 3,
        || live_readers(&server, "shelf") == 1,
    )
    .await;
    // The live reader renews on, past another of its renewals: the dead
    // one stays dead.
    tokio::time::sleep(ttl / 2).await;
    assert!(live.is_held(), "the live reader is renewed");
    assert_eq!(
        live_readers(&server, "shelf"),
        1,
        "the dead reader came back"
    );
    let released = Instant::now();
    assert!(live.release().await.unwrap());
    let at = granted.await.expect("the writer reports");
    let waited = at.duration_since(released);
    assert!(
        waited < STALL_ROOM * 2,
        "the writer waited {waited:?} after the last live reader left"
    );
    writing.await.unwrap();
    assert_eq!(server.int(&["DBSIZE"]), 0, "something of the lock is left");
}

/// A reader frozen past its lease (as a stopped VM is) no longer keeps a
/// writer out once its lease ends on the server, and is told it lost its
/// read when it wakes, before it could act on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_frozen_past_its_lease_lets_a_writer_in_and_is_told() {
    let server = tokio::task::block_in_place(RedisServer::start);
    let ttl = Duration::from_secs(1);
    let ttl_ms = ttl.as_millis().to_string();
    let mut frozen = Worker::spawn(WORKER, &["read-hold", &server.url(), "shelf", &ttl_ms]);
    tokio::task::block_in_place(|| frozen.expect_line("acquired ", Duration::from_secs(20)));
    frozen.pause();
    let writer = locker(&server).await;
    let write = writer
        .write_lock("shelf")
        .ttl(ttl)
        .wait(ttl * 20)
        .acquire()
        .await
        .expect("the writer gets in once the frozen read's lease ended");
    assert_eq!(live_readers(&server, "shelf"), 0);
    frozen.resume();
    let told = tokio::task::block_in_place(|| frozen.line_within("lost", ttl * 10));
    assert!(told.is_some(), "the frozen reader was not told");
    assert!(write.is_held());
    assert!(write.release().await.unwrap());
}

/// Writer preference against a constant stream of readers: sixteen
/// readers in two processes loop with overlapping reads; a writer gets in
/// within the longest read running when it came plus one delivery, each
/// time, and the readers overlapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_behind_sixteen_looping_readers_gets_in_within_the_longest_read() {
    const HOLD: Duration = Duration::from_millis(300);
    const ROUNDS: usize = 3;
    let server = tokio::task::block_in_place(RedisServer::start);
    let url = server.url();
    let hold_ms = HOLD.as_millis().to_string();
    let args = ["read-loop", &url, "news", "1500", "8", &hold_ms, "8"];
    let mut workers = [Worker::spawn(WORKER, &args), Worker::spawn(WORKER, &args)];
    for worker in &mut workers {
        tokio::task::block_in_place(|| worker.expect_line("ready", Duration::from_secs(30)));
    }
    let writer = locker(&server).await;
    let mut waits = Vec::new();
    for _ in 0..ROUNDS {
        eventually("readers overlap", Duration::from_secs(20), || {
            live_readers(&server, "news") >= 2
        })
        .await;
        let started = Instant::now();
        let write = writer.write_lock("news").ttl(Duration::from_millis(1500));
        let write = write.wait(Duration::from_secs(30)).acquire().await.unwrap();
        waits.push(started.elapsed());
        assert_eq!(
            live_readers(&server, "news"),
            0,
            "a reader beside the writer"
        );
        assert!(write.release().await.unwrap());
    }
    for waited in &waits {
        assert!(
            *waited < HOLD + STALL_ROOM * 2,
            "the writer waited {waited:?} behind reads of {HOLD:?} (all waits: {waits:?})"
        );
    }
    for mut worker in workers {
        let done = tokio::task::block_in_place(|| {
            let done = worker.expect_line("done ", Duration::from_secs(60));
            worker.finish(Duration::from_secs(20));
            done
        });
        let most: usize = done.split(' ').nth(2).unwrap().parse().unwrap();
        assert!(most > 1, "a worker's readers never overlapped ({done})");
    }
    eventually("nothing is left", STALL_ROOM * 3, || {
        server.int(&["DBSIZE"]) == 0
    })
    .await;
    println!("writer waits behind 16 readers holding {HOLD:?}: {waits:?}");
}

/// A reader's lease is reported lost like a lock's: its member removed
/// behind its back (an operator, a failover that lost it), the holder is
/// told at the watchdog's next renewal, while another reader's lease,
/// renewed in the same rounds, stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_removed_behind_its_back_is_reported_lost() {
    let server = tokio::task::block_in_place(RedisServer::start);
    let ttl = Duration::from_millis(1500);
    let (a, b) = (locker(&server).await, locker(&server).await);
    let gone = a.read_lock("ledger").ttl(ttl).acquire().await.unwrap();
    let kept = b.read_lock("ledger").ttl(ttl).acquire().await.unwrap();
    let readers = format!("{}:rw:r", lock_key("ledger"));
    let redis::Value::Array(members) = server.cmd(&["ZRANGE", &readers, "0", "-1"]) else {
        panic!("ZRANGE answered no array");
    };
    assert_eq!(members.len(), 2);
    // Which member is whose is secret (tokens are): remove one, and see
    // which guard is told.
    let redis::Value::BulkString(first) = &members[0] else {
        panic!("a member that is no string");
    };
    let first = String::from_utf8_lossy(first).into_owned();
    assert_eq!(server.int(&["ZREM", &readers, &first]), 1);
    let told = tokio::time::timeout(ttl + STALL_ROOM * 2, async {
        tokio::select! {
            () = gone.lost() => "a",
            () = kept.lost() => "b",
        }
    })
    .await
    .expect("the reader whose lease was removed is told");
    let (lost, held) = if told == "a" {
        (gone, kept)
    } else {
        (kept, gone)
    };
    assert!(!lost.is_held());
    // The other reader is renewed on, round after round.
    tokio::time::sleep(ttl).await;
    assert!(held.is_held(), "the other reader lost its lease too");
    assert!(
        !lost.release().await.unwrap(),
        "a lost read released as held"
    );
    assert!(held.release().await.unwrap());
    assert_eq!(server.int(&["DBSIZE"]), 0, "something of the lock is left");
}
