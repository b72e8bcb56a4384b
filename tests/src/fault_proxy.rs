//! A TCP proxy that injects real network faults between a Redis client and
//! a `redis-server`.
//!
//! [`RedisServer`](crate::RedisServer) faults the *server* (kill, pause);
//! [`FaultProxy`] faults the *network* in between: added latency, a
//! partition (blackhole), connection resets, and a command that executes
//! but whose reply never arrives. The client connects to the proxy's
//! [`FaultProxy::url`] instead of the server's, and the test flips faults
//! on and off while it runs.
//!
//! The proxy runs on its own thread with its own tokio runtime, so it keeps
//! working regardless of which runtime (if any) the test uses, and its
//! control methods are plain synchronous calls.

use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc as std_mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time;

/// Size of one read, hence the largest chunk forwarded (and pattern-matched
/// by [`FaultProxy::drop_reply_to`]) at once.
const CHUNK_SIZE: usize = 16 * 1024;
/// Chunks read but not yet written, per direction of a connection. When the
/// queue is full the proxy stops reading and TCP flow control pushes back on
/// the sender, so a blackhole never buffers more than this in memory.
const QUEUED_CHUNKS: usize = 16;
/// How long a new connection waits for `redis-server` to accept before the
/// client is reset.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between forwarding the [`FaultProxy::drop_reply_to`] chunk and
/// cutting the connection, so the server has executed the command (and
/// answered, into the void) by then.
const DROP_REPLY_GRACE: Duration = Duration::from_millis(50);
/// How long [`FaultProxy::reset_all`] waits for the connections to close.
const RESET_TIMEOUT: Duration = Duration::from_secs(2);
/// How long dropping a [`FaultProxy`] waits for its thread to end.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// Sleep after a failed `accept` (e.g. out of file descriptors), so a
/// persistent error does not spin the proxy thread.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// A TCP proxy on `127.0.0.1` in front of a `redis-server`, forwarding bytes
/// both ways until told to misbehave.
///
/// Faults apply to every connection, current and future, until turned off,
/// except [`FaultProxy::reset_all`] and [`FaultProxy::drop_reply_to`], which
/// are one-shot. Control methods take `&self`, may be called from any thread
/// or from async code (they never block for more than a few milliseconds,
/// except [`FaultProxy::reset_all`], bounded by a few seconds), and take
/// effect at once.
///
/// Dropping the proxy closes the listener and every connection and joins
/// the proxy thread (waiting at most a few seconds).
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    thread: Option<JoinHandle<()>>,
}

/// Fault settings and counters, shared between the control methods and the
/// proxy thread.
#[derive(Debug)]
struct Shared {
    /// One-way delay added to every chunk, sampled when the chunk is read.
    latency: Mutex<Duration>,
    /// Whether forwarding is suspended. A watch, so that writers held back
    /// by it wake up as soon as it is lifted.
    blackhole: watch::Sender<bool>,
    /// Whether connections accepted now wait before they are connected
    /// upstream (see [`FaultProxy::hold_new_connections`]).
    hold_new: watch::Sender<bool>,
    /// The armed [`FaultProxy::drop_reply_to`] pattern, if any.
    drop_reply: Mutex<Option<Vec<u8>>>,
    /// Replies cut by [`FaultProxy::drop_reply_to`] since start.
    dropped: AtomicUsize,
    /// Connections accepted since start.
    accepted: AtomicUsize,
    /// Connections accepted whose sockets are not closed yet.
    open: AtomicUsize,
}

/// Requests that need the proxy thread's own state (its connection tasks).
#[derive(Debug)]
enum Command {
    /// Reset every connection, then acknowledge on the channel.
    ResetAll(std_mpsc::Sender<()>),
    /// Close the listener and every connection, and end the thread.
    Shutdown,
}

/// Which way a [`pump`] forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

/// Bytes read from one side of a connection, waiting to be written to the
/// other.
#[derive(Debug)]
struct Chunk {
    data: Vec<u8>,
    /// Read time plus the latency in force then: the earliest write time.
    due: time::Instant,
    /// The chunk matched [`FaultProxy::drop_reply_to`]: cut the connection
    /// once it has reached the server.
    cut_after: bool,
}

impl FaultProxy {
    /// Listens on a free `127.0.0.1` port and forwards every connection to
    /// `127.0.0.1:upstream_port`, with no faults enabled.
    ///
    /// A connection to the upstream is opened for each accepted client. If
    /// that fails (e.g. the server is killed), the client's connection is
    /// reset.
    ///
    /// # Panics
    ///
    /// If the listener, the runtime or the thread cannot be set up.
    pub fn start(upstream_port: u16) -> Self {
        // Non-blocking: tokio requires it in from_std.
        let (listener, port) = crate::net::loopback_listener("FaultProxy");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("build the FaultProxy runtime");
        // Registered here rather than on the proxy thread, so that any setup
        // failure panics in the test that called start().
        let listener = {
            let _context = runtime.enter();
            TcpListener::from_std(listener).expect("register the FaultProxy listener")
        };
        let shared = Arc::new(Shared {
            latency: Mutex::new(Duration::ZERO),
            blackhole: watch::Sender::new(false),
            hold_new: watch::Sender::new(false),
            drop_reply: Mutex::new(None),
            dropped: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
        });
        let (commands, command_rx) = mpsc::unbounded_channel();
        let thread = thread::Builder::new()
            .name(format!("fault-proxy-{port}"))
            .spawn({
                let shared = Arc::clone(&shared);
                // Dropping the runtime when block_on returns drops every
                // connection task, closing their sockets.
                move || runtime.block_on(run(listener, upstream_port, shared, command_rx))
            })
            .expect("spawn FaultProxy thread");
        Self {
            port,
            shared,
            commands,
            thread: Some(thread),
        }
    }

    /// The loopback port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A Redis URL pointing at the proxy: `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Delays every chunk, in both directions, by `one_way` before it is
    /// forwarded, so a request/reply round trip takes at least twice as
    /// long. [`Duration::ZERO`] (the default) turns latency off.
    ///
    /// This is latency, not a bandwidth limit: chunks in flight are delayed
    /// concurrently, not one after another. The delay is fixed when a chunk
    /// is read, so chunks already in flight keep their old delay.
    pub fn set_latency(&self, one_way: Duration) {
        *self
            .shared
            .latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = one_way;
    }

    /// Turns a network partition on or off.
    ///
    /// While on, nothing is forwarded in either direction, yet no connection
    /// is closed: new connections are still accepted (and connected to the
    /// server) but get nothing, so clients only notice through their own
    /// timeouts. Bytes sent meanwhile are *held back, not discarded*, as TCP
    /// would retransmit them across a healed partition: a few chunks wait
    /// in the proxy, the rest in the kernel's socket buffers.
    ///
    /// Turning it off delivers everything held back, in order, on every
    /// connection still open. So a client that timed out on a request must
    /// not reuse its connection, or it will read the stale reply; a new
    /// connection works normally (redis clients drop a connection after a
    /// timeout anyway).
    pub fn blackhole(&self, on: bool) {
        self.shared.blackhole.send_replace(on);
    }

    /// Turns holding new connections on or off.
    ///
    /// While on, a connection the proxy accepts is neither connected to the
    /// server nor forwarded until holding is turned off: the client's
    /// `connect` succeeds, and its first request waits (a server slow to
    /// take new clients). Connections accepted earlier are not affected,
    /// so a client's established connections keep working while a new one
    /// of its hangs.
    pub fn hold_new_connections(&self, on: bool) {
        self.shared.hold_new.send_replace(on);
    }

    /// Abruptly closes every connection the proxy has accepted so far, like
    /// a crashed middlebox: the client side is reset (RST, through
    /// `SO_LINGER` 0), so its next read or write fails with a connection
    /// reset (or broken pipe) rather than a clean EOF; the server side is
    /// reset too. Bytes held back by a latency or a blackhole are lost.
    ///
    /// Returns once those connections are closed (bounded by a few seconds),
    /// so [`FaultProxy::open_connections`] then counts only newer ones. The
    /// listener stays open and later connections work normally.
    ///
    /// A client whose `connect` returned but which the proxy has not
    /// accepted yet is not affected; a request/reply round trip through the
    /// proxy before calling this guarantees the connection is affected.
    pub fn reset_all(&self) {
        let (done, wait) = std_mpsc::channel();
        // A send error means the proxy thread is gone: nothing to reset.
        if self.commands.send(Command::ResetAll(done)).is_ok() {
            // The proxy stops waiting after RESET_TIMEOUT; the extra second
            // only covers scheduling delays.
            let _ = wait.recv_timeout(RESET_TIMEOUT + Duration::from_secs(1));
        }
    }

    /// Arms a one-shot "lost reply" fault: the next chunk sent by any client
    /// that contains `pattern` is forwarded to the server, nothing more is
    /// forwarded to that client, and about 50 ms later (once the server has
    /// executed the command) the connection is reset on both sides. The
    /// client sees a reset or EOF instead of the reply, although the command
    /// took effect. Later chunks and connections are forwarded normally.
    /// Calling it again replaces an armed pattern that has not fired yet.
    ///
    /// The match is done on the raw bytes of each chunk the proxy reads (up
    /// to 16 KiB), not on parsed commands, so:
    /// - a pattern split across two reads is missed. Redis clients write a
    ///   command (or pipeline) in one write, which arrives in one read on
    ///   loopback in practice, but this is not guaranteed;
    /// - it matches anywhere in the chunk, including keys, values and the
    ///   connection handshake (`CLIENT SETINFO ...`, `HELLO`): prefer a
    ///   distinctive pattern such as a command together with its key;
    /// - an empty pattern matches the next chunk.
    pub fn drop_reply_to(&self, pattern: &[u8]) {
        *self
            .shared
            .drop_reply
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(pattern.to_vec());
    }

    /// Disarms a [`FaultProxy::drop_reply_to`] pattern that has not fired.
    pub fn disarm_drop_reply(&self) {
        *self
            .shared
            .drop_reply
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// How many replies [`FaultProxy::drop_reply_to`] has cut: an armed
    /// pattern counts once its command went to the server and the
    /// connection is being cut.
    pub fn replies_dropped(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// How many client connections the proxy has accepted since it started.
    pub fn connections_accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// How many accepted client connections are still open on the proxy's
    /// side. A connection the client closes is counted until the server has
    /// closed its side too, which is asynchronous: poll rather than assert
    /// right after closing.
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // A send error means the thread already ended.
        let _ = self.commands.send(Command::Shutdown);
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        while !thread.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        // A thread still running after the deadline is left detached rather
        // than hanging the test. The thread never panics on its own; ignore
        // the result so Drop cannot panic either.
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    /// The one-way latency currently in force.
    fn latency(&self) -> Duration {
        *self.latency.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `chunk` fires the armed [`FaultProxy::drop_reply_to`] pattern,
    /// disarming it if so: only one chunk ever matches a pattern.
    fn take_drop_reply_match(&self, chunk: &[u8]) -> bool {
        let mut armed = self
            .drop_reply
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let hit = armed.as_deref().is_some_and(|pattern| {
            // windows() rejects a zero length.
            pattern.is_empty() || chunk.windows(pattern.len()).any(|window| window == pattern)
        });
        if hit {
            *armed = None;
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
        hit
    }
}

/// Counts a connection as open for as long as it exists. Owned by the
/// connection's task, so it is released even when the task is dropped
/// without ever running (at shutdown).
struct OpenConnection(Arc<Shared>);

impl OpenConnection {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.open.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(shared))
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The proxy thread's main loop: accepts connections and carries out
/// commands until told to shut down.
async fn run(
    listener: TcpListener,
    upstream_port: u16,
    shared: Arc<Shared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    // Bumped by reset_all. Each connection watches it from its accept on, so
    // a reset reaches exactly the connections accepted before it.
    let (reset, _) = watch::channel(0_u64);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(Command::ResetAll(done)) => {
                    reset.send_modify(|generation| *generation += 1);
                    // All current connections now reset themselves. Wait
                    // for them, so they are closed when reset_all returns.
                    // Accepting pauses meanwhile, so no newer connection
                    // joins the set.
                    let all_closed = async { while connections.join_next().await.is_some() {} };
                    let _ = time::timeout(RESET_TIMEOUT, all_closed).await;
                    // The caller may have given up waiting; nothing to do.
                    let _ = done.send(());
                }
                // Returning drops the listener; the runtime's shutdown then
                // drops the connection tasks, closing their sockets.
                Some(Command::Shutdown) | None => return,
            },
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    shared.accepted.fetch_add(1, Ordering::SeqCst);
                    let open = OpenConnection::new(&shared);
                    let held = *shared.hold_new.borrow();
                    connections.spawn(serve(client, upstream_port, open, held, reset.subscribe()));
                }
                // Typically a client that gave up before being accepted, or
                // a lack of file descriptors: transient either way.
                Err(_) => time::sleep(ACCEPT_RETRY).await,
            },
            // Reap finished connections so the set does not grow forever.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Proxies one client connection until both sides close it, it fails, or
/// it is reset.
async fn serve(
    mut client: TcpStream,
    upstream_port: u16,
    open: OpenConnection,
    held: bool,
    mut reset: watch::Receiver<u64>,
) {
    let shared = &open.0;
    // Outside the relay future, so that it survives that future being
    // cancelled by a reset and can be reset too.
    let mut upstream = None;
    let relayed = async {
        if held {
            // An error means the proxy is shutting down: relay then.
            let _ = shared.hold_new.subscribe().wait_for(|&on| !on).await;
        }
        connect_and_relay(&mut client, &mut upstream, upstream_port, shared).await
    };
    let finished_cleanly = tokio::select! {
        relayed = relayed => relayed.is_ok(),
        // An error means the proxy is shutting down: also time to go.
        _ = reset.changed() => false,
    };
    if !finished_cleanly {
        abort_on_drop(&client);
        if let Some(upstream) = &upstream {
            abort_on_drop(upstream);
        }
    }
}

/// Makes dropping `stream` reset the connection (RST) instead of closing it
/// gracefully (FIN), by setting `SO_LINGER` to 0: the peer sees a
/// connection reset, as when a host crashes or a middlebox kills the
/// connection, rather than an orderly close.
fn abort_on_drop(stream: &TcpStream) {
    // Fails only on a socket already dead, which dropping closes anyway.
    let _ = stream.set_zero_linger();
}

/// Connects to the server (storing the stream in `upstream`) and forwards
/// both ways until both directions have ended. An error (I/O failure or a
/// [`FaultProxy::drop_reply_to`] cut) means the connection must be reset.
async fn connect_and_relay(
    client: &mut TcpStream,
    upstream: &mut Option<TcpStream>,
    upstream_port: u16,
    shared: &Shared,
) -> io::Result<()> {
    let connect = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream_port));
    let upstream = upstream.insert(time::timeout(UPSTREAM_CONNECT_TIMEOUT, connect).await??);
    // Forward each chunk as soon as it is due, instead of letting Nagle's
    // algorithm hold small writes back and distort latencies.
    client.set_nodelay(true)?;
    upstream.set_nodelay(true)?;
    // Set once the drop_reply_to chunk is read: nothing more reaches the
    // client from then on, not even replies the server sends right away.
    let reply_dropped = AtomicBool::new(false);
    let (client_read, client_write) = client.split();
    let (upstream_read, upstream_write) = upstream.split();
    tokio::try_join!(
        pump(
            client_read,
            upstream_write,
            Direction::ToServer,
            shared,
            &reply_dropped
        ),
        pump(
            upstream_read,
            client_write,
            Direction::ToClient,
            shared,
            &reply_dropped
        ),
    )?;
    Ok(())
}

/// Forwards one direction of a connection until EOF, which it passes on as
/// a half-close. Reading and writing run concurrently, joined by a bounded
/// queue, so latency delays chunks without serializing them.
async fn pump(
    from: impl AsyncRead + Unpin,
    to: impl AsyncWrite + Unpin,
    direction: Direction,
    shared: &Shared,
    reply_dropped: &AtomicBool,
) -> io::Result<()> {
    let (queue, queued) = mpsc::channel(QUEUED_CHUNKS);
    tokio::try_join!(
        read_chunks(from, queue, direction, shared, reply_dropped),
        write_chunks(to, queued, direction, shared, reply_dropped),
    )?;
    Ok(())
}

/// Reads chunks into `queue` until EOF, stamping each with its due time and
/// checking client chunks against the drop_reply_to pattern.
async fn read_chunks(
    mut from: impl AsyncRead + Unpin,
    queue: mpsc::Sender<Chunk>,
    direction: Direction,
    shared: &Shared,
    reply_dropped: &AtomicBool,
) -> io::Result<()> {
    let mut buf = vec![0; CHUNK_SIZE];
    loop {
        let len = from.read(&mut buf).await?;
        if len == 0 {
            // EOF. Dropping `queue` lets the writer drain it, then pass the
            // EOF on.
            return Ok(());
        }
        let data = buf[..len].to_vec();
        let cut_after = direction == Direction::ToServer && shared.take_drop_reply_match(&data);
        if cut_after {
            // Before the chunk can reach the server, hence before its reply
            // can exist.
            reply_dropped.store(true, Ordering::SeqCst);
        }
        let chunk = Chunk {
            data,
            due: time::Instant::now() + shared.latency(),
            cut_after,
        };
        if queue.send(chunk).await.is_err() {
            // The writer failed, and its error ends the connection.
            return Ok(());
        }
    }
}

/// Writes queued chunks once due and not blackholed, then half-closes `to`
/// when the queue ends.
async fn write_chunks(
    mut to: impl AsyncWrite + Unpin,
    mut queued: mpsc::Receiver<Chunk>,
    direction: Direction,
    shared: &Shared,
    reply_dropped: &AtomicBool,
) -> io::Result<()> {
    let mut blackhole = shared.blackhole.subscribe();
    while let Some(chunk) = queued.recv().await {
        time::sleep_until(chunk.due).await;
        // Held here, not discarded, while the blackhole is on. The error
        // case (sender dropped) cannot happen: `shared` owns the sender.
        let _ = blackhole.wait_for(|&on| !on).await;
        if direction == Direction::ToClient && reply_dropped.load(Ordering::SeqCst) {
            continue;
        }
        to.write_all(&chunk.data).await?;
        if chunk.cut_after {
            time::sleep(DROP_REPLY_GRACE).await;
            return Err(io::Error::other(
                "drop_reply_to fired: cutting the connection",
            ));
        }
    }
    // The peer may still be sending the other way, so only half-close.
    to.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedisServer;
    use std::io::{Read, Write};
    use std::net::TcpStream as StdTcpStream;

    /// `PING` in RESP, as a client library would send it.
    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
    const PONG: &[u8] = b"+PONG\r\n";
    /// Read timeout for replies that must not arrive.
    const SHORT: Duration = Duration::from_millis(300);
    /// Read timeout for replies that must arrive: generous, since it only
    /// bounds a failing test.
    const LONG: Duration = Duration::from_secs(5);

    /// A raw connection to the proxy.
    fn connect(proxy: &FaultProxy) -> StdTcpStream {
        let stream = StdTcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port()))
            .expect("connect to the proxy");
        stream.set_write_timeout(Some(LONG)).unwrap();
        stream
    }

    /// Sends `PING` and expects `PONG` within `timeout`.
    fn ping(stream: &mut StdTcpStream, timeout: Duration) -> io::Result<()> {
        stream.write_all(PING)?;
        read_pong(stream, timeout)
    }

    /// Reads one reply and expects it to be `PONG`. EOF is an error
    /// (`UnexpectedEof`).
    fn read_pong(stream: &mut StdTcpStream, timeout: Duration) -> io::Result<()> {
        stream.set_read_timeout(Some(timeout))?;
        let mut reply = [0; PONG.len()];
        stream.read_exact(&mut reply)?;
        if reply == PONG {
            Ok(())
        } else {
            Err(io::Error::other(format!("unexpected reply {reply:?}")))
        }
    }

    fn is_timeout(err: &io::Error) -> bool {
        matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    }

    /// A `redis` crate connection through the proxy. A machine stalled
    /// mid-connect interrupts the wait (`EINTR`): an I/O failure is tried
    /// again until the connect timeout is spent, as `RedisServer` does.
    fn redis_connection(proxy: &FaultProxy) -> redis::Connection {
        let deadline = Instant::now() + LONG;
        let con = loop {
            let attempt = redis::Client::open(proxy.url())
                .and_then(|client| client.get_connection_with_timeout(LONG));
            match attempt {
                Ok(con) => break con,
                Err(e) if e.is_io_error() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("redis connection through the proxy: {e}"),
            }
        };
        // No read timeout: Linux fails a read on a socket with one
        // (`SO_RCVTIMEO`) with EINTR when the process is stopped and
        // resumed, as a paused host does, where a read without one goes
        // on. Every reply here comes from a local server.
        con.set_read_timeout(None).unwrap();
        con
    }

    /// Polls `done` for up to 5 s.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + LONG;
        while !done() {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
        true
    }

    #[test]
    fn forwards_commands_both_ways() {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}/", proxy.port()));
        assert_ne!(proxy.port(), server.port());

        let mut con = redis_connection(&proxy);
        let pong: String = redis::cmd("PING").query(&mut con).unwrap();
        assert_eq!(pong, "PONG");
        let () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
        let value: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
        assert_eq!(value, "v");
        assert_eq!(
            server.cmd(&["GET", "k"]),
            redis::Value::BulkString(b"v".to_vec()),
            "the SET reached the real server"
        );

        // Many chunks each way, to exercise queueing and flow control.
        let big = vec![b'x'; 1 << 20];
        let () = redis::cmd("SET")
            .arg("big")
            .arg(&big)
            .query(&mut con)
            .unwrap();
        let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut con).unwrap();
        assert!(back == big, "1 MiB value corrupted on the way");

        assert_eq!(proxy.connections_accepted(), 1);
        assert_eq!(proxy.open_connections(), 1);
        drop(con);
        assert!(
            eventually(|| proxy.open_connections() == 0),
            "closing the client closes the proxied connection"
        );
    }

    #[test]
    fn latency_delays_both_directions() {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        let mut stream = connect(&proxy);
        ping(&mut stream, LONG).expect("PING without latency");

        let one_way = Duration::from_millis(100);
        proxy.set_latency(one_way);
        let started = Instant::now();
        ping(&mut stream, LONG).expect("PING with latency");
        let round_trip = started.elapsed();
        // Lower bound only: an upper bound would make the test flaky on a
        // loaded machine.
        assert!(
            round_trip >= 2 * one_way,
            "round trip {round_trip:?} < 2 x {one_way:?}"
        );

        proxy.set_latency(Duration::ZERO);
        ping(&mut stream, LONG).expect("PING after latency is removed");
    }

    #[test]
    fn blackhole_holds_traffic_back_until_lifted() {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        let mut before = connect(&proxy);
        ping(&mut before, LONG).expect("PING before the blackhole");

        proxy.blackhole(true);
        let err = ping(&mut before, SHORT).expect_err("no reply through a blackhole");
        assert!(is_timeout(&err), "expected a timeout, got {err:?}");
        // New connections are accepted, but get nothing either.
        let mut during = connect(&proxy);
        let err = ping(&mut during, SHORT).expect_err("no reply on a new connection");
        assert!(is_timeout(&err), "expected a timeout, got {err:?}");
        assert!(eventually(|| proxy.connections_accepted() == 2));
        assert_eq!(proxy.open_connections(), 2, "a blackhole closes nothing");

        proxy.blackhole(false);
        let mut after = connect(&proxy);
        ping(&mut after, LONG).expect("PING on a new connection after the blackhole");
        // Held back, not discarded: the PINGs sent during the blackhole are
        // answered now.
        read_pong(&mut before, LONG).expect("held-back PONG on the old connection");
        read_pong(&mut during, LONG).expect("held-back PONG on the blackholed connection");
    }

    #[test]
    fn held_new_connections_wait_while_older_ones_work() {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        let mut before = connect(&proxy);
        ping(&mut before, LONG).expect("PING before holding");

        proxy.hold_new_connections(true);
        let mut during = connect(&proxy);
        let err = ping(&mut during, SHORT).expect_err("no reply on a held connection");
        assert!(is_timeout(&err), "expected a timeout, got {err:?}");
        ping(&mut before, LONG).expect("an older connection still works");

        proxy.hold_new_connections(false);
        // Held, not dropped: the PING sent while held is answered now.
        read_pong(&mut during, LONG).expect("PONG on the released connection");
        ping(&mut during, LONG).expect("PING on the released connection");
    }

    #[test]
    fn reset_all_breaks_open_connections_only() {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        let mut stream = connect(&proxy);
        // The round trip guarantees the proxy has accepted the connection.
        ping(&mut stream, LONG).expect("PING before the reset");

        proxy.reset_all();
        assert_eq!(proxy.open_connections(), 0, "reset_all waits for the close");
        let err = ping(&mut stream, LONG).expect_err("a reset connection must fail");
        assert!(!is_timeout(&err), "expected a reset or EOF, got {err:?}");

        let mut fresh = connect(&proxy);
        ping(&mut fresh, LONG).expect("PING on a new connection after the reset");
        assert_eq!(proxy.connections_accepted(), 2);
    }

    #[test]
    fn drop_reply_to_executes_the_command_but_loses_the_reply() {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        proxy.drop_reply_to(b"INCR");

        // The handshake of the connection does not contain the pattern and
        // goes through.
        let mut con = redis_connection(&proxy);
        let lost: redis::RedisResult<i64> = redis::cmd("INCR").arg("k").query(&mut con);
        let err = lost.expect_err("the INCR reply must be dropped");
        assert!(!err.is_timeout(), "expected a reset or EOF, got {err:?}");
        assert_eq!(
            server.cmd(&["GET", "k"]),
            redis::Value::BulkString(b"1".to_vec()),
            "the server executed the INCR"
        );

        // One-shot: the next INCR is answered.
        let mut con = redis_connection(&proxy);
        let count: i64 = redis::cmd("INCR").arg("k").query(&mut con).unwrap();
        assert_eq!(count, 2);
    }

    #[test]
    fn drop_closes_listener_and_connections() {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port());
        let port = proxy.port();
        let mut stream = connect(&proxy);
        ping(&mut stream, LONG).expect("PING before drop");

        drop(proxy);
        let err = StdTcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .expect_err("the listener must be closed after drop");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        stream.set_read_timeout(Some(LONG)).unwrap();
        match stream.read(&mut [0; 16]) {
            Ok(0) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            other => panic!("expected EOF or reset after drop, got {other:?}"),
        }
    }

    #[test]
    fn drop_reply_pattern_matches_once() {
        let proxy = FaultProxy::start(crate::closed_port());
        let shared = &proxy.shared;
        assert!(!shared.take_drop_reply_match(b"INCR k"), "nothing armed");
        proxy.drop_reply_to(b"INCR");
        assert!(!shared.take_drop_reply_match(b"GET k"));
        assert!(shared.take_drop_reply_match(b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"));
        assert!(!shared.take_drop_reply_match(b"INCR k"), "one-shot");
        proxy.drop_reply_to(b"");
        assert!(shared.take_drop_reply_match(b"anything"));
    }
}
