//! Locks on a real three-node Redis Cluster: exclusion, keys on every
//! shard, online slot migration under load, sharded release messages, and
//! scripts reloaded after `SCRIPT FLUSH`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::cluster::Migration;
use lock_tests::exclusion::{CountRun, Load, hammer};
use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM};
use lock_tests::{RedisCluster, RedisServer};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");
/// A backoff so slow that a waiter woken within seconds was woken by a
/// release message (or the listener's own wake-up after missing some).
const SLOW_BACKOFF: Duration = Duration::from_secs(20);

async fn locker(cluster: &RedisCluster) -> Locker {
    Locker::connect(LockConfig::from_url(&cluster.url()).unwrap())
        .await
        .unwrap()
}

async fn slow_waiter(cluster: &RedisCluster) -> Locker {
    let config = LockConfig::from_url(&cluster.url())
        .unwrap()
        .retry_backoff(SLOW_BACKOFF, SLOW_BACKOFF);
    Locker::connect(config).await.unwrap()
}

/// A runtime of two workers, for tests that drive the cluster (which
/// blocks) from the test's own thread.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The Redis key holding lock `name` (default prefix).
fn lock_key(name: &str) -> String {
    format!("lock:{{{name}}}")
}

/// Index of the node serving `key`, asked through [`cmd`] (which a freeze
/// of the machine cannot interrupt): the slot from the first node, and the
/// node from its slot map.
fn node_for_key(cluster: &RedisCluster, key: &str) -> usize {
    let first = &cluster.nodes()[0];
    let slot = first.int(&["CLUSTER", "KEYSLOT", key]);
    let redis::Value::Array(ranges) = first.cmd(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS is not an array");
    };
    for range in ranges {
        let redis::Value::Array(range) = range else {
            panic!("a CLUSTER SLOTS range is not an array");
        };
        let (redis::Value::Int(low), redis::Value::Int(high), redis::Value::Array(primary)) =
            (&range[0], &range[1], &range[2])
        else {
            panic!("unexpected CLUSTER SLOTS range {range:?}");
        };
        if (*low..=*high).contains(&slot) {
            let redis::Value::Int(port) = primary[1] else {
                panic!("unexpected CLUSTER SLOTS node {primary:?}");
            };
            return cluster
                .nodes()
                .iter()
                .position(|node| i64::from(node.port()) == port)
                .expect("a node of the cluster serves the slot");
        }
    }
    panic!("no node serves slot {slot}");
}

/// One lock name served by each node, found by trying names in turn.
fn names_on_every_node(cluster: &RedisCluster, prefix: &str) -> Vec<String> {
    let mut found: Vec<Option<String>> = vec![None; cluster.nodes().len()];
    for i in 0..1000 {
        let name = format!("{prefix}:{i}");
        let node = node_for_key(cluster, &lock_key(&name));
        found[node].get_or_insert(name);
        if found.iter().all(Option::is_some) {
            return found.into_iter().flatten().collect();
        }
    }
    panic!("1000 names did not reach every node: {found:?}");
}

/// Sharded subscribers of `channel` on `node`.
fn shard_subscribers(node: &RedisServer, channel: &str) -> i64 {
    match node.cmd(&["PUBSUB", "SHARDNUMSUB", channel]) {
        redis::Value::Array(reply) => match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("PUBSUB SHARDNUMSUB {channel}: {other:?}"),
        },
        other => panic!("PUBSUB SHARDNUMSUB {channel}: {other:?}"),
    }
}

/// Polls until `node` has a sharded subscriber on `channel`.
async fn wait_subscribed(node: &RedisServer, channel: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while shard_subscribers(node, channel) < 1 {
        assert!(
            Instant::now() < deadline,
            "nobody SSUBSCRIBEd {channel} on port {}",
            node.port()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_on_three_lockers_never_overlap() {
    let cluster = RedisCluster::start();
    let mut lockers = Vec::new();
    for _ in 0..3 {
        lockers.push(locker(&cluster).await);
    }
    let load = Load::new("hammered", Duration::from_secs(3));
    let report = hammer(&lockers, &load).await;
    println!("{report}");
    assert!(report.entries > 50, "too little progress: {report}");
    assert_eq!(report.overlaps, 0, "{report}");
    assert_eq!(report.fence_regressions, 0, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(report.error_count(), 0, "{report}");
    // Every lock was released: nothing is left on any node.
    for node in cluster.nodes() {
        assert_eq!(lock_tests::fixtures::key_count(node), 0);
    }
}

#[test]
fn separate_processes_never_lose_an_increment() {
    let cluster = RedisCluster::start();
    let store = RedisServer::start();
    let url = cluster.url();
    // Through `#[distributed_lock]` on the global locker: the attribute is
    // the same on every topology, only the URL differs.
    let run = CountRun {
        worker: WORKER,
        lock_url: &url,
        processes: 3,
        tasks: 8,
        iterations: 10,
        extra: &["--attribute"],
        limit: Duration::from_secs(60),
    };
    assert_eq!(run.run(&store), run.expected());
}

/// The control: the same workload without the lock loses updates, so the
/// test above can fail.
#[test]
fn without_the_lock_the_same_workload_loses_increments() {
    let cluster = RedisCluster::start();
    let store = RedisServer::start();
    let url = cluster.url();
    let run = CountRun {
        worker: WORKER,
        lock_url: &url,
        processes: 3,
        tasks: 8,
        iterations: 10,
        extra: &["--no-lock"],
        limit: Duration::from_secs(60),
    };
    let count = run.run(&store);
    assert!(
        count < run.expected(),
        "no update was lost ({count}); the race window is too small"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_land_on_every_node_and_each_works() {
    let cluster = RedisCluster::start();
    let locker = locker(&cluster).await;
    let names = names_on_every_node(&cluster, "spread");
    let mut guards = Vec::new();
    for (node, name) in names.iter().enumerate() {
        let guard = locker.lock(name.as_str()).acquire().await.unwrap();
        // The token sits on the node that serves the key's slot.
        let holder = &cluster.nodes()[node];
        assert!(
            matches!(
                holder.cmd(&["GET", &lock_key(name)]),
                redis::Value::BulkString(_)
            ),
            "lock {name} is not on node {node}"
        );
        assert!(
            locker
                .lock(name.as_str())
                .try_acquire()
                .await
                .unwrap()
                .is_none(),
            "lock {name} was granted twice"
        );
        guards.push(guard);
    }
    for (guard, name) in guards.into_iter().zip(&names) {
        let first = guard.fence();
        assert!(guard.release().await.unwrap());
        let again = locker.lock(name.as_str()).acquire().await.unwrap();
        assert!(again.fence() > first, "{} then {}", first, again.fence());
        assert!(again.release().await.unwrap());
    }
    // Released: nothing of any lock is left on any node.
    for node in cluster.nodes() {
        assert_eq!(lock_tests::fixtures::key_count(node), 0);
    }
}

/// A load on one key while its slot moves to another node, slowly (one key
/// at a time, pausing), so that acquisitions meet the slot half-migrated.
#[test]
fn exclusion_holds_while_the_slot_migrates() {
    let cluster = RedisCluster::start();
    let runtime = two_workers();
    let name = "migrating";
    let slot = cluster.slot_of(&lock_key(name));
    let from = cluster.node_for_slot(slot);
    let to = (from + 1) % cluster.nodes().len();
    let lockers: Vec<Locker> = runtime.block_on(async {
        let mut lockers = Vec::new();
        for _ in 0..3 {
            lockers.push(locker(&cluster).await);
        }
        lockers
    });
    let mut load = Load::new(name, Duration::from_secs(6));
    // Leases that renewals keep through a stall (`lost` must stay 0).
    load.ttl = STALL_PROOF_TTL;
    let load_handle = {
        let (lockers, load) = (lockers.clone(), load.clone());
        runtime.spawn(async move { hammer(&lockers, &load).await })
    };
    // Let the load run, then migrate under it.
    while load.entries_so_far() < 20 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let before = load.entries_so_far();
    cluster.migrate_slot_with(
        slot,
        from,
        to,
        Migration {
            batch: 1,
            pause: Duration::from_millis(700),
        },
    );
    let migrated = load.entries_so_far();
    let report = runtime.block_on(load_handle).unwrap();
    let after = report.entries;
    println!("{report}; entries before={before} at end of migration={migrated} after={after}");
    assert_eq!(cluster.node_for_key(&lock_key(name)), to);
    assert_eq!(report.overlaps, 0, "{report}");
    assert_eq!(report.fence_regressions, 0, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    // One key per lock: a script is redirected to wherever the key is,
    // never refused with TRYAGAIN, so the load goes on during the move.
    assert_eq!(report.error_count(), 0, "{report}");
    assert!(migrated > before, "no entry during the migration: {report}");
    assert!(after > migrated, "no entry after the migration: {report}");
}

/// A lock held (watchdog on, a lease that renewals keep through a stall)
/// across its slot's migration is renewed on whichever node holds its key,
/// and released at the end.
#[test]
fn a_held_lock_is_renewed_across_a_migration() {
    let cluster = RedisCluster::start();
    let runtime = two_workers();
    let name = "held-through";
    let slot = cluster.slot_of(&lock_key(name));
    let from = cluster.node_for_slot(slot);
    let to = (from + 2) % cluster.nodes().len();
    let locker = runtime.block_on(locker(&cluster));
    let ttl = STALL_PROOF_TTL;
    let guard = runtime
        .block_on(locker.lock(name).ttl(ttl).acquire())
        .unwrap();
    let started = Instant::now();
    cluster.migrate_slot_with(
        slot,
        from,
        to,
        Migration {
            batch: 1,
            pause: Duration::from_millis(800),
        },
    );
    // Hold for two leases' worth in all.
    std::thread::sleep((ttl * 2).saturating_sub(started.elapsed()));
    assert!(guard.is_held(), "the lock was lost across the migration");
    assert!(matches!(
        cluster.nodes()[to].cmd(&["GET", &lock_key(name)]),
        redis::Value::BulkString(_)
    ));
    let stats = locker.stats();
    assert!(stats.renewed >= 3, "{stats:?}");
    assert_eq!(stats.lost, 0, "{stats:?}");
    assert!(runtime.block_on(guard.release()).unwrap());
}

/// Two locks in one slot, held while the slot is half-migrated (one key
/// moved, the other not yet) for two leases: a renewal of both in one
/// script is answered `TRYAGAIN` all that time, so each key is renewed
/// alone, wherever it is; neither is reported lost while both are ours.
#[test]
fn locks_sharing_a_half_migrated_slot_stay_held() {
    let cluster = RedisCluster::start();
    let runtime = two_workers();
    let first = "pair-0";
    let slot = cluster.slot_of(&lock_key(first));
    let second = (1..200_000)
        .map(|n| format!("pair-{n}"))
        .find(|name| cluster.slot_of(&lock_key(name)) == slot)
        .expect("another name in the slot");
    let from = cluster.node_for_slot(slot);
    let to = (from + 1) % cluster.nodes().len();
    let locker = runtime.block_on(locker(&cluster));
    let ttl = STALL_PROOF_TTL;
    let guards = [first, second.as_str()].map(|name| {
        runtime
            .block_on(locker.lock(name).ttl(ttl).acquire())
            .unwrap()
    });
    let (source, target) = (&cluster.nodes()[from], &cluster.nodes()[to]);
    let id = |node: &RedisServer| match node.cmd(&["CLUSTER", "MYID"]) {
        redis::Value::BulkString(id) => String::from_utf8(id).unwrap(),
        other => panic!("CLUSTER MYID answered {other:?}"),
    };
    let (source_id, target_id, slot_arg) = (id(source), id(target), slot.to_string());
    target.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &source_id]);
    source.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &target_id]);
    let port = target.port().to_string();
    let moved = source.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        &lock_key(first),
    ]);
    assert_eq!(moved, redis::Value::Okay);
    std::thread::sleep(ttl * 2);
    let stats = locker.stats();
    assert!(
        guards.iter().all(|guard| guard.is_held()),
        "locks still ours were reported lost: {stats:?}"
    );
    assert_eq!(stats.lost, 0, "{stats:?}");
    // The rest of the migration, so that the releases find their keys.
    cluster.migrate_slot(slot, from, to);
    for guard in guards {
        assert!(runtime.block_on(guard.release()).unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_on_every_shard() {
    let cluster = RedisCluster::start();
    let holder = locker(&cluster).await;
    let waiter = slow_waiter(&cluster).await;
    for (node, name) in names_on_every_node(&cluster, "handoff")
        .into_iter()
        .enumerate()
    {
        let guard = holder
            .lock(name.as_str())
            .ttl(Duration::from_secs(30))
            .acquire()
            .await
            .unwrap();
        let blocked = {
            let (waiter, name) = (waiter.clone(), name.clone());
            tokio::spawn(async move {
                waiter
                    .lock(name)
                    .wait(Duration::from_secs(15))
                    .acquire()
                    .await
                    .unwrap()
            })
        };
        let channel = format!("{}:released", lock_key(&name));
        wait_subscribed(&cluster.nodes()[node], &channel).await;
        // Subscribed, tried once more, asleep: a release before the sleep
        // would be met by that try and wake no one.
        lock_tests::fixtures::eventually("the waiter asleep", Duration::from_secs(10), || {
            waiter.stats().asleep == 1
        })
        .await;
        let before = waiter.stats();
        let held_fence = guard.fence();
        assert!(guard.release().await.unwrap());
        // Woken within 5 s, far below the 20 s backoff, and by the message
        // (counted below): proved by cause, not by a second of a calm machine.
        let taken = tokio::time::timeout(Duration::from_secs(5), blocked)
            .await
            .expect("the waiter was not woken by the release")
            .unwrap();
        assert!(taken.fence() > held_fence);
        taken.release().await.unwrap();
        let after = waiter.stats();
        assert_eq!(after.timer_wakeups, before.timer_wakeups, "{after:?}");
        assert!(after.release_wakeups > before.release_wakeups, "{after:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_waiters_on_keys_of_every_shard_is_woken_by_their_releases() {
    // Their subscriptions are taken together, one per slot's node at once.
    const KEYS: usize = 60;
    let cluster = RedisCluster::start();
    let holder = locker(&cluster).await;
    let waiter = slow_waiter(&cluster).await;
    let mut guards = Vec::new();
    for n in 0..KEYS {
        let request = holder
            .lock(format!("burst:{n}"))
            .ttl(Duration::from_secs(60));
        guards.push(request.acquire().await.unwrap());
    }
    let waiters: Vec<_> = (0..KEYS)
        .map(|n| {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                let request = waiter.lock(format!("burst:{n}")).wait(SLOW_BACKOFF);
                request.acquire().await.map(drop)
            })
        })
        .collect();
    // Subscribed, tried once more, asleep: a release before the sleep
    // would be met by that try and wake no one.
    lock_tests::fixtures::eventually("every waiter asleep", SLOW_BACKOFF, || {
        waiter.stats().asleep == KEYS as u64
    })
    .await;
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
    let woken = async {
        for waiter in waiters {
            waiter.await.unwrap().unwrap();
        }
    };
    // Far below the 20 s backoff, and not by a timer (counted below).
    tokio::time::timeout(Duration::from_secs(10), woken)
        .await
        .expect("not every waiter was woken by its release");
    let stats = waiter.stats();
    assert_eq!(stats.timer_wakeups, 0, "{stats:?}");
    assert!(stats.release_wakeups >= KEYS as u64, "{stats:?}");
}

/// The waiter's subscription follows the channel's slot to its new node:
/// the old node drops it, the listener subscribes again on the new one.
#[test]
fn a_waiter_is_still_woken_after_its_slot_moved() {
    let cluster = RedisCluster::start();
    let runtime = two_workers();
    let name = "moving-waiter";
    let channel = format!("{}:released", lock_key(name));
    let slot = cluster.slot_of(&lock_key(name));
    let from = cluster.node_for_slot(slot);
    let to = (from + 1) % cluster.nodes().len();
    let (holder, waiter) =
        runtime.block_on(async { (locker(&cluster).await, slow_waiter(&cluster).await) });
    let guard = runtime
        .block_on(holder.lock(name).ttl(Duration::from_secs(30)).acquire())
        .unwrap();
    let blocked = {
        let waiter = waiter.clone();
        runtime.spawn(async move {
            waiter
                .lock(name)
                .wait(Duration::from_secs(20))
                .acquire()
                .await
                .unwrap()
        })
    };
    runtime.block_on(wait_subscribed(&cluster.nodes()[from], &channel));
    cluster.migrate_slot(slot, from, to);
    runtime.block_on(wait_subscribed(&cluster.nodes()[to], &channel));
    let held_fence = guard.fence();
    assert!(runtime.block_on(guard.release()).unwrap());
    // Woken within 5 s, far below the 20 s backoff, and not by a timer
    // (counted below): proved by cause, not by a second of a calm machine.
    let taken = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), blocked).await })
        .expect("the waiter was not woken after the slot moved")
        .unwrap();
    assert!(taken.fence() > held_fence);
    assert_eq!(waiter.stats().timer_wakeups, 0, "{:?}", waiter.stats());
    assert!(runtime.block_on(taken.release()).unwrap());
}

/// Scripts cached on no node any more (`SCRIPT FLUSH` everywhere, mid-test)
/// are loaded again: acquire, release and the watchdog's renewals go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_reloaded_after_a_flush_on_every_node() {
    let cluster = RedisCluster::start();
    let locker = locker(&cluster).await;
    let names = names_on_every_node(&cluster, "flushed");
    let mut first_fences = Vec::new();
    for name in &names {
        let guard = locker.lock(name.as_str()).acquire().await.unwrap();
        first_fences.push(guard.fence());
        assert!(guard.release().await.unwrap());
    }
    // Held with a 3 s lease across the flush: its renewals (the first one
    // due 1 s after the acquire) need EXTEND.
    let held = locker
        .lock("held-over-flush")
        .ttl(Duration::from_secs(3))
        .acquire()
        .await
        .unwrap();
    cluster.flush_scripts();
    for node in cluster.nodes() {
        assert_eq!(cached_scripts(node), 0);
    }
    // Each node that answers NOSCRIPT gets the script in full and caches
    // it: the acquire and release scripts are back where they ran.
    for (node, name) in names.iter().enumerate() {
        let guard = locker.lock(name.as_str()).acquire().await.unwrap();
        assert!(guard.fence() > first_fences[node]);
        assert!(guard.release().await.unwrap());
        assert!(cached_scripts(&cluster.nodes()[node]) >= 2, "node {node}");
    }
    // Past the lease: only renewals after the flush kept it.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(held.is_held(), "renewal failed after the flush");
    assert!(held.release().await.unwrap());
    assert_eq!(locker.stats().lost, 0);
}

/// `number_of_cached_scripts` from `INFO memory`.
fn cached_scripts(node: &RedisServer) -> u64 {
    let info = match node.cmd(&["INFO", "memory"]) {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO: {other:?}"),
    };
    info.lines()
        .find_map(|line| line.strip_prefix("number_of_cached_scripts:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO memory has number_of_cached_scripts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_fails_fast_when_no_node_answers() {
    let url = format!(
        "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
        lock_tests::closed_port(),
        lock_tests::closed_port()
    );
    // A connect timeout far beyond the bound: failing within the bound is
    // failing on the refusals, not on the timeout.
    let config = LockConfig::from_url(&url)
        .unwrap()
        .connect_timeout(Duration::from_secs(30));
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(5), Locker::connect(config))
        .await
        .expect("connect did not give up");
    assert!(
        matches!(answer, Err(lock_runtime::LockError::Redis(_))),
        "{:?}",
        answer.err()
    );
    assert!(started.elapsed() < STALL_ROOM, "{:?}", started.elapsed());
}

/// A frozen node costs only the leases on it: the renewals of the other
/// slots go on, and its own lease is reported lost when its validity ends.
/// The freeze ends as soon as that loss is reported (about a lease), below
/// the cluster's node timeout (2 s), so the other nodes keep serving: a
/// cluster without replicas stops when a node is failed for good.
#[test]
fn a_frozen_node_loses_only_its_own_leases() {
    let cluster = RedisCluster::start();
    let runtime = two_workers();
    // The fixtures' 1 s response timeout, nearly the 1.2 s lease: each
    // slot's renewal is its own call, applied when it comes, so the frozen
    // node's timeout delays only its own lease (when a round was applied
    // once every node answered, all three leases were reported lost). Leases
    // of 1.2 s: renewed through a stall on the live nodes, and reported lost
    // on the frozen one within about 1.1 s.
    let config = lock_tests::fixtures::config(&cluster.url());
    let locker = runtime.block_on(Locker::connect(config)).unwrap();
    let ttl = Duration::from_millis(1200);
    let names = names_on_every_node(&cluster, "frozen");
    let guards: Vec<_> = names
        .iter()
        .map(|name| {
            let request = locker.lock(name.as_str()).ttl(ttl);
            runtime.block_on(request.acquire()).unwrap()
        })
        .collect();
    let expiry = |node: usize| cluster.nodes()[node].int(&["PEXPIRETIME", &lock_key(&names[node])]);
    let expiries_before = [expiry(1), expiry(2)];
    let frozen = 0;
    cluster.nodes()[frozen].pause();
    // Until the frozen node's lease is reported lost (not a guess of how
    // long that takes), and no longer than its lease and room for a stall.
    let reported = runtime.block_on(async {
        tokio::time::timeout(ttl + STALL_ROOM, guards[frozen].lost())
            .await
            .is_ok()
    });
    let held: Vec<bool> = guards.iter().map(|guard| guard.is_held()).collect();
    let stats = locker.stats();
    cluster.nodes()[frozen].resume();
    assert!(
        reported,
        "the frozen node's lease was not reported lost: {stats:?}"
    );
    assert_eq!(held, [false, true, true], "{stats:?}");
    assert_eq!(stats.lost, 1, "{stats:?}");
    // The other leases were renewed on their nodes during the freeze: their
    // expiry moved on (not merely still inside their first lease).
    let expiries_after = [expiry(1), expiry(2)];
    assert!(
        expiries_after[0] > expiries_before[0] && expiries_after[1] > expiries_before[1],
        "{expiries_before:?} -> {expiries_after:?}"
    );
    for guard in guards.into_iter().skip(1) {
        assert!(runtime.block_on(guard.release()).unwrap());
    }
}

/// Names that would break the hash tag (`lock:{}x}` hashed whole, so the
/// lock and its channel landed in different slots, and every acquire
/// failed with a raw CROSSSLOT error) work like any other: acquire, wait
/// and wake-up, release. A prefix that would open a tag of its own is a
/// config error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_with_braces_lock_like_any_other() {
    let cluster = RedisCluster::start();
    let holder = locker(&cluster).await;
    let waiter = slow_waiter(&cluster).await;
    for name in ["}x", "a}b", "{", "}", "{}", "%7D", "%", "x y\nz*?["] {
        let guard = holder
            .lock(name)
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        let blocked = {
            let (waiter, name) = (waiter.clone(), name.to_owned());
            tokio::spawn(async move {
                waiter
                    .lock(name)
                    .wait(Duration::from_secs(15))
                    .acquire()
                    .await
            })
        };
        // Woken by the release message, on the shard of the lock's slot.
        lock_tests::fixtures::eventually("the waiter subscribed", Duration::from_secs(10), || {
            cluster.nodes().iter().any(|node| {
                shard_subscribers(node, &format!("lock:{{{}}}:released", escaped(name))) == 1
            })
        })
        .await;
        assert!(guard.release().await.unwrap());
        let taken = tokio::time::timeout(Duration::from_secs(5), blocked)
            .await
            .unwrap_or_else(|_| panic!("{name:?}: the waiter missed the release"))
            .unwrap()
            .unwrap();
        assert!(taken.release().await.unwrap());
    }
    assert_eq!(waiter.stats().timer_wakeups, 0, "{:?}", waiter.stats());
    let braced = LockConfig::from_url(&cluster.url())
        .unwrap()
        .key_prefix("app{1}:");
    assert!(matches!(
        Locker::connect(braced).await,
        Err(lock_runtime::LockError::Config(_))
    ));
}

/// A name as it sits inside the hash tag: `%` and `}` escaped.
fn escaped(name: &str) -> String {
    name.replace('%', "%25").replace('}', "%7D")
}

/// Whether `node` (a replica) has the key `key` yet.
fn replica_has(node: &RedisServer, key: &str) -> bool {
    let mut connection = node.connection();
    let (_, exists): ((), i64) = redis::pipe()
        .cmd("READONLY")
        .cmd("EXISTS")
        .arg(key)
        .query(&mut connection)
        .unwrap();
    exists == 1
}

/// The primary serving a held lock's slot dies and its replica is
/// promoted: the holder keeps its lock (renewed on the new primary), the
/// waiter's sharded subscription moves to the new primary, and the
/// holder's release there wakes it by its message. (The subscription
/// used to stay with the dead node for good: nothing made the listener's
/// connection learn the new slot map, so the waiter slept through the
/// release until its own timer.)
#[test]
fn a_waiter_is_still_woken_after_a_failover_inside_the_cluster() {
    let mut cluster = RedisCluster::start_with_replicas();
    let runtime = two_workers();
    let name = "failing-over";
    let key = lock_key(name);
    let channel = format!("{key}:released");
    let slot = cluster.slot_of(&key);
    let primary = cluster.node_for_slot(slot);
    let replica = cluster.replica_of(primary);
    let (holder, waiter) =
        runtime.block_on(async { (locker(&cluster).await, slow_waiter(&cluster).await) });
    // A lease that outlasts the failover (the node timeout is 2 s).
    let ttl = Duration::from_secs(20);
    let guard = runtime
        .block_on(holder.lock(name).ttl(ttl).acquire())
        .unwrap();
    // On the replica before its primary dies: the failover loses nothing.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !replica_has(&cluster.nodes()[replica], &key) {
        assert!(Instant::now() < deadline, "the replica never got the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let blocked = {
        let waiter = waiter.clone();
        runtime.spawn(async move {
            waiter
                .lock(name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    runtime.block_on(wait_subscribed(&cluster.nodes()[primary], &channel));
    runtime.block_on(lock_tests::fixtures::eventually(
        "the waiter asleep",
        Duration::from_secs(10),
        || waiter.stats().asleep == 1,
    ));
    let renewed_before = holder.stats().renewed;
    cluster.kill_node(primary);
    cluster.wait_slot_served_by(slot, replica, &[primary]);
    // The holder follows: renewed on the new primary, still held.
    runtime.block_on(lock_tests::fixtures::eventually(
        "the holder renewed on the new primary",
        Duration::from_secs(15),
        || holder.stats().renewed > renewed_before,
    ));
    assert!(guard.is_held(), "{:?}", holder.stats());
    // The waiter listens where the release will be announced.
    runtime.block_on(lock_tests::fixtures::eventually(
        "the waiter subscribed on the new primary",
        Duration::from_secs(15),
        || shard_subscribers(&cluster.nodes()[replica], &channel) > 0,
    ));
    // Asleep again, listening: a try that met the dead node during the
    // failover pauses a backoff step (20 s here) before it tries again.
    runtime.block_on(lock_tests::fixtures::eventually(
        "the waiter asleep after the failover",
        SLOW_BACKOFF + Duration::from_secs(10),
        || waiter.stats().asleep == 1,
    ));
    let held_fence = guard.fence();
    let before = waiter.stats();
    assert!(runtime.block_on(guard.release()).unwrap());
    // Woken within 5 s, far below the 20 s backoff and the lease, and not
    // by a timer (counted below).
    let taken = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), blocked).await })
        .expect("the waiter was not woken by the release on the new primary")
        .unwrap()
        .unwrap();
    assert!(taken.fence() > held_fence);
    let after = waiter.stats();
    assert_eq!(after.timer_wakeups, before.timer_wakeups, "{after:?}");
    assert!(runtime.block_on(taken.release()).unwrap());
}

/// The primary serving a slot freezes (SIGSTOP: its connections stay
/// open, nothing is answered) and the cluster promotes its replica: a
/// locker that was using the frozen node follows, and locks in that slot
/// are granted by the new primary. (The redis crate learns a new slot map
/// only from a redirect or a dropped connection, never from a timeout, so
/// every call for the slot went on timing out on the frozen node for as
/// long as it stayed frozen.)
#[test]
fn a_locker_follows_the_failover_of_a_frozen_primary() {
    let cluster = RedisCluster::start_with_replicas();
    let runtime = two_workers();
    let name = "frozen-over";
    let key = lock_key(name);
    let slot = cluster.slot_of(&key);
    let primary = cluster.node_for_slot(slot);
    let replica = cluster.replica_of(primary);
    let locker = runtime.block_on(Locker::connect(lock_tests::fixtures::config(
        &cluster.url(),
    )));
    let locker = locker.unwrap();
    let warm = runtime.block_on(locker.lock(name).acquire()).unwrap();
    assert!(runtime.block_on(warm.release()).unwrap());
    cluster.nodes()[primary].pause();
    cluster.wait_slot_served_by(slot, replica, &[primary]);
    // Every node that answers agrees the new primary serves the slot: a
    // few bounded tries later the lock must be granted there.
    let mut outcomes = Vec::new();
    let granted = (0..5).find_map(|_| {
        let request = locker.lock(name).wait(Duration::from_millis(500));
        match runtime.block_on(request.acquire()) {
            Ok(guard) => Some(guard),
            Err(err) => {
                outcomes.push(err.to_string());
                None
            }
        }
    });
    let on_new_primary = granted.is_some()
        && matches!(
            cluster.nodes()[replica].cmd(&["GET", &key]),
            redis::Value::BulkString(_)
        );
    cluster.nodes()[primary].resume();
    let guard = granted.unwrap_or_else(|| panic!("never granted after the failover: {outcomes:?}"));
    assert!(on_new_primary, "granted, but not by the new primary");
    drop(guard);
}

/// One seed node frozen (a replica: the cluster serves every slot) does
/// not keep a new locker from connecting through the others.
#[test]
fn a_frozen_seed_does_not_stop_connect() {
    let cluster = RedisCluster::start_with_replicas();
    let runtime = two_workers();
    let frozen = cluster.replica_of(0);
    cluster.nodes()[frozen].pause();
    let config = lock_tests::fixtures::config(&cluster.url());
    let connected = runtime.block_on(Locker::connect(config));
    cluster.nodes()[frozen].resume();
    let locker = connected.expect("connect through the seeds that answer");
    let guard = runtime.block_on(locker.lock("seeded").acquire()).unwrap();
    assert!(runtime.block_on(guard.release()).unwrap());
}
