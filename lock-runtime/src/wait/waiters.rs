//! Who waits on which release channel, and whom each release wakes.
//!
//! A release message wakes only the waiter that has waited longest on that
//! channel in this process: it retries, and the rest sleep on. With a
//! thousand tasks queued on one key, a release then costs one retry instead
//! of a thousand. A waiter that leaves (acquired by other means, timed out,
//! cancelled) while holding an unused wake-up hands it to the next in line,
//! so no release is swallowed. After the pub/sub connection was down every
//! waiter is woken, since releases may have gone unheard.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures_util::FutureExt;
use tokio::sync::Notify;

/// Every channel someone in this process waits on, with its waiters in
/// arrival order.
#[derive(Clone, Default)]
pub(crate) struct Waiters {
    channels: Arc<Mutex<HashMap<String, VecDeque<Arc<Waiter>>>>>,
}

/// One waiting acquisition.
#[derive(Default)]
struct Waiter {
    wake: Notify,
    /// Woken and not yet retried: a wake-up to hand on if it leaves.
    woken: AtomicBool,
}

impl Waiter {
    fn wake(&self) {
        self.woken.store(true, Ordering::SeqCst);
        // Stores a permit when the waiter is busy retrying, so the wake-up
        // is not lost: its next wait returns at once.
        self.wake.notify_one();
    }
}

/// One waiter's place in line on one channel; leaves the line on drop.
pub(crate) struct Subscription {
    waiters: Waiters,
    channel: String,
    waiter: Arc<Waiter>,
    /// Called when the last waiter of the channel leaves.
    on_empty: Box<dyn Fn(String) + Send + Sync>,
}

impl Waiters {
    /// Joins the line of `channel`. `on_empty` runs when the channel's
    /// last waiter leaves (to unsubscribe).
    pub(crate) fn join(
        &self,
        channel: &str,
        on_empty: Box<dyn Fn(String) + Send + Sync>,
    ) -> Subscription {
        let waiter = Arc::new(Waiter::default());
        self.lock()
            .entry(channel.to_owned())
            .or_default()
            .push_back(waiter.clone());
        Subscription {
            waiters: self.clone(),
            channel: channel.to_owned(),
            waiter,
            on_empty,
        }
    }

    /// Whether anyone waits on anything.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Whether anyone waits on `channel`.
    pub(crate) fn is_wanted(&self, channel: &str) -> bool {
        self.lock().contains_key(channel)
    }

    /// Every channel someone waits on.
    pub(crate) fn channels(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// A release on `channel`: wake the longest waiter.
    pub(crate) fn wake_one(&self, channel: &str) {
        if let Some(first) = self.lock().get(channel).and_then(VecDeque::front) {
            first.wake();
        }
    }

    /// A handle that does not keep the waiters alive (for the in-memory
    /// store, which outlives its lockers).
    pub(crate) fn downgrade(&self) -> WeakWaiters {
        WeakWaiters(Arc::downgrade(&self.channels))
    }

    /// Releases may have gone unheard: wake everyone.
    pub(crate) fn wake_all(&self) {
        for line in self.lock().values() {
            line.iter().for_each(|waiter| waiter.wake());
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Arc<Waiter>>>> {
        // The map stays consistent even if a holder panicked mid-update.
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`Waiters`] that may be gone.
pub(crate) struct WeakWaiters(Weak<Mutex<HashMap<String, VecDeque<Arc<Waiter>>>>>);

impl crate::memory::Listener for WeakWaiters {
    fn released(&self, channel: &str) -> bool {
        match self.0.upgrade() {
            Some(channels) => {
                Waiters { channels }.wake_one(channel);
                true
            }
            None => false,
        }
    }

    fn waiting(&self, channel: &str) -> usize {
        self.0.upgrade().map_or(0, |channels| {
            let waiters = Waiters { channels };
            waiters.lock().get(channel).map_or(0, VecDeque::len)
        })
    }
}

impl Subscription {
    /// Forgets wake-ups so far; call right before trying to acquire, so
    /// that a release after the try is never missed and one before it is
    /// not counted twice.
    pub(crate) fn mark_seen(&mut self) {
        self.waiter.woken.store(false, Ordering::SeqCst);
        // Consumes a stored permit, if any.
        let _ = self.waiter.wake.notified().now_or_never();
    }

    /// Completes at this waiter's next wake-up since [`Self::mark_seen`].
    pub(crate) async fn released(&mut self) {
        self.waiter.wake.notified().await;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.waiters.lock();
        let Some(line) = channels.get_mut(&self.channel) else {
            return;
        };
        line.retain(|waiter| !Arc::ptr_eq(waiter, &self.waiter));
        if self.waiter.woken.load(Ordering::SeqCst) {
            // Leaving with an unused wake-up: the release it stood for
            // belongs to the next in line.
            if let Some(next) = line.front() {
                next.wake();
            }
        }
        if line.is_empty() {
            channels.remove(&self.channel);
            drop(channels);
            (self.on_empty)(std::mem::take(&mut self.channel));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(waiters: &Waiters, channel: &str) -> Subscription {
        waiters.join(channel, Box::new(|_| {}))
    }

    fn is_woken(subscription: &Subscription) -> bool {
        subscription.waiter.woken.load(Ordering::SeqCst)
    }

    #[test]
    fn a_release_wakes_only_the_longest_waiter() {
        let waiters = Waiters::default();
        let first = join(&waiters, "c");
        let second = join(&waiters, "c");
        waiters.wake_one("c");
        assert!(is_woken(&first));
        assert!(!is_woken(&second));
    }

    #[test]
    fn an_unused_wake_up_passes_to_the_next_in_line() {
        let waiters = Waiters::default();
        let first = join(&waiters, "c");
        let second = join(&waiters, "c");
        waiters.wake_one("c");
        drop(first);
        assert!(is_woken(&second));
    }

    #[test]
    fn a_used_wake_up_is_not_passed_on() {
        let waiters = Waiters::default();
        let mut first = join(&waiters, "c");
        let second = join(&waiters, "c");
        waiters.wake_one("c");
        first.mark_seen();
        drop(first);
        assert!(!is_woken(&second));
    }

    #[test]
    fn the_last_waiter_leaving_empties_the_channel() {
        let left = Arc::new(Mutex::new(Vec::new()));
        let waiters = Waiters::default();
        let record = left.clone();
        let only = waiters.join("c", Box::new(move |c| record.lock().unwrap().push(c)));
        assert!(waiters.is_wanted("c"));
        drop(only);
        assert!(waiters.is_empty());
        assert_eq!(*left.lock().unwrap(), vec!["c".to_owned()]);
    }

    #[tokio::test]
    async fn a_wake_up_while_busy_is_kept_for_the_next_wait() {
        let waiters = Waiters::default();
        let mut waiter = join(&waiters, "c");
        waiter.mark_seen();
        waiters.wake_one("c"); // arrives while the waiter is retrying
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter.released())
            .await
            .expect("the wake-up was lost");
        waiter.mark_seen();
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), waiter.released())
                .await
                .is_err(),
            "a consumed wake-up fired twice"
        );
    }

    #[test]
    fn wake_all_wakes_everyone() {
        let waiters = Waiters::default();
        let a = join(&waiters, "a");
        let b = join(&waiters, "b");
        let b2 = join(&waiters, "b");
        waiters.wake_all();
        assert!(is_woken(&a) && is_woken(&b) && is_woken(&b2));
    }
}
