//! The semaphore's own quorum on Redlock, with masters cut off: with a
//! limit of K over N masters, a plain majority would let K + 1 holders
//! each win a different majority. Three masters, limit 2, three workers
//! that each reach two masters (AB, BC and AC): the semaphore needs all
//! three masters and grants none of them until the cuts heal, then two;
//! a semaphore sabotaged to take a plain majority grants all three, and
//! the same count catches it. The behaviours on Redlock with every master
//! up run in `semaphore.rs`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::fixtures::settled_masters;
use lock_tests::{FaultProxy, RedisServer, Worker};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

const NAME: &str = "partner-api";
const LIMIT: u32 = 2;
const TTL: Duration = Duration::from_secs(2);
/// Longest a worker may take to start and try, on a starved machine.
const SETTLE: Duration = Duration::from_secs(30);

fn redlock_url(ports: [u16; 3]) -> String {
    let hosts: Vec<String> = ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    format!("redis+redlock://{}", hosts.join(","))
}

/// Three masters, and for each of three callers a proxy in front of a
/// different master: caller 0 reaches A and B through the proxy's cut to
/// C, caller 1 B and C, caller 2 A and C.
struct Partition {
    masters: Vec<RedisServer>,
    proxies: Vec<FaultProxy>,
}

impl Partition {
    fn start() -> Self {
        let masters = settled_masters(3);
        let proxies: Vec<FaultProxy> = [2, 0, 1]
            .iter()
            .map(|&cut| FaultProxy::start(masters[cut].port()))
            .collect();
        Self { masters, proxies }
    }

    /// Caller `caller`'s view: the masters, one behind its proxy.
    fn url(&self, caller: usize) -> String {
        let cut = [2, 0, 1][caller];
        let mut ports = [0; 3];
        for (index, port) in ports.iter_mut().enumerate() {
            *port = if index == cut {
                self.proxies[caller].port()
            } else {
                self.masters[index].port()
            };
        }
        redlock_url(ports)
    }

    fn cut(&self, on: bool) {
        for proxy in &self.proxies {
            proxy.blackhole(on);
        }
    }

    /// The most permits counted inside at once (on master A, which no
    /// proxy stands in front of for the count).
    fn most_inside(&self) -> u32 {
        match self.masters[0].cmd(&["GET", &format!("most:{NAME}")]) {
            redis::Value::BulkString(most) => String::from_utf8(most).unwrap().parse().unwrap(),
            _ => 0,
        }
    }

    /// A worker for caller `caller`, holding one permit once granted.
    fn holder(&self, caller: usize, env: &[(&str, &str)]) -> Worker {
        let store = self.masters[0].url();
        let mut env = env.to_vec();
        env.push(("PERMITS_STORE_URL", store.as_str()));
        let (url, limit, ttl) = (
            self.url(caller),
            LIMIT.to_string(),
            TTL.as_millis().to_string(),
        );
        let args = ["permits", &url, NAME, &limit, "1", &ttl, "0", "0"];
        Worker::spawn_with_env(WORKER, &args, &env)
    }
}

/// How many of `workers` print `acquired` within `limit` in all; returns
/// as soon as `enough` did.
fn acquired_within(workers: &mut [Worker], enough: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let mut acquired = vec![false; workers.len()];
    let count = |acquired: &[bool]| acquired.iter().filter(|&&done| done).count();
    while Instant::now() < deadline && count(&acquired) < enough {
        for (worker, done) in workers.iter_mut().zip(&mut acquired) {
            if !*done {
                *done = worker
                    .line_within("acquired", Duration::from_millis(100))
                    .is_some();
            }
        }
    }
    count(&acquired)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_on_ab_bc_and_ac_never_hold_three_permits_of_two() {
    let partition = Partition::start();
    partition.cut(true);
    // Each reaches two masters of three, and a grant needs all three:
    // each is told so, and none holds a permit.
    for caller in 0..3 {
        let output = partition.holder(caller, &[]).finish(SETTLE);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(
            !stdout.contains("acquired"),
            "granted on two masters: {stdout}"
        );
        assert!(
            stderr.contains("reached 2 of the 3 masters it needs"),
            "{stderr}"
        );
    }
    assert_eq!(partition.most_inside(), 0);
    partition.cut(false);
    // Healed: two of three get a permit, the third waits.
    let mut workers: Vec<Worker> = (0..3).map(|caller| partition.holder(caller, &[])).collect();
    let healed = tokio::task::block_in_place(|| {
        let two = acquired_within(&mut workers, 2, SETTLE);
        two + acquired_within(&mut workers, 3, TTL * 2)
    });
    assert_eq!(healed, 2, "the limit, once every master answers");
    assert_eq!(partition.most_inside(), LIMIT);
    for worker in &mut workers {
        worker.kill9();
    }
}

/// The same partition catches a semaphore that counts a plain majority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partition_catches_a_semaphore_granting_on_a_plain_majority() {
    let partition = Partition::start();
    partition.cut(true);
    let sabotage = [("LOCK_RUNTIME_SABOTAGE", "plain-majority")];
    let mut workers: Vec<Worker> = (0..3)
        .map(|caller| partition.holder(caller, &sabotage))
        .collect();
    let granted = tokio::task::block_in_place(|| acquired_within(&mut workers, 3, SETTLE));
    assert_eq!(granted, 3, "each wins its own majority");
    assert_eq!(
        partition.most_inside(),
        3,
        "three permits of two held at once"
    );
    for worker in &mut workers {
        worker.kill9();
    }
}

/// In process, the refusal says why: too few masters for the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_master_is_quorum_not_reached_naming_every_master() {
    let partition = Partition::start();
    partition.cut(true);
    let config = LockConfig::from_url(&partition.url(0))
        .unwrap()
        .connect_timeout(Duration::from_millis(500));
    let locker = Locker::connect(config).await.unwrap();
    let err = locker
        .semaphore(NAME, LIMIT)
        .ttl(TTL)
        .try_acquire()
        .await
        .unwrap_err();
    let LockError::QuorumNotReached { needed, .. } = err else {
        panic!("{err:?}");
    };
    assert_eq!(needed, 3);
    // A limit of 1 is a lock: a majority suffices.
    let one = locker.semaphore("one", 1).ttl(TTL).try_acquire().await;
    assert!(one.unwrap().is_some());
}
