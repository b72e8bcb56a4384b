//! Turns: the tasks of one locker that wait for the same lock queue up in
//! the process, and only the first in line contends on the server.
//!
//! A hot key (a flash sale: hundreds of tasks per process buying one SKU)
//! would otherwise have every waiting task retry on the server after every
//! release, and the server's work per grant would grow with the number of
//! waiters. With turns, the task whose turn it is waits on the server (it
//! subscribes to the release channel and retries when woken), keeps its
//! turn while it holds the lock, and hands it, in arrival order, to the
//! next task of its locker when it lets go; that task tries at once. Per
//! grant the server then sees one try per contending *process*, however
//! many tasks each has.
//!
//! Every acquisition that may wait takes its turn first: uncontended, that
//! is a map entry and an uncontended mutex, no server call; on a hot key,
//! a burst of arrivals sends one try per process instead of one per task.
//!
//! When the holder lets go and someone is in line, it may pass the lock
//! straight to the next task instead of releasing it (see
//! [`crate::engine::handover`]): the pass travels with the turn.
//!
//! The line also keeps the subscription to the lock's release channel
//! ([`Listening`]) once it needed one, from then until its last member
//! leaves, whoever has the turn: on a hot key it is never dropped and taken
//! again, and each turn tries while already subscribed, so a busy answer
//! needs no second try to be sure no release went unheard.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use foldhash::HashMap;
use tokio::sync::OwnedMutexGuard;

use super::waiters::Subscription;
use crate::engine::handover::{
    Handover, PASSES_IN_PROCESS_IN_A_ROW, PASSES_WHILE_OTHERS_WAIT, YIELD_GRACE_MIN,
    next_yield_grace,
};

/// Every key this locker's tasks queue for.
#[derive(Default)]
pub(crate) struct Turns {
    /// Keyed by the line's own key, shared with it (one allocation per
    /// line for its name, not one more per member).
    lines: Mutex<HashMap<Arc<str>, Arc<Line>>>,
}

/// What the line listens with, handed from turn to turn.
#[derive(Default)]
pub(crate) struct Listening {
    /// The line's place among the channel's waiters, once subscribed.
    pub(crate) subscription: Option<Subscription>,
    /// Whether the server confirmed the subscription.
    pub(crate) confirmed: bool,
    /// The lock, passed by the last holder to whoever takes the turn next.
    handover: Option<Handover>,
    /// Passes in a row since the line last took the lock from the server.
    passes: u32,
    /// Of those, the last ones in a row made without a server call.
    passes_in_process: u32,
    /// Whether someone outside the locker waited, at the last pass.
    marked: bool,
    /// The last holder released the lock after the line's share, for
    /// someone outside the locker: the next in line lets them go first.
    yielded: bool,
    /// How long the next in line holds back after a yield (zero: not
    /// learnt yet, [`YIELD_GRACE_MIN`]); see [`crate::engine::handover`].
    yield_grace: Duration,
}

/// One key's line.
struct Line {
    key: Arc<str>,
    /// Held by the task whose turn it is, until it lets go of the lock or
    /// gives up; tokio's mutex hands it on in arrival order.
    turn: Arc<tokio::sync::Mutex<Listening>>,
    /// Tasks in line (waiting, or holding the turn).
    members: std::sync::atomic::AtomicUsize,
}

/// A task's turn on one key: while it lives, the rest of the line waits.
pub(crate) struct Turn {
    listening: OwnedMutexGuard<Listening>,
    place: Place,
    /// Whether the task had to wait behind others for it.
    queued: bool,
}

impl Turn {
    /// The line's subscription, for the task whose turn it is.
    pub(crate) fn listening(&mut self) -> &mut Listening {
        &mut self.listening
    }

    /// Whether the task waited behind others of its locker for this turn.
    pub(crate) fn was_queued(&self) -> bool {
        self.queued
    }

    /// The lock was granted by the server (`passed` false) or passed by
    /// the last holder: if nobody else is in line, stop listening (a lone
    /// waiter's subscription ends with its wait, as without a line); else
    /// keep it for the next in line.
    ///
    /// A grant right after a pass this task gave back (it could not use
    /// it: another ttl, a fixed lease) counts as passed: the line took the
    /// lock back at once, so its run of holds, and what it learnt of
    /// waiters outside, go on. Counted afresh, a line whose passes are all
    /// given back would never reach its share and never let them in.
    pub(crate) fn granted(&mut self, passed: bool) {
        if !passed {
            self.listening.passes = 0;
            self.listening.passes_in_process = 0;
            self.listening.marked = false;
        }
        if self.members() <= 1 {
            // The count of passes stays: a line that empties and fills
            // again between passes is still one run of passes, and the
            // limit must hold for it.
            self.listening.subscription = None;
            self.listening.confirmed = false;
        }
    }

    /// Whether the holder should pass the lock to the next in line rather
    /// than release it: someone is in line, and the line has not yet had
    /// its share while others wait (see [`crate::engine::handover`]).
    pub(crate) fn should_pass(&self) -> bool {
        self.members() > 1
            && !(self.listening.marked && self.listening.passes >= PASSES_WHILE_OTHERS_WAIT)
    }

    /// Whether the next pass may be made in process (see
    /// [`crate::engine::handover`]): the line has not made its share of those in
    /// a row since the server last saw the lock.
    pub(crate) fn may_pass_in_process(&self) -> bool {
        self.listening.passes_in_process < PASSES_IN_PROCESS_IN_A_ROW
    }

    /// The holder lets go of the lock rather than passing it: when that is
    /// because the line had its share while others wait, it lets it go for
    /// them, and this answers for how long the line keeps off it (see
    /// [`crate::engine::handover`]); the next in line then holds back as long
    /// (see [`Self::take_yield`]).
    pub(crate) fn yields(&mut self) -> Option<Duration> {
        self.listening.yielded = self.members() > 1
            && self.listening.marked
            && self.listening.passes >= PASSES_WHILE_OTHERS_WAIT;
        self.listening.yielded.then(|| self.yield_grace())
    }

    /// Whether the last holder yielded the lock to waiters outside the
    /// locker (once: the flag is cleared).
    pub(crate) fn take_yield(&mut self) -> bool {
        std::mem::take(&mut self.listening.yielded)
    }

    /// How long to hold back after a yield (see [`crate::engine::handover`]).
    pub(crate) fn yield_grace(&self) -> Duration {
        self.listening.yield_grace.max(YIELD_GRACE_MIN)
    }

    /// What came of a hold-back: `used` when the waiter outside took the
    /// lock meanwhile (its release was heard, or the next try found the
    /// lock busy).
    pub(crate) fn yield_answered(&mut self, used: bool) {
        self.listening.yield_grace = next_yield_grace(self.yield_grace(), used);
    }

    /// The lock was passed: the next to take the turn finds `handover`.
    /// `marked` is what the server said of waiters outside the locker; a
    /// pass in process (`None`) learnt nothing new.
    pub(crate) fn pass(&mut self, handover: Handover, marked: Option<bool>) {
        let listening = &mut *self.listening;
        if handover.in_process {
            listening.passes_in_process = listening.passes_in_process.saturating_add(1);
        } else {
            listening.passes_in_process = 0;
        }
        listening.handover = Some(handover);
        // A line nobody outside waits for may pass without end.
        listening.passes = listening.passes.saturating_add(1);
        if let Some(marked) = marked {
            listening.marked = marked;
        }
    }

    /// The lock the last holder passed to this turn, if it did.
    pub(crate) fn take_handover(&mut self) -> Option<Handover> {
        self.listening.handover.take()
    }

    fn members(&self) -> usize {
        self.place
            .line
            .members
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Membership of a line; leaving the last place removes the line.
struct Place {
    turns: Arc<Turns>,
    line: Arc<Line>,
}

impl Turns {
    /// Waits (up to `wait`) for this task's turn on `key`; `None` when the
    /// wait ran out first.
    pub(crate) async fn wait_turn(self: &Arc<Self>, key: &str, wait: Duration) -> Option<Turn> {
        let place = self.join(key);
        let turn = place.line.turn.clone();
        let (listening, queued) = match turn.clone().try_lock_owned() {
            Ok(listening) => (listening, false),
            Err(_) => (
                tokio::time::timeout(wait, turn.lock_owned()).await.ok()?,
                true,
            ),
        };
        Some(Turn {
            listening,
            place,
            queued,
        })
    }

    fn join(self: &Arc<Self>, key: &str) -> Place {
        // Counted under the map's lock: a line is never removed between a
        // task finding it and joining it.
        let mut lines = self.lock();
        let line = match lines.get(key) {
            Some(line) => line.clone(),
            None => {
                let key: Arc<str> = Arc::from(key);
                let line = Arc::new(Line {
                    key: key.clone(),
                    turn: Arc::default(),
                    members: std::sync::atomic::AtomicUsize::new(0),
                });
                lines.insert(key, line.clone());
                line
            }
        };
        line.members
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop(lines);
        Place {
            turns: self.clone(),
            line,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<Line>>> {
        // The map stays consistent even if a holder panicked mid-update.
        self.lines.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut lines = self.turns.lock();
        let left = self
            .line
            .members
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        // Under the map's lock, so a task joining now finds either the
        // line still counted or no line at all.
        if left == 1 {
            lines.remove(&self.line.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tasks_take_turns_in_arrival_order_and_the_line_goes_away() {
        let turns = Arc::new(Turns::default());
        let first = turns.wait_turn("k", Duration::from_secs(1)).await.unwrap();
        assert!(!first.was_queued());
        assert!(turns.lock().contains_key("k"));
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for n in 0..3 {
            let (turns, order) = (turns.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let turn = turns.wait_turn("k", Duration::from_secs(60)).await;
                order.lock().unwrap().push(n);
                drop(turn);
            }));
            tokio::task::yield_now().await;
        }
        drop(first);
        for task in waiting {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
        assert!(turns.lock().is_empty(), "an empty line is removed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_turn_is_bounded_and_leaves_the_line() {
        let turns = Arc::new(Turns::default());
        let held = turns.wait_turn("k", Duration::from_secs(1)).await.unwrap();
        assert!(
            turns
                .wait_turn("k", Duration::from_millis(50))
                .await
                .is_none()
        );
        drop(held);
        assert!(turns.lock().is_empty());
    }
}
