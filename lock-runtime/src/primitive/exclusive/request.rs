//! [`LockRequest`]: `locker.lock(key).ttl(..).wait(..).acquire()`.

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::Exclusive;
use crate::config::{ReplicaAck, rules};
use crate::engine::attempt::{Attempt, Plan};
use crate::engine::core::Core;
use crate::engine::primitive::Primitive;
use crate::engine::release::Hold;
use crate::engine::stats::Counters;
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::metrics;
use crate::primitive::exclusive::guard::LockGuard;
use std::sync::Arc;

/// A lock request being built: `locker.lock(key).ttl(..).wait(..).acquire()`.
#[must_use = "a lock request does nothing until `acquire` or `try_acquire` is awaited"]
#[derive(Debug)]
pub struct LockRequest {
    core: Arc<Core>,
    key: String,
    ttl: Option<Duration>,
    wait: Option<Duration>,
    watchdog: bool,
    replicas: Option<ReplicaAck>,
    max_hold: Option<Duration>,
    template: &'static str,
}

impl LockRequest {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self {
            core,
            key,
            ttl: None,
            wait: None,
            watchdog: true,
            replicas: None,
            max_hold: None,
            template: metrics::NO_TEMPLATE,
        }
    }

    /// Lease length (default: the config's `default_ttl`). With the watchdog
    /// on, it bounds how long a crashed owner can block others; with it off,
    /// it is how long the lock lasts. At least 10 ms (see
    /// [`LockError::Config`]).
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

    /// The longest this lock may be held (default: no cap), counted from
    /// the acquire request. At the cap the watchdog stops renewing it and
    /// the holder is told, as for a loss ([`LockGuard::lost`] completes;
    /// an annotated body is cancelled and returns
    /// [`LockError::HoldCapExceeded`], or runs on under
    /// `on_lost = "continue"`, as after any loss): a stuck task cannot hold
    /// a lock forever. Zero is a [`LockError::Config`].
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// use std::time::Duration;
    /// let guard = locker.lock("nightly-report").max_hold(Duration::from_secs(300)).acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn max_hold(mut self, cap: Duration) -> Self {
        self.max_hold = Some(cap);
        self
    }

    /// A bounded name for this kind of lock, for metrics and traces
    /// (`orders`, `stock:<sku>`): the label that groups it with its kind,
    /// where the key itself (`stock:42`) would make one series per key.
    /// The attribute sets its key template; default `-`.
    pub fn template(mut self, template: &'static str) -> Self {
        self.template = template;
        self
    }

    /// Once acquired, wait until `replicas` replicas acknowledged the lock,
    /// for at most `timeout` (Redis `WAIT`); if fewer do, the lock is
    /// released and `acquire` fails with [`LockError::NotReplicated`].
    /// Overrides [`LockConfig::wait_for_replicas`](crate::LockConfig::wait_for_replicas)
    /// for this lock. One server or Sentinel only.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = Some(ReplicaAck { replicas, timeout });
        self
    }

    /// Takes the lock, waiting up to the request's `wait` while someone else
    /// holds it.
    ///
    /// Returns within the wait plus two bounded round trips (each at most
    /// `connect_timeout + response_timeout`), plus the replica timeout when
    /// waiting for replicas, whatever the servers do.
    ///
    /// Errors: [`LockError::Timeout`] when the wait ran out,
    /// [`LockError::Redis`] when the server failed or did not answer within
    /// that bound (a dropped or refused connection is retried once),
    /// [`LockError::Config`] for an empty key or a ttl out of range,
    /// [`LockError::QuorumNotReached`] when too few Redlock masters granted
    /// it for the whole wait (or a majority is down),
    /// [`LockError::NotReplicated`] when too few replicas confirmed it.
    /// Dropping the returned future part-way is safe: a lock it may have
    /// taken is released in the background, after the calls it sent.
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let counters = self.core.counters.clone();
        let result = self.run(None).await;
        if matches!(result, Err(LockError::Timeout { .. })) {
            Counters::bump(&counters.timeouts);
        }
        result
    }

    /// Tries once: `Ok(None)` when someone else holds the lock.
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, LockError> {
        match self.run(Some(Duration::ZERO)).await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The lease this request will ask for.
    pub(crate) fn resolved_ttl(&self) -> Duration {
        self.ttl.unwrap_or(self.core.config.default_ttl)
    }

    /// How long this request waits: its own wait, the config's default
    /// wait, or its ttl (the longest a crashed owner can block it).
    pub(crate) fn resolved_wait(&self) -> Duration {
        self.wait
            .or(self.core.config.default_wait)
            .unwrap_or_else(|| self.resolved_ttl())
    }

    async fn run(self, wait: Option<Duration>) -> Result<LockGuard, LockError> {
        let wait = wait.unwrap_or_else(|| self.resolved_wait());
        let span = tracing::debug_span!(
            "lock.acquire",
            key = %self.key,
            template = self.template,
            outcome = tracing::field::Empty,
            fence = tracing::field::Empty,
            waited_ms = tracing::field::Empty,
        );
        let started = self.core.clock().now();
        let result = self.attempt(wait, &span).await;
        let waited = self.core.clock().now().saturating_duration_since(started);
        let outcome = match &result {
            Ok(guard) => {
                span.record("fence", guard.fence());
                "acquired"
            }
            Err(LockError::Timeout { .. }) if wait.is_zero() => "busy",
            Err(LockError::Timeout { .. }) => "timeout",
            Err(_) => "error",
        };
        span.record("outcome", outcome);
        span.record(
            "waited_ms",
            u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        );
        let labels = metrics::Labels {
            template: self.template,
            primitive: Exclusive::NAME,
        };
        metrics::acquisition(labels, outcome, waited);
        result
    }

    /// Checks the request, then runs the attempt (in `span`).
    async fn attempt(&self, wait: Duration, span: &tracing::Span) -> Result<LockGuard, LockError> {
        self.core.host.check_runtime()?;
        let config = &self.core.config;
        let ttl = self.resolved_ttl();
        // The message is written only if it is needed (this runs on every call).
        rules::check_ttl(ttl, format_args!("the ttl of lock `{}`", self.key))?;
        let keys = LockKeys::new(&config.key_prefix, &self.key)?;
        if let Some(ack) = self.replicas {
            config.topology.check_replicas(ack)?;
        }
        if let Some(cap) = self.max_hold {
            rules::check_max_hold(cap, format_args!("the max_hold of lock `{}`", self.key))?;
        }
        let plan = Plan {
            ttl: Duration::from_millis(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            wait,
            renews: self.watchdog,
            replicas: self.replicas.or(config.replicas),
            max_hold: self.max_hold,
            template: self.template,
        };
        let attempt = Attempt::new(&self.core, plan, Exclusive::new(keys));
        // Boxed as `dyn Future + Send`: the future's type is deep (every
        // topology's calls), and proving it `Send` in the application's
        // crate would exceed the compiler's default recursion limit there.
        let running: BoxFuture<'_, Result<Hold<Exclusive>, LockError>> =
            Box::pin(tracing::Instrument::instrument(
                self.core.host.enter(attempt.run(span.clone())),
                span.clone(),
            ));
        running.await.map(LockGuard::new)
    }
}
