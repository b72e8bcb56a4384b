//! Calls nested in a holder's body (same task, same key): they run under
//! the holder's lock, one at a time, and never wait on an ancestor.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use lock_runtime::{LockError, Locker, distributed_lock};
use lock_tests::RedisServer;
use lock_tests::fixtures::{RacyAccount, locker};

/// A racy account and the locker its deposits lock with.
struct Ledger {
    locker: Locker,
    account: RacyAccount,
}

impl Ledger {
    async fn new(server: &RedisServer) -> Self {
        Self {
            locker: locker(&server.url()).await,
            account: RacyAccount::default(),
        }
    }

    async fn add_one(&self) {
        self.account.add_one().await;
    }

    fn assert_serialized(&self, deposits: u32) {
        assert_eq!(self.account.overlaps(), 0, "two deposits ran at once");
        assert_eq!(self.account.balance(), deposits, "a deposit was lost");
        // All of it under the one lock the outermost call took.
        assert_eq!(self.locker.stats().acquired, 1);
    }
}

#[distributed_lock(key = "acct:<id>", wait = "5s", locker = ledger.locker)]
async fn deposit(ledger: &Ledger, id: u32) -> Result<(), LockError> {
    ledger.add_one().await;
    Ok(())
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn two_deposits_joined(ledger: &Ledger, id: u32) -> Result<(), LockError> {
    let (a, b) = tokio::join!(deposit(ledger, id), deposit(ledger, id));
    a.and(b)
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn deposits_selected(ledger: &Ledger, id: u32) -> Result<(), LockError> {
    // Both branches run until the one-deposit branch completes.
    tokio::select! {
        first = deposit(ledger, id) => first?,
        second = async { deposit(ledger, id).await?; deposit(ledger, id).await } => second?,
    }
    Ok(())
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn many_deposits_unordered(ledger: &Ledger, id: u32, count: u32) -> Result<(), LockError> {
    let mut deposits: FuturesUnordered<_> = (0..count).map(|_| deposit(ledger, id)).collect();
    while let Some(result) = deposits.next().await {
        result?;
    }
    Ok(())
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn outer(ledger: &Ledger, id: u32) -> Result<(), LockError> {
    middle(ledger, id).await
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn middle(ledger: &Ledger, id: u32) -> Result<(), LockError> {
    // Nested in a nested call: its turn is the middle call's to give.
    let (a, b) = tokio::join!(deposit(ledger, id), deposit(ledger, id));
    a.and(b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_nested_calls_take_turns() {
    let server = RedisServer::start();
    let ledger = Ledger::new(&server).await;
    two_deposits_joined(&ledger, 1).await.unwrap();
    ledger.assert_serialized(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_nested_calls_take_turns() {
    let server = RedisServer::start();
    let ledger = Ledger::new(&server).await;
    deposits_selected(&ledger, 2).await.unwrap();
    // The one-deposit branch won after one deposit of the other branch
    // started or not: never two at once.
    assert_eq!(ledger.account.overlaps(), 0, "two deposits ran at once");
    assert_eq!(ledger.locker.stats().acquired, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unordered_nested_calls_take_turns() {
    let server = RedisServer::start();
    let ledger = Ledger::new(&server).await;
    many_deposits_unordered(&ledger, 3, 8).await.unwrap();
    ledger.assert_serialized(8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_nested_in_nested_calls_never_wait_on_an_ancestor() {
    let server = RedisServer::start();
    let ledger = Ledger::new(&server).await;
    // Each level would wait on its ancestor's lock for its whole wait (30 s
    // default) if nesting were not recognised; the test's bound is shorter.
    tokio::time::timeout(Duration::from_secs(10), outer(&ledger, 4))
        .await
        .expect("a nested call waited on its ancestor")
        .unwrap();
    ledger.assert_serialized(2);
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn hold_then_try(
    ledger: &Ledger,
    id: u32,
    entered: &AtomicU32,
) -> Result<LockError, LockError> {
    let holding = async {
        // Takes the turn first and keeps it until the other gave up.
        deposit_and_wait(ledger, id, entered).await
    };
    let trying = async {
        // Only once the sibling is inside.
        while entered.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let result = quick_deposit(ledger, id).await;
        entered.store(2, Ordering::SeqCst);
        result
    };
    let (held, tried) = tokio::join!(holding, trying);
    held?;
    Ok(tried.expect_err("the sibling got in while the turn was taken"))
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn deposit_and_wait(ledger: &Ledger, id: u32, entered: &AtomicU32) -> Result<(), LockError> {
    entered.store(1, Ordering::SeqCst);
    while entered.load(Ordering::SeqCst) != 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

#[distributed_lock(key = "acct:<id>", wait = "0s", locker = ledger.locker)]
async fn quick_deposit(ledger: &Ledger, id: u32) -> Result<(), LockError> {
    ledger.add_one().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_call_waits_for_its_turn_only_within_its_own_wait() {
    let server = RedisServer::start();
    let ledger = Ledger::new(&server).await;
    let entered = AtomicU32::new(0);
    let refused = hold_then_try(&ledger, 5, &entered).await.unwrap();
    assert!(matches!(refused, LockError::Timeout { .. }), "{refused:?}");
    assert_eq!(ledger.account.balance(), 0);
}

#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn outer_then_strict(ledger: &Ledger, id: u32) -> Result<LockError, LockError> {
    Ok(strict(ledger, id)
        .await
        .expect_err("a strict nested call ran"))
}

#[distributed_lock(key = "acct:<id>", reentrant = false, locker = ledger.locker)]
async fn strict(ledger: &Ledger, id: u32) -> Result<(), LockError> {
    ledger.add_one().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_forbids_reentry_fails_at_once_instead_of_waiting_for_itself() {
    let server = RedisServer::start();
    let ledger = Ledger::new(&server).await;
    let refused = tokio::time::timeout(Duration::from_secs(10), outer_then_strict(&ledger, 6))
        .await
        .expect("the strict call waited for its own enclosing call")
        .unwrap();
    assert!(
        matches!(refused, LockError::HeldByThisTask { ref key } if key == "acct:6"),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("reentrant = false"),
        "{refused}"
    );
    // Outside any holder, the strict call simply takes the lock.
    strict(&ledger, 6).await.unwrap();
}

/// Two locks of a slow sibling's making: it holds the turn while it waits,
/// on real time, for another lock that someone else holds for a while.
struct Siblings {
    locker: Locker,
    other: Locker,
}

#[distributed_lock(key = "sib:<id>", wait = "10s", locker = siblings.locker)]
async fn slow_sibling(siblings: &Siblings, id: u32) -> Result<(), LockError> {
    let request = siblings.other.lock("busy").wait(Duration::from_secs(10));
    request.acquire().await?.release().await?;
    Ok(())
}

#[distributed_lock(key = "sib:<id>", wait = "10s", locker = siblings.locker)]
async fn quick_sibling(siblings: &Siblings, id: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "sib:<id>", locker = siblings.locker)]
async fn both_siblings(siblings: &Siblings, id: u32) -> Result<(), LockError> {
    let (slow, quick) = tokio::join!(slow_sibling(siblings, id), quick_sibling(siblings, id));
    slow.and(quick)
}

/// The README's promise for `start_paused` tests against a real Redis:
/// waits run on real time. A sibling waiting for its turn behind one that
/// waits on Redis must not time out because the test's clock jumped.
#[tokio::test(start_paused = true)]
async fn a_nested_call_waits_for_its_turn_on_real_time_under_a_paused_clock() {
    let server = RedisServer::start();
    let siblings = Siblings {
        locker: locker(&server.url()).await,
        other: locker(&server.url()).await,
    };
    let blocker = locker(&server.url()).await;
    let held = blocker.lock("busy").acquire().await.unwrap();
    // Let go on real time, from outside the paused runtime.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(held);
    });
    let outcome = both_siblings(&siblings, 1).await;
    releaser.join().unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
}

#[distributed_lock(key = "acct:<id>", wait = "5s", locker = ledger.locker)]
async fn slow_deposit(ledger: Arc<Ledger>, id: u32) -> Result<(), LockError> {
    ledger.add_one().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    ledger.add_one().await;
    Ok(())
}

/// Starts a nested deposit, stops waiting for it after a moment and lets
/// it finish in the background: a common "don't block the caller" shape.
#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn detaching(
    ledger: Arc<Ledger>,
    id: u32,
) -> Result<tokio::task::JoinHandle<Result<(), LockError>>, LockError> {
    let mut nested = Box::pin(slow_deposit(ledger.clone(), id));
    let waited = tokio::time::timeout(Duration::from_millis(50), &mut nested).await;
    assert!(waited.is_err(), "the nested deposit is still running");
    Ok(tokio::spawn(nested))
}

/// A nested call moved out of its holder's body stops when that body
/// ends, before the lock is let go: it never runs beside the next owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_call_moved_out_of_its_holder_stops_when_the_holder_ends() {
    let server = RedisServer::start();
    let ledger = Arc::new(Ledger::new(&server).await);
    let detached = detaching(ledger.clone(), 1).await.unwrap();
    // The lock is free again: a deposit of its own runs at once.
    deposit(&ledger, 1).await.unwrap();
    let stopped = detached.await.unwrap();
    assert!(
        matches!(stopped, Err(LockError::Lost { .. })),
        "{stopped:?}"
    );
    assert_eq!(ledger.account.overlaps(), 0, "two deposits ran at once");
    // The detached one made its first step only, before it was stopped.
    assert_eq!(ledger.account.balance(), 2);
}

#[distributed_lock(key = "job:<id>", locker = locker)]
async fn step(locker: &Locker, id: u32) -> Result<(), LockError> {
    Ok(())
}

/// Holds past its cap, going on after it (`on_lost = "continue"`), then
/// calls `step` nested: what that nested call answered.
#[distributed_lock(
    key = "job:<id>",
    ttl = "3s",
    max_hold = "5s",
    on_lost = "continue",
    locker = locker
)]
async fn past_the_cap(locker: &Locker, id: u32) -> Result<Result<(), LockError>, LockError> {
    let lock = lock_runtime::current().expect("held");
    tokio::time::timeout(Duration::from_secs(10), lock.lost())
        .await
        .expect("told at the cap");
    Ok(step(locker, id).await)
}

/// A call nested in a holder that reached its hold cap fails as a call
/// running at the cap does: `HoldCapExceeded`, not a plain loss.
#[tokio::test(start_paused = true)]
async fn a_call_nested_after_the_hold_cap_says_so() {
    let locker = Locker::connect(lock_runtime::LockConfig::in_memory())
        .await
        .unwrap();
    let nested = past_the_cap(&locker, 1).await.expect("the body went on");
    assert!(
        matches!(nested, Err(LockError::HoldCapExceeded { .. })),
        "{nested:?}"
    );
}

/// Polls `nested` once, here (in a holder's body: it is a nested call),
/// and checks that it is still running.
async fn poll_once<F: Future + Unpin>(nested: &mut F) {
    let first = std::future::poll_fn(|cx| {
        std::task::Poll::Ready(std::pin::Pin::new(&mut *nested).poll(cx))
    })
    .await;
    assert!(first.is_pending(), "the nested call is still running");
}

/// Polls `nested` once here, then runs it to its end on a thread and
/// runtime of its own, so that no placement of tasks on one worker decides
/// what it and its holder do when.
async fn poll_once_then_move_to_a_thread<T: Send + 'static>(
    mut nested: std::pin::Pin<Box<dyn Future<Output = T> + Send>>,
) -> std::thread::JoinHandle<T> {
    poll_once(&mut nested).await;
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(nested)
    })
}

/// What a nested call moved out of its holder and its holder tell each
/// other, across threads.
#[derive(Default)]
struct Step {
    /// The nested call is inside its synchronous step.
    entered: AtomicBool,
    /// The holder's body is about to end.
    holder_done: AtomicBool,
    /// The nested call made its write, believing it holds the lock.
    wrote: AtomicBool,
}

/// A nested call whose body does synchronous work between two `.await`s:
/// it stays in that step until its holder's body ended, and a while more
/// (room for a holder that would not wait for it to let go, and for the
/// next owner to take the lock), then writes.
#[distributed_lock(key = "acct:<id>", wait = "5s", locker = ledger.locker)]
async fn busy_step(ledger: Arc<Ledger>, id: u32, step: Arc<Step>) -> Result<(), LockError> {
    tokio::task::yield_now().await;
    step.entered.store(true, Ordering::SeqCst);
    let since = std::time::Instant::now();
    while !step.holder_done.load(Ordering::SeqCst) && since.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(200));
    step.wrote.store(true, Ordering::SeqCst);
    tokio::task::yield_now().await;
    Ok(())
}

/// Starts `busy_step` nested, moves it to a thread of its own (so that no
/// scheduling of the two on one worker decides the order) and ends once
/// that step is inside its synchronous work.
#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn leaving_a_busy_step(
    ledger: Arc<Ledger>,
    id: u32,
    step: Arc<Step>,
) -> Result<std::thread::JoinHandle<Result<(), LockError>>, LockError> {
    let nested = Box::pin(busy_step(ledger.clone(), id, step.clone()));
    // Polled once here, in the holder's body: it is a nested call.
    let detached = poll_once_then_move_to_a_thread(nested).await;
    lock_tests::fixtures::eventually(
        "the nested call in its step",
        Duration::from_secs(10),
        || step.entered.load(Ordering::SeqCst),
    )
    .await;
    step.holder_done.store(true, Ordering::SeqCst);
    Ok(detached)
}

/// README: a nested call moved out of its holder "is stopped at its next
/// `.await` when that body ends, ... before the lock is let go". One that
/// is between two `.await`s on another thread when the body ends is
/// waited for: the lock is let go only after that step, so its write
/// never lands while the lock is the next owner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_call_mid_step_when_its_holder_ends_does_not_run_beside_the_next_owner() {
    let server = RedisServer::start();
    let ledger = Arc::new(Ledger::new(&server).await);
    let step = Arc::new(Step::default());
    let detached = leaving_a_busy_step(ledger.clone(), 1, step.clone())
        .await
        .unwrap();
    let next = ledger.locker.lock("acct:1").acquire().await.unwrap();
    let wrote_before_next = step.wrote.load(Ordering::SeqCst);
    let stopped = tokio::task::spawn_blocking(move || detached.join().unwrap())
        .await
        .unwrap();
    assert!(next.release().await.unwrap());
    assert!(
        wrote_before_next,
        "the nested call wrote while the lock was the next owner's"
    );
    assert!(
        matches!(stopped, Err(LockError::Lost { .. })),
        "{stopped:?}"
    );
}

/// Where a holder puts the thread its nested call runs on.
type Detached = Arc<std::sync::Mutex<Option<std::thread::JoinHandle<Result<(), LockError>>>>>;

/// Starts `busy_step` nested and moves it to a thread of its own, as
/// `leaving_a_busy_step` does, but never ends on its own: its caller gives
/// up on it (a timeout around it, a request dropped) while that step runs.
#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn abandoned_over_a_busy_step(
    ledger: Arc<Ledger>,
    id: u32,
    step: Arc<Step>,
    detached: Detached,
) -> Result<(), LockError> {
    let nested = Box::pin(busy_step(ledger.clone(), id, step.clone()));
    // Polled once here, in the holder's body: it is a nested call.
    let thread = poll_once_then_move_to_a_thread(nested).await;
    *detached.lock().unwrap() = Some(thread);
    std::future::pending::<()>().await;
    Ok(())
}

/// As for a holder whose body ends: a holder cancelled while a nested call
/// moved out of its body is between two `.await`s on another thread lets
/// go of the lock only after that step, so the nested call's write never
/// lands while the lock is the next owner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_call_mid_step_when_its_holder_is_cancelled_does_not_run_beside_the_next_owner() {
    let server = RedisServer::start();
    let ledger = Arc::new(Ledger::new(&server).await);
    let step = Arc::new(Step::default());
    let detached = Detached::default();
    let holder = abandoned_over_a_busy_step(ledger.clone(), 1, step.clone(), detached.clone());
    // The caller gives up on the holder once the nested call is in its step.
    tokio::select! {
        outcome = holder => panic!("the holder ended on its own: {outcome:?}"),
        () = lock_tests::fixtures::eventually(
            "the nested call in its step",
            Duration::from_secs(10),
            || step.entered.load(Ordering::SeqCst),
        ) => {}
    }
    step.holder_done.store(true, Ordering::SeqCst);
    let next = ledger.locker.lock("acct:1").acquire().await.unwrap();
    let wrote_before_next = step.wrote.load(Ordering::SeqCst);
    let thread = detached
        .lock()
        .unwrap()
        .take()
        .expect("the nested call's thread");
    let stopped = tokio::task::spawn_blocking(move || thread.join().unwrap())
        .await
        .unwrap();
    assert!(next.release().await.unwrap());
    assert!(
        wrote_before_next,
        "the nested call wrote while the lock was the next owner's"
    );
    assert!(
        matches!(stopped, Err(LockError::Lost { .. })),
        "{stopped:?}"
    );
}

/// Waits on its own `.await`s until told, then deposits.
#[distributed_lock(key = "acct:<id>", wait = "5s", locker = ledger.locker)]
async fn deposit_when_told(
    ledger: Arc<Ledger>,
    id: u32,
    go: Arc<AtomicBool>,
) -> Result<(), LockError> {
    let since = std::time::Instant::now();
    while !go.load(Ordering::SeqCst) && since.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    ledger.add_one().await;
    Ok(())
}

/// Starts `deposit_when_told` nested in itself and moves it to a thread of
/// its own, then waits for ever.
#[distributed_lock(key = "acct:<id>", wait = "5s", locker = ledger.locker)]
async fn handing_on(
    ledger: Arc<Ledger>,
    id: u32,
    go: Arc<AtomicBool>,
    detached: Detached,
) -> Result<(), LockError> {
    let nested = Box::pin(deposit_when_told(ledger.clone(), id, go));
    // Polled once here, in this call's body: it is nested in this call.
    let thread = poll_once_then_move_to_a_thread(nested).await;
    *detached.lock().unwrap() = Some(thread);
    std::future::pending::<()>().await;
    Ok(())
}

/// A nested call that was started and left unfinished.
type Unfinished = std::pin::Pin<Box<dyn Future<Output = Result<(), LockError>> + Send>>;

/// Starts `handing_on` nested (which starts a call nested in itself) and
/// ends, handing it out unfinished.
#[distributed_lock(key = "acct:<id>", locker = ledger.locker)]
async fn leaving_a_nested_call_that_nests_one(
    ledger: Arc<Ledger>,
    id: u32,
    go: Arc<AtomicBool>,
    detached: Detached,
) -> Result<Unfinished, LockError> {
    let mut nested: Unfinished = Box::pin(handing_on(ledger.clone(), id, go, detached.clone()));
    poll_once(&mut nested).await;
    assert!(
        detached.lock().unwrap().is_some(),
        "its own nested call started"
    );
    Ok(nested)
}

/// A call nested in a nested call, both moved out of the holder's body,
/// stops when the holder's body ends, as a call nested in the holder
/// directly does: it never runs beside the next owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_nested_in_a_nested_call_stops_when_the_holder_ends() {
    let server = RedisServer::start();
    let ledger = Arc::new(Ledger::new(&server).await);
    let go = Arc::new(AtomicBool::new(false));
    let detached = Detached::default();
    let unfinished =
        leaving_a_nested_call_that_nests_one(ledger.clone(), 1, go.clone(), detached.clone())
            .await
            .unwrap();
    let next = ledger.locker.lock("acct:1").acquire().await.unwrap();
    go.store(true, Ordering::SeqCst);
    let thread = detached
        .lock()
        .unwrap()
        .take()
        .expect("the innermost call's thread");
    let innermost = tokio::task::spawn_blocking(move || thread.join().unwrap())
        .await
        .unwrap();
    let deposited_beside_the_next_owner = ledger.account.balance();
    assert!(next.release().await.unwrap());
    drop(unfinished);
    assert!(
        matches!(innermost, Err(LockError::Lost { .. })),
        "the innermost call ran on after its holder ended: {innermost:?}"
    );
    assert_eq!(
        deposited_beside_the_next_owner, 0,
        "the innermost call deposited while the lock was the next owner's"
    );
}
