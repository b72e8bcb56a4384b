//! Which tasks hold which side of which read/write lock, so that a task
//! asking again for a lock it holds is answered at once instead of
//! waiting for itself: a write asked under its own read is refused (an
//! upgrade: two tasks doing it would wait for each other forever), and a
//! read asked under its own write runs under that write.
//!
//! A hold counts for the tokio task that acquired it (its guard may move
//! to another task; it still counts for the first), through its locker;
//! outside any task (the future a runtime's `block_on` runs, such as
//! `#[tokio::main]`'s body), for its thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use foldhash::HashMap;

use crate::engine::core::Core;
use crate::engine::handle::LockHandle;

/// A lock as the registry names it: its locker, and its name.
type Resource = (usize, String);

/// What one task holds of one lock.
#[derive(Clone)]
pub(super) enum Side {
    /// A read.
    Read,
    /// The write, seen through its handle.
    Write(LockHandle),
}

/// Who holds: a tokio task, or the thread of a `block_on`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holder {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Holder {
    fn current() -> Self {
        tokio::task::try_id()
            .map_or_else(|| Holder::Thread(std::thread::current().id()), Holder::Task)
    }
}

struct Holding {
    task: Holder,
    id: u64,
    side: Side,
}

static HELD: LazyLock<Mutex<HashMap<Resource, Vec<Holding>>>> = LazyLock::new(Mutex::default);
static NEXT: AtomicU64 = AtomicU64::new(0);

fn held() -> MutexGuard<'static, HashMap<Resource, Vec<Holding>>> {
    // A map of plain values stays whole even if a holder panicked.
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// A hold counted for its task until this is dropped.
pub(super) struct Registered {
    resource: Resource,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut held = held();
        if let Some(holdings) = held.get_mut(&self.resource) {
            holdings.retain(|holding| holding.id != self.id);
            if holdings.is_empty() {
                held.remove(&self.resource);
            }
        }
    }
}

/// Counts `side` of lock `name` (through `core`'s locker) for the current
/// task.
pub(super) fn register(core: &Core, name: &str, side: Side) -> Registered {
    let task = Holder::current();
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let resource = (core.identity(), name.to_owned());
    held()
        .entry(resource.clone())
        .or_default()
        .push(Holding { task, id, side });
    Registered { resource, id }
}

/// What the current task holds of lock `name` through `core`'s locker:
/// the write if it holds it, else a read if it holds one.
pub(super) fn held_by_this_task(core: &Core, name: &str) -> Option<Side> {
    let task = Holder::current();
    let held = held();
    let mine = held
        .get(&(core.identity(), name.to_owned()))?
        .iter()
        .filter(|holding| holding.task == task);
    let mut side = None;
    for holding in mine {
        match holding.side {
            Side::Write(_) => return Some(holding.side.clone()),
            Side::Read => side = Some(Side::Read),
        }
    }
    side
}
