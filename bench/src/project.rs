//! The project itself as a [`Contender`]: a [`Locker`] used the way its
//! README shows.

use std::time::Duration;

use lock_runtime::{LockConfig, LockGuard, Locker};

use crate::{Acquired, BenchResult, Contender};

/// lock-runtime's [`Locker`] with a given pool size.
#[derive(Clone, Debug)]
pub struct ProjectContender {
    locker: Locker,
}

impl ProjectContender {
    /// Connects a locker to `url` with `pool_size` connections
    /// (`None`: the library's default).
    pub async fn connect(url: &str, pool_size: Option<usize>) -> BenchResult<Self> {
        let mut config = LockConfig::from_url(url)?;
        if let Some(size) = pool_size {
            config = config.pool_size(size);
        }
        Ok(Self {
            locker: Locker::connect(config).await?,
        })
    }

    /// The locker, for scenarios that use it directly (the attribute).
    pub fn locker(&self) -> &Locker {
        &self.locker
    }
}

impl Contender for ProjectContender {
    type Guard = LockGuard;
    type Held = LockGuard;

    async fn lock(&self, key: String, ttl: Duration) -> BenchResult<LockGuard> {
        Ok(self
            .locker
            .lock(key)
            .ttl(ttl)
            .wait(Duration::ZERO)
            .acquire()
            .await?)
    }

    async fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> BenchResult<Acquired<LockGuard>> {
        let before = self.locker.stats().contended;
        let guard = self.locker.lock(key).ttl(ttl).wait(wait).acquire().await?;
        // Exact as long as this is the locker's only contended acquire at a
        // time, which is how the handoff scenario uses it.
        let contended = self.locker.stats().contended - before;
        Ok(Acquired {
            guard,
            busy_tries: Some(contended),
        })
    }

    async fn unlock(&self, guard: LockGuard) -> BenchResult<bool> {
        Ok(guard.release().await?)
    }

    async fn hold(&self, key: String, ttl: Duration) -> BenchResult<LockGuard> {
        // The watchdog is on by default: renewed every ttl/3, in batches.
        self.lock(key, ttl).await
    }

    async fn release_held(&self, held: LockGuard) -> BenchResult<bool> {
        let was_held = held.is_held();
        let deleted = held.release().await?;
        Ok(was_held && deleted)
    }

    fn renewal_commands(&self) -> u64 {
        self.locker.stats().renewal_calls
    }

    fn renewal_rounds(&self) -> Option<u64> {
        Some(self.locker.stats().renewal_rounds)
    }
}
