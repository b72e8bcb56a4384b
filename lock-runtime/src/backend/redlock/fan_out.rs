//! One call on every master at once, each bounded on its own, answers
//! taken in the order they arrive (so a round can stop as soon as its
//! outcome is known, without waiting for a slow master).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, Stream};

use super::master::Master;
use crate::LockError;
use crate::backend::redis::RedisBackend;

/// Starts `call` on each master in `masters` (by index into `all`); yields
/// `(index, answer)` as answers arrive. A master never reached answers an
/// error at once; one that does not answer within `bound` answers a
/// timeout error.
///
/// Dropping the stream drops the calls still running. A command already
/// written to a connection still runs on the server; anything sent later
/// on the same pooled connection runs after it.
pub(super) fn fan_out<'a, T, Fut>(
    all: &'a [Arc<Master>],
    masters: impl IntoIterator<Item = usize>,
    bound: Duration,
    what: &'static str,
    call: impl Fn(Arc<RedisBackend>) -> Fut,
) -> impl Stream<Item = (usize, Result<T, LockError>)> + 'a
where
    T: 'a,
    Fut: Future<Output = Result<T, LockError>> + 'a,
{
    masters
        .into_iter()
        .map(|index| {
            let master = &all[index];
            let running = master.backend().map(&call);
            async move {
                let answer = match running {
                    None => Err(not_connected(master)),
                    Some(running) => match tokio::time::timeout(bound, running).await {
                        Ok(answer) => answer,
                        Err(_) => Err(LockError::redis_timeout(what, bound)),
                    },
                };
                if let Err(err) = &answer {
                    tracing::debug!(master = %master.addr(), error = %err, "{what} failed on a Redlock master");
                }
                (index, answer)
            }
        })
        .collect::<FuturesUnordered<_>>()
}

fn not_connected(master: &Master) -> LockError {
    LockError::Redis(redis::RedisError::from((
        redis::ErrorKind::Io,
        "Redlock master not connected",
        format!(
            "{} has not been reached yet; retrying in the background",
            master.addr()
        ),
    )))
}
