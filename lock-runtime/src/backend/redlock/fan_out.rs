//! One call on every master at once, each bounded on its own, answers
//! taken in the order they arrive, so a round can stop as soon as its
//! outcome is known without waiting for a slow master.
//!
//! The caller's task runs the calls while it reads their answers (no task
//! of their own, no channel: a round is a handful of futures). The calls
//! always run to their end (or bound), whether or not anyone still reads
//! their answers: a round dropped with calls still running hands them to a
//! task of their own. A script call on a master that lost its scripts
//! takes three round trips (`EVALSHA`, `NOSCRIPT`, `SCRIPT LOAD`,
//! `EVALSHA`), and one cut off after the first would leave that master
//! without the lock (or the renewal) every time it is the slowest.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::master::Master;
use crate::backend::flights::InFlight;
use crate::backend::single::SingleBackend;
use crate::error::LockError;

/// One master's call, answering its index and its answer.
type Call<T> = Pin<Box<dyn Future<Output = (usize, Result<T, LockError>)> + Send>>;

/// The calls of one round, whose answers [`Round::recv`] yields as they
/// arrive.
pub(crate) struct Round<T: Send + 'static> {
    calls: FuturesUnordered<Call<T>>,
    /// Kept until the last call ended.
    flight: Option<InFlight>,
    /// Where calls still running when the round is dropped go on.
    runtime: tokio::runtime::Handle,
}

impl<T: Send + 'static> Round<T> {
    /// The next answer, `(master, answer)`; `None` once every call ended.
    pub(crate) async fn recv(&mut self) -> Option<(usize, Result<T, LockError>)> {
        self.calls.next().await
    }
}

impl<T: Send + 'static> Drop for Round<T> {
    fn drop(&mut self) {
        if self.calls.is_empty() {
            return;
        }
        let (mut calls, flight) = (std::mem::take(&mut self.calls), self.flight.take());
        self.runtime.spawn(async move {
            let _flight = flight;
            while calls.next().await.is_some() {}
        });
    }
}

/// Starts `call` on each master of `masters` (indices into `all`); the
/// round yields `(index, answer)` as answers arrive and ends when every
/// call has ended. A master never reached answers an error at once; one
/// that does not answer within `bound` answers a timeout error. The round
/// (or the task its leftover calls go to) keeps `flight` until the last
/// call ended. Must be called on a tokio runtime.
pub(super) fn fan_out<T, Fut>(
    all: &Arc<[Arc<Master>]>,
    masters: impl IntoIterator<Item = usize>,
    bound: Duration,
    what: &'static str,
    flight: Option<InFlight>,
    call: impl Fn(Arc<SingleBackend>) -> Fut,
) -> Round<T>
where
    T: Send + 'static,
    Fut: Future<Output = Result<T, LockError>> + Send + 'static,
{
    let calls: FuturesUnordered<Call<T>> = masters
        .into_iter()
        .map(|index| {
            let master = all[index].clone();
            let running = master.backend().map(&call);
            let answering: Call<T> = Box::pin(async move {
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
            });
            answering
        })
        .collect();
    Round {
        calls,
        flight,
        runtime: tokio::runtime::Handle::current(),
    }
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
