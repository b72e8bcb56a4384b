//! The project's read/write lock as a [`Contender`]: each pair takes one
//! side of it (a read, or the write), so that its rows stand beside the
//! exclusive lock's with the same scenarios and the same measures
//! (server commands per pair included). Raw redis-rs code has no
//! counterpart worth writing: a read/write lock in plain commands is the
//! check-then-write race its scripts exist to avoid.

use std::time::Duration;

use lock_runtime::{LockConfig, Locker, ReadGuard, WriteGuard};

use crate::{Acquired, BenchResult, Contender};

/// Which side each pair takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `locker.read_lock(key)`.
    Read,
    /// `locker.write_lock(key)`.
    Write,
}

impl Side {
    /// The implementation's name in the results.
    pub fn name(self) -> &'static str {
        match self {
            Side::Read => "project_read",
            Side::Write => "project_write",
        }
    }
}

/// A held side of the lock.
#[derive(Debug)]
pub enum Held {
    /// A read.
    Read(ReadGuard),
    /// The write.
    Write(WriteGuard),
}

impl Held {
    fn is_held(&self) -> bool {
        match self {
            Held::Read(guard) => guard.is_held(),
            Held::Write(guard) => guard.is_held(),
        }
    }

    async fn release(self) -> BenchResult<bool> {
        Ok(match self {
            Held::Read(guard) => guard.release().await?,
            Held::Write(guard) => guard.release().await?,
        })
    }
}

/// lock-runtime's [`Locker`], taking one side of read/write locks.
#[derive(Clone, Debug)]
pub struct ReadWriteContender {
    locker: Locker,
    side: Side,
}

impl ReadWriteContender {
    /// Connects a locker to `url` (the library's default pool) whose pairs
    /// take `side`.
    pub async fn connect(url: &str, side: Side) -> BenchResult<Self> {
        let config = LockConfig::from_url(url)?;
        Ok(Self {
            locker: Locker::connect(config).await?,
            side,
        })
    }

    async fn take(&self, key: String, ttl: Duration, wait: Duration) -> BenchResult<Held> {
        Ok(match self.side {
            Side::Read => {
                let read = self.locker.read_lock(key).ttl(ttl).wait(wait);
                Held::Read(read.acquire().await?)
            }
            Side::Write => {
                let write = self.locker.write_lock(key).ttl(ttl).wait(wait);
                Held::Write(write.acquire().await?)
            }
        })
    }
}

impl Contender for ReadWriteContender {
    type Guard = Held;
    type Held = Held;

    async fn lock(&self, key: String, ttl: Duration) -> BenchResult<Held> {
        self.take(key, ttl, Duration::ZERO).await
    }

    async fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> BenchResult<Acquired<Held>> {
        let before = self.locker.stats().contended;
        let guard = self.take(key, ttl, wait).await?;
        let contended = self.locker.stats().contended - before;
        Ok(Acquired {
            guard,
            busy_tries: Some(contended),
        })
    }

    async fn unlock(&self, guard: Held) -> BenchResult<bool> {
        guard.release().await
    }

    async fn hold(&self, key: String, ttl: Duration) -> BenchResult<Held> {
        self.lock(key, ttl).await
    }

    async fn release_held(&self, held: Held) -> BenchResult<bool> {
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
