//! Nobody starves beside a busy line: a caller that tries once, of
//! another locker or of the line's own, and a waiter far from the server
//! get the lock while one locker's tasks take it over and over (see
//! `lock-runtime/src/handover.rs`, "Fair to the other processes"). The
//! `starvation` program (`tests/src/bin/starvation.rs`) measures the same
//! workloads at length.

use std::time::Duration;

use lock_tests::fixtures::{STALL_PROOF_TTL, locker};
use lock_tests::starvation::{Busy, BusyLoad, Outsider, Tries, try_once_every, wait_in_turn};
use lock_tests::{FaultProxy, RedisServer};

/// Each hold of the busy side.
const HOLD: Duration = Duration::from_millis(1);
/// How often the caller that tries once tries.
const EVERY: Duration = Duration::from_millis(10);
/// How many times it tries, per workload, in [`TURNS`] turns.
const TRIES: u64 = 200;
/// The workloads take turns this many times, so that a machine starved
/// for a while (a paused host) starves each of them alike, rather than
/// whichever happened to run then.
const TURNS: u64 = 4;

/// The share of `tries` tries, once every `EVERY`, that `outsider` gets
/// while two tasks of `busy` take the key `key` over and over.
async fn share_beside(busy: &Busy, outsider: Outsider<'_>, key: &str, tries: u64) -> Tries {
    let load = BusyLoad::start(busy, key, 2, HOLD, STALL_PROOF_TTL);
    load.warmed_up(20, Duration::from_secs(10)).await;
    let found = try_once_every(outsider, key, EVERY, tries, Duration::from_secs(60)).await;
    load.stop().await;
    found
}

/// Adds a turn's tries to the ones before.
fn add(total: &mut Tries, turn: Tries) {
    total.tried += turn.tried;
    total.acquired += turn.acquired;
}

/// The measure: a caller that tries once gets in beside a busy
/// line at least half as often as beside hand-written `SET NX` spinners
/// whose losers sleep 10 ms, whether it is of another locker or of the
/// line's own (which takes no turn in the line for a single try).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_tries_once_gets_in_beside_a_busy_line() {
    let server = RedisServer::start();
    let url = server.url();
    let spin = Busy::Spin {
        url: url.clone(),
        pause: EVERY,
    };
    let (busy, other) = (locker(&url).await, locker(&url).await);
    let line = Busy::Line(busy.clone());
    let (mut against_spin, mut outside, mut inside) = Default::default();
    let per_turn = TRIES / TURNS;
    for _ in 0..TURNS {
        add(
            &mut against_spin,
            share_beside(&spin, Outsider::Raw(&url), "spin", per_turn).await,
        );
        add(
            &mut outside,
            share_beside(&line, Outsider::Locker(&other), "outside", per_turn).await,
        );
        add(
            &mut inside,
            share_beside(&line, Outsider::Locker(&busy), "inside", per_turn).await,
        );
    }
    for (key, found) in [
        ("spin", against_spin),
        ("outside", outside),
        ("inside", inside),
    ] {
        println!("{key}: {found:?}, share {:.3}", found.share());
    }
    let floor = against_spin.share() / 2.0;
    assert!(
        outside.share() >= floor,
        "another locker's single tries: {outside:?} beside the line, {against_spin:?} beside spinners"
    );
    assert!(
        inside.share() >= floor,
        "the line's own locker's single tries: {inside:?} beside the line, {against_spin:?} beside spinners"
    );
    // The line kept its wins meanwhile: it passed the lock among its tasks.
    assert!(busy.stats().handovers > 0, "{:?}", busy.stats());
}

/// A waiter 40 ms away from the server each way (another region: its
/// release message and then its try take 80 ms) waits up to 5 s for a key
/// that 64 local tasks of another locker take over and over: it gets in
/// on most of its attempts, and the line goes on with its share meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_distant_waiter_gets_in_beside_a_busy_line() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    proxy.set_latency(Duration::from_millis(40));
    let (busy, far) = (locker(&server.url()).await, locker(&proxy.url()).await);
    let load = BusyLoad::start(&Busy::Line(busy), "distant", 64, HOLD, STALL_PROOF_TTL);
    load.warmed_up(20, Duration::from_secs(10)).await;
    let before = load.grants();
    let (found, took) = wait_in_turn(&far, "distant", 4, Duration::from_secs(5)).await;
    let line_grants = load.grants() - before;
    load.stop().await;
    println!("distant waiter: {found:?} in {took:?}; the line's grants meanwhile: {line_grants}");
    assert!(
        found.acquired * 2 >= found.tried,
        "the distant waiter got {found:?}"
    );
    // Between two of the waiter's grants the line has its batch of holds
    // (eight passes and one more hold), so it goes on at least that much.
    assert!(
        line_grants >= 8 * found.acquired,
        "the line made {line_grants} grants beside {found:?}"
    );
}
