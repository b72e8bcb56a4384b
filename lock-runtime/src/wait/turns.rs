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
//! A task joins the line only once the lock proved busy, or when the line
//! is already there: an uncontended lock costs nothing more than a lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

/// Every key this locker's tasks queue for.
#[derive(Default)]
pub(crate) struct Turns {
    lines: Mutex<HashMap<String, Arc<Line>>>,
}

/// One key's line.
#[derive(Default)]
struct Line {
    /// Held by the task whose turn it is, until it lets go of the lock or
    /// gives up; tokio's mutex hands it on in arrival order.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Tasks in line (waiting, or holding the turn).
    members: std::sync::atomic::AtomicUsize,
}

/// A task's turn on one key: while it lives, the rest of the line waits.
pub(crate) struct Turn {
    _turn: OwnedMutexGuard<()>,
    _place: Place,
}

/// Membership of a line; leaving the last place removes the line.
struct Place {
    turns: Arc<Turns>,
    key: String,
    line: Arc<Line>,
}

impl Turns {
    /// Whether tasks of this locker already queue for `key`: a new task
    /// then joins them instead of trying the server first.
    pub(crate) fn is_queued(&self, key: &str) -> bool {
        self.lock().contains_key(key)
    }

    /// Waits (up to `wait`) for this task's turn on `key`; `None` when the
    /// wait ran out first.
    pub(crate) async fn wait_turn(self: &Arc<Self>, key: &str, wait: Duration) -> Option<Turn> {
        let place = self.join(key);
        let turn = place.line.turn.clone();
        let turn = tokio::time::timeout(wait, turn.lock_owned()).await.ok()?;
        Some(Turn {
            _turn: turn,
            _place: place,
        })
    }

    fn join(self: &Arc<Self>, key: &str) -> Place {
        // Counted under the map's lock: a line is never removed between a
        // task finding it and joining it.
        let mut lines = self.lock();
        let line = lines.entry(key.to_owned()).or_default().clone();
        line.members
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop(lines);
        Place {
            turns: self.clone(),
            key: key.to_owned(),
            line,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Line>>> {
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
            lines.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tasks_take_turns_in_arrival_order_and_the_line_goes_away() {
        let turns = Arc::new(Turns::default());
        assert!(!turns.is_queued("k"));
        let first = turns.wait_turn("k", Duration::from_secs(1)).await.unwrap();
        assert!(turns.is_queued("k"));
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
        assert!(!turns.is_queued("k"), "an empty line is removed");
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
        assert!(!turns.is_queued("k"));
    }
}
