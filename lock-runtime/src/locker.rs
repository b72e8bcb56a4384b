//! [`Locker`]: the handle through which locks are taken.

use std::sync::Arc;

use crate::backend::Backend;
use crate::background;
use crate::config::{LockConfig, Topology};
use crate::core::Core;
use crate::error::LockError;
use crate::host::Host;
use crate::primitive::exclusive::scripts;
use crate::request::LockRequest;
use crate::stats::{Counters, LockerStats};
use crate::wait::{ReleaseListener, Timeouts};

use crate::watchdog::{Watchdog, Watching};

/// A connection to the lock service: a small pool of Redis connections, one
/// watchdog task that renews every lock it handed out, and one pub/sub
/// listener that wakes waiters when a lock is released.
///
/// Cheap to clone (an `Arc`); build one per process with
/// [`Locker::connect`], or let [`crate::init`] keep the process-wide one.
/// Its connections and background tasks live on the library's own small
/// runtime, so a locker can be used from any tokio runtime (several
/// `#[tokio::test]`s in turn, say), and keeps renewing while the
/// application's runtime is busy. A locker on the in-memory store
/// ([`LockConfig::in_memory`]) runs on the caller's runtime and its clock
/// instead (see [`crate::memory`]).
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
    core: Arc<Core>,
}

impl std::fmt::Debug for Locker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.fmt(f)
    }
}

impl Locker {
    /// Validates `config` and opens its connections.
    ///
    /// Fails with [`LockError::Config`] for a bad setting and
    /// [`LockError::Redis`] when the server cannot be reached within the
    /// connect timeout. Works from any async context: the connections and
    /// the background tasks live on the library's own runtime (for the
    /// in-memory store, on the runtime of each call).
    pub async fn connect(config: LockConfig) -> Result<Self, LockError> {
        config.validate()?;
        let host = match config.topology {
            Topology::Memory(_) => Host::Caller,
            _ => Host::Background(background::handle()?),
        };
        let background = match &host {
            Host::Background(handle) => Some(handle.clone()),
            Host::Caller => None,
        };
        let connecting = async {
            let backend = Backend::connect(&config, scripts::all()).await?;
            let counters = Arc::new(Counters::default());
            let watchdog = match &background {
                Some(on) => Watching::One(Watchdog::start(
                    on,
                    backend.clone(),
                    counters.clone(),
                    host.clock(),
                )),
                None => Watching::PerLease {
                    backend: backend.clone(),
                    counters: counters.clone(),
                },
            };
            let releases = ReleaseListener::start(
                background.as_ref(),
                backend.release_feed(),
                Timeouts {
                    connect: config.connect_timeout,
                    response: config.response_timeout,
                },
            );
            Ok::<_, LockError>((backend, counters, watchdog, releases))
        };
        // Boxed: see `LockRequest::acquire`.
        let connecting: futures_util::future::BoxFuture<'_, _> = Box::pin(host.enter(connecting));
        let (backend, counters, watchdog, releases) = connecting.await?;
        Ok(Self {
            core: Arc::new(Core::new(
                config, backend, host, watchdog, releases, counters,
            )),
        })
    }

    /// Starts a request for the lock named `key` (for example `stock:42`);
    /// set its options, then call [`LockRequest::acquire`] or
    /// [`LockRequest::try_acquire`].
    pub fn lock(&self, key: impl Into<String>) -> LockRequest {
        LockRequest::new(self.core.clone(), key.into())
    }

    /// The configuration this locker was built with.
    pub fn config(&self) -> &LockConfig {
        &self.core.config
    }

    /// Counters of what this locker has done so far.
    pub fn stats(&self) -> LockerStats {
        self.core.counters.snapshot()
    }

    /// The parts requests and guards share.
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }
}
