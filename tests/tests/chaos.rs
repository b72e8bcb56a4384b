//! Chaos: worker processes take locks through `#[distributed_lock]` and
//! write to a fenced store, while the driver kills, freezes, cuts off and
//! drops replies to the holders themselves, and faults the servers of each
//! deployment; the history checker (`lock_tests::history`) then judges the
//! run by rules that trust nothing the library says about itself.
//!
//! `CHAOS_SECS` sets the length of each run (default: a short CI run); a
//! soak is
//! `CHAOS_SECS=600 cargo test -p lock-tests --test chaos -- --nocapture --test-threads 1`.
//! Each run ends with one line:
//! `chaos <deployment> chaos: sections=.. granted=.. completed=.. handoffs=.. told=.. stale_refused=.. ... violations=.. faults_injected=..`.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::chaos::{Fleet, LockPath, MOST_ROUNDS, Plan, TTL, report, until_met};
use lock_tests::history::{Minimums, STORE_SCRIPT, ServerFault, store_keys};
use lock_tests::{RedisCluster, RedisServer, SentinelSetup, Worker, monotonic_ns};

const WORKER: &str = env!("CARGO_BIN_EXE_lock_worker");

/// The length of one run: `CHAOS_SECS`, or `default` seconds.
fn run_for(default: u64) -> Duration {
    let seconds = std::env::var("CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    Duration::from_secs(seconds)
}

fn plan(locks: LockPath, store: &RedisServer, run_for: Duration) -> Plan {
    Plan {
        locks,
        store_url: store.url(),
        workers: 3,
        tasks: 8,
        resources: 3,
        run_for,
        env: Vec::new(),
        keep_histories: true,
    }
}

/// What every run must have exercised, at the least, to prove anything.
fn minimums(run_for: Duration) -> Minimums {
    let seconds = usize::try_from(run_for.as_secs()).unwrap_or(1);
    Minimums {
        completed: 10 * seconds,
        handoffs: seconds,
        told: 1,
        stale_refused: 1,
        freezes_hit: 1,
        kills_hit: 1,
        cuts_hit: 0,
        dropped_replies: 0,
        // Every deployment's run faults its servers while locks are held.
        server_faults_hit: 1,
        // Tasks of one worker share keys: the lock goes from one to the
        // next in process, and those sections are judged too.
        passed_in_process: 1,
        // Fair locks run only where a run asks for them.
        fair_ordered: 0,
    }
}

/// Faults in rotation until the workers are nearly done; `server` injects
/// the deployment's own faults (round `n` of them) and says whether one
/// took effect. Returns how many faults took effect.
///
/// Pass the quick faults first. A kill waits at most 2 s for a holder; a
/// freeze waits for a holder between its two writes (a few seconds apart
/// on a starved machine), then for a newer owner to write, and on a
/// starved machine that can take the rest of the run: a kill queued
/// behind it would never run. And while half the run is left, the
/// deployment's fault waits for every holder fault to have taken effect
/// once, trying the missing ones again: after a Sentinel failover with
/// `WAIT`, no lock is granted for 10-13 s, and a freeze that missed
/// before it would find no holder after it.
fn rotate(
    fleet: &mut Fleet,
    holder_faults: &[fn(&mut Fleet) -> bool],
    mut server: impl FnMut(&mut Fleet, usize) -> bool,
) -> usize {
    let half_run = fleet.left() / 2;
    let mut took_effect_once = vec![false; holder_faults.len()];
    let (mut injected, mut round, mut server_rounds) = (0, 0, 0);
    while fleet.left() > TTL * 5 {
        let slot = round % (holder_faults.len() + 1);
        let missing = took_effect_once.iter().position(|took| !took);
        let took_effect = match (slot == holder_faults.len(), missing) {
            (true, Some(missing)) if fleet.left() > half_run => {
                let took = holder_faults[missing](fleet);
                took_effect_once[missing] |= took;
                took
            }
            (true, _) => {
                server_rounds += 1;
                server(fleet, server_rounds - 1)
            }
            (false, _) => {
                let took = holder_faults[slot](fleet);
                took_effect_once[slot] |= took;
                took
            }
        };
        injected += usize::from(took_effect);
        round += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    injected
}

fn kill(fleet: &mut Fleet) -> bool {
    fleet.kill_holder()
}

fn freeze(fleet: &mut Fleet) -> bool {
    fleet.freeze_holder(TTL * 3)
}

fn cut(fleet: &mut Fleet) -> bool {
    fleet.cut_holder(TTL * 3)
}

fn drop_replies(fleet: &mut Fleet) -> bool {
    fleet.drop_replies(Duration::from_secs(5)) > 0
}

/// One server (AOF, `appendfsync always`), each worker through a fault
/// proxy of its own: every fault hits a contender.
#[test]
fn one_server_with_faults_on_the_holders() {
    let run_for = run_for(20);
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = RedisServer::start();
    let seconds = usize::try_from(run_for.as_secs()).unwrap_or(1);
    let minimums = Minimums {
        cuts_hit: 1,
        dropped_replies: 1,
        // One task in four of each worker takes fair locks.
        fair_ordered: seconds,
        ..minimums(run_for)
    };
    until_met("chaos one-server", &minimums, |round| {
        let mut plan = plan(LockPath::Proxied(server.port()), &store, run_for);
        plan.env.push(("CHAOS_FAIR".into(), "1".into()));
        let mut fleet = Fleet::start(WORKER, &format!("single-{round}"), plan);
        // The quick faults first: the slow ones wait for a long hold, and on a
        // starved machine a run may have room for only one round of each.
        let injected = rotate(
            &mut fleet,
            &[drop_replies, kill, freeze, cut],
            |fleet, n| {
                let start = monotonic_ns();
                if n % 2 == 0 {
                    server.pause();
                    std::thread::sleep(TTL * 2);
                    server.resume();
                    fleet.record_server_fault(ServerFault::Freeze, start, monotonic_ns());
                } else {
                    server.restart();
                    fleet.record_server_fault(ServerFault::Restart, start, monotonic_ns());
                }
                true
            },
        );
        (fleet.finish(&store), injected)
    });
}

/// One server, one task in four of each worker holding two resources at
/// once (`CHAOS_MULTI=1`, `locker.lock_all`) beside the exclusive lock's
/// holders of the same keys, with kills, freezes and cuts of the holders:
/// each multi-key hold is recorded as one section per key, so the
/// checker's per-key rules (one owner of a key at a time, fences rising)
/// judge every key whichever kind of call held it.
#[test]
fn one_server_with_multi_key_holders() {
    let run_for = run_for(20);
    let server = RedisServer::start();
    let store = RedisServer::start();
    let minimums = Minimums {
        // The holders are faulted, not the server.
        server_faults_hit: 0,
        ..minimums(run_for)
    };
    until_met("chaos multi-key", &minimums, |round| {
        let mut plan = plan(LockPath::Proxied(server.port()), &store, run_for);
        plan.env.push(("CHAOS_MULTI".into(), "1".into()));
        let mut fleet = Fleet::start(WORKER, &format!("multi-{round}"), plan);
        let injected = rotate(&mut fleet, &[kill, freeze, cut], |_, _| false);
        (fleet.finish(&store), injected)
    });
}

/// A three-node cluster: holders killed and frozen, the node that serves a
/// held lock frozen, a lock's slot migrated mid-run.
#[test]
fn cluster_with_frozen_nodes_and_migrating_slots() {
    let run_for = run_for(20);
    let cluster = RedisCluster::start();
    let store = RedisServer::start();
    until_met("chaos cluster", &minimums(run_for), |round| {
        let mut fleet = Fleet::start(
            WORKER,
            &format!("cluster-{round}"),
            plan(LockPath::Direct(cluster.url()), &store, run_for),
        );
        let injected = rotate(&mut fleet, &[kill, freeze], |fleet, n| {
            let resource = format!("lock:{{chaos:r{}}}", n % 3);
            let node = cluster.node_for_key(&resource);
            let start = monotonic_ns();
            if n % 2 == 0 {
                cluster.nodes()[node].pause();
                std::thread::sleep(TTL * 2);
                cluster.nodes()[node].resume();
                fleet.record_server_fault(ServerFault::Freeze, start, monotonic_ns());
            } else {
                let slot = cluster.slot_of(&resource);
                cluster.migrate_slot(slot, node, (node + 1) % cluster.nodes().len());
                fleet.record_server_fault(ServerFault::Migrate, start, monotonic_ns());
            }
            true
        });
        (fleet.finish(&store), injected)
    });
}

/// The cluster run with one task in four of each worker holding two
/// resources at once (`CHAOS_MULTI=1`), across slots: the node serving a
/// held key frozen, its slot migrated mid-run, holders killed and frozen.
#[test]
fn cluster_with_multi_key_holders_across_slots() {
    let run_for = run_for(20);
    let cluster = RedisCluster::start();
    let store = RedisServer::start();
    until_met("chaos cluster multi-key", &minimums(run_for), |round| {
        let mut plan = plan(LockPath::Direct(cluster.url()), &store, run_for);
        plan.env.push(("CHAOS_MULTI".into(), "1".into()));
        let mut fleet = Fleet::start(WORKER, &format!("cluster-multi-{round}"), plan);
        let injected = rotate(&mut fleet, &[kill, freeze], |fleet, n| {
            let resource = format!("lock:{{chaos:r{}}}", n % 3);
            let node = cluster.node_for_key(&resource);
            let start = monotonic_ns();
            if n % 2 == 0 {
                cluster.nodes()[node].pause();
                std::thread::sleep(TTL * 2);
                cluster.nodes()[node].resume();
                fleet.record_server_fault(ServerFault::Freeze, start, monotonic_ns());
            } else {
                let slot = cluster.slot_of(&resource);
                cluster.migrate_slot(slot, node, (node + 1) % cluster.nodes().len());
                fleet.record_server_fault(ServerFault::Migrate, start, monotonic_ns());
            }
            true
        });
        (fleet.finish(&store), injected)
    });
}

/// Redlock over three masters: holders killed and frozen; one master (a
/// minority) frozen, or restarted empty (no persistence).
#[test]
fn redlock_with_a_minority_of_masters_faulted() {
    let run_for = run_for(20);
    let mut masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let url = lock_tests::fixtures::redlock_url(&masters);
    let store = RedisServer::start();
    // Redlock passes nothing: a pass would need every master's vote.
    let minimums = Minimums {
        passed_in_process: 0,
        ..minimums(run_for)
    };
    until_met("chaos redlock", &minimums, |round| {
        let mut fleet = Fleet::start(
            WORKER,
            &format!("redlock-{round}"),
            plan(LockPath::Direct(url.clone()), &store, run_for),
        );
        let injected = rotate(&mut fleet, &[kill, freeze], |fleet, n| {
            let master = &mut masters[n % 3];
            let start = monotonic_ns();
            if n % 2 == 0 {
                master.pause();
                std::thread::sleep(TTL * 2);
                master.resume();
                fleet.record_server_fault(ServerFault::Freeze, start, monotonic_ns());
            } else {
                master.restart();
                fleet.record_server_fault(ServerFault::Restart, start, monotonic_ns());
            }
            true
        });
        (fleet.finish(&store), injected)
    });
}

/// The Redlock run with one task in four of each worker holding two
/// resources at once (`CHAOS_MULTI=1`): one master frozen or restarted
/// empty, holders killed and frozen.
#[test]
fn redlock_with_multi_key_holders() {
    let run_for = run_for(20);
    let mut masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let url = lock_tests::fixtures::redlock_url(&masters);
    let store = RedisServer::start();
    let minimums = Minimums {
        passed_in_process: 0,
        ..minimums(run_for)
    };
    until_met("chaos redlock multi-key", &minimums, |round| {
        let mut plan = plan(LockPath::Direct(url.clone()), &store, run_for);
        plan.env.push(("CHAOS_MULTI".into(), "1".into()));
        let mut fleet = Fleet::start(WORKER, &format!("redlock-multi-{round}"), plan);
        let injected = rotate(&mut fleet, &[kill, freeze], |fleet, n| {
            let master = &mut masters[n % 3];
            let start = monotonic_ns();
            if n % 2 == 0 {
                master.pause();
                std::thread::sleep(TTL * 2);
                master.resume();
                fleet.record_server_fault(ServerFault::Freeze, start, monotonic_ns());
            } else {
                master.restart();
                fleet.record_server_fault(ServerFault::Restart, start, monotonic_ns());
            }
            true
        });
        (fleet.finish(&store), injected)
    });
}

/// Sentinel with `wait_for_replicas`: holders killed and frozen, then a
/// forced failover mid-run. Every granted lock is on the replica that is
/// promoted, so exclusion holds through it: 0 violations.
#[test]
fn sentinel_failover_with_wait_for_replicas() {
    let violations = sentinel_run("sentinel-wait", Some("1"));
    assert_eq!(violations, 0);
}

/// The same without `WAIT`: a lock granted but not yet replicated when the
/// replica is promoted can be granted again, as the README says. The
/// violations are reported, not asserted.
#[test]
fn sentinel_failover_without_wait_is_reported() {
    let violations = sentinel_run("sentinel-nowait", None);
    let line = format!(
        "chaos sentinel-nowait: {violations} violation(s), which the README allows without WAIT\n"
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// A Sentinel run; returns its violations (asserted by the caller, and
/// with `WAIT` here). A run short of its minimums is made up by more
/// rounds, each with a failover of its own (see [`until_met`]).
fn sentinel_run(name: &str, replicas: Option<&str>) -> usize {
    // With `WAIT`, sections are fewer (each grant waits for a replica),
    // and a freeze waits up to 10 s for a holder in a long hold: in 20 s
    // the run had room for one such wait before its failover, and in
    // one run of six it found no holder (0 freezes hit, a vacuous run).
    // 30 s leave room for a second wait.
    let run_for = run_for(if replicas.is_some() { 30 } else { 20 });
    let setup = SentinelSetup::start();
    let store = RedisServer::start();
    // With WAIT, no lock is granted from the failover until the old master
    // rejoins as a replica (10-13 s, see the README): fewer sections.
    let seconds = usize::try_from(run_for.as_secs()).unwrap_or(1);
    let minimums = Minimums {
        completed: 4 * seconds,
        stale_refused: 0,
        // A grant that waits for a replica is never continued in process:
        // each one is confirmed by the replica (a pass is given back).
        passed_in_process: usize::from(replicas.is_none()),
        ..minimums(run_for)
    };
    let round = |round: usize| {
        let mut plan = plan(LockPath::Direct(setup.url()), &store, run_for);
        // Without WAIT, violations are expected and only reported: their
        // histories would pile up in the temp directory run after run.
        plan.keep_histories = replicas.is_some();
        if let Some(replicas) = replicas {
            plan.env
                .push(("CHAOS_WAIT_REPLICAS".into(), replicas.into()));
        }
        let mut fleet = Fleet::start(WORKER, &format!("{name}-{round}"), plan);
        let mut failed_over = false;
        let injected = rotate(&mut fleet, &[kill, freeze], |fleet, _| {
            if failed_over {
                return false;
            }
            failed_over = true;
            let start = monotonic_ns();
            setup.force_failover();
            fleet.record_server_fault(ServerFault::Failover, start, monotonic_ns());
            true
        });
        (fleet.finish(&store), injected)
    };
    // A run short of its minimums is made up by more rounds, as
    // `until_met` does; without WAIT, violations do not end it.
    let (mut verdict, mut injected) = round(0);
    for n in 1..MOST_ROUNDS {
        let broke = replicas.is_some() && !verdict.violations.is_empty();
        if broke || verdict.shortfalls(&minimums).is_empty() {
            break;
        }
        let (more, faults) = round(n);
        verdict.absorb(more);
        injected += faults;
    }
    if replicas.is_some() {
        report(&format!("chaos {name}"), &verdict, &minimums, injected);
        return 0;
    }
    let summary = format!(
        "chaos {name} {} faults_injected={injected}\n",
        verdict.summary()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), summary.as_bytes());
    let shortfalls = verdict.shortfalls(&minimums);
    assert!(shortfalls.is_empty(), "{name}: {}", shortfalls.join("; "));
    verdict.violations.len()
}

/// The checker must fail a broken locker: a run with a defect built into
/// the workers' lockers (`LOCK_RUNTIME_SABOTAGE`) reports violations.
fn sabotaged_run(defect: &str) -> usize {
    sabotaged_run_with(defect, |_| {})
}

/// [`sabotaged_run`], with the plan changed by `adjust` first.
fn sabotaged_run_with(defect: &str, adjust: impl FnOnce(&mut Plan)) -> usize {
    let server = RedisServer::start();
    let store = RedisServer::start();
    // Room for four or five faults: a defect shows only when a fault made
    // a holder late, and a starved machine lets fewer of them land.
    let mut plan = plan(
        LockPath::Proxied(server.port()),
        &store,
        Duration::from_secs(20),
    );
    plan.env
        .push(("LOCK_RUNTIME_SABOTAGE".into(), defect.into()));
    adjust(&mut plan);
    plan.keep_histories = false;
    let mut fleet = Fleet::start(WORKER, defect, plan);
    let injected = rotate(&mut fleet, &[freeze, cut], |_, _| false);
    let verdict = fleet.finish(&store);
    let line = format!(
        "chaos sabotaged {defect} {} faults_injected={injected}\n",
        verdict.summary()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    verdict.violations.len()
}

/// A watchdog that neither renews nor reports a loss: sections that hold
/// longer than their lease are overlapped by the next owner, untold.
#[test]
fn a_silent_watchdog_is_caught() {
    assert!(
        sabotaged_run("silent-watchdog") > 0,
        "the checker passed a silent watchdog"
    );
}

/// A release that deletes whoever's lock it finds: a holder released late
/// (after a freeze or a cut) deletes its successor's lock, and a third
/// owner overlaps the second, who is told too late.
#[test]
fn a_blind_release_is_caught() {
    assert!(
        sabotaged_run("blind-release") > 0,
        "the checker passed a blind release"
    );
}

/// A holder frozen past its lease whose loss is never told (the watchdog
/// drops a loss it finds late, and the body's end does not look): after
/// the thaw it finishes its stale work beside the next owner, untold.
#[test]
fn a_loss_dropped_after_a_stall_is_caught() {
    assert!(
        sabotaged_run("silent-after-stall") > 0,
        "the checker missed holders that were never told after a freeze"
    );
}

/// A hand-over in process that gives the next task the holder's own fence:
/// two sections of one key with one fence, whatever the faults did.
#[test]
fn a_pass_in_process_without_a_new_fence_is_caught() {
    assert!(
        sabotaged_run("same-fence-pass") > 0,
        "the checker passed a pass in process that kept the fence"
    );
}

/// A fair lock whose release hands the lock to the newest waiter: with
/// every fair task on one resource, lines of several waiters form, and
/// grants overtake the waiters that arrived first.
#[test]
fn a_fair_lock_that_serves_its_line_backwards_is_caught() {
    assert!(
        sabotaged_run_with("lifo-line", |plan| {
            plan.env.push(("CHAOS_FAIR".into(), "1".into()));
            plan.resources = 1;
        }) > 0,
        "the checker passed grants out of arrival order"
    );
}

/// A multi-key lock that takes only the first of its keys and answers as
/// if it took them all: its sections on the other keys overlap their
/// holders', whichever kind of call holds them.
#[test]
fn a_multi_key_lock_that_takes_part_of_its_keys_is_caught() {
    assert!(
        sabotaged_run_with("partial-multi", |plan| {
            plan.env.push(("CHAOS_MULTI".into(), "1".into()));
        }) > 0,
        "the checker passed a multi-key lock that held part of its keys"
    );
}

/// A holder frozen for three leases mid-section, with `on_lost =
/// "continue"`: it is told once it runs again, and its late write is refused
/// by the fence (the successor wrote first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_is_told_and_its_late_write_is_rejected() {
    let server = RedisServer::start();
    let mut victim = Worker::spawn(WORKER, &["victim", &server.url(), "paused"]);
    let line = victim.expect_line("acquired", Duration::from_secs(10));
    let victim_fence: u64 = line["acquired ".len()..].trim().parse().unwrap();
    // A GC pause three leases long, while the victim sleeps before writing.
    victim.pause();
    let paused_at = Instant::now();
    let locker = Locker::connect(LockConfig::from_url(&server.url()).unwrap())
        .await
        .unwrap();
    let successor = locker
        .lock("paused")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(successor.fence() > victim_fence);
    let client = redis::Client::open(server.url()).unwrap();
    let mut store = client.get_multiplexed_async_connection().await.unwrap();
    let (highest, log) = store_keys("paused");
    let accepted: i64 = redis::Script::new(STORE_SCRIPT)
        .key(highest)
        .key(log)
        .arg(successor.fence())
        .arg("successor.1")
        .arg(1)
        .invoke_async(&mut store)
        .await
        .unwrap();
    assert_eq!(accepted, 1);
    // Three leases of 500 ms in all, however soon the successor got in.
    tokio::time::sleep(Duration::from_millis(1500).saturating_sub(paused_at.elapsed())).await;
    let started = Instant::now();
    victim.resume();
    let line = victim.expect_line("late-write", Duration::from_secs(10));
    assert_eq!(
        line,
        "late-write accepted=false held=false told=true",
        "the stale owner got through ({:?} after the thaw)",
        started.elapsed()
    );
    assert!(successor.release().await.unwrap());
}
