//! Whether a caller outside a busy lock's line ever gets in: the
//! workloads of the starvation tests and of the `starvation` program.
//!
//! A *busy line* is one locker whose tasks take a hot key over and over
//! (acquire, hold, release, at once again), or, for comparison, the same
//! number of hand-written `SET NX PX` spinners whose losers sleep before
//! their next try. Against it, *outsiders* of another locker ask for the
//! same key: a caller that tries once every few milliseconds (`wait = 0`,
//! the "busy: 409" handler), or a waiter far from the server (through a
//! [`FaultProxy`](crate::FaultProxy) that delays every byte).
//!
//! Every loop is bounded in count and in time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lock_runtime::{LockError, Locker};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How the busy side takes the key.
#[derive(Clone)]
pub enum Busy {
    /// The project's locker: its tasks queue in its line.
    Line(Locker),
    /// Hand-written `SET NX PX` spinners on `url`, whose losers sleep
    /// `pause` before they try again.
    Spin {
        /// The server's URL.
        url: String,
        /// How long a spinner that lost sleeps before its next try.
        pause: Duration,
    },
}

/// A busy side at work: `tasks` tasks taking `key` in a loop, each hold
/// `hold` long, until stopped.
pub struct BusyLoad {
    grants: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tasks: JoinSet<Result<(), String>>,
}

/// Longest a busy task waits for one grant: a bound, never reached while
/// the test works.
const BUSY_WAIT: Duration = Duration::from_secs(60);
/// Most grants one busy task makes: a bound on the loop.
const BUSY_MOST: u64 = 1_000_000;

impl BusyLoad {
    /// Starts `tasks` tasks of `busy` on `key`, with leases of `ttl`.
    pub fn start(busy: &Busy, key: &str, tasks: usize, hold: Duration, ttl: Duration) -> Self {
        let grants = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut set = JoinSet::new();
        for n in 0..tasks {
            let (grants, stop, key) = (grants.clone(), stop.clone(), key.to_owned());
            match busy.clone() {
                Busy::Line(locker) => {
                    set.spawn(async move {
                        for _ in 0..BUSY_MOST {
                            if stop.load(Ordering::SeqCst) {
                                break;
                            }
                            let request = locker.lock(key.as_str()).ttl(ttl).wait(BUSY_WAIT);
                            let guard = request.acquire().await.map_err(|e| e.to_string())?;
                            grants.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(hold).await;
                            guard.release().await.map_err(|e| e.to_string())?;
                        }
                        Ok(())
                    });
                }
                Busy::Spin { url, pause } => {
                    set.spawn(async move {
                        let mut raw = RawLock::connect(&url, &key, &format!("spinner-{n}")).await?;
                        for _ in 0..BUSY_MOST {
                            if stop.load(Ordering::SeqCst) {
                                break;
                            }
                            if !raw.try_take(ttl).await? {
                                tokio::time::sleep(pause).await;
                                continue;
                            }
                            grants.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(hold).await;
                            raw.release().await?;
                        }
                        Ok(())
                    });
                }
            }
        }
        Self {
            grants,
            stop,
            tasks: set,
        }
    }

    /// Grants so far.
    pub fn grants(&self) -> u64 {
        self.grants.load(Ordering::SeqCst)
    }

    /// Waits until the busy side made `count` grants (within `within`).
    pub async fn warmed_up(&self, count: u64, within: Duration) {
        crate::fixtures::eventually("the busy side took the key", within, || {
            self.grants() >= count
        })
        .await;
    }

    /// Stops every task; fails if one failed.
    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        while let Some(done) = self.tasks.join_next().await {
            done.expect("a busy task panicked")
                .unwrap_or_else(|err| panic!("a busy task failed: {err}"));
        }
    }
}

/// A hand-written lock: `SET key token NX PX ttl`, released by a
/// compare-and-delete script.
pub struct RawLock {
    conn: redis::aio::MultiplexedConnection,
    lock: String,
    token: String,
    release: redis::Script,
}

impl RawLock {
    /// A connection to `url` for lock `key` (the project's key for that
    /// name, so that both kinds take the same key) as `token`.
    pub async fn connect(url: &str, key: &str, token: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self {
            conn,
            lock: crate::fixtures::lock_key(key),
            token: token.to_owned(),
            release: redis::Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
            ),
        })
    }

    /// One `SET NX PX`: whether it took the lock.
    pub async fn try_take(&mut self, ttl: Duration) -> Result<bool, String> {
        let taken: Option<String> = redis::cmd("SET")
            .arg(&self.lock)
            .arg(&self.token)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .query_async(&mut self.conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(taken.is_some())
    }

    /// Deletes the lock if it is still this token's.
    pub async fn release(&mut self) -> Result<(), String> {
        let _: i64 = self
            .release
            .key(&self.lock)
            .arg(&self.token)
            .invoke_async(&mut self.conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Who tries once against the busy side.
pub enum Outsider<'a> {
    /// The project's locker (`wait = 0`).
    Locker(&'a Locker),
    /// A hand-written `SET NX PX` on the server at this URL.
    Raw(&'a str),
}

/// What a run of tries found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tries {
    /// Tries made.
    pub tried: u64,
    /// Tries that acquired.
    pub acquired: u64,
}

impl Tries {
    /// The share of tries that acquired.
    pub fn share(&self) -> f64 {
        if self.tried == 0 {
            0.0
        } else {
            self.acquired as f64 / self.tried as f64
        }
    }
}

/// `outsider` tries `key` once (`wait = 0`) every `every`, `tries` times
/// or for `within`, whichever ends first; each grant is released at once.
pub async fn try_once_every(
    outsider: Outsider<'_>,
    key: &str,
    every: Duration,
    tries: u64,
    within: Duration,
) -> Tries {
    let mut raw = match outsider {
        Outsider::Raw(url) => Some(
            RawLock::connect(url, key, "outsider")
                .await
                .expect("connect the outsider"),
        ),
        Outsider::Locker(_) => None,
    };
    let mut found = Tries::default();
    let end = Instant::now() + within;
    let mut next = Instant::now();
    while found.tried < tries && Instant::now() < end {
        found.tried += 1;
        let acquired = match (&outsider, raw.as_mut()) {
            (_, Some(raw)) => {
                let taken = raw.try_take(Duration::from_secs(10)).await.expect("SET NX");
                if taken {
                    raw.release().await.expect("release a raw grant");
                }
                taken
            }
            (Outsider::Locker(locker), None) => {
                match locker.lock(key).wait(Duration::ZERO).try_acquire().await {
                    Ok(Some(guard)) => {
                        guard.release().await.expect("release a try-once grant");
                        true
                    }
                    Ok(None) => false,
                    Err(err) => panic!("a try-once call failed: {err}"),
                }
            }
            (Outsider::Raw(_), None) => unreachable!("connected above"),
        };
        found.acquired += u64::from(acquired);
        next += every;
        tokio::time::sleep_until(next.max(Instant::now())).await;
    }
    found
}

/// `locker` waits for `key` up to `wait`, `attempts` times in a row; each
/// grant is released at once. Answers the attempts that acquired and how
/// long each took.
pub async fn wait_in_turn(
    locker: &Locker,
    key: &str,
    attempts: u64,
    wait: Duration,
) -> (Tries, Vec<Duration>) {
    let mut found = Tries::default();
    let mut took = Vec::new();
    for _ in 0..attempts {
        found.tried += 1;
        let started = Instant::now();
        match locker.lock(key).wait(wait).acquire().await {
            Ok(guard) => {
                found.acquired += 1;
                took.push(started.elapsed());
                guard.release().await.expect("release a waiter's grant");
            }
            Err(LockError::Timeout { .. }) => {}
            Err(err) => panic!("a waiter failed: {err}"),
        }
    }
    (found, took)
}
