//! The process-wide locker: set up once, used everywhere, never a panic.

use std::time::Duration;

use lock_runtime::{LockConfig, LockError};
use lock_tests::RedisServer;

// One test in this binary: the global is set once per process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_once_then_use_everywhere() {
    assert!(matches!(
        lock_runtime::global(),
        Err(LockError::NotInitialized)
    ));
    let server = RedisServer::start();
    let config = || LockConfig::from_url(&server.url()).unwrap();
    // A failed init leaves the global unset, so a later init can succeed.
    let bad = lock_runtime::init(config().pool_size(0)).await;
    assert!(matches!(bad, Err(LockError::Config(_))), "{bad:?}");
    assert!(matches!(
        lock_runtime::global(),
        Err(LockError::NotInitialized)
    ));

    lock_runtime::init(config()).await.unwrap();
    let again = lock_runtime::init(config()).await;
    assert!(
        matches!(again, Err(LockError::AlreadyInitialized)),
        "{again:?}"
    );

    let before = server.micros();
    let guard = lock_runtime::global()
        .unwrap()
        .lock("global")
        .ttl(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    assert!((before..=server.micros()).contains(&guard.fence()));
    let from_task = tokio::spawn(async {
        lock_runtime::global()
            .unwrap()
            .lock("global")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    });
    assert!(from_task.await.unwrap(), "another task got a held lock");
    assert!(guard.release().await.unwrap());
}
