//! The peer crate rslock 0.10 as a [`Contender`], used the way its README
//! shows: `lock`/`acquire` to take, `unlock` to release, `extend` to renew.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lock_bench::{Acquired, BenchResult, Contender};
use rslock::{Lock, LockManager};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Most renewals one keep-alive task sends (a bound, never reached).
const MAX_RENEWALS: u64 = 100_000;

/// One rslock [`LockManager`] on one server, or on several Redlock masters.
#[derive(Clone, Debug)]
pub struct RslockContender {
    manager: LockManager,
    renewals: Arc<AtomicU64>,
}

/// An rslock lock kept alive by a task of its own, calling `extend`.
pub struct RslockHeld {
    lock: Arc<Lock>,
    lost: Arc<AtomicBool>,
    renewer: JoinHandle<()>,
}

impl RslockContender {
    /// A manager for the servers at `urls` (one, or the Redlock masters),
    /// its connections opened.
    pub async fn connect(urls: &[String]) -> BenchResult<Self> {
        let manager = LockManager::new(urls.to_vec());
        // rslock connects lazily; open the connections (the query goes to
        // every server) before measuring.
        manager.query_redis_for_key_value(b"warm-up").await?;
        Ok(Self {
            manager,
            renewals: Arc::default(),
        })
    }
}

impl Contender for RslockContender {
    type Guard = Lock;
    type Held = RslockHeld;

    async fn lock(&self, key: String, ttl: Duration) -> BenchResult<Lock> {
        Ok(self.manager.lock(key.as_str(), ttl).await?)
    }

    async fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> BenchResult<Acquired<Lock>> {
        // rslock's own waiting loop: tries, sleeping 0–200 ms between them.
        let guard = tokio::time::timeout(wait, self.manager.acquire(key.as_str(), ttl))
            .await
            .map_err(|_| format!("rslock: `{key}` still busy after {wait:?}"))??;
        Ok(Acquired {
            guard: guard.lock,
            busy_tries: None,
        })
    }

    async fn unlock(&self, lock: Lock) -> BenchResult<bool> {
        // Best effort, and it does not say whether the key was still ours.
        self.manager.unlock(&lock).await;
        Ok(true)
    }

    async fn hold(&self, key: String, ttl: Duration) -> BenchResult<RslockHeld> {
        let lock = Arc::new(self.lock(key, ttl).await?);
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = tokio::spawn(keep_alive(
            self.manager.clone(),
            lock.clone(),
            ttl,
            lost.clone(),
            self.renewals.clone(),
        ));
        Ok(RslockHeld {
            lock,
            lost,
            renewer,
        })
    }

    async fn release_held(&self, held: RslockHeld) -> BenchResult<bool> {
        held.renewer.abort();
        let _ = held.renewer.await;
        let value = self
            .manager
            .query_redis_for_key_value(&held.lock.resource)
            .await?;
        let still_ours = value.as_deref() == Some(held.lock.val.as_slice());
        self.manager.unlock(&held.lock).await;
        Ok(still_ours && !held.lost.load(Ordering::Relaxed))
    }

    fn renewal_commands(&self) -> u64 {
        self.renewals.load(Ordering::Relaxed)
    }
}

/// Extends one lock every ttl/3 until aborted or an extension fails.
async fn keep_alive(
    manager: LockManager,
    lock: Arc<Lock>,
    ttl: Duration,
    lost: Arc<AtomicBool>,
    renewals: Arc<AtomicU64>,
) {
    let every = ttl / 3;
    let mut next = Instant::now() + every;
    for _ in 0..MAX_RENEWALS {
        tokio::time::sleep_until(next).await;
        next += every;
        renewals.fetch_add(1, Ordering::Relaxed);
        if manager.extend(&lock, ttl).await.is_err() {
            lost.store(true, Ordering::Relaxed);
            return;
        }
    }
}
