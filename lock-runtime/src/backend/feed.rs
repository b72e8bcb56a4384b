//! [`ReleaseFeed`]: where the release listener subscribes.

use std::sync::Arc;

use futures_util::future::BoxFuture;

/// Gives the server to subscribe on, asked again after every failure (so a
/// listener follows a failover, or moves to another Redlock master), with
/// the generation of that server: how many moves the source had followed
/// when it named it.
#[derive(Clone)]
pub(crate) struct ClientSource {
    next: Arc<dyn Fn() -> BoxFuture<'static, redis::RedisResult<Named>> + Send + Sync>,
    /// Announces each move to another server (a failover the locker
    /// followed), by generation: a listener then leaves a server the
    /// source no longer names at once, rather than when its connection
    /// fails, which a frozen or cut-off server may never make it do.
    moved: Option<tokio::sync::watch::Receiver<u64>>,
}

/// A server to subscribe on, and its generation (see [`ClientSource`]).
pub(crate) struct Named {
    pub(crate) client: redis::Client,
    pub(crate) generation: u64,
}

impl ClientSource {
    /// Always the same server.
    pub(crate) fn fixed(client: redis::Client) -> Self {
        Self::new(move || {
            let client = client.clone();
            Box::pin(async move {
                Ok(Named {
                    client,
                    generation: 0,
                })
            })
        })
    }

    /// Whatever `next` answers at each (re)connect.
    pub(crate) fn new(
        next: impl Fn() -> BoxFuture<'static, redis::RedisResult<Named>> + Send + Sync + 'static,
    ) -> Self {
        Self {
            next: Arc::new(next),
            moved: None,
        }
    }

    /// The same, also left as soon as `moved` announces a generation past
    /// the server's.
    #[cfg_attr(not(feature = "sentinel"), allow(dead_code))]
    pub(crate) fn following(mut self, moved: tokio::sync::watch::Receiver<u64>) -> Self {
        self.moved = Some(moved);
        self
    }

    /// The server to subscribe on now.
    pub(crate) async fn next(&self) -> redis::RedisResult<Named> {
        (self.next)().await
    }

    /// Completes once the source has moved past the server of
    /// `generation` (never, for a source that does not follow moves). A
    /// move the lookup itself made, to that very server, does not count.
    pub(crate) fn moved_past(
        &self,
        generation: u64,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let moved = self.moved.clone();
        async move {
            if let Some(mut moved) = moved
                && moved.wait_for(|now| *now > generation).await.is_ok()
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn source(moves: &tokio::sync::watch::Sender<u64>) -> ClientSource {
        let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
        ClientSource::fixed(client).following(moves.subscribe())
    }

    #[tokio::test]
    async fn only_a_move_past_the_servers_generation_counts() {
        let moves = tokio::sync::watch::Sender::new(0_u64);
        let source = source(&moves);
        // The lookup that named generation 1 made that move itself.
        moves.send_replace(1);
        let mut past_one = Box::pin(source.moved_past(1));
        assert!((&mut past_one).now_or_never().is_none());
        // A server named before a move is left at once.
        assert!(source.moved_past(0).now_or_never().is_some());
        moves.send_replace(2);
        assert!(past_one.now_or_never().is_some());
    }

    #[tokio::test]
    async fn a_source_that_follows_nothing_is_never_left() {
        let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
        let fixed = ClientSource::fixed(client);
        assert!(fixed.moved_past(0).now_or_never().is_none());
        // Nor when the move announcements end (the locker was dropped).
        let moves = tokio::sync::watch::Sender::new(0_u64);
        let source = source(&moves);
        let past = source.moved_past(0);
        drop(moves);
        assert!(past.now_or_never().is_none());
    }
}
