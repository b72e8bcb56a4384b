//! One Redlock master: its connections once they exist, and a background
//! reconnect while they do not.
//!
//! A [`ConnectionManager`](redis::aio::ConnectionManager) reconnects by
//! itself, but only once its first connect succeeded: built against a dead
//! server it is never built at all. A locker must start while a minority
//! of masters is down, so each master is a slot that is either connected
//! or being (re)tried in the background; lock traffic never waits for it.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::backend::script::LuaScript;
use crate::backend::single::SingleBackend;
use crate::config::LockConfig;
use crate::error::LockError;

/// Least time between two connect attempts to a master that is down.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// One master's slot.
pub(super) struct Master {
    info: redis::ConnectionInfo,
    /// For the release listener, which opens its own connection.
    client: redis::Client,
    config: LockConfig,
    /// Loaded on the master at each first connect.
    scripts: &'static [&'static LuaScript],
    /// Set once, at the first successful connect; its managers then
    /// reconnect on their own. Read without a lock: every call of every
    /// round asks for it.
    backend: OnceLock<Arc<SingleBackend>>,
    state: Mutex<Slot>,
}

/// Where a master's connect attempts stand, until one succeeded.
#[derive(Default)]
struct Slot {
    /// A background attempt is running.
    connecting: bool,
    last_failure: Option<Instant>,
}

impl Master {
    /// A slot for the master at `info`, not connected yet.
    pub(super) fn new(
        info: redis::ConnectionInfo,
        config: &LockConfig,
        scripts: &'static [&'static LuaScript],
    ) -> Result<Self, LockError> {
        Ok(Self {
            client: crate::backend::tls::client(info.clone(), &config.tls)?,
            info,
            config: config.clone(),
            scripts,
            backend: OnceLock::new(),
            state: Mutex::new(Slot::default()),
        })
    }

    /// `host:port`, for messages.
    pub(super) fn addr(&self) -> String {
        self.info.addr().to_string()
    }

    /// A client for this master (no connection is opened).
    pub(super) fn client(&self) -> redis::Client {
        self.client.clone()
    }

    /// Connects now, within the connect timeout (start-up).
    pub(super) async fn connect(&self) -> Result<(), LockError> {
        let result = match SingleBackend::connect(self.info.clone(), &self.config).await {
            Ok(backend) => backend
                .check_login(self.config.response_timeout)
                .await
                .map(|()| backend.bounded_by_rounds()),
            Err(err) => Err(err),
        };
        if let Ok(backend) = &result {
            // The first rounds on a fresh master then take one round trip
            // and not two (`NOSCRIPT`, then the script in full): a round's
            // calls are bounded by a tenth of the lease. Best effort.
            backend
                .preload(self.scripts, self.config.response_timeout)
                .await;
        }
        match result {
            Ok(backend) => {
                // A second connect that raced this one drops its own.
                let _ = self.backend.set(Arc::new(backend));
                Ok(())
            }
            Err(err) => {
                self.slot().last_failure = Some(Instant::now());
                Err(err)
            }
        }
    }

    /// The connections, if this master was ever reached. When it was not,
    /// starts a background attempt (at most one at a time, at most one per
    /// [`RETRY_PAUSE`]) and answers `None` at once.
    pub(super) fn backend(self: &Arc<Self>) -> Option<Arc<SingleBackend>> {
        if let Some(backend) = self.backend.get() {
            return Some(backend.clone());
        }
        let mut slot = self.slot();
        let rested = slot
            .last_failure
            .is_none_or(|failed| failed.elapsed() >= RETRY_PAUSE);
        if !slot.connecting
            && rested
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            slot.connecting = true;
            let master = self.clone();
            runtime.spawn(async move {
                let result = master.connect().await;
                master.slot().connecting = false;
                match result {
                    Ok(()) => tracing::info!(master = %master.addr(), "Redlock master reached"),
                    Err(err) => {
                        tracing::debug!(master = %master.addr(), error = %err, "Redlock master still unreachable");
                    }
                }
            });
        }
        None
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        // The slot stays consistent even if a holder panicked mid-update.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
