//! A private, faultable `redis-server` process per test.

use std::fs;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redis::ConnectionLike;

use crate::process as sys;

/// How many fresh ports [`RedisServer::start_with`] tries before giving up.
const START_ATTEMPTS: usize = 5;
/// How long a spawned server may take to answer `PING`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a restart keeps retrying while its port is still taken.
const SAME_PORT_RETRY: Duration = Duration::from_secs(5);
/// Sleep between readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Connect/read timeout of a single readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);
/// Connect timeout of [`RedisServer::connection`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long [`RedisServer::cmd`] waits for an answer, so a command against a
/// paused server fails the test instead of hanging it.
const CMD_TIMEOUT: Duration = Duration::from_secs(5);
/// Number of log lines quoted when the server fails to start.
const LOG_TAIL_LINES: usize = 20;

/// Makes temp dir names unique within this process, even for the same port.
static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A real `redis-server` process listening on a free `127.0.0.1` port, with
/// its own temporary working directory.
///
/// The server runs without RDB snapshots and (unless overridden through
/// [`RedisServer::start_with`]) without AOF. Dropping the value kills the
/// process, reaps it and deletes the directory.
///
/// # Which thread to start it from
///
/// The child is spawned with `PR_SET_PDEATHSIG = SIGKILL`, so it is killed
/// even if the test binary dies without running destructors. Linux delivers
/// that signal when the *thread* that spawned the child exits, not the
/// process. Start (and restart) servers from the test's own thread, never
/// from inside a `tokio::spawn`ed task whose worker thread may exit first,
/// and do not park one in a `static` shared across `#[test]`s: each test runs
/// on its own thread, and the server dies with the test that created it.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    extra_args: Vec<String>,
    /// Text of a config file read before the arguments (a sentinel needs
    /// one it can rewrite); written into `dir`.
    config: Option<String>,
    dir: PathBuf,
    /// `None` once the process was killed (and reaped). Only a `Some` child
    /// is ever signalled: an unreaped child's pid cannot be reused, so we
    /// never signal an unrelated process.
    child: Option<Child>,
}

/// Why one attempt at bringing a server up failed.
struct StartFailure {
    /// The process exited on its own, typically because the port was taken.
    /// Worth retrying, unlike a server that runs but never answers.
    exited: bool,
    /// Human-readable cause, including the tail of the server log.
    message: String,
}

impl RedisServer {
    /// Starts a server with the default configuration and waits until it
    /// answers `PING`.
    ///
    /// # Panics
    ///
    /// If `redis-server` is not installed, or does not come up (the panic
    /// message then quotes the end of its log).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Like [`RedisServer::start`], with `extra_args` appended to the command
    /// line so they override the defaults, e.g.
    /// `&["--appendonly", "yes", "--appendfsync", "always"]`. The arguments
    /// are reused by [`RedisServer::restart`] and [`RedisServer::start_again`].
    ///
    /// # Panics
    ///
    /// Same as [`RedisServer::start`].
    pub fn start_with(extra_args: &[&str]) -> Self {
        Self::start_inner(None, extra_args)
    }

    /// Like [`RedisServer::start_with`], with a config file holding `config`
    /// read before every argument: e.g. a sentinel,
    /// `start_with_config("sentinel monitor ...", &["--sentinel"])`.
    ///
    /// # Panics
    ///
    /// Same as [`RedisServer::start`].
    pub fn start_with_config(config: &str, extra_args: &[&str]) -> Self {
        Self::start_inner(Some(config.to_owned()), extra_args)
    }

    fn start_inner(config: Option<String>, extra_args: &[&str]) -> Self {
        let extra_args: Vec<String> = extra_args.iter().map(|&arg| arg.to_owned()).collect();
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let mut server = Self {
                port,
                extra_args: extra_args.clone(),
                config: config.clone(),
                dir: create_temp_dir(port),
                child: None,
            };
            if let Some(text) = &config {
                fs::write(server.config_path(), text)
                    .unwrap_or_else(|e| panic!("write {}: {e}", server.config_path().display()));
            }
            match server.try_start() {
                Ok(()) => return server,
                // Another process grabbed the port between free_port() and
                // the server's bind: try a different port. Dropping `server`
                // removes its directory.
                Err(failure) if failure.exited => last_failure = failure.message,
                Err(failure) => panic!("{}", failure.message),
            }
        }
        panic!("redis-server failed to start after {START_ATTEMPTS} attempts: {last_failure}");
    }

    /// The Redis URL of the server: `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The loopback port the server listens on. It stays the same across
    /// [`RedisServer::restart`] and [`RedisServer::start_again`].
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the server, or `None` after [`RedisServer::kill`]
    /// (or if it died and [`RedisServer::is_running`] noticed). It changes on
    /// every restart.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is alive. A paused server counts as running.
    ///
    /// Takes `&mut self` because finding out reaps a process that died on its
    /// own, after which [`RedisServer::pid`] returns `None`.
    pub fn is_running(&mut self) -> bool {
        let Some(child) = self.child.as_mut() else {
            return false;
        };
        match child.try_wait() {
            Ok(None) => true,
            Ok(Some(_)) | Err(_) => {
                self.child = None;
                false
            }
        }
    }

    /// Kills the server with `SIGKILL` (no shutdown, no final AOF rewrite or
    /// flush: like a crash) and waits for it to exit. The port and the data
    /// directory are kept for [`RedisServer::start_again`]. Does nothing if
    /// the server is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Errors only mean the process is already gone; either way
            // wait() reaps it so no zombie is left behind.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server with `SIGSTOP`: connections stay open and new ones
    /// are accepted by the kernel, but nothing is answered, like a server
    /// stuck in a long GC pause or a network partition. Returns once the
    /// kernel reports the process as stopped.
    ///
    /// # Panics
    ///
    /// If the server is not running.
    pub fn pause(&self) {
        let pid = self.running_pid("pause");
        sys::send_signal(pid, libc::SIGSTOP).expect("send SIGSTOP to redis-server");
        // kill(2) returns before the target has actually stopped; wait so a
        // test's next request is guaranteed to hit a frozen server.
        wait_for_state(pid, |state| state == 'T');
    }

    /// Resumes a server frozen by [`RedisServer::pause`] with `SIGCONT`. It
    /// then answers everything that queued up meanwhile.
    ///
    /// # Panics
    ///
    /// If the server is not running.
    pub fn resume(&self) {
        let pid = self.running_pid("resume");
        sys::send_signal(pid, libc::SIGCONT).expect("send SIGCONT to redis-server");
        wait_for_state(pid, |state| state != 'T');
    }

    /// Kills the server with `SIGKILL` and starts a new one on the same port,
    /// with the same arguments and directory (so an AOF written with
    /// `--appendonly yes` is reloaded). Returns once the new process answers
    /// `PING`. Works whether or not the server was running.
    ///
    /// # Panics
    ///
    /// If the server cannot be brought back within a few seconds.
    pub fn restart(&mut self) {
        self.kill();
        self.start_on_same_port();
    }

    /// Starts the server again after [`RedisServer::kill`], on the same port
    /// with the same arguments and directory, and waits until it answers
    /// `PING`.
    ///
    /// # Panics
    ///
    /// If the server is still running, or cannot be brought back within a
    /// few seconds.
    pub fn start_again(&mut self) {
        assert!(
            !self.is_running(),
            "start_again: redis-server on port {} is still running; kill it first or use restart()",
            self.port
        );
        self.start_on_same_port();
    }

    /// Opens a new synchronous connection to the server (2 s connect
    /// timeout, no read/write timeout: set one on the connection if the test
    /// may pause the server).
    ///
    /// # Panics
    ///
    /// If the connection cannot be established.
    pub fn connection(&self) -> redis::Connection {
        // A machine stalled mid-connect interrupts the wait (EINTR): an I/O
        // failure is tried again until the connect timeout is spent.
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        loop {
            let attempt = redis::Client::open(self.url())
                .and_then(|client| client.get_connection_with_timeout(CONNECT_TIMEOUT));
            match attempt {
                Ok(connection) => return connection,
                Err(e) if e.is_io_error() && Instant::now() < deadline => {
                    thread::sleep(POLL_INTERVAL);
                }
                Err(e) => panic!("connect to redis-server at {}: {e}", self.url()),
            }
        }
    }

    /// Runs one command on a fresh connection and returns the raw reply,
    /// e.g. `server.cmd(&["SET", "key", "value"])`.
    ///
    /// An error reply from the server (such as `WRONGTYPE`) is returned as
    /// [`redis::Value::ServerError`] so tests can assert on it.
    ///
    /// A machine stall cannot fail it: the read has no socket timeout (a
    /// blocking read with one fails with `EINTR` when a freeze interrupts
    /// it, where one without is resumed by the kernel), and the 5 s bound
    /// on the answer is kept by waiting for it on a helper thread.
    ///
    /// # Panics
    ///
    /// If `args` is empty, on a connection error, or without an answer
    /// within 5 s (e.g. against a paused server).
    pub fn cmd(&self, args: &[&str]) -> redis::Value {
        let (name, rest) = args
            .split_first()
            .expect("RedisServer::cmd needs at least the command name");
        let mut command = redis::cmd(name);
        for arg in rest {
            command.arg(*arg);
        }
        let mut connection = self.connection();
        let (answer, answered) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = answer.send(connection.req_command(&command));
        });
        match answered.recv_timeout(CMD_TIMEOUT) {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => panic!("{args:?} on redis-server at {}: {e}", self.url()),
            Err(_) => panic!(
                "{args:?} on redis-server at {}: no answer within {CMD_TIMEOUT:?}",
                self.url()
            ),
        }
    }

    /// The server's clock (`TIME`) in microseconds since the Unix epoch:
    /// what a fence granted at that moment is.
    pub fn micros(&self) -> u64 {
        match self.cmd(&["TIME"]) {
            redis::Value::Array(parts) => {
                let part = |value: &redis::Value| match value {
                    redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes)
                        .parse::<u64>()
                        .expect("TIME answers numbers"),
                    other => panic!("TIME answered {other:?}"),
                };
                part(&parts[0]) * 1_000_000 + part(&parts[1])
            }
            other => panic!("TIME answered {other:?}"),
        }
    }

    /// Runs one command and reads its reply as a number: an integer reply,
    /// a numeric string (`GET` of a counter), or 0 for a missing key.
    ///
    /// # Panics
    ///
    /// As [`RedisServer::cmd`], and on any other reply.
    pub fn int(&self, args: &[&str]) -> i64 {
        match self.cmd(args) {
            redis::Value::Int(n) => n,
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes)
                .parse()
                .unwrap_or_else(|_| panic!("{args:?} answered a non-number")),
            redis::Value::Nil => 0,
            other => panic!("{args:?} answered {other:?}"),
        }
    }

    /// The pid of the running child, for signalling it.
    fn running_pid(&self, action: &str) -> u32 {
        self.pid().unwrap_or_else(|| {
            panic!(
                "{action}: redis-server on port {} is not running",
                self.port
            )
        })
    }

    /// Starts on `self.port`, retrying while the old socket or another
    /// process still holds it.
    fn start_on_same_port(&mut self) {
        let deadline = Instant::now() + SAME_PORT_RETRY;
        loop {
            match self.try_start() {
                Ok(()) => return,
                Err(failure) if failure.exited && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(100));
                }
                Err(failure) => panic!("restarting on port {}: {}", self.port, failure.message),
            }
        }
    }

    /// Spawns the process and waits until it is ready. On failure the child
    /// is already killed and reaped.
    fn try_start(&mut self) -> Result<(), StartFailure> {
        self.child = Some(self.spawn());
        self.wait_ready()
    }

    fn spawn(&self) -> Child {
        let mut command = Command::new("redis-server");
        if self.config.is_some() {
            // redis-server reads a config file only as its first argument.
            command.arg(self.config_path());
        }
        command
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            // No RDB snapshots: the tests never want them, and they would
            // fork the server behind the test's back.
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.log_path())
            // Last, so they override the defaults above.
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Not null: errors found before the log file is opened (such as
            // a bad option in `extra_args`) only ever reach stderr.
            .stderr(self.stderr_file());
        sys::kill_with_parent(&mut command);
        match command.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                panic!("redis-server not found: install it with `apt-get install -y redis-server`")
            }
            Err(e) => panic!("failed to spawn redis-server: {e}"),
        }
    }

    /// Polls until the server answers, exits, or `READY_TIMEOUT` passes.
    fn wait_ready(&mut self) -> Result<(), StartFailure> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let child = self
                .child
                .as_mut()
                .expect("wait_ready is only called right after spawn");
            let pid = child.id();
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Err(StartFailure {
                    exited: true,
                    message: format!(
                        "redis-server on port {} exited with {status} before accepting connections{}",
                        self.port,
                        self.log_tails()
                    ),
                });
            }
            if answers_as(self.port, pid) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(StartFailure {
                    exited: false,
                    message: format!(
                        "redis-server on port {} did not answer PING within {READY_TIMEOUT:?}{}",
                        self.port,
                        self.log_tails()
                    ),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("redis.conf")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    fn stderr_path(&self) -> PathBuf {
        self.dir.join("redis.stderr")
    }

    /// Where the child's stderr goes; appended to, like the log, so earlier
    /// runs stay visible across restarts.
    fn stderr_file(&self) -> Stdio {
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path())
            .map_or_else(|_| Stdio::null(), Stdio::from)
    }

    /// The ends of the log file and of stderr, for a panic message.
    fn log_tails(&self) -> String {
        let mut tails = log_tail(&self.log_path());
        if let Ok(stderr) = fs::read_to_string(self.stderr_path())
            && !stderr.trim().is_empty()
        {
            tails.push_str(&format!("\n--- stderr ---\n{}", last_lines(&stderr)));
        }
        tails
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // SIGKILL also kills a stopped process, but continuing it first
            // costs nothing and avoids relying on that subtlety.
            let _ = sys::send_signal(child.id(), libc::SIGCONT);
        }
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A port nothing listens on right now (the OS's pick), for a server to
/// take. It is released at once, so another process can take it before the
/// server binds it; `start_with` retries in that case.
pub fn free_port() -> u16 {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0 to find a free port");
    listener
        .local_addr()
        .expect("local_addr of a bound listener")
        .port()
}

fn create_temp_dir(port: u16) -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(sweep_dead_runs_dirs);
    let counter = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "lock-tests-{}-{port}-{counter}",
        std::process::id()
    ));
    // A leftover from an earlier run with a recycled pid could hold an AOF
    // that the new server would load.
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("create redis temp dir {}: {e}", dir.display()));
    dir
}

/// Deletes the directories of servers whose test process is gone. A
/// server that outlives its `RedisServer` value (one kept for a whole test
/// binary, or a test binary killed mid-run) is killed with its process, but
/// nobody deletes its directory; the next run does, so they never pile up.
fn sweep_dead_runs_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("lock-tests-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether the server on `port` answers `PING` with `PONG` *and* is the
/// process `pid`. The second check matters: if another test's server won the
/// race for the port, ours is about to exit with "address in use", and the
/// other one must not be mistaken for it.
fn answers_as(port: u16, pid: u32) -> bool {
    let probe = || -> redis::RedisResult<bool> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
        let mut con = client.get_connection_with_timeout(PROBE_TIMEOUT)?;
        con.set_read_timeout(Some(PROBE_TIMEOUT))?;
        con.set_write_timeout(Some(PROBE_TIMEOUT))?;
        // While loading an AOF the server answers PING with -LOADING, which
        // is an Err here: not ready yet.
        let pong: String = redis::cmd("PING").query(&mut con)?;
        let info: String = redis::cmd("INFO").arg("server").query(&mut con)?;
        let own_pid = format!("process_id:{pid}");
        Ok(pong == "PONG" && info.lines().any(|line| line.trim_end() == own_pid))
    };
    probe().unwrap_or(false)
}

/// The last lines of the server log, formatted for a panic message.
fn log_tail(path: &Path) -> String {
    match fs::read_to_string(path) {
        Ok(log) => format!("\n--- tail of {} ---\n{}", path.display(), last_lines(&log)),
        Err(e) => format!("\n(no log at {}: {e})", path.display()),
    }
}

/// The last `LOG_TAIL_LINES` lines of `text`.
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// Polls `/proc/<pid>/stat` (for up to 2 s) until the process state letter
/// satisfies `done`. Gives up silently: the caller's next step will show
/// whether the signal took effect.
fn wait_for_state(pid: u32, done: impl Fn(char) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match process_state(pid) {
            Some(state) if !done(state) => thread::sleep(Duration::from_millis(1)),
            _ => return,
        }
    }
}

/// The state letter (`R`, `S`, `T`, `Z`, ...) of a process, from
/// `/proc/<pid>/stat`. `None` if the process does not exist.
fn process_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Format: "pid (comm) S ...". comm may itself contain spaces or
    // parentheses, so look after the *last* ')'.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.trim_start().chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// A raw `PING` with a short read timeout, independent of the redis crate,
    /// so a paused server shows up as an error instead of a hang.
    fn raw_ping(port: u16) -> io::Result<()> {
        let timeout = Duration::from_millis(300);
        let mut stream = TcpStream::connect_timeout(&(Ipv4Addr::LOCALHOST, port).into(), timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.write_all(b"PING\r\n")?;
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply)?;
        if &reply == b"+PONG\r\n" {
            Ok(())
        } else {
            Err(io::Error::other(format!("unexpected reply {reply:?}")))
        }
    }

    fn pong() -> redis::Value {
        redis::Value::SimpleString("PONG".into())
    }

    #[test]
    fn start_answers_ping() {
        let server = RedisServer::start();
        assert_eq!(
            server.url(),
            format!("redis://127.0.0.1:{}/", server.port())
        );
        assert!(server.pid().is_some());
        raw_ping(server.port()).expect("raw PING");
        assert_eq!(server.cmd(&["PING"]), pong());
        assert_eq!(
            server.cmd(&["SET", "k", "v"]),
            redis::Value::Okay,
            "SET through cmd()"
        );
        assert!(matches!(
            server.cmd(&["LPUSH", "k", "x"]),
            redis::Value::ServerError(_)
        ));
    }

    #[test]
    fn extra_args_override_defaults() {
        let server = RedisServer::start_with(&["--appendonly", "yes"]);
        let reply = server.cmd(&["CONFIG", "GET", "appendonly"]);
        assert_eq!(
            reply,
            redis::Value::Array(vec![
                redis::Value::BulkString(b"appendonly".to_vec()),
                redis::Value::BulkString(b"yes".to_vec()),
            ])
        );
    }

    #[test]
    fn pause_blocks_replies_until_resume() {
        let server = RedisServer::start();
        server.pause();
        let err = raw_ping(server.port()).expect_err("a paused server must not answer");
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "expected a timeout, got {err:?}"
        );
        server.resume();
        raw_ping(server.port()).expect("PING after resume");
    }

    #[test]
    fn kill_then_start_again_on_same_port() {
        let mut server = RedisServer::start();
        let port = server.port();
        let old_pid = server.pid().unwrap();

        server.kill();
        assert!(!server.is_running());
        assert_eq!(server.pid(), None);
        let err = raw_ping(port).expect_err("a killed server must not answer");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);

        server.start_again();
        assert!(server.is_running());
        assert_eq!(server.port(), port);
        assert_ne!(server.pid(), Some(old_pid));
        raw_ping(port).expect("PING after start_again");
    }

    #[test]
    fn restart_keeps_port_and_aof_data() {
        let mut server =
            RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
        let port = server.port();
        let old_pid = server.pid().unwrap();
        assert_eq!(server.cmd(&["SET", "survivor", "1"]), redis::Value::Okay);

        server.restart();
        assert_eq!(server.port(), port);
        assert_ne!(server.pid(), Some(old_pid));
        assert_eq!(
            server.cmd(&["GET", "survivor"]),
            redis::Value::BulkString(b"1".to_vec()),
            "the AOF in the kept directory is reloaded"
        );
    }

    #[test]
    fn restart_of_a_paused_server_works() {
        let mut server = RedisServer::start();
        server.pause();
        server.restart();
        raw_ping(server.port()).expect("PING after restart");
    }

    #[test]
    fn drop_kills_process_and_removes_dir() {
        let server = RedisServer::start();
        let pid = server.pid().unwrap();
        let dir = server.dir.clone();
        let proc_path = PathBuf::from(format!("/proc/{pid}"));
        assert!(proc_path.exists());
        assert!(dir.exists());

        drop(server);
        // Drop reaps the child, so /proc/<pid> should vanish at once; poll
        // briefly anyway in case procfs lags.
        let deadline = Instant::now() + Duration::from_secs(2);
        while proc_path.exists() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!proc_path.exists(), "redis-server {pid} survived drop");
        assert!(!dir.exists(), "{} survived drop", dir.display());
    }

    #[test]
    fn process_state_parses_proc_stat() {
        let state = process_state(std::process::id()).expect("own /proc entry");
        assert!(state.is_ascii_uppercase(), "state {state:?}");
        assert_eq!(process_state(u32::MAX), None);
    }
}
