//! A Sentinel deployment per test: a master, one replica and three
//! sentinels (quorum 2), each a real process on a free loopback port.

use std::thread;
use std::time::{Duration, Instant};

use redis::FromRedisValue;

use crate::RedisServer;

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "mymaster";
/// How long the sentinels wait for an unanswered `PING` before they call
/// a server down: short, so a failover after a crash takes seconds.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// Longest a bring-up or a failover may take before the test fails.
const SETTLE_LIMIT: Duration = Duration::from_secs(20);
/// Sleep between two looks at the deployment's state.
const POLL: Duration = Duration::from_millis(50);
/// Read/write timeout of one command to any of the processes.
const CMD_TIMEOUT: Duration = Duration::from_secs(2);

/// Master + replica + three sentinels. Dropping it kills every process.
///
/// Start it from the test's own thread (like [`RedisServer`]): the
/// processes die with the thread that spawned them.
#[derive(Debug)]
pub struct SentinelSetup {
    /// The server that was the master at start-up.
    pub master: RedisServer,
    /// The server that was the replica at start-up.
    pub replica: RedisServer,
    sentinels: Vec<RedisServer>,
    /// The master's port as the sentinels know it: its TLS port in a TLS
    /// setup, whose failover helpers are not supported.
    named_port: u16,
    /// The sentinels' TLS ports, in a TLS setup.
    sentinel_tls_ports: Vec<u16>,
}

impl SentinelSetup {
    /// Starts the five processes and returns once the replica is in sync
    /// and every sentinel knows the master, the replica and the two other
    /// sentinels, so a failover can start at once.
    ///
    /// # Panics
    ///
    /// If a process does not start, or the deployment does not settle
    /// within 20 s.
    pub fn start() -> Self {
        Self::start_inner(|| (Vec::new(), None))
    }

    /// Like [`SentinelSetup::start`], with every process also on a TLS
    /// port of its own serving `pki`'s `server` certificate, replication
    /// and the sentinels' links over TLS; [`SentinelSetup::tls_url`] names
    /// the sentinels' TLS ports. The failover helpers do not apply.
    pub fn start_tls(pki: &crate::tls::TestPki) -> Self {
        Self::start_inner(|| {
            let port = crate::redis_server::free_port();
            let args = crate::tls::tls_args(pki, port, "server", crate::tls::ClientAuth::None);
            (args, Some(port))
        })
    }

    /// `rediss+sentinel://` naming the sentinels' TLS ports.
    pub fn tls_url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinel_tls_ports
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        format!("rediss+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// Starts the processes, each with the arguments `extra` makes and, when
    /// it gives one, known to the others by that TLS port.
    fn start_inner(mut extra: impl FnMut() -> (Vec<String>, Option<u16>)) -> Self {
        let start = |args: Vec<String>, more: &[&str]| {
            let all: Vec<&str> = more
                .iter()
                .copied()
                .chain(args.iter().map(String::as_str))
                .collect();
            RedisServer::start_with(&all)
        };
        // A full sync starts at once rather than after the default 5 s
        // (either server may be the master after a failover): a setup is
        // ready, and a demoted master in sync again, that much sooner.
        let no_delay = ["--repl-diskless-sync-delay", "0"];
        let (master_args, master_tls) = extra();
        let master = start(master_args, &no_delay);
        let named_port = master_tls.unwrap_or(master.port());
        let (replica_args, _) = extra();
        let replica_of = ["--replicaof", "127.0.0.1", &named_port.to_string()];
        let replica = start(replica_args, &[&no_delay[..], &replica_of[..]].concat());
        let config = format!(
            "sentinel resolve-hostnames no\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {named_port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} {}\n\
             sentinel failover-timeout {MASTER_NAME} 5000\n",
            DOWN_AFTER.as_millis()
        );
        let mut sentinel_tls_ports = Vec::new();
        let sentinels = (0..3)
            .map(|_| {
                let (args, tls_port) = extra();
                sentinel_tls_ports.extend(tls_port);
                let all: Vec<&str> = std::iter::once("--sentinel")
                    .chain(args.iter().map(String::as_str))
                    .collect();
                RedisServer::start_with_config(&config, &all)
            })
            .collect();
        let setup = Self {
            master,
            replica,
            sentinels,
            named_port,
            sentinel_tls_ports,
        };
        setup.wait_until(
            "the replica is in sync and the sentinels know everyone",
            || setup.settled(),
        );
        setup
    }

    /// `redis+sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,127.0.0.1:<s3>/mymaster`.
    pub fn url(&self) -> String {
        crate::fixtures::multi_host_url("sentinel", &self.sentinels, &format!("/{MASTER_NAME}"))
    }

    /// The sentinel processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The master's port as the first sentinel reports it.
    ///
    /// # Panics
    ///
    /// If that sentinel does not answer.
    pub fn master_port(&self) -> u16 {
        master_port_by(&self.sentinels[0]).unwrap_or_else(|e| {
            panic!(
                "asking sentinel {} for the master: {e}",
                self.sentinels[0].port()
            )
        })
    }

    /// Of [`SentinelSetup::master`] and [`SentinelSetup::replica`], the one
    /// the sentinels name as the master now.
    pub fn current_master(&self) -> &RedisServer {
        self.server_on(self.master_port())
    }

    /// Of the two data servers, the one the sentinels do not name.
    pub fn current_replica(&self) -> &RedisServer {
        let master = self.master_port();
        if self.master.port() == master {
            &self.replica
        } else {
            &self.master
        }
    }

    /// Has the sentinels fail over by hand (`SENTINEL FAILOVER`), and
    /// returns once every sentinel names the other server and it reports
    /// itself master.
    ///
    /// # Panics
    ///
    /// If the sentinel refuses, or the failover does not finish within 20 s.
    pub fn force_failover(&self) {
        self.force_failover_via(&[0, 1, 2]);
    }

    /// Like [`SentinelSetup::force_failover`], through the sentinels at
    /// `asked` (indexes into [`SentinelSetup::sentinels`]): the first one
    /// runs the failover, and all of them must name the new master. The
    /// others may be paused or dead.
    ///
    /// # Panics
    ///
    /// Same as [`SentinelSetup::force_failover`].
    pub fn force_failover_via(&self, asked: &[usize]) {
        let first = &self.sentinels[asked[0]];
        let from = master_port_by(first)
            .unwrap_or_else(|e| panic!("asking sentinel {} for the master: {e}", first.port()));
        let to = if self.master.port() == from {
            self.replica.port()
        } else {
            self.master.port()
        };
        let reply = query::<String>(first, &["SENTINEL", "FAILOVER", MASTER_NAME]);
        assert!(
            matches!(reply.as_deref(), Ok("OK")),
            "SENTINEL FAILOVER refused: {reply:?}"
        );
        self.wait_for_master_among(to, asked);
    }

    /// Returns once every sentinel names the server on `port` as the
    /// master and that server reports the master role.
    ///
    /// # Panics
    ///
    /// If that does not happen within 20 s.
    pub fn wait_for_master(&self, port: u16) {
        self.wait_for_master_among(port, &[0, 1, 2]);
    }

    fn wait_for_master_among(&self, port: u16, asked: &[usize]) {
        self.wait_until(&format!("the sentinels name {port} as the master"), || {
            asked.iter().all(|&index| {
                master_port_by(&self.sentinels[index]).is_ok_and(|named| named == port)
            }) && role_of(self.server_on(port)).is_some_and(|role| role == "master")
        });
    }

    /// Returns once the server the sentinels do not name replicates from
    /// the one they name, in sync: it has applied every write the master
    /// had taken when this was called. After a failover the old master is
    /// turned into a replica only some seconds later (Sentinel waits before
    /// it reconfigures a server that still calls itself master).
    ///
    /// A link reported `up` is not enough: after a diskless full sync (the
    /// default) the replica reports its link up as soon as it loaded the
    /// snapshot, while the master holds the commands back until the
    /// replica's next `REPLCONF ACK` (up to a second later), and a write
    /// taken meanwhile reaches no replica if the master stops before then.
    /// The replica's replication offset, which counts only what it applied,
    /// must reach the master's.
    ///
    /// # Panics
    ///
    /// If that does not happen within 20 s.
    pub fn wait_until_replicated(&self) {
        // The master's offset once, when first asked (again if the
        // sentinels name another master meanwhile): it grows on with the
        // sentinels' own traffic, which need not be waited for.
        let target = std::cell::Cell::new(None);
        self.wait_until("the replica applied the current master's writes", || {
            let Ok(master) = master_port_by(&self.sentinels[0]) else {
                return false;
            };
            let (master_server, replica) = if self.master.port() == master {
                (&self.master, &self.replica)
            } else {
                (&self.replica, &self.master)
            };
            let wanted = match target.get() {
                Some((port, offset)) if port == master => offset,
                _ => {
                    let Some(offset) = replication_offset(master_server, "master_repl_offset")
                    else {
                        return false;
                    };
                    target.set(Some((master, offset)));
                    offset
                }
            };
            query::<String>(replica, &["INFO", "replication"]).is_ok_and(|info| {
                info.lines()
                    .any(|l| l.trim_end() == "master_link_status:up")
                    && info
                        .lines()
                        .any(|l| l.trim_end() == format!("master_port:{master}"))
                    && offset_in(&info, "slave_repl_offset")
                        .is_some_and(|applied| applied >= wanted)
            })
        });
    }

    /// Cuts the replication link: the current replica drops its link and
    /// cannot log in again (it now authenticates as a user that does not
    /// exist), so later writes on the master never reach it, while both
    /// processes keep running and answering the sentinels. Returns once
    /// the master reports no replica connected.
    ///
    /// (`SIGSTOP` on the replica does not do this: the master's writes
    /// wait in the stopped replica's socket buffer and are applied the
    /// moment it resumes, even if the master died meanwhile.)
    ///
    /// # Panics
    ///
    /// If a command fails or the link is still up after 20 s.
    pub fn cut_replication(&self) {
        let replica = self.current_replica();
        for args in [
            ["CONFIG", "SET", "masteruser", "no-such-user"],
            ["CONFIG", "SET", "masterauth", "no-such-password"],
        ] {
            let reply = query::<String>(replica, &args);
            assert!(matches!(reply.as_deref(), Ok("OK")), "{args:?}: {reply:?}");
        }
        query::<i64>(replica, &["CLIENT", "KILL", "TYPE", "master"])
            .unwrap_or_else(|e| panic!("killing the replica's master link: {e}"));
        let master = self.current_master();
        self.wait_until("the master has no replica connected", || {
            query::<String>(master, &["INFO", "replication"])
                .is_ok_and(|info| info.lines().any(|l| l.trim_end() == "connected_slaves:0"))
        });
    }

    fn server_on(&self, port: u16) -> &RedisServer {
        if self.master.port() == port {
            &self.master
        } else if self.replica.port() == port {
            &self.replica
        } else {
            panic!("the sentinels name {port}, which is neither data server")
        }
    }

    /// The replica streams from the master, and each sentinel sees a
    /// healthy master with one healthy replica and two other sentinels.
    fn settled(&self) -> bool {
        let in_sync = query::<String>(&self.replica, &["INFO", "replication"]).is_ok_and(|info| {
            info.lines()
                .any(|l| l.trim_end() == "master_link_status:up")
        });
        in_sync
            && self.sentinels.iter().all(|sentinel| {
                let master = query::<std::collections::HashMap<String, String>>(
                    sentinel,
                    &["SENTINEL", "MASTER", MASTER_NAME],
                );
                let replicas = query::<Vec<std::collections::HashMap<String, String>>>(
                    sentinel,
                    &["SENTINEL", "REPLICAS", MASTER_NAME],
                );
                master.is_ok_and(|m| {
                    field(&m, "flags") == "master"
                        && field(&m, "num-other-sentinels") == "2"
                        && field(&m, "port") == self.named_port.to_string()
                }) && replicas.is_ok_and(|r| {
                    r.len() == 1
                        && field(&r[0], "flags") == "slave"
                        && field(&r[0], "master-link-status") == "ok"
                })
            })
    }

    /// Polls `done` until it holds; panics after [`SETTLE_LIMIT`].
    fn wait_until(&self, what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + SETTLE_LIMIT;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "after {SETTLE_LIMIT:?}, still not true: {what}"
            );
            thread::sleep(POLL);
        }
    }
}

/// The master's port as `sentinel` reports it.
fn master_port_by(sentinel: &RedisServer) -> redis::RedisResult<u16> {
    let (_host, port) = query::<(String, u16)>(
        sentinel,
        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
    )?;
    Ok(port)
}

/// The number `field` (`master_repl_offset`, `slave_repl_offset`) of
/// `server`'s `INFO replication`; None if the server does not answer.
fn replication_offset(server: &RedisServer, field: &str) -> Option<u64> {
    let info = query::<String>(server, &["INFO", "replication"]).ok()?;
    offset_in(&info, field)
}

/// The number `field` of an `INFO replication` text.
fn offset_in(info: &str, field: &str) -> Option<u64> {
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.parse().ok())
}

/// `master` or `slave`, from `ROLE`; None if the server does not answer.
fn role_of(server: &RedisServer) -> Option<String> {
    let role = query::<redis::Value>(server, &["ROLE"]).ok()?;
    match role {
        redis::Value::Array(items) => items
            .into_iter()
            .next()
            .and_then(|first| String::from_redis_value(first).ok()),
        _ => None,
    }
}

fn field<'a>(map: &'a std::collections::HashMap<String, String>, name: &str) -> &'a str {
    map.get(name).map_or("", String::as_str)
}

/// One command with timeouts on a fresh connection: a stopped or dead
/// process gives an error, never a hang.
fn query<T: FromRedisValue>(server: &RedisServer, args: &[&str]) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    // A machine stalled mid-call interrupts it (EINTR): asked again, a few
    // times, as the server's own connections are.
    let mut interrupted = 0;
    loop {
        let client = redis::Client::open(server.url())?;
        let answer = client
            .get_connection_with_timeout(CMD_TIMEOUT)
            .and_then(|mut connection| {
                connection.set_read_timeout(Some(CMD_TIMEOUT))?;
                connection.set_write_timeout(Some(CMD_TIMEOUT))?;
                cmd.query(&mut connection)
            });
        match answer {
            Err(err) if interrupted < 5 && err.is_io_error() && is_interrupted(&err) => {
                interrupted += 1;
            }
            answer => return answer,
        }
    }
}

/// Whether `err` is a call a signal interrupted.
fn is_interrupted(err: &redis::RedisError) -> bool {
    std::error::Error::source(err)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
        || err.to_string().contains("os error 4")
}
