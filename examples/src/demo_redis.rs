//! [`DemoRedis`]: a Redis server for a demo, found or started on the spot.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Redis server for a demo: the one named by `REDIS_URL`, else one on
/// 127.0.0.1:6379, else a throwaway `redis-server` started on a free port
/// and stopped when this value is dropped.
pub struct DemoRedis {
    url: String,
    child: Option<Child>,
}

impl DemoRedis {
    /// Finds or starts a server; the error says how to get one.
    pub fn find_or_start() -> Result<Self, String> {
        if let Ok(url) = std::env::var("REDIS_URL") {
            return Ok(Self { url, child: None });
        }
        let default = std::net::SocketAddr::from(([127, 0, 0, 1], 6379));
        if TcpStream::connect_timeout(&default, Duration::from_millis(300)).is_ok() {
            return Ok(Self {
                url: "redis://127.0.0.1:6379/".to_owned(),
                child: None,
            });
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port for a demo server: {e}"))?
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|_| {
                "no Redis answers on 127.0.0.1:6379 and `redis-server` is not installed; \
                 install it (`apt-get install -y redis-server`) or set REDIS_URL"
                    .to_owned()
            })?;
        let server = Self {
            url: format!("redis://127.0.0.1:{port}/"),
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("the demo redis-server did not start within 5 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("started a throwaway redis-server on port {port} for this demo");
        Ok(server)
    }

    /// The server's URL, credentials included: for connecting, never for
    /// printing (see [`DemoRedis::address`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `host:port` of the server, for messages: a URL may carry a password.
    pub fn address(&self) -> String {
        use redis::IntoConnectionInfo;
        self.url.as_str().into_connection_info().map_or_else(
            |_| "the configured Redis".to_owned(),
            |info| info.addr().to_string(),
        )
    }
}

/// A connection for the demo's own data (stock counts and such), separate
/// from the locker's: one multiplexed connection, cheap to clone and share
/// between tasks.
pub async fn data_connection(
    url: &str,
) -> Result<redis::aio::MultiplexedConnection, redis::RedisError> {
    redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await
}

/// Deletes the fencing counter of the lock named `lock_key` (taken with the
/// default key prefix).
///
/// Only for a demo's own one-off lock names (a SKU made unique per run),
/// so that repeated runs against a long-lived Redis leave nothing behind.
/// Never do this to a lock that may be taken again: fencing tokens are
/// only worth anything if the counter never goes back.
pub async fn forget_demo_lock(
    redis: &mut redis::aio::MultiplexedConnection,
    lock_key: &str,
) -> Result<(), redis::RedisError> {
    let prefix = lock_runtime::LockConfig::DEFAULT_KEY_PREFIX;
    redis::cmd("DEL")
        .arg(format!("{prefix}{{{lock_key}}}:fence"))
        .query_async(redis)
        .await
}

impl Drop for DemoRedis {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
