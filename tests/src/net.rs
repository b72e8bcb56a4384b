//! Network helpers for tests where the Redis server is unreachable.
//!
//! Two kinds of "unreachable" behave very differently for a client:
//! - a closed port refuses the connection at once ([`closed_port`]);
//! - a peer that accepts but never answers makes the client wait until its
//!   own timeout fires ([`SilentListener`]), like a hung or firewalled server.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::sys;

/// How long the accept loop sleeps when no connection is pending. It bounds
/// how long dropping a [`SilentListener`] takes.
const ACCEPT_POLL: Duration = Duration::from_millis(10);

/// Returns a loopback port that nothing listens on, so connecting to it is
/// refused immediately.
///
/// The port stays reserved (bound by a socket that never listens) until the
/// test process exits, so a server started concurrently by another test can
/// never be handed the same port. Each call keeps one file descriptor open
/// for that purpose.
pub fn closed_port() -> u16 {
    let (socket, port) = sys::bind_without_listening().expect("reserve a closed port on 127.0.0.1");
    // Deliberately leaked: closing the socket would free the port for reuse.
    std::mem::forget(socket);
    port
}

/// A TCP listener on `127.0.0.1` that accepts connections and then holds
/// them open without ever reading or writing.
///
/// A Redis client connecting to it gets a TCP connection, but its handshake
/// or first command never gets a reply, so only its own timeouts can save it.
/// Dropping the listener stops the accept thread and closes every socket
/// (listening and accepted), which clients observe as EOF.
#[derive(Debug)]
pub struct SilentListener {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// A non-blocking listener on a free loopback port, and the port; `what`
/// names the owner in the panic message when the machine refuses.
pub(crate) fn loopback_listener(what: &str) -> (TcpListener, u16) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap_or_else(|e| panic!("bind 127.0.0.1:0 for {what}: {e}"));
    let port = listener
        .local_addr()
        .expect("local_addr of a bound listener")
        .port();
    listener
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("set the {what} listener non-blocking: {e}"));
    (listener, port)
}

impl SilentListener {
    /// Binds a free loopback port and starts accepting on a background
    /// thread.
    pub fn start() -> Self {
        // Non-blocking so the thread can notice the stop flag; a blocking
        // accept() would keep Drop waiting until some client connected.
        let (listener, port) = loopback_listener("SilentListener");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new()
            .name(format!("silent-listener-{port}"))
            .spawn({
                let stop = Arc::clone(&stop);
                move || hold_connections(&listener, &stop)
            })
            .expect("spawn SilentListener thread");
        Self {
            port,
            stop,
            thread: Some(thread),
        }
    }

    /// The loopback port the listener is bound to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A Redis URL pointing at the listener: `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

/// Accepts until `stop` is set, keeping every accepted socket alive (and
/// untouched) until then. Returning drops the listener and the sockets.
fn hold_connections(listener: &TcpListener, stop: &AtomicBool) {
    let mut held: Vec<TcpStream> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => held.push(stream),
            // WouldBlock is the normal "nothing pending" case; other errors
            // (e.g. a connection reset before we accepted it) are transient
            // and not worth failing a test over, so they are treated alike.
            Err(_) => thread::sleep(ACCEPT_POLL),
        }
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // The thread never panics on its own; ignore the result so Drop
            // cannot panic either.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Read, Write};

    #[test]
    fn closed_port_refuses_connections() {
        let port = closed_port();
        match TcpStream::connect((Ipv4Addr::LOCALHOST, port)) {
            Err(err) => assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused),
            Ok(s) => panic!(
                "connected to closed port {port}: local {:?} peer {:?}",
                s.local_addr(),
                s.peer_addr()
            ),
        }
    }

    #[test]
    fn closed_port_stays_reserved() {
        let port = closed_port();
        let err = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .expect_err("no one else may bind closed_port()");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }

    /// A read that a machine stall interrupts (`EINTR`) is read again: the
    /// stall is the host's, not the listener's.
    fn read_through_stalls(stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    #[test]
    fn silent_listener_accepts_but_never_answers() {
        let listener = SilentListener::start();
        assert_eq!(
            listener.url(),
            format!("redis://127.0.0.1:{}/", listener.port())
        );

        let mut stream =
            TcpStream::connect((Ipv4Addr::LOCALHOST, listener.port())).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        stream.write_all(b"PING\r\n").expect("write PING");
        let mut buf = [0u8; 16];
        let err =
            read_through_stalls(&mut stream, &mut buf).expect_err("SilentListener must not answer");
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "expected a read timeout, got {err:?}"
        );

        // Dropping closes the accepted socket: the client now sees EOF (or a
        // reset, since its unread PING is discarded) instead of waiting.
        drop(listener);
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        match read_through_stalls(&mut stream, &mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            other => panic!("expected EOF or reset after drop, got {other:?}"),
        }
    }
}
