//! One call on every master at once, all within the round's bound (one
//! deadline for the round, see [`super::calls`]), answers taken in the
//! order they arrive, so a round can stop as soon as its
//! outcome is known without waiting for a slow master.
//!
//! The caller's task runs the calls while it reads their answers (no task
//! of their own, no channel: a round is a handful of futures). The calls
//! always run to their end (or bound), whether or not anyone still reads
//! their answers: a round dropped with calls still running hands them to a
//! task of their own. Each call carries its operation's
//! [`InFlight`] for its master until it ends, so that a clean-up on that
//! master waits for it (see [`crate::backend::flights`]). A script call on a master that lost its scripts
//! takes three round trips (`EVALSHA`, `NOSCRIPT`, `SCRIPT LOAD`,
//! `EVALSHA`), and one cut off after the first would leave that master
//! without the lock (or the renewal) every time it is the slowest.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::calls::{Answer, Call, Calls, Deadline};
use super::master::Master;
use crate::backend::flights::InFlight;
use crate::backend::single::SingleBackend;
use crate::error::LockError;

/// The calls of one round, whose answers [`Round::recv`] yields as they
/// arrive.
pub(crate) struct Round<T: Send + 'static> {
    /// `None` once handed to a task of their own (see `Drop`).
    calls: Option<Calls<T>>,
    /// Where calls still running when the round is dropped go on.
    runtime: tokio::runtime::Handle,
}

impl<T: Send + 'static> Round<T> {
    /// A round of `calls` (each with its master's index), on the current
    /// runtime, until `deadline`.
    fn new(calls: impl IntoIterator<Item = (usize, Call<T>)>, deadline: Option<Deadline>) -> Self {
        Self {
            calls: Some(Calls::new(calls, deadline)),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// The next answer, `(master, answer)`; `None` once every call ended.
    pub(crate) async fn recv(&mut self) -> Option<Answer<T>> {
        let calls = self.calls.as_mut()?;
        std::future::poll_fn(|cx| calls.poll_next(cx)).await
    }

    /// Wakes the caller's task only once `answers` answers may be in: with
    /// fewer, it cannot decide anything (see [`super::calls`]).
    pub(crate) fn decisive_from(mut self, answers: usize) -> Self {
        if let Some(calls) = &mut self.calls {
            calls.decisive_from(answers);
        }
        self
    }
}

impl<T: Send + 'static> Drop for Round<T> {
    fn drop(&mut self) {
        let Some(mut calls) = self.calls.take() else {
            return;
        };
        if calls.is_empty() {
            return;
        }
        // Answers that came in while the round was deciding are taken here:
        // a busy caller's task often wakes once every master answered, and
        // a task for answers already in would cost more than the round did.
        // Entered, as polling may start a command (a script's reload) and
        // the round may be dropped off any runtime.
        {
            let _entered = self.runtime.enter();
            let mut cx = Context::from_waker(Waker::noop());
            while let Poll::Ready(Some(_)) = calls.poll_next(&mut cx) {}
        }
        if calls.is_empty() {
            return;
        }
        // Every wake-up counts from now on: nobody decides anything.
        calls.decisive_from(1);
        self.runtime.spawn(async move {
            while std::future::poll_fn(|cx| calls.poll_next(cx))
                .await
                .is_some()
            {}
        });
    }
}

/// Starts `call` on each master of `masters` (indices into `all`; `call`
/// is given the index too); the round yields `(index, answer)` as answers
/// arrive and ends when every call has ended. A master never reached
/// answers an error at once; one that does not answer within `bound`
/// answers a timeout error. Each call (in the round, or in the task its
/// leftover calls go to) carries `flight` for its master until it ends.
/// Must be called on a tokio runtime.
pub(super) fn fan_out<T, Fut>(
    all: &Arc<[Arc<Master>]>,
    masters: impl IntoIterator<Item = usize>,
    bound: Duration,
    what: &'static str,
    flight: Option<&InFlight>,
    call: impl Fn(usize, Arc<SingleBackend>) -> Fut,
) -> Round<T>
where
    T: Send + 'static,
    Fut: Future<Output = Result<T, LockError>> + Send + 'static,
{
    let calls = masters.into_iter().map(|index| {
        let master = all[index].clone();
        let call = master.backend().map(|backend| call(index, backend));
        let answering: Call<T> = Box::pin(Answering {
            index,
            master,
            what,
            _flight: flight.map(|flight| flight.on(index)),
            call,
        });
        (index, answering)
    });
    Round::new(calls, Some(Deadline::after(bound, what, all)))
}

pin_project_lite::pin_project! {
    /// One master's call, answering its index with its answer (the
    /// round's deadline bounds it). Written out rather than as an `async`
    /// block, which would keep the call twice (as a capture and as the
    /// future it awaits).
    struct Answering<Fut> {
        index: usize,
        master: Arc<Master>,
        what: &'static str,
        // Dropped with the call, when it ended (or was cut off).
        _flight: Option<InFlight>,
        // `None`: the master was never reached.
        #[pin]
        call: Option<Fut>,
    }
}

impl<T, Fut> Future for Answering<Fut>
where
    Fut: Future<Output = Result<T, LockError>>,
{
    type Output = (usize, Result<T, LockError>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = match this.call.as_pin_mut() {
            None => Err(not_connected(this.master)),
            Some(call) => std::task::ready!(call.poll(cx)),
        };
        if let Err(err) = &answer {
            let what = *this.what;
            tracing::debug!(master = %this.master.addr(), error = %err, "{what} failed on a Redlock master");
        }
        Poll::Ready((*this.index, answer))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::flights::in_flight;
    use futures_util::FutureExt;

    /// A round over `calls`, each carrying a fresh operation's flight for
    /// its master.
    fn round_of(calls: Vec<Call<u8>>) -> (Round<u8>, crate::backend::flights::Landing) {
        let (flight, landing) = in_flight(calls.len());
        let carried = calls.into_iter().enumerate().map(|(index, call)| {
            let carried = flight.on(index);
            let call: Call<u8> = Box::pin(async move {
                let _carried = carried;
                call.await
            });
            (index, call)
        });
        let round = Round::new(carried.collect::<Vec<_>>(), None);
        (round, landing)
    }

    fn answering(index: usize) -> Call<u8> {
        Box::pin(async move { (index, Ok(7)) })
    }

    #[tokio::test]
    async fn answers_already_in_are_taken_when_the_round_is_dropped() {
        let (mut round, landing) = round_of((0..3).map(answering).collect());
        assert!(round.recv().await.is_some());
        drop(round);
        // Nothing was left to a task: on this one-thread runtime no task
        // has run since, yet the operation landed.
        assert!(landing.landed().now_or_never().is_some());
    }

    #[tokio::test]
    async fn a_call_still_running_goes_on_after_the_round_is_dropped() {
        let (answer, answered) = tokio::sync::oneshot::channel::<()>();
        let slow: Call<u8> = Box::pin(async move {
            let _ = answered.await;
            (2, Ok(7))
        });
        let (mut round, landing) = round_of(vec![answering(0), answering(1), slow]);
        assert!(round.recv().await.is_some());
        drop(round);
        let mut landed = Box::pin(landing.landed());
        assert!((&mut landed).now_or_never().is_none(), "a call still runs");
        answer.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), landed)
            .await
            .expect("the call left to a task ended, yet the operation did not land");
    }
}
