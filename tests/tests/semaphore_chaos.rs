//! Chaos for the semaphore: worker processes take and give back permits
//! while the driver kills them with -9, freezes them past their leases,
//! and freezes the server they use or cuts their connections to it; the
//! checker (`lock_tests::permits`) then counts, from what the workers
//! recorded, the most permits held at once by holds never told of a loss:
//! never more than the limit. A semaphore sabotaged to grant one permit
//! past its limit is caught by the same count. On one server, a Cluster,
//! Sentinel and Redlock (whose own quorum, with masters cut, is
//! `semaphore_redlock.rs`).
//!
//! `CHAOS_SECS` sets the length of each run (default 8 s).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lock_tests::fixtures::settled_masters;
use lock_tests::permits::{Tally, read};
use lock_tests::{FaultProxy, RedisCluster, RedisServer, SentinelSetup, Worker};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// The semaphore's limit, and the permits each worker takes.
const LIMIT: u32 = 3;
const PERMITS: [u32; 5] = [1, 1, 1, 2, 2];
/// Each hold's lease and length: long holds, so that a fault mostly hits
/// a holder.
const TTL: Duration = Duration::from_secs(1);
const HOLD: Duration = Duration::from_millis(150);

/// The length of one run: `CHAOS_SECS`, or 8 s.
fn run_for() -> Duration {
    let seconds = std::env::var("CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    Duration::from_secs(seconds)
}

/// The workers of one run, each with its history file.
struct Fleet {
    url: String,
    key: &'static str,
    env: Vec<(&'static str, &'static str)>,
    dir: PathBuf,
    workers: Vec<Worker>,
    histories: Vec<PathBuf>,
    /// The history of each slot's current worker.
    current: Vec<usize>,
    /// Kills and freezes that hit a worker while it held permits.
    kills_hit: usize,
    freezes_hit: usize,
}

impl Fleet {
    fn start(url: String, key: &'static str, env: &[(&'static str, &'static str)]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "semaphore-chaos-{}-{}",
            std::process::id(),
            key.replace(':', "-")
        ));
        std::fs::create_dir_all(&dir).expect("a directory for the histories");
        let mut fleet = Self {
            url,
            key,
            env: env.to_vec(),
            dir,
            workers: Vec::new(),
            histories: Vec::new(),
            current: Vec::new(),
            kills_hit: 0,
            freezes_hit: 0,
        };
        for slot in 0..PERMITS.len() {
            let worker = fleet.spawn(slot);
            fleet.workers.push(worker);
            fleet.current.push(fleet.histories.len() - 1);
        }
        fleet
    }

    /// Whether the worker in `slot` holds permits now, as its history
    /// says (its last line a `begin`).
    fn holding(&self, slot: usize) -> bool {
        let history = std::fs::read_to_string(&self.histories[self.current[slot]]);
        history.is_ok_and(|text| text.lines().last().is_some_and(|l| l.starts_with("begin ")))
    }

    /// A worker that holds permits now, looked for a bounded while.
    fn a_holder(&self) -> Option<usize> {
        for _ in 0..40 {
            if let Some(slot) = (0..PERMITS.len()).find(|&slot| self.holding(slot)) {
                return Some(slot);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }

    /// A new worker in `slot` (the permits it takes), with a history of
    /// its own.
    fn spawn(&mut self, slot: usize) -> Worker {
        let history = self.dir.join(format!("{}.log", self.histories.len()));
        let (limit, permits) = (LIMIT.to_string(), PERMITS[slot].to_string());
        let (ttl, hold) = (TTL.as_millis().to_string(), HOLD.as_millis().to_string());
        let path = history.to_string_lossy().into_owned();
        let args = [
            "permits-chaos",
            &self.url,
            self.key,
            &limit,
            &permits,
            &ttl,
            &hold,
            &path,
        ];
        let mut worker = Worker::spawn_with_env(WORKER, &args, &self.env);
        worker.expect_line("ready", Duration::from_secs(30));
        self.histories.push(history);
        worker
    }

    /// Kills a holder (or, if none is found, the worker in `slot`) with -9
    /// and starts another in its place.
    fn kill(&mut self, slot: usize) {
        let slot = self.a_holder().unwrap_or(slot);
        self.workers[slot].kill9();
        self.kills_hit += usize::from(self.holding(slot));
        self.workers[slot] = self.spawn(slot);
        self.current[slot] = self.histories.len() - 1;
    }

    /// Freezes a holder past its lease.
    fn freeze(&mut self) {
        let Some(slot) = self.a_holder() else {
            return;
        };
        self.workers[slot].pause();
        self.freezes_hit += usize::from(self.holding(slot));
        std::thread::sleep(TTL * 2);
        self.workers[slot].resume();
    }

    /// Kills every worker and reads what they recorded, with the kills
    /// and freezes that hit a holder.
    fn finish(mut self) -> (Tally, usize, usize) {
        for worker in &mut self.workers {
            worker.kill9();
        }
        let histories: Vec<String> = self
            .histories
            .iter()
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .collect();
        let _ = std::fs::remove_dir_all(&self.dir);
        (read(&histories).1, self.kills_hit, self.freezes_hit)
    }
}

/// One run on `url`: kills, freezes of workers and `server_fault` in
/// rotation, then the tally of what the workers recorded.
fn chaos(
    url: String,
    key: &'static str,
    env: &[(&'static str, &'static str)],
    mut server_fault: impl FnMut(),
) -> (Tally, usize, usize) {
    let mut fleet = Fleet::start(url, key, env);
    let started = Instant::now();
    let mut round = 0;
    while started.elapsed() < run_for() {
        let slot = round % PERMITS.len();
        match round % 3 {
            0 => fleet.kill(slot),
            1 => fleet.freeze(),
            _ => server_fault(),
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    fleet.finish()
}

/// Never more than the limit, and a run that proves something: holds
/// that overlapped, a killed holder, a frozen holder told of its loss.
fn judge(deployment: &str, (tally, kills_hit, freezes_hit): (Tally, usize, usize)) {
    println!(
        "semaphore chaos {deployment}: {tally:?} kills_hit={kills_hit} freezes_hit={freezes_hit}"
    );
    assert!(
        tally.most <= LIMIT,
        "{deployment}: {} permits held at once by holds never told of a loss, of {LIMIT} (at {} ns)",
        tally.most,
        tally.most_at
    );
    assert!(
        tally.completed >= 10,
        "{deployment}: too few holds completed: {tally:?}"
    );
    assert!(
        tally.most >= 2,
        "{deployment}: the holds never overlapped: {tally:?}"
    );
    assert!(kills_hit >= 1, "{deployment}: no kill hit a holder");
    assert!(
        freezes_hit >= 1 && tally.told >= 1,
        "{deployment}: no frozen holder was told: {tally:?}"
    );
}

/// Freezes `server` for `pause`.
fn freeze(server: &RedisServer, pause: Duration) {
    server.pause();
    std::thread::sleep(pause);
    server.resume();
}

/// Freezes `server` for `pause` and cuts every connection through
/// `proxy`, in turn.
fn freeze_or_cut(server: &RedisServer, proxy: &FaultProxy, pause: Duration) -> impl FnMut() {
    let mut faults = 0;
    move || {
        if faults % 2 == 0 {
            freeze(server, pause);
        } else {
            proxy.reset_all();
        }
        faults += 1;
    }
}

#[test]
fn one_server_with_killed_and_frozen_holders_and_a_frozen_or_cut_server() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let faults = freeze_or_cut(&server, &proxy, TTL / 2);
    let tally = chaos(proxy.url(), "render:one", &[], faults);
    judge("one-server", tally);
}

/// Every master of three is needed for a limit of 3: a frozen or cut
/// master stops grants and renewals, and holders that cannot renew in
/// time are told.
#[test]
fn redlock_with_killed_and_frozen_holders_and_a_frozen_or_cut_master() {
    let masters = settled_masters(3);
    let proxy = FaultProxy::start(masters[0].port());
    let url = format!(
        "redis+redlock://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
        proxy.port(),
        masters[1].port(),
        masters[2].port()
    );
    let faults = freeze_or_cut(&masters[1], &proxy, TTL / 2);
    let tally = chaos(url, "render:redlock", &[], faults);
    judge("redlock", tally);
}

#[test]
fn cluster_with_killed_and_frozen_holders_and_a_frozen_node() {
    let cluster = RedisCluster::start();
    let node = cluster.node_for_key("lock:{render:cluster}:sem");
    let tally = chaos(cluster.url(), "render:cluster", &[], || {
        freeze(&cluster.nodes()[node], TTL / 2);
    });
    judge("cluster", tally);
}

#[test]
fn sentinel_with_killed_and_frozen_holders_and_a_frozen_master() {
    let setup = SentinelSetup::start();
    // Shorter than the sentinels' down-after: no failover, whose
    // asynchronous replication could lose a fresh grant.
    let tally = chaos(setup.url(), "render:sentinel", &[], || {
        freeze(setup.current_master(), Duration::from_millis(300));
    });
    judge("sentinel", tally);
}

#[test]
fn the_checker_catches_a_semaphore_that_grants_past_its_limit() {
    let server = RedisServer::start();
    let sabotage = [("LOCK_RUNTIME_SABOTAGE", "over-limit")];
    let (tally, _, _) = chaos(server.url(), "render:sabotaged", &sabotage, || {});
    println!("semaphore chaos sabotaged: {tally:?}");
    assert!(
        tally.most > LIMIT,
        "a semaphore granting {} permits went unnoticed: {tally:?}",
        LIMIT + 1
    );
}
