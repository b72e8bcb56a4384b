//! The project's multi-key lock as a [`Contender`]: each "lock" is
//! `keys` keys taken at once (`<key>#0`, `<key>#1`, ..) with
//! `locker.lock_all`, and given back, for the pair rows beside the
//! exclusive lock. On one server every key of a hold is in one slot: one
//! script each way. On a Cluster the names come from [`SlotKeys`]: all in
//! one slot, or across slots and nodes.

use std::time::Duration;

use lock_runtime::{LockConfig, Locker, MultiGuard};

use crate::slots::SlotKeys;
use crate::{Acquired, BenchResult, Contender};

/// `keys` keys per hold.
#[derive(Clone, Debug)]
pub struct MultiContender {
    locker: Locker,
    keys: u32,
    /// Where the names go on a Cluster; `None`: `<key>#<n>`.
    slots: Option<SlotKeys>,
}

impl MultiContender {
    /// Connects a locker to `url`, for holds of `keys` keys.
    pub async fn connect(url: &str, keys: u32) -> BenchResult<Self> {
        Ok(Self {
            locker: Locker::connect(LockConfig::from_url(url)?).await?,
            keys,
            slots: None,
        })
    }

    /// Connects a locker to the Cluster at `url`, for holds named by
    /// `slots` (their number of keys and their spread over the slots).
    pub async fn connect_by_slot(url: &str, slots: SlotKeys) -> BenchResult<Self> {
        let mut contender = Self::connect(url, slots.keys()).await?;
        contender.slots = Some(slots);
        Ok(contender)
    }

    fn keys_of(&self, key: &str) -> Vec<String> {
        match &self.slots {
            Some(slots) => slots.names(key),
            None => (0..self.keys).map(|n| format!("{key}#{n}")).collect(),
        }
    }
}

impl Contender for MultiContender {
    type Guard = MultiGuard;
    type Held = MultiGuard;

    async fn lock(&self, key: String, ttl: Duration) -> BenchResult<MultiGuard> {
        let request = self.locker.lock_all(self.keys_of(&key)).ttl(ttl);
        Ok(request.wait(Duration::ZERO).acquire().await?)
    }

    async fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> BenchResult<Acquired<MultiGuard>> {
        let request = self.locker.lock_all(self.keys_of(&key)).ttl(ttl);
        Ok(Acquired {
            guard: request.wait(wait).acquire().await?,
            busy_tries: None,
        })
    }

    async fn unlock(&self, guard: MultiGuard) -> BenchResult<bool> {
        Ok(guard.release().await?)
    }

    async fn hold(&self, key: String, ttl: Duration) -> BenchResult<MultiGuard> {
        self.lock(key, ttl).await
    }

    async fn release_held(&self, held: MultiGuard) -> BenchResult<bool> {
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
