//! `#[distributed_lock]` functions against a real Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};
use lock_tests::fixtures::STALL_ROOM;
use lock_tests::{RedisServer, Worker};
use tokio::sync::Notify;

async fn locker(server: &RedisServer) -> Locker {
    Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap()
}

#[distributed_lock(key = "counter:<name>", ttl = "5s", wait = "30s", locker = locker)]
async fn enter(locker: &Locker, name: &str, inside: &AtomicBool) -> Result<(), LockError> {
    assert!(!inside.swap(true, Ordering::SeqCst), "two bodies at once");
    tokio::time::sleep(Duration::from_millis(1)).await;
    inside.store(false, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotated_bodies_never_overlap_across_tasks() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (locker, inside) = (locker.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                enter(&locker, "shared", &inside).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(locker.stats().acquired, 80);
    assert!(locker.stats().contended > 0);
}

#[test]
fn annotated_bodies_never_overlap_across_processes() {
    let server = RedisServer::start();
    let url = server.url();
    let workers: Vec<Worker> = (0..2)
        .map(|_| {
            let args = [
                "count",
                &url,
                "counter-lock",
                "counter",
                "16",
                "10",
                "--attribute",
            ];
            Worker::spawn(env!("CARGO_BIN_EXE_lock_worker"), &args)
        })
        .collect();
    for worker in workers {
        let output = worker.finish(Duration::from_secs(120));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(
        server.cmd(&["GET", "counter"]),
        redis::Value::BulkString(b"320".to_vec())
    );
}

struct Customer {
    name: String,
}

struct Order {
    id: u64,
    customer: Customer,
    lines: (u32, u32),
}

struct Shard {
    shard: u32,
    locker: Locker,
}

impl Shard {
    #[distributed_lock(
        key = "shard:<self.shard>:order:<order.id>:<order.customer.name>:<order.lines.1>",
        locker = self.locker
    )]
    async fn place(&self, order: &Order) -> Result<String, LockError> {
        Ok(lock_runtime::current().unwrap().key().to_owned())
    }

    #[distributed_lock(key = "shard:<self.shard>:close", locker = self.locker)]
    async fn close(self) -> Result<u32, LockError> {
        Ok(self.shard)
    }

    #[distributed_lock(key = "shard:<self.shard>:bump", locker = self.locker)]
    async fn bump(&mut self) -> Result<u32, LockError> {
        self.shard += 1;
        Ok(self.shard)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_rendered_from_parameters_fields_and_self() {
    let server = RedisServer::start();
    let mut shard = Shard {
        shard: 3,
        locker: locker(&server).await,
    };
    let order = Order {
        id: 42,
        customer: Customer { name: "ada".into() },
        lines: (1, 2),
    };
    assert_eq!(shard.place(&order).await.unwrap(), "shard:3:order:42:ada:2");
    assert_eq!(order.customer.name, "ada", "the argument was not moved");
    assert_eq!(shard.bump().await.unwrap(), 4);
    assert_eq!(shard.close().await.unwrap(), 4);
    assert!(lock_runtime::current().is_none());
    // Every lock was released at the end of its body.
    assert_eq!(
        server.cmd(&["KEYS", "lock:{shard*}"]),
        redis::Value::Array(vec![])
    );
}

#[derive(Debug)]
enum AppError {
    Busy(String),
    Lock(LockError),
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        match error {
            LockError::Timeout { key, .. } => AppError::Busy(key),
            other => AppError::Lock(other),
        }
    }
}

#[distributed_lock(key = "invoice:<id>", wait = "0s", locker = locker)]
async fn settle(locker: &Locker, id: u32) -> Result<u32, AppError> {
    Ok(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_errors_come_out_through_the_users_from() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    assert_eq!(settle(&locker, 7).await.unwrap(), 7);
    let held = locker.lock("invoice:7").acquire().await.unwrap();
    match settle(&locker, 7).await {
        Err(AppError::Busy(key)) => assert_eq!(key, "invoice:7"),
        other => panic!("expected AppError::Busy, got {other:?}"),
    }
    held.release().await.unwrap();
    // A dead server is a typed error too, converted the same way.
    drop(server);
    match settle(&locker, 8).await {
        Err(AppError::Lock(LockError::Redis(_))) => {}
        other => panic!("expected AppError::Lock(Redis), got {other:?}"),
    }
}

#[distributed_lock(key = "job", ttl = "600ms", locker = locker)]
async fn long_job(
    locker: &Locker,
    started: tokio::sync::oneshot::Sender<u64>,
    finished: &AtomicBool,
) -> Result<(), LockError> {
    let _ = started.send(lock_runtime::current().unwrap().fence());
    tokio::time::sleep(Duration::from_secs(10)).await;
    finished.store(true, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock(key = "job", ttl = "600ms", on_lost = "continue", locker = locker)]
async fn stubborn_job(
    locker: &Locker,
    started: tokio::sync::oneshot::Sender<u64>,
    finished: &AtomicBool,
) -> Result<(), LockError> {
    let lock = lock_runtime::current().unwrap();
    let _ = started.send(lock.fence());
    // Goes on until the loss is known (not for a guess of how long the
    // watchdog takes to find it), then finishes all the same.
    tokio::time::timeout(Duration::from_secs(10), lock.lost())
        .await
        .expect("the deleted lock was never reported lost");
    finished.store(true, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lost_cancel_stops_the_body_when_the_key_is_deleted() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let finished = AtomicBool::new(false);
    let (started, started_rx) = tokio::sync::oneshot::channel();
    let job = long_job(&locker, started, &finished);
    tokio::pin!(job);
    let delete = async {
        started_rx.await.unwrap();
        assert_eq!(server.cmd(&["DEL", "lock:{job}"]), redis::Value::Int(1));
        (Instant::now(), locker.stats().renewal_calls)
    };
    let (result, (deleted_at, calls_at_delete)) = tokio::join!(job, delete);
    let cancelled_after = deleted_at.elapsed();
    assert!(
        matches!(result, Err(LockError::Lost { ref key }) if key == "job"),
        "{result:?}"
    );
    assert!(
        !finished.load(Ordering::SeqCst),
        "the body ran on without its lock"
    );
    // Stopped by the loss the first renewal after the delete found (the
    // body would sleep 10 s), not by the lease's validity running out.
    let stats = locker.stats();
    assert!(
        stats.renewal_calls - calls_at_delete <= 1,
        "{} renewal rounds before the cancel: {stats:?}",
        stats.renewal_calls - calls_at_delete
    );
    assert_eq!(stats.lost, 1, "{stats:?}");
    // A renewal comes every ttl/3 at the latest; the rest is room for the
    // machine stalling meanwhile.
    let ttl = Duration::from_millis(600);
    assert!(
        cancelled_after < ttl / 3 + STALL_ROOM,
        "cancelled after {cancelled_after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lost_continue_lets_the_body_finish() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let finished = AtomicBool::new(false);
    let (started, started_rx) = tokio::sync::oneshot::channel();
    let job = stubborn_job(&locker, started, &finished);
    let delete = async {
        started_rx.await.unwrap();
        server.cmd(&["DEL", "lock:{job}"]);
    };
    let (result, ()) = tokio::join!(job, delete);
    result.unwrap();
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(locker.stats().lost, 1);
}

#[distributed_lock(key = "nested:<id>", wait = "2s", locker = locker)]
async fn outer(locker: &Locker, id: u32, entries: &AtomicU32) -> Result<(u64, u64), LockError> {
    entries.fetch_add(1, Ordering::SeqCst);
    let mine = lock_runtime::current().unwrap().fence();
    // Same task, same key: runs at once instead of waiting for itself.
    let nested = inner(locker, id, entries).await?;
    // Another task still has to wait, and here gives up.
    let other = {
        let locker = locker.clone();
        tokio::spawn(async move { try_inner(&locker, id).await })
    };
    assert!(matches!(
        other.await.unwrap(),
        Err(LockError::Timeout { .. })
    ));
    Ok((mine, nested))
}

#[distributed_lock(key = "nested:<id>", wait = "2s", locker = locker)]
async fn inner(locker: &Locker, id: u32, entries: &AtomicU32) -> Result<u64, LockError> {
    entries.fetch_add(1, Ordering::SeqCst);
    Ok(lock_runtime::current().unwrap().fence())
}

#[distributed_lock(key = "nested:<id>", wait = "0s", locker = locker)]
async fn try_inner(locker: &Locker, id: u32) -> Result<(), LockError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_call_for_a_held_key_does_not_deadlock() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let entries = AtomicU32::new(0);
    // Had the nested call waited for the lock its caller holds, it would
    // have waited its whole 2 s wait and returned a Timeout, and `outer`
    // with it: Ok proves it did not wait, whatever the clock says.
    let (outer_fence, inner_fence) = outer(&locker, 9, &entries).await.unwrap();
    assert_eq!(entries.load(Ordering::SeqCst), 2);
    assert_eq!(
        outer_fence, inner_fence,
        "the nested call took a second lock"
    );
    assert_eq!(locker.stats().acquired, 1);
}

trait Inventory {
    async fn reserve(&self, sku: u64) -> Result<u64, LockError>;
}

struct Warehouse {
    locker: Locker,
}

impl Inventory for Warehouse {
    #[distributed_lock(key = "sku:<sku>", locker = self.locker)]
    async fn reserve(&self, sku: u64) -> Result<u64, LockError> {
        Ok(lock_runtime::current().unwrap().fence())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trait_impl_methods_are_locked_too() {
    let server = RedisServer::start();
    let warehouse = Warehouse {
        locker: locker(&server).await,
    };
    // Each call took the lock: the fence is the server's clock at the
    // grant, and the second call's is later.
    let before = server.micros();
    let first = warehouse.reserve(5).await.unwrap();
    let second = warehouse.reserve(5).await.unwrap();
    let after = server.micros();
    assert!(
        before <= first && first < second && second <= after,
        "{before} {first} {second} {after}"
    );
}

/// A trait that `dyn` needs: `#[async_trait]` on the impl expands first and
/// boxes the method's body before the attribute sees it.
#[async_trait::async_trait]
trait Shelf {
    async fn take(&self, sku: u64, entered: &Notify, leave: &Notify) -> Result<String, LockError>;
}

struct Stockroom {
    locker: Locker,
}

#[async_trait::async_trait]
impl Shelf for Stockroom {
    #[distributed_lock(key = "shelf:<sku>", wait = "0s", locker = self.locker)]
    async fn take(&self, sku: u64, entered: &Notify, leave: &Notify) -> Result<String, LockError> {
        entered.notify_one();
        leave.notified().await;
        let lock = lock_runtime::current().expect("the body runs under the lock");
        Ok(lock.key().to_owned())
    }
}

/// The store does not matter here, so the in-memory one serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_trait_methods_are_locked_too() {
    let locker = Locker::connect(LockConfig::in_memory()).await.unwrap();
    let shelf: Arc<dyn Shelf + Send + Sync> = Arc::new(Stockroom { locker });
    let (entered, leave) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let holder = tokio::spawn({
        let (shelf, entered, leave) = (shelf.clone(), entered.clone(), leave.clone());
        async move { shelf.take(7, &entered, &leave).await }
    });
    entered.notified().await;
    // Let in, this call would leave at once and answer Ok.
    let open = Notify::new();
    open.notify_one();
    let busy = shelf.take(7, &Notify::new(), &open).await;
    assert!(
        matches!(busy, Err(LockError::Timeout { .. })),
        "the key was free: {busy:?}"
    );
    leave.notify_one();
    assert_eq!(holder.await.unwrap().unwrap(), "shelf:7");
}

#[distributed_lock(key = "layer:<n>", locker = locker)]
async fn layer_leaf(locker: &Locker, n: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "layer:<n>", locker = locker)]
async fn layer_middle(locker: &Locker, n: u32) -> Result<(), LockError> {
    let (a, b) = tokio::join!(layer_leaf(locker, n), layer_leaf(locker, n + 1));
    a.and(b)
}

#[distributed_lock(key = "layer:<n>", locker = locker)]
async fn layer_top(locker: &Locker, n: u32) -> Result<(), LockError> {
    layer_middle(locker, n).await
}

/// Each annotated layer adds a bounded amount to the future that calls it;
/// it does not multiply it (three layers once took 168 KB in a debug build
/// and overflowed a test thread's stack when nested).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotated_layers_add_to_a_future_not_multiply_it() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let leaf = std::mem::size_of_val(&layer_leaf(&locker, 0));
    let top = std::mem::size_of_val(&layer_top(&locker, 0));
    assert!(
        top <= 8 * leaf,
        "leaf {leaf} bytes, three layers {top} bytes"
    );
    layer_top(&locker, 0).await.unwrap();
}

/// Cuts the locker's path to the server as the body ends, so that the
/// release after it cannot be answered.
#[distributed_lock(key = "release:<name>", ttl = "5s", locker = locker)]
async fn cut_before_release(
    locker: &Locker,
    name: &str,
    proxy: &lock_tests::FaultProxy,
) -> Result<u32, LockError> {
    proxy.blackhole(true);
    Ok(7)
}

/// The same, asking for the release's failure as the call's answer.
#[distributed_lock(key = "release:<name>", ttl = "5s", locker = locker, on_release_error = "fail")]
async fn cut_before_release_and_fail(
    locker: &Locker,
    name: &str,
    proxy: &lock_tests::FaultProxy,
) -> Result<u32, LockError> {
    proxy.blackhole(true);
    Ok(7)
}

/// A release that fails after the body ran is counted and logged, and the
/// call answers the body's output; with `on_release_error = "fail"` it
/// answers `LockError::ReleaseFailed` instead. (The guard's drop tries
/// the release once more, in the background, which fails too while the
/// path stays cut: two failures per call.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_fails_after_the_body_is_counted_or_returned() {
    let server = RedisServer::start();
    let proxy = lock_tests::FaultProxy::start(server.port());
    let locker = Locker::connect(lock_tests::fixtures::config(&proxy.url()))
        .await
        .unwrap();
    let given_up = |count: u64| {
        let locker = locker.clone();
        async move {
            let what = format!("{count} lock(s) given up");
            lock_tests::fixtures::eventually(&what, Duration::from_secs(30), || {
                locker.stats().released >= count
            })
            .await;
        }
    };
    assert_eq!(cut_before_release(&locker, "a", &proxy).await.unwrap(), 7);
    given_up(1).await;
    assert_eq!(locker.stats().release_errors, 2, "{:?}", locker.stats());
    proxy.blackhole(false);
    let err = cut_before_release_and_fail(&locker, "b", &proxy)
        .await
        .unwrap_err();
    given_up(2).await;
    proxy.blackhole(false);
    let LockError::ReleaseFailed { key, source } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(key, "release:b");
    assert!(matches!(**source, LockError::Redis(_)), "{source:?}");
    assert!(
        err.to_string().contains("stays held until its lease ends"),
        "{err}"
    );
    assert_eq!(locker.stats().release_errors, 4, "{:?}", locker.stats());
}
