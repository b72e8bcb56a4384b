//! One call on every master at once, each bounded on its own, answers
//! taken in the order they arrive, so a round can stop as soon as its
//! outcome is known without waiting for a slow master.
//!
//! The calls run in a task of their own and always run to their end (or
//! bound), whether or not anyone still reads their answers: a script call
//! on a master that lost its scripts takes three round trips (`EVALSHA`,
//! `NOSCRIPT`, `SCRIPT LOAD`, `EVALSHA`), and one cut off after the first
//! would leave that master without the lock (or the renewal) every time it
//! is the slowest.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;

use super::master::Master;
use crate::backend::flights::InFlight;
use crate::backend::single::SingleBackend;
use crate::error::LockError;

/// Starts `call` on each master of `masters` (indices into `all`); the
/// receiver yields `(index, answer)` as answers arrive and ends when every
/// call has ended. A master never reached answers an error at once; one
/// that does not answer within `bound` answers a timeout error. The task
/// running the calls keeps `flight` until the last call ended.
pub(super) fn fan_out<T, Fut>(
    all: &Arc<[Arc<Master>]>,
    masters: impl IntoIterator<Item = usize>,
    bound: Duration,
    what: &'static str,
    flight: Option<InFlight>,
    call: impl Fn(Arc<SingleBackend>) -> Fut,
) -> mpsc::UnboundedReceiver<(usize, Result<T, LockError>)>
where
    T: Send + 'static,
    Fut: Future<Output = Result<T, LockError>> + Send + 'static,
{
    let calls: FuturesUnordered<_> = masters
        .into_iter()
        .map(|index| {
            let master = all[index].clone();
            let running = master.backend().map(&call);
            async move {
                let answer = match running {
                    None => Err(not_connected(&master)),
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
        .collect();
    let (answers, receiver) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let _flight = flight;
        calls
            .for_each(move |answer| {
                // A reader that stopped listening is fine: the call still ran.
                let _ = answers.send(answer);
                std::future::ready(())
            })
            .await;
    });
    receiver
}

/// A master never reached answers like one that refused the connection:
/// its background connect keeps failing, so it counts as down.
fn not_connected(master: &Master) -> LockError {
    LockError::Redis(redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!(
            "Redlock master {} has not been reached yet; retrying in the background",
            master.addr()
        ),
    )))
}
