//! A cluster connection opened again, from the seeds, after a call on it
//! timed out.
//!
//! The redis crate asks the cluster for its slot map again when a node
//! answers with a redirect or a node connection drops, but not when a node
//! stops answering: after a frozen primary was replaced by its replica,
//! every call for its slots would keep going to the frozen node and time
//! out, for as long as it stays frozen. A fresh connection discovers the
//! slot map from the seeds, as at start-up, and reaches the new primary.
//! It is opened in the background (one at a time per connection, within a
//! bound) while the old one goes on serving, and swapped in once it is up.
//!
//! A clean-up goes out on its call's route, which after a swap names the
//! fresh connection; it still cannot overtake a call of the old one that it
//! undoes: that call's bytes were in the node's socket before the fresh
//! connection was even opened, and a node reads a connection's requests
//! only after those of sockets that were ready before it accepted it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

use crate::error::LockError;

/// One pooled connection, replaced after a timeout.
pub(super) struct Renewable {
    current: RwLock<ClusterConnection>,
    /// A replacement is being opened.
    renewing: AtomicBool,
}

impl Renewable {
    pub(super) fn new(connection: ClusterConnection) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(connection),
            renewing: AtomicBool::new(false),
        })
    }

    /// The connection in use now.
    pub(super) fn connection(&self) -> ClusterConnection {
        // A poisoned slot still holds a whole connection: use it.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Opens replacements.
pub(super) struct Renewals {
    client: ClusterClient,
    /// Longest a replacement may take to open.
    bound: Duration,
}

impl Renewals {
    pub(super) fn new(client: ClusterClient, bound: Duration) -> Self {
        Self { client, bound }
    }

    /// After a call on `slot` answered `answer`: when it timed out, opens a
    /// replacement in the background, unless one is being opened already.
    pub(super) fn after<T>(&self, slot: &Arc<Renewable>, answer: &Result<T, LockError>) {
        let timed_out = matches!(answer, Err(LockError::Redis(err)) if err.is_timeout());
        if !timed_out || slot.renewing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            slot.renewing.store(false, Ordering::Release);
            return;
        };
        let (slot, client, bound) = (slot.clone(), self.client.clone(), self.bound);
        runtime.spawn(async move {
            match tokio::time::timeout(bound, client.get_async_connection()).await {
                Ok(Ok(fresh)) => {
                    *slot.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
                    tracing::debug!("a cluster connection was opened again after a timeout");
                }
                Ok(Err(err)) => {
                    tracing::debug!(%err, "opening a cluster connection again failed");
                }
                Err(_) => tracing::debug!("opening a cluster connection again timed out"),
            }
            slot.renewing.store(false, Ordering::Release);
        });
    }
}
