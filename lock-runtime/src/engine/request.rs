//! What every primitive's request shares: the options a caller sets (ttl,
//! wait, watchdog, hold cap, replicas, template), their defaults from the
//! configuration, the checks, and the acquisition itself: one span, one
//! metric, the timeout counted, the attempt run within its bound. A
//! primitive's request (`locker.lock(key)`, and the family's) holds an
//! [`Asked`] and puts its own builder and guard in front of it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use crate::config::{ReplicaAck, rules};
use crate::engine::attempt::{Attempt, Plan};
use crate::engine::core::Core;
use crate::engine::primitive::Primitive;
use crate::engine::release::Hold;
use crate::engine::stats::Counters;
use crate::engine::traced::in_span;
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::metrics;

/// A request's options as the caller set them (None: the default).
#[derive(Debug)]
pub(crate) struct Asked {
    pub(crate) core: Arc<Core>,
    /// The resource's name as the caller gave it.
    pub(crate) key: String,
    pub(crate) ttl: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) watchdog: bool,
    pub(crate) replicas: Option<ReplicaAck>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) template: &'static str,
}

impl Asked {
    /// A request for the resource `key`, with every default.
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

    /// Takes the resource `primitive` makes of its keys, waiting up to the
    /// request's wait; a wait that ran out is counted.
    pub(crate) async fn acquire<P: Primitive>(
        self,
        primitive: impl FnOnce(LockKeys) -> Result<P, LockError>,
    ) -> Result<Hold<P>, LockError> {
        let counters = self.core.counters.clone();
        let result = self.run(None, primitive).await;
        if matches!(result, Err(LockError::Timeout { .. })) {
            Counters::bump(&counters.timeouts);
        }
        result
    }

    /// Tries once: `Ok(None)` when it is busy.
    pub(crate) async fn try_acquire<P: Primitive>(
        self,
        primitive: impl FnOnce(LockKeys) -> Result<P, LockError>,
    ) -> Result<Option<Hold<P>>, LockError> {
        match self.run(Some(Duration::ZERO), primitive).await {
            Ok(hold) => Ok(Some(hold)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn run<P: Primitive>(
        self,
        wait: Option<Duration>,
        primitive: impl FnOnce(LockKeys) -> Result<P, LockError>,
    ) -> Result<Hold<P>, LockError> {
        let wait = wait.unwrap_or_else(|| self.resolved_wait());
        let span = tracing::debug_span!(
            "lock.acquire",
            key = %self.key,
            template = self.template,
            primitive = P::NAME,
            outcome = tracing::field::Empty,
            fence = tracing::field::Empty,
            waited_ms = tracing::field::Empty,
        );
        let started = self.core.clock().now();
        let result = self.attempt(wait, &span, primitive, started).await;
        let waited = self.core.clock().now().saturating_duration_since(started);
        let outcome = match &result {
            Ok(hold) => {
                span.record("fence", hold.handle().fence());
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
            primitive: P::NAME,
        };
        metrics::acquisition(labels, outcome, waited);
        result
    }

    /// Checks the request, then runs the attempt (in `span`), timed from
    /// `started`.
    async fn attempt<P: Primitive>(
        &self,
        wait: Duration,
        span: &tracing::Span,
        primitive: impl FnOnce(LockKeys) -> Result<P, LockError>,
        started: Instant,
    ) -> Result<Hold<P>, LockError> {
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
        let attempt = Attempt::new(&self.core, plan, primitive(keys)?, started);
        // Boxed as `dyn Future + Send`: the future's type is deep (every
        // topology's calls), and proving it `Send` in the application's
        // crate would exceed the compiler's default recursion limit there.
        // Boxed before it is wrapped: each wrapper would copy it whole.
        let running: BoxFuture<'_, Result<Hold<P>, LockError>> =
            Box::pin(attempt.run(span.clone()));
        in_span(span, self.core.host.enter(running)).await
    }
}

/// The builder methods every request shares (`ttl`, `wait`, `watchdog`,
/// `max_hold`, `template`, `wait_for_replicas`), for a request type
/// `$request` holding an [`Asked`] in its field `asked`; `$make` is the
/// call that makes one in the examples (`lock("nightly-report")`).
macro_rules! request_options {
    ($request:ident, $make:literal) => {
        impl $request {
            /// Lease length (default: the config's `default_ttl`). With the
            /// watchdog on, it bounds how long a crashed owner can block
            /// others; with it off, it is how long the hold lasts. At least
            /// 10 ms (see [`LockError::Config`](crate::LockError::Config)).
            pub fn ttl(mut self, ttl: std::time::Duration) -> Self {
                self.asked.ttl = Some(ttl);
                self
            }

            /// Longest time `acquire` waits while it is busy (default: the
            /// config's `default_wait` if set, else this request's ttl).
            /// Zero tries once.
            pub fn wait(mut self, wait: std::time::Duration) -> Self {
                self.asked.wait = Some(wait);
                self
            }

            /// Renew the lease while the guard lives (default `true`). With
            /// `false` the lease is fixed: the hold ends after its ttl, and
            /// the guard reports it lost at that moment.
            pub fn watchdog(mut self, renew: bool) -> Self {
                self.asked.watchdog = renew;
                self
            }

            /// The longest this hold may last (default: no cap), counted
            /// from the acquire request. At the cap the watchdog stops
            /// renewing it and the holder is told, as for a loss (the
            /// guard's `lost()` completes; an annotated body is cancelled
            /// and returns
            /// [`LockError::HoldCapExceeded`](crate::LockError::HoldCapExceeded),
            /// or runs on under `on_lost = "continue"`): a stuck task
            /// cannot hold it forever. Zero is a
            /// [`LockError::Config`](crate::LockError::Config).
            ///
            /// ```no_run
            /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
            /// use std::time::Duration;
            #[doc = concat!("let guard = locker.", $make)]
            ///     .max_hold(Duration::from_secs(300))
            ///     .acquire()
            ///     .await?;
            /// # Ok(()) }
            /// ```
            pub fn max_hold(mut self, cap: std::time::Duration) -> Self {
                self.asked.max_hold = Some(cap);
                self
            }

            /// A bounded name for this kind of lock, for metrics and traces
            /// (`orders`, `stock:<sku>`): the label that groups it with its
            /// kind, where the key itself (`stock:42`) would make one series
            /// per key. The attribute sets its key template; default `-`.
            pub fn template(mut self, template: &'static str) -> Self {
                self.asked.template = template;
                self
            }

            /// Once acquired, wait until `replicas` replicas acknowledged
            /// the hold, for at most `timeout` (Redis `WAIT`); if fewer do,
            /// it is released and `acquire` fails with
            /// [`LockError::NotReplicated`](crate::LockError::NotReplicated).
            /// Overrides
            /// [`LockConfig::wait_for_replicas`](crate::LockConfig::wait_for_replicas)
            /// for this request. One server or Sentinel only.
            pub fn wait_for_replicas(
                mut self,
                replicas: u32,
                timeout: std::time::Duration,
            ) -> Self {
                self.asked.replicas = Some(crate::config::ReplicaAck { replicas, timeout });
                self
            }
        }
    };
}

pub(crate) use request_options;
