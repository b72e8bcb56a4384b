//! [`Core`]: what a [`Locker`](crate::Locker) is made of (its connections,
//! watchdog, release listener and counters), shared by the locker, its
//! requests, their attempts and the guards they hand out. Those all point
//! down here rather than back up at the `Locker`.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::runtime::Handle;

use crate::backend::Backend;
use crate::config::LockConfig;
use crate::stats::Counters;
use crate::wait::ReleaseListener;
use crate::watchdog::Watchdog;

/// One locker's parts.
pub(crate) struct Core {
    pub(crate) config: LockConfig,
    pub(crate) backend: Backend,
    /// The runtime that hosts the connections and the background tasks.
    pub(crate) background: Handle,
    pub(crate) watchdog: Watchdog,
    pub(crate) releases: ReleaseListener,
    pub(crate) counters: std::sync::Arc<Counters>,
    next_lease_id: AtomicU64,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn new(
        config: LockConfig,
        backend: Backend,
        background: Handle,
        watchdog: Watchdog,
        releases: ReleaseListener,
        counters: std::sync::Arc<Counters>,
    ) -> Self {
        Self {
            config,
            backend,
            background,
            watchdog,
            releases,
            counters,
            next_lease_id: AtomicU64::new(1),
        }
    }

    /// Tells lockers apart, for per-task reentrancy.
    pub(crate) fn identity(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// A fresh lease id.
    pub(crate) fn next_lease_id(&self) -> u64 {
        self.next_lease_id.fetch_add(1, Ordering::Relaxed)
    }
}
