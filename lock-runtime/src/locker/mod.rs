//! [`Locker`]: the handle through which locks are taken.

pub(crate) mod global;
pub(crate) mod source;

use std::sync::{Arc, LazyLock};

use crate::backend::permissions::Needs;
use crate::backend::script::LuaScript;
use crate::backend::{Backend, Route};
use crate::config::{LockConfig, Topology};
use crate::engine::core::Core;
use crate::engine::retry::retried_once;
use crate::engine::stats::{Counters, LockerStats};
use crate::engine::wait::{ReleaseListener, Timeouts};
use crate::error::LockError;
use crate::host::Host;
use crate::host::background;
use crate::keys::LockKeys;
use crate::owner::LineId;
use crate::primitive::exclusive;
use crate::primitive::exclusive::inspect::LockInfo;
use crate::primitive::exclusive::request::LockRequest;
use crate::primitive::fair::request::FairLockRequest;
use crate::primitive::multi::request::MultiLockRequest;
use crate::primitive::read_write::request::{ReadLockRequest, WriteLockRequest};
use crate::primitive::semaphore::request::SemaphoreRequest;

use crate::engine::watchdog::{Watchdog, Watching};

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

/// Every script the locks run (the primitives' and the engine's renewals),
/// for loading on a fresh Redlock master.
fn scripts() -> &'static [&'static LuaScript] {
    static ALL: LazyLock<Vec<&'static LuaScript>> = LazyLock::new(|| {
        let mut all = exclusive::scripts::all().to_vec();
        all.extend(crate::engine::renewal::scripts());
        all
    });
    &ALL
}

/// Whether the server's user may run everything this locker's locks will
/// (see [`crate::backend::permissions`]).
async fn check_permissions(config: &LockConfig, backend: &Backend) -> Result<(), LockError> {
    let keys = LockKeys::new(&config.key_prefix, "lock-runtime:acl-check")?;
    let redlock = matches!(backend, Backend::Redlock(_));
    let mut commands = exclusive::commands(redlock);
    commands.extend(backend.pubsub_commands());
    if config.replicas.is_some() {
        commands.push("WAIT");
    }
    let mut on_keys = vec![keys.lock().to_owned()];
    if redlock {
        on_keys.extend([keys.counter().to_owned(), keys.up_mark().to_owned()]);
    }
    let needs = Needs {
        commands,
        keys: on_keys,
        channel: keys.channel().to_owned(),
    };
    let server = config.topology.addresses().join(",");
    backend
        .check_permissions(&needs, &server, config.response_timeout)
        .await
}

impl Locker {
    /// Validates `config` and opens its connections.
    ///
    /// Fails with [`LockError::Config`] for a bad setting, or when the
    /// server's user may not run a command the locks need (the error
    /// names it; see the README's "Least privilege"), and
    /// [`LockError::Redis`] when the server cannot be reached within the
    /// connect timeout. Works from any async context: the connections and
    /// the background tasks live on the library's own runtime (for the
    /// in-memory store, on the runtime of each call).
    pub async fn connect(config: LockConfig) -> Result<Self, LockError> {
        config.validate()?;
        crate::metrics::describe();
        let host = match config.topology {
            Topology::Memory(_) => Host::Caller,
            _ => Host::Background(background::handle()?),
        };
        let background = match &host {
            Host::Background(handle) => Some(handle.clone()),
            Host::Caller => None,
        };
        let line = LineId::random();
        let connecting = async {
            let backend = Backend::connect(&config, scripts()).await?;
            check_permissions(&config, &backend).await?;
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
                line,
                host.clock(),
            );
            Ok::<_, LockError>((backend, counters, watchdog, releases))
        };
        // Boxed: see `LockRequest::acquire`.
        let connecting: futures_util::future::BoxFuture<'_, _> = Box::pin(host.enter(connecting));
        let (backend, counters, watchdog, releases) = connecting.await?;
        Ok(Self {
            core: Arc::new(Core::new(
                config, backend, host, watchdog, releases, counters, line,
            )),
        })
    }

    /// Starts a request for the lock named `key` (for example `stock:42`);
    /// set its options, then call [`LockRequest::acquire`] or
    /// [`LockRequest::try_acquire`].
    pub fn lock(&self, key: impl Into<String>) -> LockRequest {
        LockRequest::new(self.core.clone(), key.into())
    }

    /// Starts a request for several keys at once (any iterable of key
    /// names), taken all or none, each as [`Locker::lock`] takes it: a
    /// multi-key hold of `a` and `b` excludes `lock("a")` and `lock("b")`,
    /// and the other way round. Callers that name the same keys in
    /// different orders never deadlock: every caller takes them in one
    /// global order. A key named twice is one key; an empty list is a
    /// [`LockError::Config`]. On every topology, Redlock included (a
    /// majority of masters holds every key).
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// let guard = locker.lock_all(["acct:1", "acct:2"]).acquire().await?;
    /// // ... move money between the two accounts ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<K: Into<String>>(&self, keys: impl IntoIterator<Item = K>) -> MultiLockRequest {
        MultiLockRequest::new(
            self.core.clone(),
            keys.into_iter().map(Into::into).collect(),
        )
    }

    /// Starts a request for the fair lock named `key`: one owner at a
    /// time, granted in the order the server first saw its waiters, and
    /// handed to the next waiter inside the release. Another lock than
    /// [`Locker::lock`]'s of the same name. Not on Redlock (each master
    /// would keep a line of its own): there `acquire` answers
    /// [`LockError::Config`].
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// let guard = locker.fair_lock("jobs:nightly").acquire().await?;
    /// // ... the waiters behind it go in the order they came ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, key: impl Into<String>) -> FairLockRequest {
        FairLockRequest::new(self.core.clone(), key.into())
    }

    /// Starts a request for a read of the read/write lock named `key`:
    /// readers hold it together, each with a lease of its own, while no
    /// writer does. Another lock than [`Locker::lock`]'s of the same name.
    /// Not on Redlock: there `acquire` answers [`LockError::Config`].
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// let read = locker.read_lock("catalog").acquire().await?;
    /// // ... read, beside other readers ...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self, key: impl Into<String>) -> ReadLockRequest {
        ReadLockRequest::new(self.core.clone(), key.into())
    }

    /// Starts a request for the write of the read/write lock named `key`:
    /// one writer, and no reader, at a time; a waiting writer goes before
    /// readers that come after it. See [`Locker::read_lock`].
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// let write = locker.write_lock("catalog").acquire().await?;
    /// // ... change it, alone ...
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self, key: impl Into<String>) -> WriteLockRequest {
        WriteLockRequest::new(self.core.clone(), key.into())
    }

    /// Starts a request for permits of the semaphore named `key`, which
    /// lets at most `limit` permits be held at once across every process
    /// (one per request unless [`SemaphoreRequest::permits`] says more).
    /// Each acquisition is a lease the watchdog renews; a holder that dies
    /// gives its permits back when its lease ends. No set-up step: the
    /// first request makes the semaphore, and every caller of one
    /// semaphore must name the same limit (another limit while permits are
    /// held is a [`LockError::Config`]). Not on Redlock.
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// // At most four renders per tenant, whichever instance runs them.
    /// let permit = locker.semaphore("render:acme", 4).acquire().await?;
    /// // ... render ...
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, key: impl Into<String>, limit: u32) -> SemaphoreRequest {
        SemaphoreRequest::new(self.core.clone(), key.into(), limit)
    }

    /// What the servers know of lock `key` now (as a majority of masters
    /// knows it, on Redlock): whether it is held, by whom
    /// ([`LockConfig::holder_label`](crate::LockConfig::holder_label)),
    /// whether someone waits for it, and for how long yet. Costs the locks nothing: it
    /// reads what every acquisition writes anyway. Returns within two
    /// bounded round trips. On Redlock it fails, rather than call the lock
    /// free, when the masters that did not answer could make a majority
    /// for a holder.
    ///
    /// ```no_run
    /// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
    /// let info = locker.inspect("stock:42").await?;
    /// println!("{info:?}");
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self, key: impl Into<String>) -> Result<LockInfo, LockError> {
        let keys = LockKeys::new(&self.core.config.key_prefix, &key.into())?;
        let (core, route) = (&self.core, Route::pooled(self.core.backend.pick()));
        let inspecting = || exclusive::inspect(&core.backend, route, &keys);
        self.bounded("inspect", retried_once("inspect", inspecting))
            .await
    }

    /// Deletes lock `key` whoever holds it and wakes its waiters; true when
    /// it was held. For operators: a lock stuck behind a holder that
    /// cannot be stopped otherwise.
    ///
    /// **Dangerous**: the holder is not stopped, only told. It learns the
    /// lock is gone at its next renewal (within a third of its ttl; with a
    /// fixed lease, not before the lease's end), and its body is cancelled
    /// then under `on_lost = "cancel"`; until then it and the next owner
    /// both run. Only fences keep the guarded resource safe meanwhile. Every
    /// call is logged at `warn`. Like a release, it is made once more when
    /// its connection dropped; `false` after such a retry may mean the
    /// first call deleted it.
    pub async fn force_unlock(&self, key: impl Into<String>) -> Result<bool, LockError> {
        let keys = LockKeys::new(&self.core.config.key_prefix, &key.into())?;
        let (core, route) = (&self.core, Route::pooled(self.core.backend.pick()));
        let deleted = self
            .bounded(
                "force_unlock",
                retried_once("force_unlock", || {
                    exclusive::force_release(&core.backend, route, &keys)
                }),
            )
            .await?;
        tracing::warn!(
            key = keys.name(),
            was_held = deleted,
            "lock force-unlocked; its holder is told at its next renewal"
        );
        Ok(deleted)
    }

    /// Runs an operator's `call` on this locker's host, within two bounded
    /// round trips.
    async fn bounded<T: Send>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, LockError>> + Send,
    ) -> Result<T, LockError> {
        self.core.host.check_runtime()?;
        let bound = self.core.config.two_calls_bound();
        let bounded = async move {
            match tokio::time::timeout(bound, call).await {
                Ok(result) => result,
                Err(_) => Err(LockError::redis_timeout(what, bound)),
            }
        };
        // Boxed: see `LockRequest::acquire`.
        let bounded: futures_util::future::BoxFuture<'_, _> =
            Box::pin(self.core.host.enter(bounded));
        bounded.await
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
