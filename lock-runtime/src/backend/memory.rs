//! The in-memory store ([`crate::memory`]) as a node topology: every
//! script call runs, at once, as the script's twin on a [`MemoryStore`].
//! Nothing else of the runtime knows the difference: acquisition, waiting,
//! the watchdog and loss signals are the same code as on Redis, hosted by
//! the caller's runtime ([`crate::host`]).

use redis::FromRedisValue;

use super::script::{LuaScript, ScriptCall};
use super::{BatchEntry, ReleaseFeed, batch_answers, batch_call};
use crate::error::LockError;
use crate::memory::MemoryStore;

/// Lockers' calls on one [`MemoryStore`].
pub(crate) struct MemoryBackend {
    store: MemoryStore,
}

impl MemoryBackend {
    pub(crate) fn new(store: MemoryStore) -> Self {
        Self { store }
    }

    /// One store, no pool.
    pub(crate) fn pick(&self) -> usize {
        0
    }

    /// Releases are delivered by the store itself.
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        ReleaseFeed::Memory(self.store.clone())
    }

    /// Runs `call`'s twin on the store.
    pub(crate) fn run<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T, LockError> {
        let answer = call.run_native(&self.store).map_err(|why| {
            LockError::Redis(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the in-memory store refused a call",
                why,
            )))
        })?;
        Ok(redis::from_redis_value(answer).map_err(redis::RedisError::from)?)
    }

    /// Runs a batch script over all of `entries` in one call.
    pub(crate) fn run_batch(
        &self,
        script: &'static LuaScript,
        entries: &[BatchEntry],
    ) -> Result<Vec<Option<redis::Value>>, LockError> {
        let answer = self.run(&batch_call(script, entries))?;
        Ok(batch_answers(answer, entries.len())?
            .into_iter()
            .map(Some)
            .collect())
    }
}
