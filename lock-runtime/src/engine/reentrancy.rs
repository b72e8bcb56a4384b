//! Which locks the current task holds through `#[distributed_lock]`, for
//! [`current`], and for calls nested in a holder's body.
//!
//! A call for a key that an enclosing call of the same task already holds
//! (through the same locker) does not wait for itself: it runs under the
//! enclosing lock. But only one such nested call runs at a time: calls
//! nested in one holder's body that run concurrently (`join!`, `select!`,
//! `FuturesUnordered`) take turns on a lock local to that holder, each
//! waiting within its own `wait`. A call nested in a nested call takes
//! turns on its own parent's local lock, which is free, so nesting never
//! waits on an ancestor.
//!
//! A nested call never outlives the body it is nested in: one still
//! running when that body ends (moved out of it, say spawned after a
//! `timeout` gave up on it) is stopped at its next `.await` with
//! `LockError::Lost`, since the lock it ran under is being let go. One
//! caught between two `.await`s (polled on another thread when the body
//! ends) is waited for: the holder lets go only once no nested call's
//! step is running, so none runs beside the next owner. So does a holder
//! cancelled by its caller: the lock is let go in the background once
//! that step ends (see `crate::attribute`). The same holds for a call
//! nested in a nested call, both moved out: the holder's end ends every
//! body nested in it, however deep, and its steps are waited for too.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Notify, Semaphore};

use crate::engine::core::Core;
use crate::engine::handle::LockHandle;

tokio::task_local! {
    static HELD: Arc<Frame>;
}

/// One annotated call holding a lock: who it is to the calls after it in
/// its task, linked to the frame the task was in when it began (the
/// task's frames, innermost first), and what it shares with the calls
/// nested directly in it. One allocation per call.
pub(crate) struct Frame {
    locker: usize,
    /// Which lock of the key it holds, as the caller names kinds (the
    /// exclusive lock, a read, a write): locks of one name but of
    /// different kinds are different locks.
    pub(crate) kind: &'static str,
    pub(crate) handle: LockHandle,
    outer: Option<Arc<Frame>>,
    pub(crate) nested: Nested,
}

impl Frame {
    /// The frame of a call that holds `handle`, a lock of `kind` taken
    /// through the locker of `core`: made before its body runs, so that
    /// whoever lets go of its lock can wait for the calls nested in it
    /// ([`Nested::settled`]), also when the call is cancelled.
    pub(crate) fn new(core: &Core, kind: &'static str, handle: LockHandle) -> Arc<Self> {
        Self::make(core.identity(), kind, handle, None)
    }

    /// The frame of a call nested in `parent`'s body, under its lock: it
    /// ends when that body does, if not before.
    pub(crate) fn nested_in(parent: &Arc<Frame>) -> Arc<Self> {
        let child = Self::make(
            parent.locker,
            parent.kind,
            parent.handle.clone(),
            Some(parent.clone()),
        );
        let mut children = parent.nested.children();
        children.retain(|child| child.strong_count() > 0);
        children.push(Arc::downgrade(&child));
        drop(children);
        // Looked at after joining: a parent that ended before has handed
        // its children on already, this one included or not.
        if parent.nested.ended.load(Ordering::SeqCst) {
            child.nested.finish();
        }
        child
    }

    fn make(
        locker: usize,
        kind: &'static str,
        handle: LockHandle,
        parent: Option<Arc<Frame>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            locker,
            kind,
            handle,
            // Made in the task, and the scope, its body then runs in.
            outer: HELD.try_with(Arc::clone).ok(),
            nested: Nested {
                turns: Semaphore::new(1),
                ended: AtomicBool::new(false),
                watched: AtomicBool::new(false),
                end: Notify::new(),
                polling: AtomicUsize::new(0),
                idle: Notify::new(),
                parent,
                children: Mutex::new(Vec::new()),
            },
        })
    }
}

/// What one holding call shares with the calls nested directly in it.
pub(crate) struct Nested {
    /// One permit, taken by each nested call in turn.
    pub(crate) turns: Semaphore,
    /// The holding call's body ended (or was dropped).
    ended: AtomicBool,
    /// Someone waits for the end: only then is it announced (`end`'s
    /// wake-up takes a lock, and most bodies nest nothing).
    watched: AtomicBool,
    end: Notify,
    /// Nested calls being polled right now (see [`Nested::step`]).
    polling: AtomicUsize,
    /// The last of those polls ended, after the body did.
    idle: Notify,
    /// The frame of the holder this call is nested in, if it is nested:
    /// each poll of a call nested in this one counts there too, so that
    /// the holder lets go only once no call nested at any depth is
    /// mid-step.
    parent: Option<Arc<Frame>>,
    /// The frames of the calls nested in this one's body: they end with
    /// it, even one moved out and not polled since (its own nested calls
    /// look only at it).
    children: Mutex<Vec<Weak<Frame>>>,
}

impl Nested {
    /// Marks the holding call's body ended, and the bodies nested in it,
    /// and wakes who waits for that.
    pub(crate) fn finish(&self) {
        // Once is enough: a frame that joins after the first end sees
        // `ended` and finishes itself (see `nested_in`).
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.watched.load(Ordering::SeqCst) {
            self.end.notify_waiters();
        }
        let children = std::mem::take(&mut *self.children());
        for child in children.iter().filter_map(Weak::upgrade) {
            child.nested.finish();
        }
    }

    fn children(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Frame>>> {
        // A list of weak references stays whole even if a holder panicked.
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This frame and those of the holders it is nested in, innermost first.
    fn and_ancestors(&self) -> impl Iterator<Item = &Nested> {
        std::iter::successors(Some(self), |nested| {
            nested.parent.as_deref().map(|parent| &parent.nested)
        })
    }

    /// Runs a nested call's `work`, each poll counted in [`Self::polling`]
    /// while it runs: a poll that began before the body ended is waited
    /// for ([`Self::settled`]); one that begins after sees the end (the
    /// work looks at [`Self::ended`] first).
    pub(crate) async fn step<F: Future>(&self, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            let _polling = Polling::enter(self);
            work.as_mut().poll(cx)
        })
        .await
    }

    /// Whether no nested call is being polled right now.
    pub(crate) fn idle(&self) -> bool {
        self.polling.load(Ordering::SeqCst) == 0
    }

    /// Completes once no nested call is being polled; after [`Self::finish`],
    /// none starts again.
    pub(crate) async fn settled(&self) {
        // Most bodies nest nothing, or nothing still running: no waiter to
        // register (a poll that starts from now on sees the end).
        if self.idle() {
            return;
        }
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            // Registered before looking, so a poll ending between the two
            // wakes it.
            idle.as_mut().enable();
            if self.polling.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Completes once the holding call's body has ended.
    pub(crate) async fn ended(&self) {
        // Before looking at `ended`: an end that finds `watched` unset
        // comes before this look, which then sees it.
        self.watched.store(true, Ordering::SeqCst);
        loop {
            let end = self.end.notified();
            tokio::pin!(end);
            // Registered before looking, so an end between the two wakes it.
            end.as_mut().enable();
            if self.ended.load(Ordering::SeqCst) {
                return;
            }
            end.await;
        }
    }
}

/// One poll of a nested call, counted while it runs, by its holder and
/// every holder that one is nested in.
struct Polling<'a>(&'a Nested);

impl<'a> Polling<'a> {
    fn enter(nested: &'a Nested) -> Self {
        for holder in nested.and_ancestors() {
            holder.polling.fetch_add(1, Ordering::SeqCst);
        }
        Self(nested)
    }
}

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        for holder in self.0.and_ancestors() {
            if holder.polling.fetch_sub(1, Ordering::SeqCst) == 1
                && holder.ended.load(Ordering::SeqCst)
            {
                holder.idle.notify_waiters();
            }
        }
    }
}

/// Marks its frame's body ended when dropped: when the body returns, and
/// when the call is cancelled.
struct EndOnDrop(Arc<Frame>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.nested.finish();
    }
}

/// The lock held by the innermost `#[distributed_lock]` function this task
/// is running, or `None` outside one. Task-local: a task spawned from the
/// body does not inherit it.
///
/// ```no_run
/// use lock_runtime::{distributed_lock, LockError};
///
/// #[distributed_lock(key = "invoice:<id>")]
/// async fn settle(id: u64) -> Result<u64, LockError> {
///     let lock = lock_runtime::current().expect("inside an annotated fn");
///     Ok(lock.fence()) // send it along with every write
/// }
/// ```
pub fn current() -> Option<LockHandle> {
    HELD.try_with(|held| held.handle.clone()).ok()
}

/// The innermost call of this task that holds `key` through `locker`, as
/// a lock of one of `kinds` (as the caller names kinds: the exclusive
/// lock, the fair lock, a read, a write).
pub(crate) fn held_by_this_task(core: &Core, key: &str, kinds: &[&str]) -> Option<Arc<Frame>> {
    let id = core.identity();
    HELD.try_with(|held| {
        std::iter::successors(Some(held), |frame| frame.outer.as_ref())
            .find(|frame| {
                frame.locker == id && frame.handle.key() == key && kinds.contains(&frame.kind)
            })
            .cloned()
    })
    .ok()
    .flatten()
}

/// Runs `body` as the call of `frame`: its frame the task's innermost
/// while the body runs.
pub(crate) async fn holding<F: Future>(frame: Arc<Frame>, body: F) -> F::Output {
    let end = EndOnDrop(frame.clone());
    let output = HELD.scope(frame, body).await;
    // A nested call moved out of the body may be mid-step on another
    // thread: it stops at its next `.await`, and the lock is let go after.
    let nested = &end.0.nested;
    nested.finish();
    nested.settled().await;
    output
}
