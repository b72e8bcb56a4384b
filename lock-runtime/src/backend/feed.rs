//! [`ReleaseFeed`]: where the release listener subscribes.

use std::sync::Arc;

use futures_util::future::BoxFuture;

/// Gives the server to subscribe on, asked again after every failure (so a
/// listener follows a failover, or moves to another Redlock master).
#[derive(Clone)]
pub(crate) struct ClientSource {
    next: Arc<dyn Fn() -> BoxFuture<'static, redis::RedisResult<redis::Client>> + Send + Sync>,
    /// Announces that the server to subscribe on changed (a failover the
    /// locker followed): a listener then leaves the old one at once,
    /// rather than when its connection fails, which a frozen or cut-off
    /// server may never make it do.
    moved: Option<tokio::sync::watch::Receiver<u64>>,
}

impl ClientSource {
    /// Always the same server.
    pub(crate) fn fixed(client: redis::Client) -> Self {
        Self::new(move || {
            let client = client.clone();
            Box::pin(async move { Ok(client) })
        })
    }

    /// Whatever `next` answers at each (re)connect.
    pub(crate) fn new(
        next: impl Fn() -> BoxFuture<'static, redis::RedisResult<redis::Client>> + Send + Sync + 'static,
    ) -> Self {
        Self {
            next: Arc::new(next),
            moved: None,
        }
    }

    /// The same, also left as soon as `moved` announces another server.
    #[cfg_attr(not(feature = "sentinel"), allow(dead_code))]
    pub(crate) fn following(mut self, moved: tokio::sync::watch::Receiver<u64>) -> Self {
        self.moved = Some(moved);
        self
    }

    /// The server to subscribe on now.
    pub(crate) async fn next(&self) -> redis::RedisResult<redis::Client> {
        (self.next)().await
    }

    /// Completes when the server to subscribe on changes after this call
    /// (never, for a source that does not follow moves).
    pub(crate) fn moved(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let moved = self.moved.clone().map(|mut moved| {
            // Only moves from now on count.
            moved.mark_unchanged();
            moved
        });
        async move {
            if let Some(mut moved) = moved
                && moved.changed().await.is_ok()
            {
                return;
            }
            std::future::pending().await
        }
    }
}

/// How release messages reach this process.
// Built once per locker and moved into its listener: size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(crate) enum ReleaseFeed {
    /// Plain `SUBSCRIBE` on one server (a release `PUBLISH`es there; on a
    /// replicated setup the message reaches replicas too).
    PubSub(ClientSource),
    /// Plain `SUBSCRIBE` on each of several independent servers at once
    /// (Redlock's masters). A release publishes on every master where it
    /// deletes a lock a waiter marked, and those deletes land at different
    /// moments: a master that still held the lock when the first message
    /// woke a waiter tells it again when its own delete lands, and a master
    /// the owner never held does not silence the others.
    EachOf(Vec<redis::Client>),
    /// Sharded pub/sub (`SSUBSCRIBE`) on the node that owns each channel's
    /// slot, followed across resharding.
    #[cfg(feature = "cluster")]
    Sharded(redis::cluster::ClusterClient),
    /// The in-memory store delivers each release itself.
    Memory(crate::memory::MemoryStore),
}
