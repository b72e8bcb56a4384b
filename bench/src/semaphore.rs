//! The project's semaphore as a [`Contender`]: each "lock" is one permit
//! of a semaphore of `limit` permits, taken and given back as its README
//! shows, for the pair rows beside the exclusive lock.

use std::time::Duration;

use lock_runtime::{LockConfig, Locker, PermitGuard};

use crate::{Acquired, BenchResult, Contender};

/// One permit of a semaphore with `limit` permits per key.
#[derive(Clone, Debug)]
pub struct SemaphoreContender {
    locker: Locker,
    limit: u32,
}

impl SemaphoreContender {
    /// Connects a locker to `url`, for semaphores of `limit` permits.
    pub async fn connect(url: &str, limit: u32) -> BenchResult<Self> {
        Ok(Self {
            locker: Locker::connect(LockConfig::from_url(url)?).await?,
            limit,
        })
    }
}

impl Contender for SemaphoreContender {
    type Guard = PermitGuard;
    type Held = PermitGuard;

    async fn lock(&self, key: String, ttl: Duration) -> BenchResult<PermitGuard> {
        let request = self.locker.semaphore(key, self.limit).ttl(ttl);
        Ok(request.wait(Duration::ZERO).acquire().await?)
    }

    async fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> BenchResult<Acquired<PermitGuard>> {
        let request = self.locker.semaphore(key, self.limit).ttl(ttl);
        Ok(Acquired {
            guard: request.wait(wait).acquire().await?,
            busy_tries: None,
        })
    }

    async fn unlock(&self, guard: PermitGuard) -> BenchResult<bool> {
        Ok(guard.release().await?)
    }

    async fn hold(&self, key: String, ttl: Duration) -> BenchResult<PermitGuard> {
        self.lock(key, ttl).await
    }

    async fn release_held(&self, held: PermitGuard) -> BenchResult<bool> {
        let was_held = held.is_held();
        Ok(was_held && held.release().await?)
    }

    fn renewal_commands(&self) -> u64 {
        self.locker.stats().renewal_calls
    }

    fn renewal_rounds(&self) -> Option<u64> {
        Some(self.locker.stats().renewal_rounds)
    }
}
