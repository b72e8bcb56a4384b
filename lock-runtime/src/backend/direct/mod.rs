//! A connection to one Redis server whose callers write their own
//! requests (see [`wire`]): one crossing to the library's thread per call
//! where a multiplexed redis-rs connection takes two.
//!
//! It replaces redis-rs's `ConnectionManager` where it can: plain TCP and
//! RESP2, which is what a lock's `redis://` URL asks for. TLS, Unix
//! sockets and RESP3 keep the manager. Like the manager it is shared by
//! cloning, opens a new socket when its socket failed (one attempt at a
//! time, at the next call: the call that meets a broken socket fails, the
//! one after it reconnects), and bounds each call's wait for its answer by
//! the response timeout.

mod handshake;
mod reply;
#[cfg(test)]
mod tests;
mod wire;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use redis::{ConnectionAddr, ConnectionInfo, RedisResult, Value};
use tokio::runtime::Handle;

use self::wire::Wire;
pub(crate) use self::wire::polled_with_yields;
use super::lock_connection::LockConnection;
use super::plain::PlainCommands;
use super::script::{Form, ScriptCall};

/// Whether a connection to `info` can be a [`DirectConnection`]: plain
/// TCP, RESP2.
pub(crate) fn supports(info: &ConnectionInfo) -> bool {
    matches!(info.addr(), ConnectionAddr::Tcp(..))
        && info.redis_settings().protocol() == redis::ProtocolVersion::RESP2
}

/// A connection to one server, shared by cloning (see the module's doc).
#[derive(Clone)]
pub(crate) struct DirectConnection {
    node: Arc<Node>,
}

/// The server and its current socket.
struct Node {
    info: ConnectionInfo,
    connect_timeout: Duration,
    /// Bound of one call's wait for its answer; `None` for a connection
    /// whose callers bound it (`WAIT` may rightly take as long as asked).
    response_timeout: Option<Duration>,
    /// The library's runtime: sockets and their readers live there.
    runtime: Handle,
    wire: Mutex<Option<Arc<Wire>>>,
    /// Held while a socket is being opened: one attempt at a time.
    opening: tokio::sync::Mutex<()>,
}

impl DirectConnection {
    /// Opens a connection to `info` (on the current runtime, which must be
    /// the library's), failing as the manager would when the server
    /// cannot be reached or refuses the login.
    pub(crate) async fn connect(
        info: ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Option<Duration>,
    ) -> RedisResult<Self> {
        let node = Arc::new(Node {
            info,
            connect_timeout,
            response_timeout,
            runtime: Handle::current(),
            wire: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
        });
        node.wire().await?;
        Ok(Self { node })
    }

    /// Another connection to the same server, with no response timeout of
    /// its own (for `WAIT`), opened at its first call.
    pub(crate) fn unbounded_sibling(&self) -> Self {
        Self {
            node: Arc::new(Node {
                info: self.node.info.clone(),
                connect_timeout: self.node.connect_timeout,
                response_timeout: None,
                runtime: self.node.runtime.clone(),
                wire: Mutex::new(None),
                opening: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Sends the request `write` appends (one or more whole commands) and
    /// returns its replies (`skip` dropped, `take` kept), within the
    /// response timeout.
    async fn call(
        &self,
        write: impl FnOnce(&mut Vec<u8>),
        skip: usize,
        take: usize,
    ) -> RedisResult<Vec<Value>> {
        let wire = self.node.wire().await?;
        wire.request(write, skip, take).await
    }
}

impl Node {
    /// The open socket, or a new one when there is none or it failed.
    async fn wire(self: &Arc<Self>) -> RedisResult<Arc<Wire>> {
        if let Some(wire) = self.open_wire() {
            return Ok(wire);
        }
        let _turn = self.opening.lock().await;
        // Another caller may have opened it while this one waited.
        if let Some(wire) = self.open_wire() {
            return Ok(wire);
        }
        // On the library's runtime, whichever runtime calls: the socket
        // is registered with the runtime that opens it. The opening goes
        // on, and is kept, if this caller gives up.
        let node = self.clone();
        let opening = self.runtime.spawn(async move {
            let opened = tokio::time::timeout(node.connect_timeout, node.open()).await;
            let wire = match opened {
                Ok(wire) => Arc::new(wire?),
                Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut).into()),
            };
            *node.lock_wire() = Some(wire.clone());
            Ok::<_, redis::RedisError>(wire)
        });
        match opening.await {
            Ok(opened) => opened,
            Err(err) => Err(io::Error::other(format!("opening a connection: {err}")).into()),
        }
    }

    /// The current socket, unless it failed.
    fn open_wire(&self) -> Option<Arc<Wire>> {
        self.lock_wire()
            .as_ref()
            .filter(|wire| !wire.is_broken())
            .cloned()
    }

    fn lock_wire(&self) -> std::sync::MutexGuard<'_, Option<Arc<Wire>>> {
        self.wire.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connects, then logs in and selects the database.
    async fn open(&self) -> RedisResult<Wire> {
        let ConnectionAddr::Tcp(host, port) = self.info.addr() else {
            return Err(io::Error::other("a direct connection is plain TCP").into());
        };
        let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
        // Callers write small requests of their own: Nagle's algorithm
        // would hold one back behind another's unacknowledged bytes.
        stream.set_nodelay(true)?;
        let wire = Wire::start(stream, &self.runtime, self.response_timeout);
        handshake::log_in(&wire, self.info.redis_settings()).await?;
        Ok(wire)
    }
}

impl redis::aio::ConnectionLike for DirectConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        async move {
            let mut replies = self.call(|out| cmd.write_packed_command(out), 0, 1).await?;
            replies.pop().ok_or_else(no_reply)
        }
        .boxed()
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        let request = pipeline.get_packed_pipeline();
        async move {
            self.call(|out| out.extend_from_slice(&request), offset, count)
                .await
        }
        .boxed()
    }

    fn get_db(&self) -> i64 {
        self.node.info.redis_settings().db()
    }
}

/// Requests written straight into the outgoing bytes.
impl LockConnection for DirectConnection {
    async fn send_script(&mut self, call: &ScriptCall, form: Form) -> RedisResult<Value> {
        let mut replies = self.call(|out| call.write_resp(form, out), 0, 1).await?;
        replies.pop().ok_or_else(no_reply)
    }

    async fn send_plain(&mut self, plain: &PlainCommands) -> RedisResult<Value> {
        let replies = self
            .call(|out| plain.write_resp(out), 0, plain.len())
            .await?;
        Ok(Value::Array(replies))
    }
}

/// The error of a command answered with no reply.
fn no_reply() -> redis::RedisError {
    io::Error::other("a command without its reply").into()
}
