//! A private three-node Redis Cluster per test (or benchmark), with real
//! online slot migration.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::RedisServer;

/// Number of hash slots of every Redis Cluster.
pub const SLOTS: u16 = 16384;
/// How long the cluster may take to form, or to agree after a change.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);
/// Sleep between polls of the cluster's state.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How long a `MIGRATE` may take per batch (milliseconds, Redis' unit).
const MIGRATE_TIMEOUT_MS: &str = "5000";

/// Three `redis-server` primaries (no replicas) forming one cluster, each
/// serving about a third of the slots. Dropping it kills the servers.
///
/// Like [`RedisServer`], start it from the test's own thread.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// One contiguous range of slots and the node that serves it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SlotRange {
    first: u16,
    last: u16,
    port: u16,
}

/// How [`RedisCluster::migrate_slot_with`] moves keys.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    /// Keys per `MIGRATE`.
    pub batch: usize,
    /// Pause after marking the slot migrating and after every batch, while
    /// the slot is half-migrated (clients then see `ASK` and `TRYAGAIN`).
    pub pause: Duration,
}

impl Default for Migration {
    fn default() -> Self {
        Self {
            batch: 100,
            pause: Duration::ZERO,
        }
    }
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them with
    /// `redis-cli --cluster create`, and waits until every node reports
    /// `cluster_state:ok` and all agree on the slot map.
    ///
    /// # Panics
    ///
    /// If a server does not start, `redis-cli` fails, or the cluster does
    /// not settle within 20 s.
    pub fn start() -> Self {
        Self::start_with(Vec::new)
    }

    /// Like [`RedisCluster::start`], each node with the arguments
    /// `node_args` makes for it (a TLS port of its own, say).
    ///
    /// # Panics
    ///
    /// Same as [`RedisCluster::start`].
    pub fn start_with(node_args: impl FnMut() -> Vec<String>) -> Self {
        Self::start_nodes(0, node_args)
    }

    /// Like [`RedisCluster::start`], with one replica per primary: six
    /// servers, three serving the slots and three replicating one of them
    /// each, ready to be promoted when their primary fails (after the 2 s
    /// node timeout). [`RedisCluster::nodes`] lists all six.
    ///
    /// # Panics
    ///
    /// Same as [`RedisCluster::start`].
    pub fn start_with_replicas() -> Self {
        Self::start_nodes(1, Vec::new)
    }

    fn start_nodes(replicas: usize, mut node_args: impl FnMut() -> Vec<String>) -> Self {
        let args = [
            "--cluster-enabled",
            "yes",
            // Relative to the server's own directory, so never shared.
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "2000",
        ];
        let nodes: Vec<RedisServer> = (0..3 * (1 + replicas))
            .map(|_| {
                let extra = node_args();
                let all: Vec<&str> = args
                    .iter()
                    .copied()
                    .chain(extra.iter().map(String::as_str))
                    .collect();
                RedisServer::start_with(&all)
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let output = run_bounded(create, SETTLE_TIMEOUT);
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let cluster = Self { nodes };
        cluster.wait_settled();
        if replicas > 0 {
            cluster.wait_replicas_in_sync();
        }
        cluster
    }

    /// Waits until every replica's link to its primary is up.
    fn wait_replicas_in_sync(&self) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let in_sync = self.nodes.iter().all(|node| {
                let info = text(&node.cmd(&["INFO", "replication"]));
                info.contains("role:master") || info.contains("master_link_status:up")
            });
            if in_sync {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the replicas did not sync within {SETTLE_TIMEOUT:?}"
            );
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Index of the replica of the primary at `primary`.
    ///
    /// # Panics
    ///
    /// If it has none.
    pub fn replica_of(&self, primary: usize) -> usize {
        let id = node_id(&self.nodes[primary]);
        self.nodes
            .iter()
            .position(|node| {
                let info = text(&node.cmd(&["INFO", "replication"]));
                info.contains("role:slave")
                    && info.contains(&format!("master_port:{}", self.nodes[primary].port()))
            })
            .unwrap_or_else(|| panic!("node {primary} ({id}) has no replica"))
    }

    /// Kills node `index` with -9; it stays down.
    pub fn kill_node(&mut self, index: usize) {
        self.nodes[index].kill();
    }

    /// Waits until every node but those in `down` names the node at `to`
    /// as the server of `slot`, and `to` reports the master role.
    ///
    /// # Panics
    ///
    /// If that does not happen within 20 s.
    pub fn wait_slot_served_by(&self, slot: u16, to: usize, down: &[usize]) {
        let port = self.nodes[to].port();
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let agreed = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(index, _)| !down.contains(index))
                .all(|(_, node)| {
                    slot_ranges(node).iter().any(|range| {
                        range.first <= slot && slot <= range.last && range.port == port
                    })
                });
            let master =
                text(&self.nodes[to].cmd(&["INFO", "replication"])).contains("role:master");
            if agreed && master {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "slot {slot} is not served by node {to} after {SETTLE_TIMEOUT:?}"
            );
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// The `redis+cluster://` URL naming every node.
    pub fn url(&self) -> String {
        crate::urls::multi_host_url("cluster", &self.nodes, "")
    }

    /// The nodes, in the order they were started.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The hash slot of `key` (as the server computes it).
    pub fn slot_of(&self, key: &str) -> u16 {
        match self.nodes[0].cmd(&["CLUSTER", "KEYSLOT", key]) {
            redis::Value::Int(slot) => u16::try_from(slot).expect("slot out of range"),
            other => panic!("CLUSTER KEYSLOT answered {other:?}"),
        }
    }

    /// Index in [`RedisCluster::nodes`] of the node serving `slot`, as the
    /// first node sees it.
    pub fn node_for_slot(&self, slot: u16) -> usize {
        let ranges = slot_ranges(&self.nodes[0]);
        let port = ranges
            .iter()
            .find(|range| range.first <= slot && slot <= range.last)
            .unwrap_or_else(|| panic!("no node serves slot {slot}"))
            .port;
        self.index_of_port(port)
    }

    /// For every slot, in order, the index in [`RedisCluster::nodes`] of
    /// the node serving it, as the first node sees it: one `CLUSTER SLOTS`
    /// for the whole map.
    pub fn node_of_every_slot(&self) -> Vec<usize> {
        let mut nodes = vec![usize::MAX; usize::from(SLOTS)];
        for range in slot_ranges(&self.nodes[0]) {
            let node = self.index_of_port(range.port);
            for slot in range.first..=range.last {
                nodes[usize::from(slot)] = node;
            }
        }
        assert!(
            !nodes.contains(&usize::MAX),
            "the first node's slot map has a gap"
        );
        nodes
    }

    /// Index of the node serving `key`'s slot.
    pub fn node_for_key(&self, key: &str) -> usize {
        self.node_for_slot(self.slot_of(key))
    }

    /// Moves `slot` from node `from` to node `to` online, keys included.
    pub fn migrate_slot(&self, slot: u16, from: usize, to: usize) {
        self.migrate_slot_with(slot, from, to, Migration::default());
    }

    /// Moves `slot` from node `from` to node `to` the way `redis-cli
    /// --cluster reshard` does: the target imports, the source migrates,
    /// keys move in batches with `MIGRATE`, then every node learns the new
    /// owner (target first, so it never bounces a request back), and the
    /// cluster is waited on until all nodes agree.
    ///
    /// # Panics
    ///
    /// If a step fails or the cluster does not settle.
    pub fn migrate_slot_with(&self, slot: u16, from: usize, to: usize, how: Migration) {
        assert_ne!(from, to, "migrating a slot to its own node");
        let slot_arg = slot.to_string();
        let (source, target) = (&self.nodes[from], &self.nodes[to]);
        let (source_id, target_id) = (node_id(source), node_id(target));
        expect_ok(target.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &source_id]));
        expect_ok(source.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &target_id]));
        thread::sleep(how.pause);
        let batch = how.batch.max(1).to_string();
        let target_port = target.port().to_string();
        loop {
            let keys = match source.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot_arg, &batch]) {
                redis::Value::Array(keys) => keys,
                other => panic!("CLUSTER GETKEYSINSLOT answered {other:?}"),
            };
            if keys.is_empty() {
                break;
            }
            let keys: Vec<String> = keys.iter().map(text).collect();
            let mut migrate = vec![
                "MIGRATE",
                "127.0.0.1",
                &target_port,
                "",
                "0",
                MIGRATE_TIMEOUT_MS,
                "KEYS",
            ];
            migrate.extend(keys.iter().map(String::as_str));
            match source.cmd(&migrate) {
                // NOKEY: every key of the batch expired meanwhile.
                redis::Value::Okay => {}
                redis::Value::SimpleString(answer) if answer == "NOKEY" => {}
                other => panic!("MIGRATE answered {other:?}"),
            }
            thread::sleep(how.pause);
        }
        let assign = |node: &RedisServer| {
            expect_ok(node.cmd(&["CLUSTER", "SETSLOT", &slot_arg, "NODE", &target_id]));
        };
        assign(target);
        assign(source);
        for (index, node) in self.nodes.iter().enumerate() {
            if index != from && index != to {
                assign(node);
            }
        }
        self.wait_settled();
        assert_eq!(
            self.node_for_slot(slot),
            to,
            "slot {slot} did not end on node {to}"
        );
    }

    /// Runs `SCRIPT FLUSH` on every node.
    pub fn flush_scripts(&self) {
        for node in &self.nodes {
            expect_ok(node.cmd(&["SCRIPT", "FLUSH"]));
        }
    }

    /// Kills node `index` with -9 and starts it again on its port, with its
    /// `nodes.conf`, so it rejoins with the slots it served; returns once
    /// the cluster agrees again.
    pub fn restart_node(&mut self, index: usize) {
        self.nodes[index].restart();
        self.wait_settled();
    }

    /// Waits until every node reports `cluster_state:ok` and all of them
    /// describe the same, complete slot map.
    ///
    /// # Panics
    ///
    /// If that does not happen within 20 s.
    pub fn wait_settled(&self) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let views: Vec<Vec<SlotRange>> = self.nodes.iter().map(slot_ranges).collect();
            let all_ok = self
                .nodes
                .iter()
                .all(|node| text(&node.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok"));
            let agreed = views.windows(2).all(|pair| pair[0] == pair[1]);
            if all_ok && agreed && covers_every_slot(&views[0]) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not settle within {SETTLE_TIMEOUT:?}: ok={all_ok} views={views:?}"
            );
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn index_of_port(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|node| node.port() == port)
            .unwrap_or_else(|| panic!("port {port} is not a node of this cluster"))
    }
}

/// The node's view of who serves which slots, sorted.
fn slot_ranges(node: &RedisServer) -> Vec<SlotRange> {
    let redis::Value::Array(ranges) = node.cmd(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS did not answer an array");
    };
    let mut parsed: Vec<SlotRange> = ranges
        .iter()
        .map(|range| match range {
            redis::Value::Array(fields) => match (&fields[0], &fields[1], &fields[2]) {
                (
                    redis::Value::Int(first),
                    redis::Value::Int(last),
                    redis::Value::Array(primary),
                ) => {
                    let redis::Value::Int(port) = primary[1] else {
                        panic!("CLUSTER SLOTS: unexpected node {primary:?}");
                    };
                    SlotRange {
                        first: *first as u16,
                        last: *last as u16,
                        port: port as u16,
                    }
                }
                other => panic!("CLUSTER SLOTS: unexpected range {other:?}"),
            },
            other => panic!("CLUSTER SLOTS: unexpected entry {other:?}"),
        })
        .collect();
    parsed.sort();
    parsed
}

/// Whether sorted `ranges` cover slots 0..16384 without a gap.
fn covers_every_slot(ranges: &[SlotRange]) -> bool {
    let mut next = 0u32;
    for range in ranges {
        if u32::from(range.first) != next {
            return false;
        }
        next = u32::from(range.last) + 1;
    }
    next == u32::from(SLOTS)
}

fn node_id(node: &RedisServer) -> String {
    text(&node.cmd(&["CLUSTER", "MYID"]))
}

fn text(value: &redis::Value) -> String {
    match value {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        redis::Value::SimpleString(text) | redis::Value::VerbatimString { text, .. } => {
            text.clone()
        }
        other => panic!("expected text, got {other:?}"),
    }
}

fn expect_ok(value: redis::Value) {
    assert!(
        matches!(value, redis::Value::Okay),
        "expected OK, got {value:?}"
    );
}

/// Runs `command` to completion, killing it after `limit`.
fn run_bounded(mut command: Command, limit: Duration) -> std::process::Output {
    let mut child = command.spawn().expect("spawn redis-cli");
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().expect("collect redis-cli output"),
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL_INTERVAL),
            _ => {
                let _ = child.kill();
                let output = child.wait_with_output().expect("collect redis-cli output");
                panic!(
                    "redis-cli did not finish within {limit:?}: {}",
                    String::from_utf8_lossy(&output.stdout)
                );
            }
        }
    }
}
