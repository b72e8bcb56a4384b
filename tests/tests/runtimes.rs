//! A user's `#[tokio::test]` suite against the global locker: each test has
//! a runtime of its own, and the runtime that called `init` may end while
//! others go on. The locker's connections and watchdog live on the
//! library's own thread, so every test works, in any order, in parallel,
//! and across the end of the runtime that connected.

use std::sync::OnceLock;
use std::time::Duration;

use lock_runtime::{LockError, distributed_lock};
use lock_tests::RedisServer;
use lock_tests::fixtures::{STALL_PROOF_TTL, config};

/// One server for the whole binary, as a user's suite would have one
/// Redis. Started on a thread that lives as long as the process, so it is
/// not killed when the test that started it ends.
fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let server = RedisServer::start();
            sender.send(server.url()).unwrap();
            // Keep the server (and this thread) for the rest of the process.
            std::thread::park();
            drop(server);
        });
        receiver.recv().unwrap()
    })
}

/// What each test does first, as the README says: `init`, accepting that
/// another test got there before.
async fn init() {
    match lock_runtime::init(config(server_url())).await {
        Ok(()) | Err(LockError::AlreadyInitialized) => {}
        Err(err) => panic!("init: {err}"),
    }
}

/// Leases that renewals keep through a stall of the machine (a 600 ms one
/// has under 200 ms to spare): `lock_tests::fixtures::STALL_PROOF_TTL`.
#[distributed_lock(key = "suite:<name>", ttl = "1500ms", wait = "10s")]
async fn hold_across(name: &str, hold: Duration) -> Result<bool, LockError> {
    // Longer than the lease: only renewals keep it.
    tokio::time::sleep(hold).await;
    Ok(lock_runtime::current().unwrap().is_held())
}

#[tokio::test]
async fn first_test_holds_a_lock_past_its_lease() {
    init().await;
    assert!(hold_across("first", STALL_PROOF_TTL * 2).await.unwrap());
}

#[tokio::test]
async fn second_test_holds_a_lock_past_its_lease() {
    init().await;
    assert!(hold_across("second", STALL_PROOF_TTL * 2).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_threaded_test_holds_a_lock_past_its_lease() {
    init().await;
    assert!(hold_across("third", STALL_PROOF_TTL * 2).await.unwrap());
}

/// Runtimes one after another: the first connects the global locker and
/// ends while a lock taken on it is held; the next ones use the locker,
/// and the held lock is still renewed and released.
#[test]
fn runtimes_come_and_go_while_a_lock_is_held() {
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let guard = runtime().block_on(async {
        init().await;
        lock_runtime::global()
            .unwrap()
            .lock("suite:sequential")
            .ttl(STALL_PROOF_TTL)
            .acquire()
            .await
            .unwrap()
    });
    // That runtime is gone. Well past the lease, the lock is still ours.
    std::thread::sleep(STALL_PROOF_TTL * 2);
    assert!(
        guard.is_held(),
        "the lock was lost when the runtime that took it ended"
    );
    for round in 0..3 {
        runtime().block_on(async {
            let locker = lock_runtime::global().unwrap();
            let busy = locker.lock("suite:sequential").try_acquire().await.unwrap();
            assert!(
                busy.is_none(),
                "round {round}: someone else got a held lock"
            );
            let other = locker
                .lock(format!("suite:round:{round}"))
                .acquire()
                .await
                .unwrap();
            assert!(other.release().await.unwrap());
        });
    }
    // Released from yet another runtime, and dropped outside any.
    runtime().block_on(async { assert!(guard.release().await.unwrap()) });
    let dropped = runtime().block_on(async {
        lock_runtime::global()
            .unwrap()
            .lock("suite:dropped")
            .acquire()
            .await
            .unwrap()
    });
    drop(dropped);
    let again = runtime().block_on(async {
        lock_runtime::global()
            .unwrap()
            .lock("suite:dropped")
            .wait(Duration::from_secs(5))
            .acquire()
            .await
    });
    assert!(
        again.is_ok(),
        "a guard dropped outside any runtime was not released: {again:?}"
    );
}
