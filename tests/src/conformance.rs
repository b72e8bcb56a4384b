//! Where the conformance suite (`tests/tests/conformance.rs`) runs each
//! behaviour: a [`Site`] per test, on one of the deployments every backend
//! is held to.
//!
//! The Redis deployments are started once per test binary, on first use,
//! by a keeper thread that never ends: the servers die with the thread
//! that spawned them ([`RedisServer`]), so they live exactly as long as the
//! binary. Each test works under a key prefix of its own, so tests that
//! share a deployment never share a lock. The in-memory backend gets a
//! fresh [`MemoryStore`] per test.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, Locker};

use crate::fixtures::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, redlock_url, settled_masters};
use crate::{RedisCluster, RedisServer, SentinelSetup};

/// The backends every behaviour is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `LockConfig::in_memory`.
    Memory,
    /// One server.
    Single,
    /// A three-node Redis Cluster.
    Cluster,
    /// A master and a replica, found through three sentinels.
    Sentinel,
    /// Redlock over three masters.
    Redlock,
}

/// A running Redis deployment.
enum Servers {
    Single(RedisServer),
    Cluster(RedisCluster),
    Sentinel(SentinelSetup),
    Redlock(Vec<RedisServer>),
}

impl Servers {
    fn start(kind: Kind) -> Self {
        match kind {
            Kind::Memory => unreachable!("the in-memory store has no servers"),
            Kind::Single => Servers::Single(RedisServer::start()),
            Kind::Cluster => Servers::Cluster(RedisCluster::start()),
            Kind::Sentinel => Servers::Sentinel(SentinelSetup::start()),
            Kind::Redlock => Servers::Redlock(settled_masters(3)),
        }
    }

    fn url(&self) -> String {
        match self {
            Servers::Single(server) => server.url(),
            Servers::Cluster(cluster) => cluster.url(),
            Servers::Sentinel(setup) => setup.url(),
            Servers::Redlock(masters) => redlock_url(masters),
        }
    }

    /// The servers that hold `key` (a majority of them, for Redlock).
    fn holding(&self, key: &str) -> Vec<&RedisServer> {
        match self {
            Servers::Single(server) => vec![server],
            Servers::Cluster(cluster) => vec![&cluster.nodes()[cluster.node_for_key(key)]],
            Servers::Sentinel(setup) => vec![setup.current_master()],
            Servers::Redlock(masters) => masters.iter().collect(),
        }
    }
}

/// The deployment of `kind`, started on first use by the keeper thread.
fn servers(kind: Kind) -> &'static Servers {
    type Request = (Kind, mpsc::Sender<&'static Servers>);
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (requests, inbox) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("conformance-servers".into())
            .spawn(move || {
                let mut started: HashMap<Kind, &'static Servers> = HashMap::new();
                // Runs for the rest of the binary: the servers it spawned
                // die when it does.
                for (kind, reply) in inbox {
                    let servers = *started
                        .entry(kind)
                        .or_insert_with(|| Box::leak(Box::new(Servers::start(kind))));
                    let _ = reply.send(servers);
                }
                loop {
                    std::thread::park();
                }
            })
            .expect("start the keeper thread");
        Mutex::new(requests)
    });
    let (reply, answer) = mpsc::channel();
    keeper
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((kind, reply))
        .expect("the keeper thread runs");
    answer.recv().expect("the deployment started")
}

/// One test's place on a backend: its own key prefix (or store), lockers
/// on it, and what the test may do behind their backs.
pub struct Site {
    kind: Kind,
    prefix: String,
    config: LockConfig,
    servers: Option<&'static Servers>,
    store: Option<MemoryStore>,
}

impl Site {
    /// A place for test `test` on `kind`.
    pub fn new(kind: Kind, test: &str) -> Self {
        let prefix = format!("conf:{test}:");
        let (config, servers, store) = match kind {
            Kind::Memory => {
                let store = MemoryStore::new();
                (LockConfig::in_memory_store(&store), None, Some(store))
            }
            _ => {
                // Started off the test's runtime: it blocks for seconds.
                let servers = servers(kind);
                if let Servers::Redlock(masters) = servers {
                    // Past their restart quarantine under this prefix too:
                    // the behaviours are not about restarts.
                    for master in masters {
                        crate::fixtures::settle_prefix(master, &prefix);
                    }
                }
                let config = LockConfig::from_url(&servers.url())
                    .expect("a valid deployment URL")
                    .connect_timeout(CONNECT_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT);
                (config, Some(servers), None)
            }
        };
        Self {
            kind,
            config: config.key_prefix(prefix.as_str()),
            prefix,
            servers,
            store,
        }
    }

    /// Which backend this is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The configuration of this site's lockers.
    pub fn config(&self) -> LockConfig {
        self.config.clone()
    }

    /// A new locker on this site (another process, as far as the locks can
    /// tell).
    pub async fn locker(&self) -> Locker {
        Locker::connect(self.config())
            .await
            .unwrap_or_else(|err| panic!("connect a locker on {:?}: {err}", self.kind))
    }

    /// The key lock `name` is stored under (names without `%` or `}`).
    pub fn key(&self, name: &str) -> String {
        format!("{}{{{name}}}", self.prefix)
    }

    /// Deletes lock `name` behind its holder's back, as an operator or
    /// another client could.
    pub fn delete(&self, name: &str) {
        self.delete_of(name, "");
    }

    /// [`Self::delete`] for the primitive whose key follows the lock key
    /// with `kind` (`:sem` for a semaphore).
    pub fn delete_of(&self, name: &str, kind: &str) {
        match (&self.store, self.servers) {
            (Some(store), _) => {
                store.expire(name);
            }
            (None, Some(servers)) => {
                let key = format!("{}{kind}", self.key(name));
                for server in servers.holding(&key) {
                    server.cmd(&["DEL", &key]);
                }
            }
            (None, None) => unreachable!("a site has a store or servers"),
        }
    }

    /// Every key stored for the resource `name`, of any primitive (a
    /// lock's key, a fair lock's and its line), sorted.
    pub fn keys_of(&self, name: &str) -> Vec<String> {
        match (&self.store, self.servers) {
            (Some(store), _) => store.keys_of(name),
            (None, Some(servers)) => {
                let base = self.key(name);
                let mut keys: Vec<String> = servers
                    .holding(&base)
                    .iter()
                    .flat_map(|server| match server.cmd(&["KEYS", &format!("{base}*")]) {
                        redis::Value::Array(keys) => keys,
                        other => panic!("KEYS: {other:?}"),
                    })
                    .filter_map(|key| match key {
                        redis::Value::BulkString(key) => String::from_utf8(key).ok(),
                        _ => None,
                    })
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                keys
            }
            (None, None) => unreachable!("a site has a store or servers"),
        }
    }

    /// Deletes every key of the resource `name` behind its holders' backs
    /// (see [`Site::delete`]).
    pub fn delete_all(&self, name: &str) {
        match (&self.store, self.servers) {
            (Some(store), _) => {
                store.expire(name);
            }
            (None, Some(servers)) => {
                let base = self.key(name);
                for key in self.keys_of(name) {
                    for server in servers.holding(&base) {
                        server.cmd(&["DEL", &key]);
                    }
                }
            }
            (None, None) => unreachable!("a site has a store or servers"),
        }
    }

    /// Whether some locker listens for the release of lock `name`: a
    /// waiter of the in-memory store, or a subscriber of its release
    /// channel on the server where a release publishes it.
    pub fn has_waiter(&self, name: &str) -> bool {
        self.has_waiter_of(name, "")
    }

    /// [`Self::has_waiter`] for the primitive whose keys follow the lock
    /// key with `kind` (`:sem` for a semaphore).
    pub fn has_waiter_of(&self, name: &str, kind: &str) -> bool {
        match (&self.store, self.servers) {
            (Some(store), _) => store.waiting(name) > 0,
            (None, Some(servers)) => {
                let channel = format!("{}{kind}:released", self.key(name));
                let numsub = |server: &RedisServer, command: &str| -> i64 {
                    match server.cmd(&["PUBSUB", command, &channel]) {
                        redis::Value::Array(reply) => match reply.get(1) {
                            Some(redis::Value::Int(n)) => *n,
                            _ => 0,
                        },
                        _ => 0,
                    }
                };
                match servers {
                    Servers::Cluster(cluster) => {
                        let node = &cluster.nodes()[cluster.node_for_key(&channel)];
                        numsub(node, "SHARDNUMSUB") > 0
                    }
                    other => other
                        .holding(&channel)
                        .iter()
                        .any(|server| numsub(server, "NUMSUB") > 0),
                }
            }
            (None, None) => unreachable!("a site has a store or servers"),
        }
    }

    /// How many lockers listen on the channel of lock `name` that ends in
    /// `suffix` (`:released` for the exclusive lock's; a primitive's own
    /// otherwise): subscribed connections on the server where a release
    /// publishes it (on Redlock, the fewest of any master), or, on the
    /// in-memory store, waiters for lock `name` on any of its channels.
    pub fn listeners(&self, name: &str, suffix: &str) -> i64 {
        match (&self.store, self.servers) {
            (Some(store), _) => i64::try_from(store.waiting(name)).unwrap_or(i64::MAX),
            (None, Some(servers)) => {
                let channel = format!("{}{suffix}", self.key(name));
                let numsub = |server: &RedisServer, command: &str| -> i64 {
                    match server.cmd(&["PUBSUB", command, &channel]) {
                        redis::Value::Array(reply) => match reply.get(1) {
                            Some(redis::Value::Int(n)) => *n,
                            _ => 0,
                        },
                        _ => 0,
                    }
                };
                match servers {
                    Servers::Cluster(cluster) => {
                        let node = &cluster.nodes()[cluster.node_for_key(&channel)];
                        numsub(node, "SHARDNUMSUB")
                    }
                    // On Redlock a waiter listens on every master: as many
                    // as every master counts.
                    other => other
                        .holding(&channel)
                        .iter()
                        .map(|server| numsub(server, "NUMSUB"))
                        .min()
                        .unwrap_or(0),
                }
            }
            (None, None) => unreachable!("a site has a store or servers"),
        }
    }

    /// Whether any key of lock `name` followed by one of `suffixes` is
    /// left where it would be stored (on the in-memory store: any key of
    /// lock `name`, of any kind).
    pub fn keeps_any(&self, name: &str, suffixes: &[&str]) -> bool {
        match (&self.store, self.servers) {
            (Some(store), _) => !store.keys_of(name).is_empty(),
            (None, Some(servers)) => suffixes.iter().any(|suffix| {
                let key = format!("{}{suffix}", self.key(name));
                servers
                    .holding(&key)
                    .iter()
                    .any(|server| crate::fixtures::exists(server, &key))
            }),
            (None, None) => unreachable!("a site has a store or servers"),
        }
    }

    /// Whether anything of lock `name` is left where it would be stored.
    pub fn exists(&self, name: &str) -> bool {
        self.exists_of(name, "")
    }

    /// [`Self::exists`] for the primitive whose key follows the lock key
    /// with `kind` (`:sem` for a semaphore).
    pub fn exists_of(&self, name: &str, kind: &str) -> bool {
        match (&self.store, self.servers) {
            (Some(store), _) => !store.keys_of(name).is_empty(),
            (None, Some(servers)) => {
                let key = format!("{}{kind}", self.key(name));
                servers
                    .holding(&key)
                    .iter()
                    .any(|server| crate::fixtures::exists(server, &key))
            }
            (None, None) => unreachable!("a site has a store or servers"),
        }
    }
}
