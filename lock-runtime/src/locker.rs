//! [`Locker`]: the handle through which locks are taken.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::backend::{AcquireReply, Backend};
use crate::config::{ReplicaAck, Topology};
use crate::keys::LockKeys;
use crate::lease::{Lease, validity_end};
use crate::stats::{Counters, LockerStats};
use crate::token::OwnerToken;
use crate::wait::{Backoff, ReleaseListener, Subscription, Timeouts};
use crate::watchdog::{Watchdog, ttl_millis};
use crate::{LockConfig, LockError, LockGuard};

/// Longest lease accepted. A lease is a crash bound: one longer than a
/// year is a mistake (and would overflow clock arithmetic long before Redis).
pub(crate) const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// A connection to the lock service: a small pool of Redis connections, one
/// watchdog task that renews every lock it handed out, and one pub/sub
/// listener that wakes waiters when a lock is released.
///
/// Cheap to clone (an `Arc`); build one per process with
/// [`Locker::connect`], or let [`crate::init`] keep the process-wide one.
///
/// ```no_run
/// use lock_runtime::{LockConfig, Locker};
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), lock_runtime::LockError> {
/// let locker = Locker::connect(LockConfig::from_url("redis://127.0.0.1/")?).await?;
/// let guard = locker.lock("stock:42").ttl(Duration::from_secs(3)).acquire().await?;
/// println!("fencing token {}", guard.fence());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locker {
    inner: Arc<Inner>,
}

struct Inner {
    config: LockConfig,
    backend: Backend,
    watchdog: Watchdog,
    releases: ReleaseListener,
    counters: Arc<Counters>,
    next_lease_id: AtomicU64,
}

impl std::fmt::Debug for Locker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locker")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Locker {
    /// Validates `config` and opens its connections.
    ///
    /// Must run inside a tokio runtime, which then hosts the locker's
    /// background tasks: keep that runtime alive as long as the locker.
    /// Fails with [`LockError::Config`] for a bad setting and
    /// [`LockError::Redis`] when the server cannot be reached within the
    /// connect timeout.
    pub async fn connect(config: LockConfig) -> Result<Self, LockError> {
        config.validate()?;
        let backend = Backend::connect(&config).await?;
        let counters = Arc::new(Counters::default());
        let watchdog = Watchdog::start(backend.clone(), counters.clone());
        let releases = ReleaseListener::start(
            backend.release_feed(),
            Timeouts {
                connect: config.connect_timeout,
                response: config.response_timeout,
            },
        );
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                backend,
                watchdog,
                releases,
                counters,
                next_lease_id: AtomicU64::new(1),
            }),
        })
    }

    /// Starts a request for the lock named `key` (for example `stock:42`);
    /// set its options, then call [`LockRequest::acquire`] or
    /// [`LockRequest::try_acquire`].
    pub fn lock(&self, key: impl Into<String>) -> LockRequest {
        LockRequest {
            locker: self.clone(),
            key: key.into(),
            ttl: None,
            wait: None,
            watchdog: true,
            replicas: None,
        }
    }

    /// The configuration this locker was built with.
    pub fn config(&self) -> &LockConfig {
        &self.inner.config
    }

    /// Counters of what this locker has done so far.
    pub fn stats(&self) -> LockerStats {
        self.inner.counters.snapshot()
    }

    /// Tells lockers apart, for per-task reentrancy.
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.inner.watchdog
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.inner.counters
    }
}

/// A lock request being built: `locker.lock(key).ttl(..).wait(..).acquire()`.
#[must_use = "a lock request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct LockRequest {
    locker: Locker,
    key: String,
    ttl: Option<Duration>,
    wait: Option<Duration>,
    watchdog: bool,
    replicas: Option<ReplicaAck>,
}

impl LockRequest {
    /// Lease length (default: the config's `default_ttl`). With the watchdog
    /// on, it bounds how long a crashed owner can block others; with it off,
    /// it is how long the lock lasts.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Longest time [`acquire`](Self::acquire) waits for a busy lock
    /// (default: the config's `default_wait` if set, else this lock's ttl).
    /// Zero tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Renew the lease while the guard lives (default `true`). With `false`
    /// the lease is fixed: the lock ends after its ttl, and the guard reports
    /// it lost at that moment.
    pub fn watchdog(mut self, renew: bool) -> Self {
        self.watchdog = renew;
        self
    }

    /// Once acquired, wait until `replicas` replicas acknowledged the lock,
    /// for at most `timeout` (Redis `WAIT`); if fewer do, the lock is
    /// released and `acquire` fails with [`LockError::NotReplicated`].
    /// Overrides [`LockConfig::wait_for_replicas`] for this lock. One
    /// server or Sentinel only.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = Some(ReplicaAck { replicas, timeout });
        self
    }

    /// Takes the lock, waiting up to the request's `wait` while someone else
    /// holds it.
    ///
    /// Errors: [`LockError::Timeout`] when the wait ran out,
    /// [`LockError::Redis`] when the server failed (after one retry of a
    /// dropped connection), [`LockError::Config`] for an empty key or zero ttl,
    /// [`LockError::QuorumNotReached`] when too few Redlock masters answered,
    /// [`LockError::NotReplicated`] when too few replicas confirmed it.
    /// Dropping the returned future part-way is safe: a lock it may have
    /// taken is released in the background.
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let config = &self.locker.inner.config;
        // Unset: the config's default wait, else this lock's own ttl (the
        // longest a crashed owner can block it).
        let wait = self
            .wait
            .or(config.default_wait)
            .unwrap_or_else(|| self.ttl.unwrap_or(config.default_ttl));
        let counters = self.locker.inner.counters.clone();
        let result = self.run(wait).await;
        if matches!(result, Err(LockError::Timeout { .. })) {
            Counters::bump(&counters.timeouts);
        }
        result
    }

    /// Tries once: `Ok(None)` when someone else holds the lock.
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, LockError> {
        match self.run(Duration::ZERO).await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn run(self, wait: Duration) -> Result<LockGuard, LockError> {
        let ttl = self.ttl.unwrap_or(self.locker.inner.config.default_ttl);
        let ttl_ms = ttl_millis(ttl);
        if ttl_ms == 0 || ttl > MAX_TTL {
            return Err(LockError::config(format!(
                "ttl of lock `{}` is {ttl:?}; it must be between 1 ms and {MAX_TTL:?}",
                self.key
            )));
        }
        let config = &self.locker.inner.config;
        let keys = LockKeys::new(&config.key_prefix, &self.key)?;
        let replicas = self.replicas.or(config.replicas);
        if let Some(ack) = self.replicas {
            ack.validate()?;
            if matches!(
                config.topology,
                Topology::Cluster { .. } | Topology::Redlock { .. }
            ) {
                return Err(LockError::config(format!(
                    "wait_for_replicas works with one server or Sentinel, not with {}",
                    config.topology.kind()
                )));
            }
        }
        let span = tracing::debug_span!("lock.acquire", key = %self.key);
        let mut attempt = Attempt::new(&self.locker, keys, ttl_ms, self.watchdog, wait);
        attempt.replicas = replicas;
        attempt.run().instrument(span).await
    }
}

/// One acquisition in progress. While a request may have reached the
/// server without its answer reaching us, the attempt is *armed*: dropped
/// in that state (caller cancelled, or the call failed) it releases the lock
/// it may have taken, so no lock is ever left held by nobody.
struct Attempt<'a> {
    locker: &'a Locker,
    keys: LockKeys,
    token: OwnerToken,
    ttl_ms: u64,
    renew: bool,
    wait: Duration,
    replicas: Option<ReplicaAck>,
    conn: usize,
    armed: bool,
}

impl<'a> Attempt<'a> {
    fn new(locker: &'a Locker, keys: LockKeys, ttl_ms: u64, renew: bool, wait: Duration) -> Self {
        Self {
            conn: locker.backend().pick(),
            locker,
            keys,
            token: OwnerToken::random(),
            ttl_ms,
            renew,
            wait,
            replicas: None,
            armed: false,
        }
    }

    async fn run(&mut self) -> Result<LockGuard, LockError> {
        let started = Instant::now();
        // A wait too long to represent is no deadline at all.
        let deadline = started.checked_add(self.wait);
        let config = &self.locker.inner.config;
        let mut backoff = Backoff::new(config.backoff_min, config.backoff_max);
        let mut subscription: Option<Subscription> = None;
        let mut subscribed_once = false;
        let mut contended = false;
        loop {
            if let Some(subscription) = subscription.as_mut() {
                subscription.mark_seen();
            }
            let (sent_at, reply) = self.send().await?;
            let pttl = match reply {
                AcquireReply::Acquired { fence } => {
                    let ttl = Duration::from_millis(self.ttl_ms);
                    if validity_end(sent_at, ttl) > Instant::now() {
                        return Ok(self.granted(fence, sent_at, started, contended));
                    }
                    // The answer came back after the lease could have run
                    // out, so the lock may already be someone else's. Stay
                    // armed and ask again with the same token: the script
                    // refreshes the lease if it is still ours.
                    tracing::debug!(
                        "acquire answered after its lease could have expired; asking again"
                    );
                    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                        return Err(self.timeout(started));
                    }
                    continue;
                }
                AcquireReply::Busy { pttl } => pttl,
            };
            contended = true;
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(self.timeout(started));
            }
            if !subscribed_once {
                // Subscribe, then try again at once: a release between our
                // try and the subscription would otherwise go unheard.
                subscribed_once = true;
                let patience = now + config.response_timeout;
                let limit = deadline.map_or(patience, |deadline| deadline.min(patience));
                let listener = &self.locker.inner.releases;
                subscription =
                    tokio::time::timeout_at(limit.into(), listener.subscribe(self.keys.channel()))
                        .await
                        .ok();
                continue;
            }
            let owner_lease_end = pttl.map_or(Duration::MAX, |p| p + Duration::from_millis(1));
            let pause = backoff
                .next_pause()
                .min(owner_lease_end)
                .min(deadline.map_or(Duration::MAX, |deadline| deadline - now));
            let counters = self.locker.counters();
            match subscription.as_mut() {
                Some(subscription) => tokio::select! {
                    () = subscription.released() => Counters::bump(&counters.release_wakeups),
                    () = tokio::time::sleep(pause) => Counters::bump(&counters.timer_wakeups),
                },
                None => {
                    tokio::time::sleep(pause).await;
                    Counters::bump(&counters.timer_wakeups);
                }
            }
        }
    }

    /// Sends the acquire script once, and once more if the connection
    /// dropped under it: the script is idempotent for our token, so a retry
    /// after a lost reply finds the lock ours instead of busy.
    async fn send(&mut self) -> Result<(Instant, AcquireReply), LockError> {
        let backend = self.locker.backend();
        self.armed = true;
        let sent_at = Instant::now();
        let (conn, ttl_ms, replicas) = (self.conn, self.ttl_ms, self.replicas);
        let first = backend
            .acquire(conn, &self.keys, &self.token, ttl_ms, replicas)
            .await;
        let (sent_at, reply) = match first {
            Ok(reply) => (sent_at, reply),
            Err(LockError::Redis(err)) if worth_one_retry(&err) => {
                tracing::debug!(error = %err, "acquire hit a dropped connection; retrying once");
                let sent_at = Instant::now();
                let reply = backend
                    .acquire(conn, &self.keys, &self.token, ttl_ms, replicas)
                    .await
                    .inspect_err(|err| self.disarm_if_cleaned_up(err))?;
                (sent_at, reply)
            }
            Err(err) => {
                self.disarm_if_cleaned_up(&err);
                return Err(err);
            }
        };
        // A busy answer proves no earlier try of ours holds the lock.
        if matches!(reply, AcquireReply::Busy { .. }) {
            self.armed = false;
        }
        Ok((sent_at, reply))
    }

    /// Errors after which the backend already gave back whatever it took.
    fn disarm_if_cleaned_up(&mut self, err: &LockError) {
        if matches!(
            err,
            LockError::NotReplicated { .. } | LockError::QuorumNotReached { .. }
        ) {
            self.armed = false;
        }
    }

    fn timeout(&self, started: Instant) -> LockError {
        LockError::Timeout {
            key: self.keys.name().to_owned(),
            waited: started.elapsed(),
        }
    }

    fn granted(
        &mut self,
        fence: u64,
        sent_at: Instant,
        started: Instant,
        contended: bool,
    ) -> LockGuard {
        self.armed = false;
        let locker = self.locker;
        let counters = locker.counters();
        Counters::bump(&counters.acquired);
        if contended {
            Counters::bump(&counters.contended);
        }
        let lease = Arc::new(Lease::new(
            locker.inner.next_lease_id.fetch_add(1, Ordering::Relaxed),
            self.keys.clone(),
            self.token.clone(),
            fence,
            Duration::from_millis(self.ttl_ms),
            self.conn,
            sent_at,
        ));
        locker.watchdog().watch(lease.clone(), self.renew, sent_at);
        tracing::debug!(
            key = self.keys.name(),
            fence,
            waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "lock acquired"
        );
        LockGuard::new(lease, locker.clone())
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Same connection as the acquire, so the release is queued after it
        // and cannot overtake it on the way to the server.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime left: the lease simply runs out
        };
        let backend = self.locker.backend().clone();
        let (conn, keys, token) = (self.conn, self.keys.clone(), self.token.clone());
        runtime.spawn(async move {
            if let Err(err) = backend.release(conn, &keys, &token).await {
                tracing::debug!(key = keys.name(), error = %err, "cleanup of an unfinished acquire failed; the lease will run out");
            }
        });
    }
}

/// A failed call worth repeating at once: the connection broke under it
/// (the manager is already reconnecting). Not a refused connection (the
/// server is down) and not a timeout (the bound is already spent).
fn worth_one_retry(err: &redis::RedisError) -> bool {
    (err.is_connection_dropped() || err.is_unrecoverable_error())
        && !err.is_connection_refusal()
        && !err.is_timeout()
}
