//! The baseline: what a careful hand-written lock on redis-rs does, on one
//! multiplexed connection. `SET key token NX PX ttl` to take, a Lua
//! compare-and-delete to release, a Lua compare-and-`PEXPIRE` to renew (one
//! timer task per held lock), and a fixed 1 ms poll to wait. With the
//! `cluster` feature, the same commands on one redis-rs cluster connection
//! (`RawContender::connect_cluster`), which routes each by its key.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Script};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::{Acquired, BenchResult, Contender};

/// Poll interval of a waiting raw acquire.
pub const POLL: Duration = Duration::from_millis(1);

/// Most renewals one raw keep-alive task sends (a bound, never reached in
/// a benchmark-length hold).
const MAX_RENEWALS: u64 = 100_000;

static UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
    )
});

/// Hand-written locks on one [`MultiplexedConnection`] (or, with the
/// `cluster` feature, one cluster connection).
#[derive(Clone)]
pub struct RawContender<C = MultiplexedConnection> {
    conn: C,
    busy_tries: Arc<AtomicU64>,
    renewals: Arc<AtomicU64>,
}

/// A raw lock: its key and owner token.
#[derive(Debug)]
pub struct RawGuard {
    key: String,
    token: String,
}

/// A raw lock with its keep-alive task.
#[derive(Debug)]
pub struct RawHeld {
    guard: RawGuard,
    lost: Arc<AtomicBool>,
    renewer: JoinHandle<()>,
}

impl RawContender {
    /// Opens the one multiplexed connection to `url`.
    pub async fn connect(url: &str) -> BenchResult<Self> {
        let client = redis::Client::open(url)?;
        Ok(Self {
            conn: client.get_multiplexed_async_connection().await?,
            busy_tries: Arc::default(),
            renewals: Arc::default(),
        })
    }

    /// The same, with the connection's driver (the task that writes
    /// requests and reads replies) on a current-thread runtime of a
    /// thread of its own, one for the process, as the project drives its
    /// connections: what raw code pays for the two thread crossings per
    /// call that the project's guarantees cost (see the README's
    /// benchmark section).
    pub async fn connect_on_own_thread(url: &str) -> BenchResult<Self> {
        static DRIVERS: std::sync::Mutex<Option<tokio::runtime::Handle>> =
            std::sync::Mutex::new(None);
        let handle = {
            let mut drivers = DRIVERS.lock().unwrap_or_else(|e| e.into_inner());
            match drivers.as_ref() {
                Some(handle) => handle.clone(),
                None => {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let handle = runtime.handle().clone();
                    std::thread::Builder::new()
                        .name("raw-drivers".to_owned())
                        .spawn(move || runtime.block_on(std::future::pending::<()>()))?;
                    drivers.insert(handle).clone()
                }
            }
        };
        let url = url.to_owned();
        handle
            .spawn(async move { Self::connect(&url).await })
            .await
            .map_err(|err| format!("the raw drivers' thread: {err}"))?
    }
}

#[cfg(feature = "cluster")]
impl RawContender<redis::cluster_async::ClusterConnection> {
    /// Opens one redis-rs cluster connection, given the nodes at `urls`
    /// (`redis://host:port/` each): it learns the slot map and sends each
    /// command to the node serving its key.
    pub async fn connect_cluster(urls: &[String]) -> BenchResult<Self> {
        let client = redis::cluster::ClusterClient::new(urls.iter().map(String::as_str))?;
        Ok(Self {
            conn: client.get_async_connection().await?,
            busy_tries: Arc::default(),
            renewals: Arc::default(),
        })
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RawContender<C> {
    /// One `SET NX PX`: `Some(guard)` when taken, `None` when busy.
    async fn try_lock(&self, key: String, ttl: Duration) -> BenchResult<Option<RawGuard>> {
        let token = random_token()?;
        let mut conn = self.conn.clone();
        let options = redis::SetOptions::default()
            .conditional_set(redis::ExistenceCheck::NX)
            .with_expiration(redis::SetExpiry::PX(millis(ttl)));
        let set: Option<String> = conn.set_options(&key, &token, options).await?;
        Ok(set.map(|_| RawGuard { key, token }))
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> Contender for RawContender<C> {
    type Guard = RawGuard;
    type Held = RawHeld;

    async fn lock(&self, key: String, ttl: Duration) -> BenchResult<RawGuard> {
        match self.try_lock(key.clone(), ttl).await? {
            Some(guard) => Ok(guard),
            None => Err(format!("raw: lock `{key}` unexpectedly busy").into()),
        }
    }

    async fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> BenchResult<Acquired<RawGuard>> {
        let deadline = Instant::now() + wait;
        let mut busy = 0;
        loop {
            if let Some(guard) = self.try_lock(key.clone(), ttl).await? {
                self.busy_tries.fetch_add(busy, Ordering::Relaxed);
                return Ok(Acquired {
                    guard,
                    busy_tries: Some(busy),
                });
            }
            busy += 1;
            if Instant::now() + POLL > deadline {
                return Err(format!("raw: lock `{key}` still busy after {wait:?}").into());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn unlock(&self, guard: RawGuard) -> BenchResult<bool> {
        let mut conn = self.conn.clone();
        let deleted: i64 = UNLOCK
            .key(&guard.key)
            .arg(&guard.token)
            .invoke_async(&mut conn)
            .await?;
        Ok(deleted == 1)
    }

    async fn hold(&self, key: String, ttl: Duration) -> BenchResult<RawHeld> {
        let guard = self.lock(key, ttl).await?;
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = tokio::spawn(keep_alive(
            self.conn.clone(),
            guard.key.clone(),
            guard.token.clone(),
            ttl,
            lost.clone(),
            self.renewals.clone(),
        ));
        Ok(RawHeld {
            guard,
            lost,
            renewer,
        })
    }

    async fn release_held(&self, held: RawHeld) -> BenchResult<bool> {
        held.renewer.abort();
        let deleted = self.unlock(held.guard).await?;
        Ok(deleted && !held.lost.load(Ordering::Relaxed))
    }

    fn renewal_commands(&self) -> u64 {
        self.renewals.load(Ordering::Relaxed)
    }
}

/// Renews one lock every ttl/3 until aborted or the lock is gone.
async fn keep_alive<C: ConnectionLike>(
    mut conn: C,
    key: String,
    token: String,
    ttl: Duration,
    lost: Arc<AtomicBool>,
    renewals: Arc<AtomicU64>,
) {
    let every = ttl / 3;
    let mut next = Instant::now() + every;
    for _ in 0..MAX_RENEWALS {
        tokio::time::sleep_until(next).await;
        next += every;
        renewals.fetch_add(1, Ordering::Relaxed);
        let renewed: redis::RedisResult<i64> = EXTEND
            .key(&key)
            .arg(&token)
            .arg(millis(ttl))
            .invoke_async(&mut conn)
            .await;
        if !matches!(renewed, Ok(1)) {
            lost.store(true, Ordering::Relaxed);
            return;
        }
    }
}

/// 128 random bits in hex, like the project's owner tokens.
fn random_token() -> BenchResult<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|err| format!("getrandom: {err}"))?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut token = String::with_capacity(32);
    for byte in bytes {
        token.push(char::from(HEX[usize::from(byte >> 4)]));
        token.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    Ok(token)
}

/// A duration in whole milliseconds, as Redis takes it.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
