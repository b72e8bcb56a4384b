//! [`ReleaseFeed`]: where the release listener subscribes.

use std::sync::Arc;

use futures_util::future::BoxFuture;

/// Gives the server to subscribe on, asked again after every failure (so a
/// listener follows a failover, or moves to another Redlock master).
#[derive(Clone)]
pub(crate) struct ClientSource(
    Arc<dyn Fn() -> BoxFuture<'static, redis::RedisResult<redis::Client>> + Send + Sync>,
);

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
        Self(Arc::new(next))
    }

    /// The server to subscribe on now.
    pub(crate) async fn next(&self) -> redis::RedisResult<redis::Client> {
        (self.0)().await
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
