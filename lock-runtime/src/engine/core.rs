//! [`Core`]: what a [`Locker`](crate::Locker) is made of (its connections,
//! watchdog, release listener and counters), shared by the locker, its
//! requests, their attempts and the guards they hand out. Those all point
//! down here rather than back up at the `Locker`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::Backend;
use crate::config::LockConfig;
use crate::engine::stats::Counters;
use crate::engine::wait::{ReleaseListener, Turns};
use crate::engine::watchdog::Watching;
use crate::host::Host;
use crate::host::clock::Clock;
use crate::owner::LineId;

/// One locker's parts.
pub(crate) struct Core {
    pub(crate) config: LockConfig,
    pub(crate) backend: Backend,
    /// Where the connections, the timers and the background tasks run.
    pub(crate) host: Host,
    pub(crate) watchdog: Watching,
    pub(crate) releases: ReleaseListener,
    /// Per key, the line of this locker's tasks waiting for it.
    pub(crate) turns: std::sync::Arc<Turns>,
    pub(crate) counters: std::sync::Arc<Counters>,
    /// Who this locker is to whoever inspects its locks (the public part of
    /// every owner token it makes).
    pub(crate) holder: String,
    /// Who this locker's lines of tasks are to the lock scripts (see
    /// [`crate::engine::handover`]).
    pub(crate) line: LineId,
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
        host: Host,
        watchdog: Watching,
        releases: ReleaseListener,
        counters: std::sync::Arc<Counters>,
        line: LineId,
    ) -> Self {
        Self {
            holder: config.holder(),
            line,
            config,
            backend,
            host,
            watchdog,
            releases,
            turns: std::sync::Arc::default(),
            counters,
            next_lease_id: AtomicU64::new(1),
        }
    }

    /// The clock this locker's leases are measured on.
    pub(crate) fn clock(&self) -> Clock {
        self.host.clock()
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
