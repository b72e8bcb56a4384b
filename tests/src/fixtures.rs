//! What the integration tests share: a locker configured for tests, reads
//! of the server's state, and [`eventually`], the way to wait for a state
//! instead of guessing how long it takes to arrive.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};

use crate::RedisServer;

/// Connect timeout of test lockers: long enough for a machine that stalls
/// for a few hundred milliseconds at a time, short enough that a test of a
/// dead server does not drag.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Response timeout of test lockers (see [`CONNECT_TIMEOUT`]).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest the machine may stop every process of the suite at once
/// (test, lockers and servers alike): CI's shared hosts pause it for a
/// hundred milliseconds or two (`under-load --stall 200` reproduces that),
/// plus room for the scheduler to run everyone again afterwards.
pub const LONGEST_STALL: Duration = Duration::from_millis(300);

/// Room a wall-clock bound leaves for the machine stalling while it runs:
/// a few stalls of [`LONGEST_STALL`] and a starved scheduler. A bound is
/// what the code promises (a ttl, a wait, a timeout) plus this, never a
/// guess of how fast a calm machine is.
pub const STALL_ROOM: Duration = Duration::from_secs(1);

/// The shortest lease a test may expect the watchdog to keep through a
/// stall. A lease is renewed every ttl/3 at the latest and trusted until
/// ttl minus 6 % minus the recent stalls (up to ttl/4) after the renewal
/// was sent, so a renewal delayed by a stall S lands in time while
/// ttl/3 + S + round trip < 0.94 ttl - S: about 0.6 ttl > 2 S. With S =
/// [`LONGEST_STALL`] that is 1 s; 1.5 s leaves room for the round trip.
pub const STALL_PROOF_TTL: Duration = Duration::from_millis(1500);

/// The shortest lease whose loss can be asserted to be told before the key
/// can expire on a machine that stalls. The library tells a loss at the
/// end of the lease's validity, ttl/100 + 2 ms + ttl/20 (plus the stalls it
/// saw recently) before the key can expire; a stall of [`LONGEST_STALL`]
/// at that very moment delays the signal by as much. With 6 s, the fixed
/// part alone is 362 ms.
pub const TOLD_IN_TIME_TTL: Duration = Duration::from_secs(6);

/// The configuration tests use for `url`.
pub fn config(url: &str) -> LockConfig {
    LockConfig::from_url(url)
        .expect("a valid test URL")
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
}

/// A locker on `url` with [`config`].
pub async fn locker(url: &str) -> Locker {
    Locker::connect(config(url))
        .await
        .unwrap_or_else(|err| panic!("connect a test locker: {err}"))
}

pub use lock_servers::urls::multi_host_url;

/// Redlock over `masters`.
pub fn redlock_url(masters: &[RedisServer]) -> String {
    multi_host_url("redlock", masters, "")
}

/// `count` new Redlock masters that count as up for longer than any
/// restart quarantine, as the masters of a deployment that has been
/// running are: their grants count at once, so a test may take some of
/// them down. A restart without persistence loses the mark, as it loses
/// the real uptime, and puts that master in quarantine again.
pub fn settled_masters(count: usize) -> Vec<RedisServer> {
    let masters: Vec<RedisServer> = (0..count).map(|_| RedisServer::start()).collect();
    masters.iter().for_each(settle);
    masters
}

/// Marks a Redlock master as past its restart quarantine, for a test about
/// something else than restarts (reconnecting to a master that came back).
pub fn settle(master: &RedisServer) {
    settle_prefix(master, "lock:");
}

/// [`settle`] for the locks under key prefix `prefix`.
pub fn settle_prefix(master: &RedisServer, prefix: &str) {
    master.cmd(&["SET", &format!("{prefix}up-for"), &u64::MAX.to_string()]);
}

/// The Redis key of lock `name` under the default prefix.
pub fn lock_key(name: &str) -> String {
    format!("lock:{{{name}}}")
}

/// The release channel of lock `name` under the default prefix.
pub fn release_channel(name: &str) -> String {
    format!("lock:{{{name}}}:released")
}

/// Whether `key` exists on `server`.
pub fn exists(server: &RedisServer, key: &str) -> bool {
    server.cmd(&["EXISTS", key]) == redis::Value::Int(1)
}

/// The string value of `key` on `server`, if any.
pub fn get(server: &RedisServer, key: &str) -> Option<String> {
    match server.cmd(&["GET", key]) {
        redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        redis::Value::Nil => None,
        other => panic!("GET {key} answered {other:?}"),
    }
}

/// `PTTL key` on `server`: ms left, -1 without expiry, -2 when missing.
pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.int(&["PTTL", key])
}

/// How many keys `server` holds.
pub fn key_count(server: &RedisServer) -> i64 {
    server.int(&["DBSIZE"])
}

/// One field of `INFO <section>` on `server` (e.g. `evicted_keys`).
pub fn info_field(server: &RedisServer, section: &str, field: &str) -> String {
    let info = info(server, section);
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map(|value| value.trim().to_owned())
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
}

/// `INFO <section>` on `server`, whole.
pub fn info(server: &RedisServer, section: &str) -> String {
    match server.cmd(&["INFO", section]) {
        redis::Value::BulkString(text) => String::from_utf8_lossy(&text).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO {section}: {other:?}"),
    }
}

/// A master and one replica of it, in sync as both see it: the replica's
/// link is up *and* the master lists it online (it counts the replica's
/// acknowledgements for `WAIT` only from then on). Diskless sync without
/// its default 5 s grace, so the replica is in sync at once.
pub fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&replica, "replication", "master_link_status") != "up"
        || !info(&master, "replication").contains("state=online")
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(20));
    }
    (master, replica)
}

/// Subscribers of `channel` on `server` (`PUBSUB NUMSUB`).
pub fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    match server.cmd(&["PUBSUB", "NUMSUB", channel]) {
        redis::Value::Array(reply) => match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("PUBSUB NUMSUB {channel}: {other:?}"),
        },
        other => panic!("PUBSUB NUMSUB {channel}: {other:?}"),
    }
}

/// Clients of `server` in pub/sub mode.
pub fn pubsub_clients(server: &RedisServer) -> usize {
    match server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]) {
        redis::Value::BulkString(text) => String::from_utf8_lossy(&text).lines().count(),
        redis::Value::VerbatimString { text, .. } => text.lines().count(),
        other => panic!("CLIENT LIST: {other:?}"),
    }
}

/// How many times `server` ran `command` (lower case, e.g. `evalsha`)
/// since it started, from `INFO commandstats`.
pub fn command_calls(server: &RedisServer, command: &str) -> u64 {
    let info = match server.cmd(&["INFO", "commandstats"]) {
        redis::Value::BulkString(text) => String::from_utf8_lossy(&text).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO commandstats: {other:?}"),
    };
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Polls `condition` until it holds; fails the test with `what` when it
/// did not within `within`. Tests wait on what they can observe with this,
/// never on a sleep that guesses how long something takes. `within` runs
/// on the test's tokio clock: real time, unless the test paused it (as the
/// in-memory store's tests do, whose locks run on that clock too).
pub async fn eventually(what: &str, within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `channel` has `count` subscribers on `server`.
pub async fn wait_for_subscribers(server: &RedisServer, channel: &str, count: i64) {
    eventually(
        &format!("{count} subscriber(s) of {channel}"),
        Duration::from_secs(10),
        || subscribers(server, channel) == count,
    )
    .await;
}

/// Whether `future` completes within `limit`.
pub async fn completes_within(limit: Duration, future: impl Future<Output = ()>) -> bool {
    tokio::time::timeout(limit, future).await.is_ok()
}

/// Runs test `name` of the current test binary alone, in a process of its
/// own, for a test whose assertions read process-wide state that the other
/// tests of the binary, running beside it, would change: the CPU time of
/// the process, or the stalls the library remembers (a stall it saw in the
/// last minute shortens every lease it grants).
///
/// Returns `true` inside that process, where the caller runs the test's
/// body; `false` in the test binary, after the process passed (it fails
/// the test otherwise).
///
/// ```ignore
/// #[test]
/// fn something_measured() {
///     if !lock_tests::fixtures::alone("something_measured") {
///         return;
///     }
///     // ... the test itself ...
/// }
/// ```
pub fn alone(name: &str) -> bool {
    const ALONE: &str = "LOCK_TESTS_ALONE";
    if std::env::var(ALONE).is_ok_and(|value| value == name) {
        return true;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(ALONE, name)
        .output()
        .expect("run the test alone");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name}, alone: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    false
}

/// A lock's life on `holder`: acquired and renewed for two leases, then
/// acquired again while `waiter` waits, released, and the waiter woken by
/// the release message (not a timer) with a higher fence.
pub async fn hold_renew_and_hand_over(holder: &Locker, waiter: Locker, name: &str) {
    let guard = holder
        .lock(name)
        .ttl(STALL_PROOF_TTL)
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(STALL_PROOF_TTL * 2).await;
    assert!(guard.is_held());
    assert!(holder.stats().renewed >= 2, "{:?}", holder.stats());
    let renewed = guard.fence();
    assert!(guard.release().await.unwrap());
    // A lease far longer than the wait: the waiter's timer (the lease's
    // end) never fires first, so only the release's message can wake it,
    // and no try of its own can race the release.
    let guard = holder.lock(name).ttl(HANDED_TTL).acquire().await.unwrap();
    assert!(guard.fence() > renewed);
    let name_owned = name.to_owned();
    let sleeper = waiter.clone();
    let waiting = tokio::spawn(async move {
        let taken = waiter
            .lock(name_owned)
            .ttl(STALL_PROOF_TTL)
            .wait(Duration::from_secs(60))
            .acquire()
            .await
            .unwrap();
        let fence = taken.fence();
        taken.release().await.unwrap();
        (fence, waiter.stats())
    });
    eventually("the waiter sleeps", STALL_ROOM * 10, || {
        sleeper.stats().asleep == 1
    })
    .await;
    let fence = guard.fence();
    assert!(guard.release().await.unwrap());
    let (next, stats) = waiting.await.unwrap();
    assert!(next > fence);
    assert!(stats.release_wakeups >= 1, "{stats:?}");
}

/// The lease of a hold whose release must wake a waiter: longer than any
/// wait for it in a test, at most Redlock's restart quarantine (30 s).
const HANDED_TTL: Duration = Duration::from_secs(20);

/// An account whose deposit is a racy read, pause, write (an await where
/// another future can run in between), and that counts the moments two
/// deposits were inside at once: what a lock must serialize.
#[derive(Debug, Default)]
pub struct RacyAccount {
    balance: AtomicU32,
    inside: AtomicU32,
    overlaps: AtomicU32,
}

impl RacyAccount {
    /// One deposit: read, pause 5 ms, write the read value plus one.
    pub async fn add_one(&self) {
        if self.inside.fetch_add(1, Ordering::SeqCst) > 0 {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        let balance = self.balance.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.balance.store(balance + 1, Ordering::SeqCst);
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    /// Deposits that landed.
    pub fn balance(&self) -> u32 {
        self.balance.load(Ordering::SeqCst)
    }

    /// Times a deposit began while another was inside.
    pub fn overlaps(&self) -> u32 {
        self.overlaps.load(Ordering::SeqCst)
    }
}
