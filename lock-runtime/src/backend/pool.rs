//! Opening a topology's connections at start-up.

use std::future::Future;

use crate::config::LockConfig;
use crate::error::LockError;

/// Opens the `pool_size` connections for lock traffic and one more for the
/// watchdog's renewals (returned apart), all within the connect timeout, so
/// a service learns at start-up, not at its first lock, that the server
/// cannot be reached. `what` says where it connects (`connecting to Redis
/// at 10.0.0.7:6379`: addresses only, never credentials), and every error
/// says it.
pub(crate) async fn open_pool<C, Open, Opening>(
    config: &LockConfig,
    what: &str,
    mut open: Open,
) -> Result<(Vec<C>, C), LockError>
where
    Open: FnMut() -> Opening,
    Opening: Future<Output = redis::RedisResult<C>>,
{
    let connect_all = async {
        let mut pool = Vec::with_capacity(config.pool_size + 1);
        for _ in 0..=config.pool_size {
            pool.push(open().await?);
        }
        Ok::<_, redis::RedisError>(pool)
    };
    let mut pool = match tokio::time::timeout(config.connect_timeout, connect_all).await {
        Ok(Ok(pool)) => pool,
        // A connection's own connect timeout (the same bound) is this one.
        Ok(Err(err)) if err.is_timeout() => {
            return Err(LockError::redis_timeout(what, config.connect_timeout));
        }
        Ok(Err(err)) => return Err(cannot_connect(what, err)),
        Err(_) => return Err(LockError::redis_timeout(what, config.connect_timeout)),
    };
    let renewals = pool
        .pop()
        .ok_or_else(|| LockError::config("pool_size must be at least 1"))?;
    Ok((pool, renewals))
}

/// `err`, met while connecting, with `what` in front (`connecting to Redis
/// at 10.0.0.7:6379`: addresses only, never credentials) and its kind
/// kept, so that a failed start-up says which server failed and why.
pub(crate) fn cannot_connect(what: &str, err: redis::RedisError) -> LockError {
    LockError::Redis(redis::RedisError::from((
        err.kind(),
        "cannot connect",
        format!("{what}: {err}"),
    )))
}
