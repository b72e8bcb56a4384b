//! [`Backing`]: where a demo keeps its locks and its data, chosen so that
//! it never writes to somebody's Redis unasked.
//!
//! 1. `REDIS_URL`, when set: the server the user named.
//! 2. Else, when `redis-server` is installed: a throwaway one of the demo's
//!    own, on a free loopback port, stopped when the demo ends.
//! 3. Else the in-memory store (`LockConfig::in_memory`): no server at
//!    all, and every contender inside this one process.
//!
//! A Redis on 127.0.0.1:6379 is never used unless `REDIS_URL` names it:
//! on a developer's machine that may well be another project's.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, LockError};

use crate::data::Data;

/// Where a demo's locks and data live. A throwaway server is stopped when
/// this value is dropped.
pub enum Backing {
    /// The server `REDIS_URL` names.
    Given {
        /// Its URL, credentials included.
        url: String,
    },
    /// A `redis-server` started for this run.
    Throwaway {
        /// Its URL.
        url: String,
        /// The server process, killed on drop.
        child: Child,
    },
    /// No server: the in-memory store, shared by every locker this
    /// backing configures.
    Memory {
        /// The store.
        store: MemoryStore,
        /// The demo's data, beside it.
        data: Data,
    },
}

impl Backing {
    /// `REDIS_URL`, else a throwaway `redis-server`, else the in-memory
    /// store. An installed `redis-server` that does not start is an error
    /// rather than a quiet switch to memory.
    pub fn choose() -> Result<Self, String> {
        if let Ok(url) = std::env::var("REDIS_URL") {
            return Ok(Self::Given { url });
        }
        match start_throwaway()? {
            Some((url, child)) => Ok(Self::Throwaway { url, child }),
            None => Ok(Self::memory()),
        }
    }

    /// The in-memory store, whatever is installed.
    pub fn memory() -> Self {
        Self::Memory {
            store: MemoryStore::new(),
            data: Data::memory(),
        }
    }

    /// One line saying which backing this is, for a demo's first line.
    pub fn describe(&self) -> String {
        match self {
            Self::Given { url } => format!("redis: {} (from REDIS_URL)", address(url)),
            Self::Throwaway { url, .. } => format!(
                "redis: a throwaway redis-server on {}, stopped at the end (set REDIS_URL to use another)",
                address(url)
            ),
            Self::Memory { .. } => "redis: none (REDIS_URL is not set and redis-server is not \
                                    installed); using the in-memory store, inside this one process"
                .to_owned(),
        }
    }

    /// The Redis URL, or `None` on the in-memory store.
    pub fn url(&self) -> Option<&str> {
        match self {
            Self::Given { url } | Self::Throwaway { url, .. } => Some(url),
            Self::Memory { .. } => None,
        }
    }

    /// The in-memory store, or `None` on Redis.
    pub fn store(&self) -> Option<&MemoryStore> {
        match self {
            Self::Memory { store, .. } => Some(store),
            _ => None,
        }
    }

    /// A configuration for a locker on this backing. Lockers made from
    /// configurations of one in-memory backing share its store, and
    /// contend as processes on one server do.
    pub fn lock_config(&self) -> Result<LockConfig, LockError> {
        match self {
            Self::Given { url } | Self::Throwaway { url, .. } => LockConfig::from_url(url),
            Self::Memory { store, .. } => Ok(LockConfig::in_memory_store(store)),
        }
    }

    /// A handle on the demo's data (stock counts and such), apart from the
    /// locks.
    pub async fn data(&self) -> Result<Data, redis::RedisError> {
        match self {
            Self::Given { url } | Self::Throwaway { url, .. } => Data::connect(url).await,
            Self::Memory { data, .. } => Ok(data.clone()),
        }
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        if let Self::Throwaway { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `host:port` of a URL, for messages: a URL may carry a password.
pub fn address(url: &str) -> String {
    use redis::IntoConnectionInfo;
    url.into_connection_info().map_or_else(
        |_| "the configured Redis".to_owned(),
        |info| info.addr().to_string(),
    )
}

/// Starts `redis-server` on a free loopback port; `None` when it is not
/// installed.
fn start_throwaway() -> Result<Option<(String, Child)>, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port for a throwaway redis-server: {e}"))?
        .port();
    let spawned = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot start redis-server: {e}")),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline || matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the throwaway redis-server on port {port} did not start within 5 s; \
                 set REDIS_URL to use another server"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Some((format!("redis://127.0.0.1:{port}/"), child)))
}
