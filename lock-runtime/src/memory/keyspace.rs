//! [`Keyspace`]: the in-memory store's data, and the few Redis commands
//! the lock scripts use (`GET`, `SET [NX] PX`, `DEL`, `PEXPIRE`, `PTTL`,
//! `TIME`, `PUBLISH`) with Redis's answers.
//!
//! # Time
//! A call sees one instant, taken when it starts (as Redis freezes the
//! clock while a script runs), on the caller's tokio clock. A key whose
//! expiry has passed is gone for whoever looks at it. Expired keys that
//! nobody looks at again are swept once the store holds many keys, so a
//! service that locks per order keeps no more than its live locks plus a
//! bounded remainder. Each runtime has its own clock (a test's may be
//! paused or advanced by hand), so a key's expiry is kept with the clock
//! it was set on, and a sweep removes only keys set on the clock of the
//! call that runs it: runtimes with clocks of their own that share a store
//! on distinct keys never expire each other's. (Expired keys a runtime
//! left behind when it ended go when someone touches them.)

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The clock a call runs on: its tokio runtime's (`None`: outside any).
pub(crate) type ClockId = Option<tokio::runtime::Id>;

/// Keys beyond which a write sweeps out every expired key.
const SWEEP_ABOVE: usize = 4096;

/// The keys, their values and expiries.
#[derive(Debug)]
pub(crate) struct Keyspace {
    entries: HashMap<String, Entry>,
    /// `(expiry, key)` of every key that has one, by the clock it was set
    /// on.
    expiries: HashMap<ClockId, BTreeSet<(Instant, String)>>,
    /// The last `TIME` answered, in µs, so it never repeats or goes back,
    /// and when (on the real monotonic clock, which tests cannot pause).
    last_time_us: u64,
    last_time_at: Option<std::time::Instant>,
    /// The current call's instant, and its clock.
    now: Instant,
    clock: ClockId,
    /// `(channel, message)` of each publish of the current call,
    /// delivered after it.
    published: Vec<(String, String)>,
}

#[derive(Debug)]
struct Entry {
    value: String,
    expires_at: Option<Instant>,
    /// The clock `expires_at` is on.
    clock: ClockId,
}

impl Default for Keyspace {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            expiries: HashMap::new(),
            last_time_us: 0,
            last_time_at: None,
            now: Instant::now(),
            clock: None,
            published: Vec::new(),
        }
    }
}

impl Keyspace {
    /// Starts a call at `now` on `clock`.
    pub(crate) fn begin(&mut self, now: Instant, clock: ClockId) {
        self.now = now;
        self.clock = clock;
        self.published.clear();
        if self.entries.len() > SWEEP_ABOVE {
            self.sweep();
        }
    }

    /// Ends a call: what it published, `(channel, message)`, in order.
    pub(crate) fn finish(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.published)
    }

    /// `GET`.
    pub(crate) fn get(&mut self, key: &str) -> Option<&str> {
        self.drop_if_expired(key);
        self.entries.get(key).map(|entry| entry.value.as_str())
    }

    /// `SET key value NX PX ttl`: true when it was set.
    pub(crate) fn set_nx_px(&mut self, key: &str, value: String, ttl_ms: u64) -> bool {
        if self.get(key).is_some() {
            return false;
        }
        self.entries.insert(
            key.to_owned(),
            Entry {
                value,
                expires_at: None,
                clock: self.clock,
            },
        );
        self.pexpire(key, ttl_ms);
        true
    }

    /// `SET key value PX ttl`, whatever the key held.
    pub(crate) fn set_px(&mut self, key: &str, value: String, ttl_ms: u64) {
        self.del(key);
        self.set_nx_px(key, value, ttl_ms);
    }

    /// `APPEND key suffix` to an existing key (its expiry stays); false
    /// when there is no key (Redis would create one; no caller needs it).
    pub(crate) fn append(&mut self, key: &str, suffix: &str) -> bool {
        self.drop_if_expired(key);
        match self.entries.get_mut(key) {
            Some(entry) => {
                entry.value.push_str(suffix);
                true
            }
            None => false,
        }
    }

    /// `DEL` of one key: true when it existed.
    pub(crate) fn del(&mut self, key: &str) -> bool {
        self.drop_if_expired(key);
        match self.entries.remove(key) {
            Some(entry) => {
                if let Some(at) = entry.expires_at {
                    self.unqueue(entry.clock, at, key);
                }
                true
            }
            None => false,
        }
    }

    /// `PEXPIRE key ms`: true when the key exists.
    pub(crate) fn pexpire(&mut self, key: &str, ms: u64) -> bool {
        self.drop_if_expired(key);
        let at = self.now + Duration::from_millis(ms);
        let Some(entry) = self.entries.get_mut(key) else {
            return false;
        };
        let before = entry.expires_at.replace(at).map(|at| (entry.clock, at));
        entry.clock = self.clock;
        if let Some((clock, before)) = before {
            self.unqueue(clock, before, key);
        }
        let queue = self.expiries.entry(self.clock).or_default();
        queue.insert((at, key.to_owned()));
        true
    }

    /// `PTTL`: milliseconds left, -1 without an expiry, -2 for no key.
    pub(crate) fn pttl(&mut self, key: &str) -> i64 {
        self.drop_if_expired(key);
        match self.entries.get(key) {
            None => -2,
            Some(Entry {
                expires_at: None, ..
            }) => -1,
            Some(Entry {
                expires_at: Some(at),
                ..
            }) => {
                let left = at.saturating_duration_since(self.now).as_millis();
                i64::try_from(left).unwrap_or(i64::MAX)
            }
        }
    }

    /// `TIME`, in µs since the Unix epoch: the wall clock, but never less
    /// than the previous answer plus the real time since it (at least one
    /// µs). A fence taken from it must rise even if the wall clock steps
    /// back, and a hold passed in process raises its fence by up to one per
    /// two real µs (see [`crate::engine::fence::FenceBasis`]): a clock that only
    /// crept on by one µs per call would fall behind those.
    pub(crate) fn time_us(&mut self) -> u64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
            });
        let real = std::time::Instant::now();
        let since_last = self.last_time_at.map_or(0, |at| {
            u64::try_from(real.saturating_duration_since(at).as_micros()).unwrap_or(u64::MAX)
        });
        let floor = self.last_time_us.saturating_add(since_last.max(1));
        self.last_time_us = wall.max(floor);
        self.last_time_at = Some(real);
        self.last_time_us
    }

    /// `PUBLISH channel message`: delivered once the call ends.
    pub(crate) fn publish(&mut self, channel: &str, message: String) {
        self.published.push((channel.to_owned(), message));
    }

    /// Every live key with its value and time left, for inspection.
    pub(crate) fn live(&mut self) -> Vec<(String, String, Option<Duration>)> {
        let now = self.now;
        self.entries
            .iter()
            .filter(|(_, entry)| entry.expires_at.is_none_or(|at| at > now))
            .map(|(key, entry)| {
                let left = entry.expires_at.map(|at| at.saturating_duration_since(now));
                (key.clone(), entry.value.clone(), left)
            })
            .collect()
    }

    /// How many keys are stored, expired ones not yet swept included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn drop_if_expired(&mut self, key: &str) {
        let expired = self
            .entries
            .get(key)
            .and_then(|entry| Some((entry.clock, entry.expires_at?)))
            .filter(|&(_, at)| at <= self.now);
        if let Some((clock, at)) = expired {
            self.entries.remove(key);
            self.unqueue(clock, at, key);
        }
    }

    /// Takes `key`'s expiry `at` on `clock` off its queue.
    fn unqueue(&mut self, clock: ClockId, at: Instant, key: &str) {
        if let Some(queue) = self.expiries.get_mut(&clock) {
            queue.remove(&(at, key.to_owned()));
            if queue.is_empty() {
                self.expiries.remove(&clock);
            }
        }
    }

    /// Removes the expired keys set on the current call's clock.
    fn sweep(&mut self) {
        let Some(queue) = self.expiries.get_mut(&self.clock) else {
            return;
        };
        while let Some((at, _)) = queue.first()
            && *at <= self.now
        {
            if let Some((_, key)) = queue.pop_first() {
                self.entries.remove(&key);
            }
        }
        if queue.is_empty() {
            self.expiries.remove(&self.clock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(keyspace: &mut Keyspace, start: Instant, ms: u64) {
        keyspace.begin(start + Duration::from_millis(ms), None);
    }

    #[test]
    fn time_keeps_pace_with_real_time_when_the_wall_clock_is_behind() {
        let mut keys = Keyspace::default();
        let first = keys.time_us();
        // As after the wall clock stepped back an hour.
        keys.last_time_us = first + 3_600_000_000;
        let ahead = keys.time_us();
        assert!(ahead > first + 3_600_000_000);
        std::thread::sleep(Duration::from_millis(2));
        let later = keys.time_us();
        assert!(
            later >= ahead + 2_000,
            "{later} after {ahead}: crept on by {}",
            later - ahead
        );
    }

    #[test]
    fn set_nx_px_sets_once_and_expires_on_time() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        at(&mut keys, start, 0);
        assert!(keys.set_nx_px("k", "a".into(), 100));
        assert!(!keys.set_nx_px("k", "b".into(), 100));
        assert_eq!(keys.get("k"), Some("a"));
        assert_eq!(keys.pttl("k"), 100);
        at(&mut keys, start, 99);
        assert_eq!(keys.pttl("k"), 1);
        at(&mut keys, start, 100);
        assert_eq!(keys.get("k"), None);
        assert_eq!(keys.pttl("k"), -2);
        assert!(keys.set_nx_px("k", "b".into(), 100));
    }

    #[test]
    fn pexpire_and_del_need_the_key() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        at(&mut keys, start, 0);
        assert!(!keys.pexpire("k", 10));
        assert!(!keys.del("k"));
        keys.set_nx_px("k", "a".into(), 10);
        at(&mut keys, start, 5);
        assert!(keys.pexpire("k", 10));
        at(&mut keys, start, 14);
        assert_eq!(keys.get("k"), Some("a"));
        assert!(keys.del("k"));
        assert_eq!(keys.len(), 0);
    }

    #[test]
    fn time_never_repeats() {
        let mut keys = Keyspace::default();
        let first = keys.time_us();
        let second = keys.time_us();
        assert!(second > first);
        assert!(first > 1_700_000_000_000_000, "µs since the epoch: {first}");
    }

    #[test]
    fn many_expired_keys_are_swept_without_being_read() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        at(&mut keys, start, 0);
        for n in 0..=SWEEP_ABOVE {
            keys.set_nx_px(&format!("k{n}"), "v".into(), 10);
        }
        at(&mut keys, start, 20);
        assert_eq!(keys.len(), 0);
    }

    #[test]
    fn publishing_is_delivered_when_the_call_ends() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        keys.publish("c", "m".to_owned());
        assert_eq!(keys.finish(), [("c".to_owned(), "m".to_owned())]);
        assert!(keys.finish().is_empty());
    }
}
