//! The project's fair lock as a [`Contender`]: for the handoff, where its
//! release hands the lock to the waiter inside the release script.

use std::time::Duration;

use lock_runtime::{FairGuard, LockConfig, Locker};

use crate::{Acquired, BenchResult, Contender};

/// lock-runtime's fair lock, on a [`Locker`] of its own.
#[derive(Clone, Debug)]
pub struct FairContender {
    locker: Locker,
}

impl FairContender {
    /// Connects a locker to `url` with the library's defaults.
    pub async fn connect(url: &str) -> BenchResult<Self> {
        Ok(Self {
            locker: Locker::connect(LockConfig::from_url(url)?).await?,
        })
    }
}

impl Contender for FairContender {
    type Guard = FairGuard;
    type Held = FairGuard;

    async fn lock(&self, key: String, ttl: Duration) -> BenchResult<FairGuard> {
        let request = self.locker.fair_lock(key).ttl(ttl).wait(Duration::ZERO);
        Ok(request.acquire().await?)
    }

    async fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> BenchResult<Acquired<FairGuard>> {
        let guard = self.locker.fair_lock(key).ttl(ttl).wait(wait);
        let guard = guard.acquire().await?;
        // A holder that waited in line has an arrival: it found the lock
        // busy (exactly once: the release handed it over).
        let busy_tries = u64::from(guard.arrival().is_some());
        Ok(Acquired {
            guard,
            busy_tries: Some(busy_tries),
        })
    }

    async fn unlock(&self, guard: FairGuard) -> BenchResult<bool> {
        Ok(guard.release().await?)
    }

    async fn hold(&self, key: String, ttl: Duration) -> BenchResult<FairGuard> {
        self.lock(key, ttl).await
    }

    async fn release_held(&self, held: FairGuard) -> BenchResult<bool> {
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
