//! Chaos runs: worker processes (`lock_worker chaos`) take locks and write
//! to a fenced store while the driver injects faults *on them*: the
//! holders and waiters themselves are killed, frozen, cut off and lose
//! replies, chosen by reading who holds a lock from their histories, never
//! by timing. The [`crate::history`] checker then judges the run from the
//! histories, the driver's fault log and the store's own log.
//!
//! Each worker reaches the locks either directly (a URL for any topology)
//! or through a [`FaultProxy`] of its own in front of one server, which the
//! driver cuts, slows or makes drop a reply.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::history::{
    Event, Fault, Minimums, ServerFault, StoreEntry, Verdict, WorkerHistory, check, store_keys,
};
use crate::{FaultProxy, RedisServer, Worker, monotonic_ns};

/// How workers reach the locks.
#[derive(Clone, Debug)]
pub enum LockPath {
    /// This URL, for every worker (any topology).
    Direct(String),
    /// A fault proxy of its own in front of the server on this port.
    Proxied(u16),
}

/// The shape of a run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Where the workers' locks live.
    pub locks: LockPath,
    /// The plain server the fenced store lives on.
    pub store_url: String,
    /// Worker processes at any time.
    pub workers: usize,
    /// Tasks per worker.
    pub tasks: u32,
    /// Resources (keys) the tasks share.
    pub resources: u32,
    /// How long the workers run.
    pub run_for: Duration,
    /// Environment for the workers (e.g. `LOCK_RUNTIME_SABOTAGE`).
    pub env: Vec<(String, String)>,
    /// Keep the histories of a run with violations, for whoever reads the
    /// failure (off for runs that are meant to fail).
    pub keep_histories: bool,
}

/// One worker process of the run.
struct Member {
    id: String,
    process: Worker,
    proxy: Option<FaultProxy>,
    history: PathBuf,
    killed: bool,
}

/// The worker processes of a run, replaced as faults kill them, and every
/// fault the driver injected.
pub struct Fleet {
    plan: Plan,
    exe: String,
    dir: PathBuf,
    deadline: Instant,
    members: Vec<Member>,
    spawned: usize,
    faults: Vec<Fault>,
    histories: Vec<(String, PathBuf)>,
}

/// The lease the worker's sections take.
pub const TTL: Duration = Duration::from_secs(1);

impl Fleet {
    /// Starts `plan.workers` workers of `exe` (the `lock_worker` binary),
    /// recording into a fresh directory named after `name`.
    pub fn start(exe: &str, name: &str, plan: Plan) -> Self {
        let dir = std::env::temp_dir().join(format!("lock-chaos-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the history directory");
        let mut fleet = Self {
            deadline: Instant::now() + plan.run_for,
            plan,
            exe: exe.to_owned(),
            dir,
            members: Vec::new(),
            spawned: 0,
            faults: Vec::new(),
            histories: Vec::new(),
        };
        for _ in 0..fleet.plan.workers {
            let member = fleet.spawn();
            fleet.members.push(member);
        }
        fleet
    }

    /// Whether the workers' run time is over.
    pub fn over(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// How long until the workers stop.
    pub fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    fn spawn(&mut self) -> Member {
        self.spawned += 1;
        let id = format!("w{}", self.spawned);
        let history = self.dir.join(format!("{id}.history"));
        let (proxy, lock_url) = match &self.plan.locks {
            LockPath::Direct(url) => (None, url.clone()),
            LockPath::Proxied(port) => {
                let proxy = FaultProxy::start(*port);
                let url = proxy.url();
                (Some(proxy), url)
            }
        };
        let seconds = self.left().as_secs().max(1).to_string();
        let args = [
            "chaos",
            &id,
            &lock_url,
            &self.plan.store_url,
            &self.plan.resources.to_string(),
            &self.plan.tasks.to_string(),
            &seconds,
            history.to_str().expect("temp paths are UTF-8"),
        ];
        let env: Vec<(&str, &str)> = self
            .plan
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut process = Worker::spawn_with_env(&self.exe, &args, &env);
        process.expect_line("ready", Duration::from_secs(30));
        self.histories.push((id.clone(), history.clone()));
        Member {
            id,
            process,
            proxy,
            history,
            killed: false,
        }
    }

    /// A worker inside a critical section right now, by its history (the
    /// last section it began has not ended), waiting up to `within` for
    /// one that `wanted` accepts; then any holder if `or_any`.
    fn find_holder(
        &self,
        within: Duration,
        wanted: impl Fn(&Open) -> bool,
        or_any: bool,
    ) -> Option<(usize, Option<Open>)> {
        let deadline = Instant::now() + within;
        let mut any = None;
        loop {
            for (index, member) in self.members.iter().enumerate() {
                if member.killed {
                    continue;
                }
                let mut open = open_sections(&member.history);
                if let Some(at) = open.iter().position(&wanted) {
                    return Some((index, Some(open.swap_remove(at))));
                }
                if !open.is_empty() {
                    any.get_or_insert((index, None));
                }
            }
            if Instant::now() >= deadline {
                return any.filter(|_| or_any);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// kill -9 a holder, as a crash would, and start a replacement.
    pub fn kill_holder(&mut self) -> bool {
        let Some((index, _)) =
            self.find_holder(Duration::from_secs(2), |open| open.mode == "cancel", true)
        else {
            return false;
        };
        let member = &mut self.members[index];
        member.process.kill9();
        // Read once the process is reaped: a write it logged between a
        // reading taken before the signal and its landing is no tear.
        let t = monotonic_ns();
        member.killed = true;
        self.faults.push(Fault::Kill {
            worker: member.id.clone(),
            t,
        });
        let replacement = self.spawn();
        self.members[index] = replacement;
        true
    }

    /// SIGSTOP a holder for at least `pause` (longer than its lease: a GC
    /// pause), one between its two writes that writes on after a loss, and
    /// until a newer owner of its resource has written to the store: after
    /// the thaw, its second write is then certainly late, and the fence
    /// must refuse it.
    pub fn freeze_holder(&mut self, pause: Duration) -> bool {
        let between_writes = |open: &Open| open.mode == "continue" && open.in_long_hold();
        // Such a holder comes along every few seconds: wait for one, so
        // that every run has late writes for the fence to refuse. Only
        // while the others still run long enough after the pause to take
        // the lock and write (else the late write is not late).
        let room = pause + TTL * 3;
        let within = self
            .left()
            .saturating_sub(room)
            .min(Duration::from_secs(10));
        if within.is_zero() {
            return false;
        }
        let Some((index, victim)) = self.find_holder(within, between_writes, false) else {
            return false;
        };
        let member = &self.members[index];
        let start = monotonic_ns();
        member.process.pause();
        std::thread::sleep(pause);
        if let Some(victim) = victim {
            // As long as the run lasts: a starved machine (half a core for
            // every process) can take more than 10 s to hand the lock over.
            let within = self.left().max(Duration::from_secs(10));
            self.wait_for_a_newer_write(&victim.key, victim.fence, within);
        }
        member.process.resume();
        self.faults.push(Fault::Freeze {
            worker: member.id.clone(),
            start,
            end: monotonic_ns(),
        });
        true
    }

    /// Waits (up to `within`) until the store's highest fence for `key` is
    /// above `fence`: a newer owner has written.
    fn wait_for_a_newer_write(&self, key: &str, fence: u64, within: Duration) {
        let deadline = Instant::now() + within;
        let (highest, _) = store_keys(key);
        let Ok(client) = redis::Client::open(self.plan.store_url.as_str()) else {
            return;
        };
        while Instant::now() < deadline {
            let written: Option<u64> = client
                .get_connection()
                .and_then(|mut store| redis::cmd("GET").arg(&highest).query(&mut store))
                .unwrap_or(None);
            if written.is_some_and(|written| written > fence) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts a holder's network path to the locks for `pause`: nothing is
    /// forwarded either way (held back, as TCP would), no connection closes.
    ///
    /// The victim is a holder inside a long hold (see `Open::in_long_hold`):
    /// a short section ends within a few ms, often before the cut that was
    /// aimed at it lands, and a cut that hits no holder proves nothing.
    pub fn cut_holder(&mut self, pause: Duration) -> bool {
        let within = self
            .left()
            .saturating_sub(pause + TTL * 3)
            .min(Duration::from_secs(10));
        if within.is_zero() {
            return false;
        }
        let Some((index, _)) = self.find_holder(within, Open::in_long_hold, false) else {
            return false;
        };
        let member = &self.members[index];
        let Some(proxy) = &member.proxy else {
            return false;
        };
        let start = monotonic_ns();
        proxy.blackhole(true);
        std::thread::sleep(pause);
        proxy.blackhole(false);
        self.faults.push(Fault::Cut {
            worker: member.id.clone(),
            start,
            end: monotonic_ns(),
        });
        true
    }

    /// Arms every worker's proxy to drop its next reply to a lock script,
    /// waits until one was dropped (at most `within`: a worker whose tasks
    /// all wait quietly for a release sends no script for a while), and
    /// records the drops that happened.
    pub fn drop_replies(&mut self, within: Duration) -> usize {
        let armed: Vec<(usize, usize)> = self
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.proxy.as_ref().map(|p| (i, p.replies_dropped())))
            .collect();
        for &(index, _) in &armed {
            if let Some(proxy) = &self.members[index].proxy {
                proxy.drop_reply_to(b"EVALSHA");
            }
        }
        let deadline = Instant::now() + within;
        let any_dropped = |members: &[Member]| {
            armed.iter().any(|&(index, before)| {
                members[index]
                    .proxy
                    .as_ref()
                    .is_some_and(|proxy| proxy.replies_dropped() > before)
            })
        };
        while Instant::now() < deadline && !any_dropped(&self.members) {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Others armed at the same time may drop theirs a moment later.
        std::thread::sleep(Duration::from_millis(200));
        let mut dropped = 0;
        for (index, before) in armed {
            let member = &self.members[index];
            let Some(proxy) = &member.proxy else { continue };
            proxy.disarm_drop_reply();
            if proxy.replies_dropped() > before {
                dropped += 1;
                self.faults.push(Fault::DroppedReply {
                    worker: member.id.clone(),
                    t: monotonic_ns(),
                });
            }
        }
        dropped
    }

    /// Records a fault on a server, which the driver injected itself.
    pub fn record_server_fault(&mut self, what: ServerFault, start: u64, end: u64) {
        self.faults.push(Fault::Server { what, start, end });
    }

    /// Lets the workers finish, then judges the run: the histories, the
    /// faults and the store's log on `store`. A history that cannot be read
    /// or parsed fails the run.
    pub fn finish(self, store: &RedisServer) -> Verdict {
        let mut passed_in_process = 0;
        for mut member in self.members {
            if member.killed {
                continue;
            }
            // Printed once its tasks are done, just before it exits.
            let line = member
                .process
                .expect_line("passed-in-process ", Duration::from_secs(60));
            passed_in_process += passes_reported(&line);
            let output = member.process.finish(Duration::from_secs(60));
            assert!(
                output.status.success(),
                "chaos worker {} failed: {}",
                member.id,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let workers: Vec<WorkerHistory> = self
            .histories
            .iter()
            .map(|(id, path)| {
                let text = std::fs::read_to_string(path)
                    .unwrap_or_else(|e| panic!("read the history of {id}: {e}"));
                WorkerHistory::parse(id, &text)
            })
            .collect();
        let logs = store_logs(store, self.plan.resources);
        // A run of several rounds shares its store: the next round is
        // judged on its own entries, not on this one's.
        clear_store(store, self.plan.resources);
        let grace = u64::try_from(TTL.as_nanos()).unwrap_or(u64::MAX);
        let mut verdict = check(&workers, &self.faults, &logs, grace);
        verdict.passed_in_process = passed_in_process;
        if verdict.violations.is_empty() || !self.plan.keep_histories {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            // Kept for whoever reads the failure.
            let faults: Vec<String> = self.faults.iter().map(ToString::to_string).collect();
            let _ = std::fs::write(self.dir.join("faults"), faults.join("\n"));
            eprintln!("chaos: histories and faults kept in {}", self.dir.display());
        }
        verdict
    }
}

/// The locks a worker passed in process, from the line it prints before
/// `done`: `passed-in-process <n>`.
fn passes_reported(line: &str) -> usize {
    line.strip_prefix("passed-in-process ")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A section `history` has open (begun, not ended).
struct Open {
    mode: String,
    writes: usize,
    /// When its last write was announced (monotonic ns), if it wrote.
    last_write: Option<u64>,
    key: String,
    fence: u64,
}

impl Open {
    /// Whether this section is certainly in the long hold between its two
    /// writes (one section in eight waits 1.5 leases there), with most of
    /// that hold still to come: a short section writes twice within a few
    /// ms, too close for a signal or a cut sent after reading its history
    /// to land between them. A first write older than the longest machine
    /// stall (which can hold a short section between its writes) with no
    /// second one marks a long section.
    fn in_long_hold(&self) -> bool {
        let older_than = crate::fixtures::LONGEST_STALL + Duration::from_millis(200);
        let older_than = u64::try_from(older_than.as_nanos()).unwrap_or(u64::MAX);
        let settled = monotonic_ns().saturating_sub(older_than);
        self.writes == 1 && self.last_write.is_some_and(|t| t <= settled)
    }
}

/// The sections `history` has open, oldest grant first.
fn open_sections(history: &Path) -> Vec<Open> {
    let Ok(text) = std::fs::read_to_string(history) else {
        return Vec::new();
    };
    let mut invoked: HashMap<String, (String, String)> = HashMap::new();
    let mut fences: HashMap<String, u64> = HashMap::new();
    let mut writes: HashMap<String, (usize, u64)> = HashMap::new();
    let mut open: Vec<String> = Vec::new();
    for event in text.lines().filter_map(Event::parse) {
        match event {
            Event::Invoke { sid, key, mode, .. } => {
                invoked.insert(sid, (mode.to_string(), key));
            }
            Event::Begin { sid, fence, .. } => {
                fences.insert(sid.clone(), fence);
                open.push(sid);
            }
            Event::Write { sid, t, .. } => {
                let entry = writes.entry(sid).or_default();
                *entry = (entry.0 + 1, t);
            }
            Event::End { sid, .. } => open.retain(|s| *s != sid),
            _ => {}
        }
    }
    open.into_iter()
        .map(|sid| {
            let (mode, key) = invoked.get(&sid).cloned().unwrap_or_default();
            let written = writes.get(&sid).copied();
            Open {
                mode,
                writes: written.map_or(0, |(n, _)| n),
                last_write: written.map(|(_, t)| t),
                key,
                fence: fences.get(&sid).copied().unwrap_or(0),
            }
        })
        .collect()
}

/// The store's log of every resource, in server order.
fn store_logs(store: &RedisServer, resources: u32) -> HashMap<String, Vec<StoreEntry>> {
    let mut logs = HashMap::new();
    for resource in 0..resources {
        let key = format!("r{resource}");
        let (_, log_key) = store_keys(&key);
        let entries = match store.cmd(&["LRANGE", &log_key, "0", "-1"]) {
            redis::Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    redis::Value::BulkString(bytes) => {
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        StoreEntry::parse(&text)
                            .unwrap_or_else(|| panic!("{log_key}: unreadable entry `{text}`"))
                    }
                    other => panic!("{log_key}: unexpected entry {other:?}"),
                })
                .collect(),
            other => panic!("LRANGE {log_key}: {other:?}"),
        };
        logs.insert(key, entries);
    }
    logs
}

/// Deletes the store's keys of every resource (its log and highest fence).
fn clear_store(store: &RedisServer, resources: u32) {
    for resource in 0..resources {
        let (highest, log) = store_keys(&format!("r{resource}"));
        store.cmd(&["DEL", &highest, &log]);
    }
}

/// The most rounds a run takes to meet its minimums (see [`until_met`]).
pub const MOST_ROUNDS: usize = 3;

/// Runs `round` (one whole run: workers started, faulted and judged; it is
/// given its number) until the rounds together met `minimums`, at most
/// [`MOST_ROUNDS`] times, then reports them as [`report`] does. A starved
/// machine lands fewer faults where they count (a freeze needs a holder
/// mid-section), and a run short of its minimums proves nothing: it is
/// made up by more of the same, within that bound, rather than failed on
/// luck. A violation ends the run at once. `round` answers its verdict
/// and how many faults it injected.
pub fn until_met(
    name: &str,
    minimums: &Minimums,
    mut round: impl FnMut(usize) -> (Verdict, usize),
) {
    let (mut verdict, mut injected) = round(0);
    for n in 1..MOST_ROUNDS {
        let shortfalls = verdict.shortfalls(minimums);
        if !verdict.violations.is_empty() || shortfalls.is_empty() {
            break;
        }
        let line = format!(
            "{name}: short after {n} round(s) ({}); one more\n",
            shortfalls.join("; ")
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        let (more, faults) = round(n);
        verdict.absorb(more);
        injected += faults;
    }
    report(name, &verdict, minimums, injected);
}

/// Prints the run's summary line where every run shows it (not captured
/// by the test harness), then fails on any violation or shortfall.
pub fn report(name: &str, verdict: &Verdict, minimums: &Minimums, faults_injected: usize) {
    let line = format!(
        "{name} {} faults_injected={faults_injected}\n",
        verdict.summary()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    assert!(
        verdict.violations.is_empty(),
        "{name}: violations:\n{}",
        verdict.violations.join("\n")
    );
    let shortfalls = verdict.shortfalls(minimums);
    assert!(shortfalls.is_empty(), "{name}: {}", shortfalls.join("; "));
}
