//! [`Data`]: a demo's own data (stock counts and such), in Redis or, with
//! no server, in this process. Separate from the locks, as an
//! application's data and its locks are.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// Whole-number values by key. Cheap to clone and share between tasks.
#[derive(Clone)]
pub enum Data {
    /// One multiplexed connection to the demo's Redis.
    Redis(MultiplexedConnection),
    /// A map in this process.
    Memory(Arc<Mutex<HashMap<String, u64>>>),
}

impl Data {
    /// A connection to the Redis at `url`.
    pub async fn connect(url: &str) -> Result<Self, redis::RedisError> {
        let connection = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self::Redis(connection))
    }

    /// An empty map in this process.
    pub fn memory() -> Self {
        Self::Memory(Arc::default())
    }

    /// The value of `key`, if set.
    pub async fn get(&self, key: &str) -> Result<Option<u64>, redis::RedisError> {
        match self {
            Self::Redis(redis) => redis.clone().get(key).await,
            Self::Memory(map) => Ok(lock(map).get(key).copied()),
        }
    }

    /// Sets `key` to `value`.
    pub async fn set(&self, key: &str, value: u64) -> Result<(), redis::RedisError> {
        match self {
            Self::Redis(redis) => redis.clone().set(key, value).await,
            Self::Memory(map) => {
                lock(map).insert(key.to_owned(), value);
                Ok(())
            }
        }
    }

    /// Adds one to `key` (0 when unset) and returns the new value, in one
    /// step: two callers never get the same number.
    pub async fn incr(&self, key: &str) -> Result<u64, redis::RedisError> {
        match self {
            Self::Redis(redis) => redis.clone().incr(key, 1).await,
            Self::Memory(map) => {
                let mut map = lock(map);
                let value = map.entry(key.to_owned()).or_default();
                *value += 1;
                Ok(*value)
            }
        }
    }

    /// Deletes `keys`.
    pub async fn del(&self, keys: &[&str]) -> Result<(), redis::RedisError> {
        match self {
            Self::Redis(redis) => redis.clone().del(keys).await,
            Self::Memory(map) => {
                let mut map = lock(map);
                for key in keys {
                    map.remove(*key);
                }
                Ok(())
            }
        }
    }
}

fn lock(map: &Mutex<HashMap<String, u64>>) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
    map.lock().unwrap_or_else(|e| e.into_inner())
}
