//! One master found, and followed across failovers, through Sentinel.
//!
//! The sentinels name the master; a [`SingleBackend`] talks to it, kept in
//! a slot that is swapped for a new one when the sentinels name another
//! server. Every call goes to the backend in the slot at that moment.
//!
//! The sentinels are asked again (one lookup at a time, starting at least
//! [`MIN_LOOKUP_GAP`] apart; failures seen before a lookup started share
//! its answer) when a call fails the way calls to a moved master
//! fail (see [`moved`]), when the release listener reconnects, and every
//! [`RECHECK_EVERY`] in the background, so an idle locker does not keep
//! talking to a demoted master that still accepts connections.
//!
//! A failed call still returns its error, except that a call the old
//! master refused without running it (connection refused, `READONLY`,
//! `NOREPLICAS`, `MASTERDOWN`, `LOADING`) is sent once more when the
//! lookup it caused found a new master: every script is idempotent for
//! its owner token, and the refused run wrote nothing. (An acquire's try
//! that failed otherwise is sent again by the attempt itself, which sees
//! the [`SentinelBackend::generation`] change under it.) Renewals meet the
//! new master's data: a lock whose write never reached it is answered 0
//! at once: every swap is announced ([`SentinelBackend::moves`]) and the
//! watchdog then renews every lease on the new master without waiting for
//! its schedule, reporting lost the ones that are not there.
//!
//! The sentinels are asked in the order configured, and the first one
//! naming a server that confirms with `ROLE` that it is a master wins;
//! while the sentinels disagree (the seconds after a failover), that is
//! the first sentinel's view.

mod moved;
mod resolver;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use redis::ConnectionInfo;

use super::feed::Named;
use super::plain::PlainCommands;
use super::script::{LuaScript, ScriptCall};
use super::single::SingleBackend;
use super::{BatchEntry, ClientSource, ReleaseFeed, Route, tls};
use crate::config::LockConfig;
use crate::config::ReplicaAck;
use crate::error::LockError;
use resolver::Resolver;

/// Shortest time between two lookups: a burst of failing calls during a
/// failover asks the sentinels once, not once per call.
const MIN_LOOKUP_GAP: Duration = Duration::from_millis(100);
/// How often the sentinels are asked while nothing fails.
const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// Locks on whichever server the sentinels name as the master.
#[derive(Clone)]
pub(crate) struct SentinelBackend {
    shared: Arc<Shared>,
}

struct Shared {
    current: RwLock<Arc<Master>>,
    /// Held while the sentinels are asked: one lookup at a time.
    resolver: tokio::sync::Mutex<Resolver>,
    config: LockConfig,
    /// Longest a caller waits for a lookup and the connections it opens.
    follow_bound: Duration,
    /// The generation in use, announced on every swap.
    moved: tokio::sync::watch::Sender<u64>,
}

/// The master in use, and the connections to it.
struct Master {
    address: ConnectionInfo,
    backend: SingleBackend,
    /// Bumped on every swap, so a caller can tell that someone else
    /// already followed the failover it ran into.
    generation: u64,
}

impl SentinelBackend {
    /// Asks the `sentinels` for the master monitored as `master` and opens
    /// the pool to it (with `node`'s credentials and database). Fails with
    /// [`LockError::Redis`] when no sentinel answers with a healthy master
    /// within the connect timeout, or the master cannot be reached.
    pub(crate) async fn connect(
        sentinels: &[ConnectionInfo],
        master: &str,
        node: &redis::RedisConnectionInfo,
        config: &LockConfig,
    ) -> Result<Self, LockError> {
        let sentinels = sentinels
            .iter()
            .map(|sentinel| crate::backend::tls::with_tls(sentinel.clone(), &config.tls))
            .collect::<Result<Vec<_>, _>>()?;
        let mut resolver = Resolver::new(
            &sentinels,
            master,
            node,
            &config.tls,
            config.connect_timeout,
        );
        let address = resolver.master().await?;
        let backend = SingleBackend::connect(address.clone(), config).await?;
        tracing::debug!(master, address = %address.addr(), "sentinels named the master");
        let shared = Arc::new(Shared {
            current: RwLock::new(Arc::new(Master {
                address,
                backend,
                generation: 0,
            })),
            resolver: tokio::sync::Mutex::new(resolver),
            config: config.clone(),
            // A lookup, then the connections to a new master.
            follow_bound: config.connect_timeout * 2,
            moved: tokio::sync::watch::Sender::new(0),
        });
        tokio::spawn(recheck(Arc::downgrade(&shared)));
        Ok(Self { shared })
    }

    /// A connection index; valid on every master this backend will use,
    /// since each gets a pool of the same size.
    pub(crate) fn pick(&self) -> usize {
        self.shared.master().backend.pick()
    }

    /// The generation of the master in use: how many swaps so far.
    pub(crate) fn generation(&self) -> u64 {
        *self.shared.moved.borrow()
    }

    /// Announces each swap to a new master (its generation).
    pub(crate) fn moves(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.moved.subscribe()
    }

    /// Release messages: subscribed on the master in use at each
    /// (re)connect of the listener, which reconnects as soon as the locker
    /// follows a failover. Only a listener that failed on the master still
    /// in use asks the sentinels again; one that left for a master the
    /// locker already followed subscribes there at once (a lookup then
    /// could wait out a sentinel still naming the frozen master, and run
    /// past the listener's connect bound).
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        let shared = Arc::downgrade(&self.shared);
        // One past the generation of the last master named to the
        // listener (0: none yet).
        let named = Arc::new(AtomicU64::new(0));
        ReleaseFeed::PubSub(
            ClientSource::new(move || {
                let shared = shared.clone();
                let named = named.clone();
                Box::pin(async move {
                    let Some(shared) = shared.upgrade() else {
                        return Err(redis::RedisError::from((
                            redis::ErrorKind::Client,
                            "the locker was dropped",
                        )));
                    };
                    let current = shared.master();
                    let master = if named.load(Ordering::Relaxed) > current.generation {
                        shared.follow(current.generation, Instant::now()).await
                    } else {
                        current
                    };
                    named.store(master.generation + 1, Ordering::Relaxed);
                    let client = tls::client(master.address.clone(), &shared.config.tls)?;
                    Ok(Named {
                        client,
                        generation: master.generation,
                    })
                })
            })
            .following(self.moves()),
        )
    }

    /// Runs `call` on the current master (see [`SingleBackend::run`]).
    pub(crate) async fn run<T: redis::FromRedisValue>(
        &self,
        route: Route,
        call: &ScriptCall,
    ) -> Result<T, LockError> {
        self.shared
            .call(|master| async move { master.backend.run(route, call).await })
            .await
    }

    /// Runs the plain commands `pipe` on the current master.
    pub(crate) async fn run_plain<T: redis::FromRedisValue>(
        &self,
        route: Route,
        pipe: &PlainCommands,
    ) -> Result<T, LockError> {
        self.shared
            .call(|master| async move { master.backend.run_plain(route, pipe).await })
            .await
    }

    /// Runs `call` on the current master and waits for its replicas (see
    /// [`SingleBackend::run_then_wait`]).
    pub(crate) async fn run_then_wait<T: redis::FromRedisValue>(
        &self,
        route: Route,
        call: &ScriptCall,
        ack: ReplicaAck,
    ) -> Result<(T, u32), LockError> {
        self.shared
            .call(|master| async move { master.backend.run_then_wait(route, call, ack).await })
            .await
    }

    /// Runs a batch on the current master: a lease whose key the new
    /// master's data lacks (a write lost in the failover) is answered "not
    /// ours" there.
    pub(crate) async fn run_batch(
        &self,
        script: &'static LuaScript,
        entries: &[BatchEntry],
    ) -> Result<Vec<Option<redis::Value>>, LockError> {
        self.shared
            .call(|master| async move { master.backend.run_batch(script, entries).await })
            .await
    }
}

impl Shared {
    fn master(&self) -> Arc<Master> {
        // A poisoned slot still holds a whole Arc: use it.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Runs `op` on the current master; on an error that suggests the
    /// master moved, follows it, and repeats `op` once on the new master
    /// if the old one certainly did not carry it out.
    async fn call<T, F, Fut>(&self, op: F) -> Result<T, LockError>
    where
        F: Fn(Arc<Master>) -> Fut,
        Fut: Future<Output = Result<T, LockError>>,
    {
        let master = self.master();
        let result = op(master.clone()).await;
        let Err(LockError::Redis(err)) = &result else {
            return result;
        };
        if !moved::suggests_failover(err) {
            return result;
        }
        let now = self.follow(master.generation, Instant::now()).await;
        if now.generation != master.generation && moved::not_carried_out(err) {
            tracing::debug!(error = %err, "the old master refused the call; sending it to the new one");
            return op(now).await;
        }
        result
    }

    /// Asks the sentinels where the master is, unless someone already
    /// moved on from generation `seen`, or a lookup started after
    /// `failed_at` (when the caller saw the failure) already answered for
    /// it; swaps in a backend for a new address. Lookups start at least
    /// [`MIN_LOOKUP_GAP`] apart: a caller waits out the rest of the gap.
    /// Returns the master in use afterwards. Never fails: a lookup that
    /// fails leaves the slot as it was, and the next failing call asks again.
    async fn follow(&self, seen: u64, failed_at: Instant) -> Arc<Master> {
        let Ok(mut resolver) = tokio::time::timeout(self.follow_bound, self.resolver.lock()).await
        else {
            return self.master();
        };
        let current = self.master();
        if current.generation != seen || resolver.asked_since(failed_at) {
            return current;
        }
        tokio::time::sleep(resolver.pause_before_next(MIN_LOOKUP_GAP)).await;
        let address = match resolver.master().await {
            Ok(address) => address,
            Err(err) => {
                tracing::debug!(error = %err, "no master from the sentinels right now");
                return current;
            }
        };
        if address.addr() == current.address.addr() {
            return current;
        }
        let backend = match SingleBackend::connect(address.clone(), &self.config).await {
            Ok(backend) => backend,
            Err(err) => {
                tracing::warn!(address = %address.addr(), error = %err, "cannot reach the master the sentinels named");
                return current;
            }
        };
        tracing::warn!(
            from = %current.address.addr(),
            to = %address.addr(),
            "the master moved; locks now go to the new one"
        );
        let next = Arc::new(Master {
            address,
            backend,
            generation: current.generation + 1,
        });
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next.clone();
        self.moved.send_replace(next.generation);
        next
    }
}

/// Asks the sentinels every [`RECHECK_EVERY`] until the backend is dropped.
async fn recheck(shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(RECHECK_EVERY).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let seen = shared.master().generation;
        shared.follow(seen, Instant::now()).await;
    }
}
