//! The calls of one round, polled by the caller's task, which each call
//! wakes only once enough answers may be in for it to decide something.
//!
//! A round over three masters needs two answers before any outcome is
//! known. Each answer arrives on the library's runtime thread and would
//! wake the caller's task, on another thread: the first of those wake-ups
//! finds nothing to decide and costs a thread hop, a poll of the whole
//! operation and, on a busy host, the CPU the other answers were waiting
//! for. So wake-ups are counted and held back until as many came in as
//! answers the caller needs ([`Calls::decisive_from`]); a call wakes at
//! least once per answer, so none is ever held back past that count.
//!
//! Unlike `FuturesUnordered`, whose one wake-up of its owner cannot be held
//! back without losing the next, the calls' waker marks them for the next
//! poll and counts.
//!
//! Every call of a round starts at once and has the same bound, so one
//! [`Deadline`] bounds them all: one timer per round, not one per master
//! (a timer costs about a thousand instructions to arm and disarm, and
//! its driver's lock is shared with every thread that makes calls). Each
//! master's connection keeps its response timeout besides: a master that
//! holds its connection but does not answer fails at that timeout, which
//! is usually shorter than the round's bound (that one also covers a
//! reconnect).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_util::task::AtomicWaker;

use super::master::Master;
use crate::error::LockError;

/// One master's answer: its index and what it answered.
pub(super) type Answer<T> = (usize, Result<T, LockError>);

/// One master's call, answering its index and its answer.
pub(super) type Call<T> = Pin<Box<dyn Future<Output = Answer<T>> + Send>>;

/// When the calls still running of a round are cut off, each answering a
/// timeout.
pub(super) struct Deadline {
    /// Armed at the round's first wait, on the runtime current then.
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// What the calls were, and their bound, for the timeout's message.
    what: &'static str,
    bound: Duration,
    /// The round's masters, named in the log of a timeout.
    masters: Arc<[Arc<Master>]>,
}

impl Deadline {
    /// `bound` from now, for calls doing `what` on (some of) `masters`.
    pub(super) fn after(bound: Duration, what: &'static str, masters: &Arc<[Arc<Master>]>) -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep(bound)),
            what,
            bound,
            masters: masters.clone(),
        }
    }

    /// The timeout a call of master `index` answers when cut off.
    fn cut_off(&self, index: usize) -> LockError {
        let error = LockError::redis_timeout(self.what, self.bound);
        if let Some(master) = self.masters.get(index) {
            let what = self.what;
            tracing::debug!(master = %master.addr(), error = %error, "{what} failed on a Redlock master");
        }
        error
    }
}

/// A round's calls and the answers not yet read.
pub(super) struct Calls<T> {
    slots: Vec<Slot<T>>,
    /// None in unit tests of the wake-ups alone.
    deadline: Option<Deadline>,
    /// The calls' waker: the shared state below.
    waker: Waker,
    shared: Arc<Shared>,
    /// Calls still running.
    running: usize,
    /// Answers the caller needs before it can decide anything.
    decisive: usize,
    /// Answers read so far.
    read: usize,
}

enum Slot<T> {
    /// A call still running, and the master it answers for.
    Running(usize, Call<T>),
    Answered(Answer<T>),
    Read,
}

/// What the calls' waker shares with the caller. One waker serves every
/// call: a round has a handful, and polling one that has not answered
/// yet costs less than a waker of its own would (an allocation each).
struct Shared {
    /// Some call was woken since the calls were last polled.
    woken: AtomicBool,
    /// Wake-ups still to come before the caller's task is woken.
    held: AtomicIsize,
    caller: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        if self.held.fetch_sub(1, Ordering::AcqRel) <= 1 {
            self.caller.wake();
        }
    }
}

impl<T> Calls<T> {
    /// The calls, each with the index of its master, none polled yet; every
    /// wake-up reaches the caller until [`Self::decisive_from`] says
    /// otherwise. Those still running at `deadline` answer a timeout.
    pub(super) fn new(
        calls: impl IntoIterator<Item = (usize, Call<T>)>,
        deadline: Option<Deadline>,
    ) -> Self {
        let slots: Vec<Slot<T>> = calls
            .into_iter()
            .map(|(master, call)| Slot::Running(master, call))
            .collect();
        let shared = Arc::new(Shared {
            // Every call is polled at the first poll.
            woken: AtomicBool::new(true),
            held: AtomicIsize::new(1),
            caller: AtomicWaker::new(),
        });
        Self {
            running: slots.len(),
            slots,
            deadline,
            waker: Waker::from(shared.clone()),
            shared,
            decisive: 1,
            read: 0,
        }
    }

    /// Wakes the caller only once `answers` answers may be in (at most
    /// every call's: `usize::MAX` waits for all of them).
    pub(super) fn decisive_from(&mut self, answers: usize) {
        self.decisive = answers.min(self.slots.len());
    }

    /// No call is still running and every answer was read.
    pub(super) fn is_empty(&self) -> bool {
        self.running == 0
            && !self
                .slots
                .iter()
                .any(|slot| matches!(slot, Slot::Answered(_)))
    }

    /// The next answer; `None` once every call ended and every answer was
    /// read.
    pub(super) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Answer<T>>> {
        if let Some(answer) = self.take_answered() {
            return Poll::Ready(Some(answer));
        }
        if self.running == 0 {
            return Poll::Ready(None);
        }
        self.shared.caller.register(cx.waker());
        if self.shared.woken.swap(false, Ordering::AcqRel) {
            self.poll_running();
            if let Some(answer) = self.take_answered() {
                return Poll::Ready(Some(answer));
            }
            if self.running == 0 {
                return Poll::Ready(None);
            }
        }
        if self.cut_off_at_deadline(cx) {
            return Poll::Ready(self.take_answered());
        }
        // Every answer in was read: hold back the wake-ups of the answers
        // that cannot settle anything yet.
        let still = self.decisive.saturating_sub(self.read).max(1);
        self.shared.held.store(
            isize::try_from(still).unwrap_or(isize::MAX),
            Ordering::Release,
        );
        // A call woken since the swap counted against the old hold: poll
        // again soon rather than wait for a wake-up it may have used up.
        // (Not at once: a call that wakes itself would spin here.)
        if self.shared.woken.load(Ordering::Acquire) {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }

    /// Whether the deadline passed, answering a timeout for every call
    /// still running; if not, the deadline wakes the caller when it does.
    fn cut_off_at_deadline(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(deadline) = self.deadline.as_mut() else {
            return false;
        };
        if deadline.sleep.as_mut().poll(cx).is_pending() {
            return false;
        }
        for slot in &mut self.slots {
            if let Slot::Running(master, _) = *slot {
                *slot = Slot::Answered((master, Err(deadline.cut_off(master))));
                self.running -= 1;
            }
        }
        true
    }

    /// Polls each running call once. A call that yielded to lead its
    /// connection's batch of requests (`backend/direct`) is polled again
    /// soon: its wake-up, held back here, would leave the batch unwritten
    /// until other answers come.
    fn poll_running(&mut self) {
        let mut cx = Context::from_waker(&self.waker);
        let ((), yielded) = crate::backend::direct::polled_with_yields(|| {
            for slot in &mut self.slots {
                let Slot::Running(_, call) = slot else {
                    continue;
                };
                if let Poll::Ready(answer) = call.as_mut().poll(&mut cx) {
                    *slot = Slot::Answered(answer);
                    self.running -= 1;
                }
            }
        });
        if yielded {
            self.shared.woken.store(true, Ordering::Release);
        }
    }

    fn take_answered(&mut self) -> Option<Answer<T>> {
        let slot = self
            .slots
            .iter_mut()
            .find(|slot| matches!(slot, Slot::Answered(_)))?;
        match std::mem::replace(slot, Slot::Read) {
            Slot::Answered(answer) => {
                self.read += 1;
                Some(answer)
            }
            // Found answered just above.
            other => {
                *slot = other;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::oneshot;

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Three calls that answer when their sender says so.
    fn three() -> (Calls<u8>, Vec<oneshot::Sender<u8>>) {
        let (senders, calls): (Vec<_>, Vec<(usize, Call<u8>)>) = (0..3)
            .map(|index| {
                let (send, receive) = oneshot::channel::<u8>();
                let call: Call<u8> = Box::pin(async move {
                    let answer = receive.await.map_err(|_| LockError::config("dropped"));
                    (index, answer)
                });
                (send, (index, call))
            })
            .unzip();
        (Calls::new(calls, None), senders)
    }

    #[test]
    fn the_caller_is_woken_only_once_enough_answers_came_in() {
        let (mut calls, mut senders) = three();
        calls.decisive_from(2);
        let counting = Arc::new(Counting::default());
        let waker = Waker::from(counting.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(calls.poll_next(&mut cx).is_pending());
        senders.remove(1).send(7).unwrap();
        assert_eq!(
            counting.0.load(Ordering::SeqCst),
            0,
            "one answer settles nothing"
        );
        senders.remove(0).send(8).unwrap();
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        let mut answers = vec![];
        while let Poll::Ready(Some((index, answer))) = calls.poll_next(&mut cx) {
            answers.push((index, answer.unwrap()));
        }
        answers.sort();
        assert_eq!(answers, [(0, 8), (1, 7)]);
        // Read two of two: the last answer wakes the caller at once.
        senders.remove(0).send(9).unwrap();
        assert_eq!(counting.0.load(Ordering::SeqCst), 2);
        assert!(matches!(
            calls.poll_next(&mut cx),
            Poll::Ready(Some((2, Ok(9))))
        ));
        assert!(matches!(calls.poll_next(&mut cx), Poll::Ready(None)));
        assert!(calls.is_empty());
    }

    #[test]
    fn without_a_count_every_answer_wakes_the_caller() {
        let (mut calls, senders) = three();
        let counting = Arc::new(Counting::default());
        let waker = Waker::from(counting.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(calls.poll_next(&mut cx).is_pending());
        let mut senders = senders.into_iter();
        senders.next().unwrap().send(1).unwrap();
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            calls.poll_next(&mut cx),
            Poll::Ready(Some((0, Ok(1))))
        ));
        assert!(calls.poll_next(&mut cx).is_pending());
        drop(senders);
        // Dropped senders answer errors, each waking the caller.
        while let Poll::Ready(Some((_, answer))) = calls.poll_next(&mut cx) {
            assert!(answer.is_err());
        }
        assert!(calls.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn calls_still_running_at_the_deadline_answer_a_timeout() {
        let (calls, mut senders) = three();
        let calls: Vec<(usize, Call<u8>)> = calls
            .slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Running(master, call) => (master, call),
                _ => unreachable!("no call was polled"),
            })
            .collect();
        let bound = Duration::from_secs(1);
        let nobody: Arc<[Arc<Master>]> = Arc::from(Vec::new());
        let mut calls = Calls::new(calls, Some(Deadline::after(bound, "a test call", &nobody)));
        calls.decisive_from(2);
        senders.remove(1).send(7).unwrap();
        let started = tokio::time::Instant::now();
        let read_all = async {
            let mut answers = vec![];
            while let Some((index, answer)) = std::future::poll_fn(|cx| calls.poll_next(cx)).await {
                let timed_out = |err| matches!(err, LockError::Redis(redis) if redis.is_timeout());
                answers.push((index, answer.map_err(timed_out)));
            }
            answers
        };
        let mut answers = tokio::time::timeout(bound * 2, read_all)
            .await
            .expect("the calls still running were not cut off");
        answers.sort();
        assert_eq!(answers, [(0, Err(true)), (1, Ok(7)), (2, Err(true))]);
        assert_eq!(
            started.elapsed(),
            bound,
            "cut off at the deadline, not before"
        );
        assert!(calls.is_empty());
        // The calls cut off were dropped: their senders see nobody listens.
        assert!(senders.iter().all(oneshot::Sender::is_closed));
    }

    #[tokio::test]
    async fn answers_come_whatever_the_count_when_calls_end_on_other_threads() {
        for _ in 0..200 {
            let (mut calls, senders) = three();
            calls.decisive_from(3);
            let answering = std::thread::spawn(move || {
                for (value, send) in senders.into_iter().enumerate() {
                    send.send(u8::try_from(value).unwrap()).unwrap();
                }
            });
            let mut read = 0;
            while let Some((_, answer)) = std::future::poll_fn(|cx| calls.poll_next(cx)).await {
                answer.unwrap();
                read += 1;
            }
            assert_eq!(read, 3);
            answering.join().unwrap();
        }
    }
}
