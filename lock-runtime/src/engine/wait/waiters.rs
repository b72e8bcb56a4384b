//! Who waits on which release channel, and whom each release wakes.
//!
//! A release message wakes only the waiter that has waited longest on that
//! channel in this process: it retries, and the rest sleep on. With a
//! thousand tasks queued on one key, a release then costs one retry instead
//! of a thousand. A waiter that leaves (acquired by other means, timed out,
//! cancelled) while holding an unused wake-up hands it to the next in line,
//! so no release is swallowed. After the pub/sub connection was down every
//! waiter is woken, since releases may have gone unheard.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use futures_util::FutureExt;
use tokio::sync::Notify;

use super::behind::Behind;
use super::grantee::Grantee;
use super::sightings::{Release, Sightings, Wakes};
use crate::engine::handover::Handover;
use crate::host::clock::Clock;
use crate::owner::LineId;

/// Every channel someone in this process waits on, with its waiters in
/// arrival order.
#[derive(Clone, Default)]
pub(crate) struct Waiters {
    channels: Arc<Mutex<HashMap<String, VecDeque<Arc<Waiter>>>>>,
    /// The locker's line id: a lock it let go of for the callers outside
    /// it is no news to its own waiters (they keep off it meanwhile).
    own: LineId,
    /// The locker's clock, which says when a waiter heard a lock handed to
    /// another.
    clock: Clock,
    /// Channels a server confirmed this process listens on, since the
    /// listener last had a gap: a waiter that joins one of them hears
    /// every release from then on, with no subscription of its own.
    confirmed: Arc<Mutex<HashSet<String>>>,
    /// The latest releases told by name ([`Release::by`]), with their
    /// channels and how many masters told each so far: a release that
    /// every Redlock master tells wakes a waiter once, when as many told
    /// it as the waiter needs ([`Subscription::told_by`]).
    told: Arc<Mutex<VecDeque<Telling>>>,
}

/// A named release, and how many masters told it.
struct Telling {
    channel: String,
    by: Grantee,
    count: usize,
}

/// Named releases remembered: far more than a burst of releases on one
/// channel can bring before their messages from every master are in.
const TOLD_KEPT: usize = 64;

/// One waiting acquisition.
#[derive(Default)]
struct Waiter {
    /// Who it is to a release that hands it the lock (see
    /// [`Wakes::Grant`]), when its primitive's releases do.
    grantee: Option<Grantee>,
    /// How many free units it waits for (0 until said: one).
    wants: AtomicUsize,
    /// How many masters must tell a named release before it wakes for it
    /// (0 until said: one).
    told_by: AtomicUsize,
    wake: Notify,
    /// Woken and not yet retried: a wake-up to hand on if it leaves.
    woken: AtomicBool,
    /// What woke it since it last tried.
    heard: Mutex<Heard>,
}

/// The wake-ups of one waiter since its last try.
#[derive(Default)]
struct Heard {
    releases: Vec<Release>,
    /// The lock is its own: handed over by a release, or by a holder of
    /// this locker. Kept until taken, across tries.
    granted: Option<Granted>,
    /// When it last heard a release hand the lock to another waiter: the
    /// line moves, and the new owner holds it at least a place's lease.
    handed_on: Option<Instant>,
    /// A wake-up that is news whatever the try saw (the listener was
    /// down, a leaving waiter handed its wake-up on, or too many to keep).
    anything: bool,
}

/// How a lock became a waiter's while it waited.
pub(crate) enum Granted {
    /// A release handed it over on the server, with this fence, and saw
    /// these waiters behind it.
    Released { fence: u64, behind: Behind },
    /// A holder of this locker handed it over in process (see
    /// [`Waiters::pass`]); these are the waiters behind it. Untaken, its
    /// drop gives the lock back on the server.
    Passed {
        handover: Box<Handover>,
        behind: Behind,
    },
}

/// Release messages a waiter keeps between two tries; more count as news.
const KEPT_RELEASES: usize = 16;

impl Waiter {
    /// Tells the waiter the lock is its own (`granted`). Not a wake-up to
    /// hand on if it leaves: its leaving hands the lock on, on the server.
    /// A grant it holds already stays, and the new one comes back.
    fn grant(&self, granted: Granted) -> Option<Granted> {
        let mut heard = self.heard();
        if heard.granted.is_some() {
            return Some(granted);
        }
        heard.granted = Some(granted);
        drop(heard);
        self.wake.notify_one();
        None
    }

    /// Tells the waiter a release handed the lock to another waiter at
    /// `now`. Only the first since its last try wakes it (to set its
    /// timer by it); later ones only move the time on.
    fn handed_on(&self, now: Instant) {
        let first = self.heard().handed_on.replace(now).is_none();
        if first {
            self.wake.notify_one();
        }
    }

    /// Wakes the waiter for `release`, or for anything (`None`).
    fn wake(&self, release: Option<Release>) {
        {
            let mut heard = self.heard();
            match release {
                Some(release) if heard.releases.len() < KEPT_RELEASES => {
                    heard.releases.push(release);
                }
                _ => heard.anything = true,
            }
        }
        self.woken.store(true, Ordering::SeqCst);
        // Stores a permit when the waiter is busy retrying, so the wake-up
        // is not lost: its next wait returns at once.
        self.wake.notify_one();
    }

    fn heard(&self) -> MutexGuard<'_, Heard> {
        // Plain data: consistent even if a holder panicked mid-update.
        self.heard.lock().unwrap_or_else(|e| e.into_inner())
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
    /// No waiters yet, of the locker whose lines are `own` and whose
    /// leases run on `clock`.
    pub(crate) fn of(own: LineId, clock: Clock) -> Self {
        Self {
            channels: Arc::default(),
            own,
            clock,
            confirmed: Arc::default(),
            told: Arc::default(),
        }
    }

    /// A server confirmed this process listens on `channel`.
    pub(crate) fn mark_confirmed(&self, channel: &str) {
        // Under the map's lock: a line leaving meanwhile takes its channel
        // out of the set after this, not before.
        let channels = self.lock();
        if channels.contains_key(channel) {
            self.confirmed().insert(channel.to_owned());
        }
    }

    /// Joins the line of `channel` (as [`Self::join`]) only if this process
    /// listens on it already, confirmed: the waiter then hears every
    /// release published from now on. None otherwise.
    pub(crate) fn join_confirmed(
        &self,
        channel: &str,
        grantee: Option<Grantee>,
        on_empty: Box<dyn Fn(String) + Send + Sync>,
    ) -> Option<Subscription> {
        // The map's lock first, as everywhere: the line cannot go (and its
        // channel leave the confirmed set) between the check and the join.
        let mut channels = self.lock();
        if !self.confirmed().contains(channel) {
            return None;
        }
        let waiter = Arc::new(Waiter {
            grantee,
            ..Waiter::default()
        });
        channels
            .entry(channel.to_owned())
            .or_default()
            .push_back(waiter.clone());
        Some(Subscription {
            waiters: self.clone(),
            channel: channel.to_owned(),
            waiter,
            on_empty,
        })
    }

    fn confirmed(&self) -> MutexGuard<'_, HashSet<String>> {
        // Plain data: consistent even if a holder panicked mid-update.
        self.confirmed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Joins the line of `channel`, as `grantee` when a release may hand
    /// this waiter the lock. `on_empty` runs when the channel's last
    /// waiter leaves (to unsubscribe).
    pub(crate) fn join(
        &self,
        channel: &str,
        grantee: Option<Grantee>,
        on_empty: Box<dyn Fn(String) + Send + Sync>,
    ) -> Subscription {
        let waiter = Arc::new(Waiter {
            grantee,
            ..Waiter::default()
        });
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

    /// How many masters told `release` on `channel` so far, this one
    /// included; None for a release that does not say who let go.
    fn telling(&self, channel: &str, release: Release) -> Option<usize> {
        let by = release.by?;
        let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(telling) = told
            .iter_mut()
            .find(|telling| telling.by == by && telling.channel == channel)
        {
            telling.count += 1;
            return Some(telling.count);
        }
        if told.len() == TOLD_KEPT {
            told.pop_front();
        }
        told.push_back(Telling {
            channel: channel.to_owned(),
            by,
            count: 1,
        });
        Some(1)
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

    /// A release on `channel`: wake the longest waiters, as many as it
    /// says (one, unless it freed more: see [`Wakes`]), unless this
    /// locker's own line let the lock go for others.
    pub(crate) fn wake(&self, channel: &str, release: Release) {
        if release.yielded_by == Some(self.own) {
            return;
        }
        // A named release wakes each waiter at the telling it waits for.
        let telling = self.telling(channel, release);
        let due = |waiter: &Waiter| {
            telling.is_none_or(|count| count == waiter.told_by.load(Ordering::Relaxed).max(1))
        };
        let count = match release.wakes {
            Wakes::Some(count) => count,
            Wakes::All => usize::MAX,
            Wakes::Free(free) => {
                // In order, while what each waits for fits: a waiter for
                // more than is left is not woken to find too few, nor
                // overtaken in this process by the ones behind it.
                if let Some(line) = self.lock().get(channel) {
                    let mut left = free;
                    for waiter in line.iter().filter(|waiter| due(waiter)) {
                        let wants = waiter.wants.load(Ordering::Relaxed).max(1);
                        let Some(rest) = left.checked_sub(wants) else {
                            break;
                        };
                        left = rest;
                        waiter.wake(Some(release));
                    }
                }
                return;
            }
            Wakes::Grant { to, fence, behind } => {
                // Only the one it was handed to; the others wait on, and
                // know the line moved.
                let now = self.clock.now();
                if let Some(line) = self.lock().get(channel) {
                    for waiter in line {
                        if waiter.grantee == Some(to) {
                            // A second message of one grant finds it kept.
                            drop(waiter.grant(Granted::Released { fence, behind }));
                        } else {
                            waiter.handed_on(now);
                        }
                    }
                }
                return;
            }
        };
        if let Some(line) = self.lock().get(channel) {
            line.iter()
                .filter(|waiter| due(waiter))
                .take(count)
                .for_each(|waiter| waiter.wake(Some(release)));
        }
    }

    /// Hands a lock held in this locker to its waiter `to` on `channel`,
    /// with the waiters `behind` it; the hand-over comes back when no
    /// such waiter waits here (it may wait elsewhere, or have left).
    pub(crate) fn pass(
        &self,
        channel: &str,
        to: Grantee,
        handover: Handover,
        behind: Behind,
    ) -> Option<Handover> {
        // Under the lock: a waiter that leaves meanwhile either leaves
        // after this, holding the pass (whose drop gives it back), or
        // before, and is not found.
        let channels = self.lock();
        let waiter = channels
            .get(channel)
            .and_then(|line| line.iter().find(|waiter| waiter.grantee == Some(to)));
        let Some(waiter) = waiter else {
            return Some(handover);
        };
        let handover = Box::new(handover);
        match waiter.grant(Granted::Passed { handover, behind })? {
            Granted::Passed { handover, .. } => Some(*handover),
            // What comes back is what was given.
            Granted::Released { .. } => None,
        }
    }

    /// A handle that does not keep the waiters alive (for the in-memory
    /// store, which outlives its lockers).
    pub(crate) fn downgrade(&self) -> WeakWaiters {
        WeakWaiters(Arc::downgrade(&self.channels), self.own, self.clock)
    }

    /// Releases may have gone unheard: wake everyone (and confirm nothing
    /// until a server does again).
    pub(crate) fn wake_all(&self) {
        let channels = self.lock();
        self.confirmed().clear();
        for line in channels.values() {
            line.iter().for_each(|waiter| waiter.wake(None));
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Arc<Waiter>>>> {
        // The map stays consistent even if a holder panicked mid-update.
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`Waiters`] that may be gone.
pub(crate) struct WeakWaiters(
    Weak<Mutex<HashMap<String, VecDeque<Arc<Waiter>>>>>,
    LineId,
    Clock,
);

impl crate::memory::Listener for WeakWaiters {
    fn released(&self, channel: &str, message: &str) -> bool {
        match self.0.upgrade() {
            Some(channels) => {
                let release = Release::from_payload(0, message.as_bytes());
                let waiters = Waiters {
                    channels,
                    own: self.1,
                    clock: self.2,
                    confirmed: Arc::default(),
                    // One store tells each release once.
                    told: Arc::default(),
                };
                waiters.wake(channel, release);
                true
            }
            None => false,
        }
    }

    fn waiting(&self, name: &str) -> usize {
        self.0.upgrade().map_or(0, |channels| {
            let waiters = Waiters {
                channels,
                own: self.1,
                clock: self.2,
                confirmed: Arc::default(),
                told: Arc::default(),
            };
            waiters
                .lock()
                .iter()
                .filter(|(channel, _)| {
                    crate::keys::name_of_channel(channel).as_deref() == Some(name)
                })
                .map(|(_, waiting)| waiting.len())
                .sum()
        })
    }
}

impl Subscription {
    /// The channel this waiter listens on.
    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    /// Forgets wake-ups so far; call right before trying to acquire, so
    /// that a release after the try is never missed and one before it is
    /// not counted twice.
    pub(crate) fn mark_seen(&mut self) {
        self.waiter.woken.store(false, Ordering::SeqCst);
        // Consumes a stored permit, if any.
        let _ = self.waiter.wake.notified().now_or_never();
        let mut heard = self.waiter.heard();
        // A lock handed over is no news to forget: it is the waiter's.
        *heard = Heard {
            granted: heard.granted.take(),
            ..Heard::default()
        };
    }

    /// Says how many free units (a semaphore's permits) this waiter waits
    /// for: a release that leaves fewer free does not wake it.
    pub(crate) fn wants(&self, units: usize) {
        self.waiter.wants.store(units, Ordering::Relaxed);
    }

    /// Says how many masters must tell one named release before it wakes
    /// this waiter: on Redlock, as many as a grant needs, so that the try
    /// it wakes for finds the release landed where it can win.
    pub(crate) fn told_by(&self, masters: usize) {
        self.waiter.told_by.store(masters, Ordering::Relaxed);
    }

    /// Whether the lock was handed to this waiter and not taken yet.
    pub(crate) fn granted(&self) -> bool {
        self.waiter.heard().granted.is_some()
    }

    /// When this waiter last heard, since its last try, a release hand the
    /// lock to another waiter.
    pub(crate) fn handed_on(&self) -> Option<Instant> {
        self.waiter.heard().handed_on
    }

    /// The lock handed to this waiter, if it was.
    pub(crate) fn take_grant(&mut self) -> Option<Granted> {
        self.waiter.heard().granted.take()
    }

    /// Completes at this waiter's next wake-up since [`Self::mark_seen`].
    pub(crate) async fn released(&mut self) {
        self.waiter.wake.notified().await;
    }

    /// Whether the wake-ups since the last try bring news to a try that
    /// saw `sightings` (every wake-up does, without them); forgets those
    /// that do not, so that they are not handed on either.
    pub(crate) fn take_news(&mut self, sightings: Option<&Sightings>) -> bool {
        let mut heard = self.waiter.heard();
        let news = heard.anything
            || heard
                .releases
                .iter()
                .any(|release| sightings.is_none_or(|sightings| sightings.is_news(*release)));
        if !news {
            *heard = Heard {
                handed_on: heard.handed_on,
                granted: heard.granted.take(),
                ..Heard::default()
            };
            self.waiter.woken.store(false, Ordering::SeqCst);
        }
        news
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
            // belongs to the next in line, if the units that woke this
            // one suffice for it.
            let freed = self.waiter.wants.load(Ordering::Relaxed).max(1);
            if let Some(next) = line.front()
                && next.wants.load(Ordering::Relaxed).max(1) <= freed
            {
                next.wake(None);
            }
        }
        if line.is_empty() {
            channels.remove(&self.channel);
            self.waiters.confirmed().remove(&self.channel);
            drop(channels);
            (self.on_empty)(std::mem::take(&mut self.channel));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(waiters: &Waiters, channel: &str) -> Subscription {
        waiters.join(channel, None, Box::new(|_| {}))
    }

    fn is_woken(subscription: &Subscription) -> bool {
        subscription.waiter.woken.load(Ordering::SeqCst)
    }

    fn from(master: usize, deleted_at: Option<u64>) -> Release {
        Release {
            master,
            deleted_at,
            yielded_by: None,
            wakes: Wakes::Some(1),
            by: None,
        }
    }

    #[test]
    fn a_release_wakes_only_the_longest_waiter() {
        let waiters = Waiters::default();
        let first = join(&waiters, "c");
        let second = join(&waiters, "c");
        waiters.wake("c", from(0, None));
        assert!(is_woken(&first));
        assert!(!is_woken(&second));
    }

    #[test]
    fn an_unused_wake_up_passes_to_the_next_in_line() {
        let waiters = Waiters::default();
        let first = join(&waiters, "c");
        let second = join(&waiters, "c");
        waiters.wake("c", from(0, None));
        drop(first);
        assert!(is_woken(&second));
    }

    #[test]
    fn a_used_wake_up_is_not_passed_on() {
        let waiters = Waiters::default();
        let mut first = join(&waiters, "c");
        let second = join(&waiters, "c");
        waiters.wake("c", from(0, None));
        first.mark_seen();
        drop(first);
        assert!(!is_woken(&second));
    }

    #[test]
    fn the_last_waiter_leaving_empties_the_channel() {
        let left = Arc::new(Mutex::new(Vec::new()));
        let waiters = Waiters::default();
        let record = left.clone();
        let only = waiters.join("c", None, Box::new(move |c| record.lock().unwrap().push(c)));
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
        waiters.wake("c", from(0, None)); // arrives while the waiter is retrying
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
    fn free_units_wake_the_longest_waiters_they_suffice_for() {
        let waiters = Waiters::default();
        let one = join(&waiters, "c");
        let three = join(&waiters, "c");
        three.wants(3);
        let behind = join(&waiters, "c");
        let free = |units| Release {
            wakes: Wakes::Free(units),
            ..from(0, None)
        };
        waiters.wake("c", free(1));
        assert!(is_woken(&one));
        assert!(
            !is_woken(&three),
            "one free permit does not wake a waiter for three"
        );
        assert!(!is_woken(&behind), "nor the ones behind it");
        waiters.wake("c", free(5));
        assert!(is_woken(&three) && is_woken(&behind));
        // One release told by every master wakes once.
        let waiters = Waiters::default();
        let (first, second) = (join(&waiters, "c"), join(&waiters, "c"));
        let told = |master| Release {
            by: Some(Grantee::of("holder")),
            ..Release { master, ..free(1) }
        };
        waiters.wake("c", told(0));
        waiters.wake("c", told(1));
        assert!(is_woken(&first) && !is_woken(&second));
        // A waiter that needs two masters wakes at the second telling.
        let waiters = Waiters::default();
        let patient = join(&waiters, "c");
        patient.told_by(2);
        waiters.wake("c", told(0));
        assert!(!is_woken(&patient));
        waiters.wake("c", told(2));
        assert!(is_woken(&patient));
        // A waiter for one leaving with its wake-up does not hand it to
        // a waiter for three.
        let waiters = Waiters::default();
        let one = join(&waiters, "c");
        let three = join(&waiters, "c");
        three.wants(3);
        waiters.wake("c", free(1));
        drop(one);
        assert!(!is_woken(&three));
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

    #[test]
    fn news_is_judged_against_what_the_last_try_saw() {
        use crate::engine::wait::sightings::Seen;
        let waiters = Waiters::default();
        let mut waiter = join(&waiters, "c");
        let seen = Sightings::new(vec![Seen::BusyAt(100), Seen::Free]);
        // The same release told again by a master free at the try, and by
        // one that was taken again before the try reached it: nothing new.
        waiter.mark_seen();
        waiters.wake("c", from(1, Some(150)));
        waiters.wake("c", from(0, Some(90)));
        assert!(!waiter.take_news(Some(&seen)));
        assert!(!is_woken(&waiter), "an old wake-up would be handed on");
        // A delete after the busy answer is.
        waiters.wake("c", from(0, Some(120)));
        assert!(waiter.take_news(Some(&seen)));
        // Without sightings every release is news.
        waiter.mark_seen();
        waiters.wake("c", from(1, Some(150)));
        assert!(waiter.take_news(None));
    }

    #[test]
    fn a_wake_up_for_anything_is_news_whatever_was_seen() {
        use crate::engine::wait::sightings::Seen;
        let waiters = Waiters::default();
        let mut waiter = join(&waiters, "c");
        let seen = Sightings::new(vec![Seen::Free]);
        waiter.mark_seen();
        waiters.wake_all();
        assert!(waiter.take_news(Some(&seen)));
        // Trying again forgets it.
        waiter.mark_seen();
        assert!(!waiter.take_news(Some(&seen)));
    }
}
