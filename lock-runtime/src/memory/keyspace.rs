//! [`Keyspace`]: the in-memory store's data, and the few Redis commands
//! the lock scripts use (`GET`, `SET [NX] PX`, `APPEND`, `DEL`, `PEXPIRE`,
//! `PTTL`, `TIME`, `PUBLISH`, and on sorted sets `ZADD`, `ZSCORE`, `ZREM`,
//! `ZCARD`, `ZREMRANGEBYSCORE` and the highest score) with Redis's
//! answers. A twin never reads a key as another type than it wrote it
//! with: a string read of a sorted set finds nothing.
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

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use foldhash::HashMap;

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
    /// What [`Keyspace::now_ms`] counts from.
    epoch: Instant,
    clock: ClockId,
    /// `(channel, message)` of each publish of the current call,
    /// delivered after it.
    published: Vec<(String, String)>,
}

#[derive(Debug)]
struct Entry {
    data: Data,
    expires_at: Option<Instant>,
    /// The clock `expires_at` is on.
    clock: ClockId,
}

/// What a key holds.
#[derive(Debug)]
enum Data {
    Text(String),
    /// A sorted set: member to score. The lock scripts' scores are whole
    /// numbers (deadlines in ms), so they are kept as such.
    Sorted(HashMap<String, i64>),
}

impl Entry {
    fn text(&self) -> Option<&str> {
        match &self.data {
            Data::Text(text) => Some(text),
            Data::Sorted(_) => None,
        }
    }

    fn sorted(&mut self) -> Option<&mut HashMap<String, i64>> {
        match &mut self.data {
            Data::Sorted(set) => Some(set),
            Data::Text(_) => None,
        }
    }
}

impl Default for Keyspace {
    fn default() -> Self {
        Self {
            entries: HashMap::default(),
            expiries: HashMap::default(),
            last_time_us: 0,
            last_time_at: None,
            now: Instant::now(),
            epoch: Instant::now(),
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

    /// `GET` (nothing for a key that is not a string).
    pub(crate) fn get(&mut self, key: &str) -> Option<&str> {
        self.drop_if_expired(key);
        self.entries.get(key).and_then(Entry::text)
    }

    /// Milliseconds on the clock of the call, from a moment of the
    /// store's own: what scores that are deadlines count in, so that they
    /// pass with the keys' expiries (a test's paused clock included). The
    /// twin of `TIME` in milliseconds for those scores; fences take the
    /// wall clock ([`Self::time_us`]).
    pub(crate) fn now_ms(&self) -> i64 {
        // Far from zero, and from the overflow, whichever clock calls.
        const FROM: i128 = 1_000_000_000_000;
        let nanos = match self.now.checked_duration_since(self.epoch) {
            Some(after) => i128::try_from(after.as_nanos()).unwrap_or(i128::MAX / 2),
            None => -i128::try_from(self.epoch.duration_since(self.now).as_nanos())
                .unwrap_or(i128::MAX / 2),
        };
        // Whole milliseconds, rounded down on both sides of the epoch.
        let ms = FROM + nanos.div_euclid(1_000_000);
        i64::try_from(ms).unwrap_or(i64::MAX)
    }

    /// `ZADD key score member`: true when the member is new. A missing
    /// key is made (without an expiry); a key of another type is left as
    /// it is (false).
    pub(crate) fn zadd(&mut self, key: &str, score: i64, member: &str) -> bool {
        self.drop_if_expired(key);
        let entry = self.entries.entry(key.to_owned()).or_insert_with(|| Entry {
            data: Data::Sorted(HashMap::default()),
            expires_at: None,
            clock: self.clock,
        });
        entry
            .sorted()
            .is_some_and(|set| set.insert(member.to_owned(), score).is_none())
    }

    /// `ZSCORE key member`.
    pub(crate) fn zscore(&mut self, key: &str, member: &str) -> Option<i64> {
        self.drop_if_expired(key);
        self.entries.get_mut(key)?.sorted()?.get(member).copied()
    }

    /// `ZREM key member`: true when it was there. An emptied set is gone,
    /// as in Redis.
    pub(crate) fn zrem(&mut self, key: &str, member: &str) -> bool {
        self.drop_if_expired(key);
        let Some(set) = self.entries.get_mut(key).and_then(Entry::sorted) else {
            return false;
        };
        let removed = set.remove(member).is_some();
        if set.is_empty() {
            self.del(key);
        }
        removed
    }

    /// `ZCARD key`.
    pub(crate) fn zcard(&mut self, key: &str) -> usize {
        self.drop_if_expired(key);
        self.entries
            .get_mut(key)
            .and_then(Entry::sorted)
            .map_or(0, |set| set.len())
    }

    /// `ZREMRANGEBYSCORE key -inf max`: how many were removed.
    pub(crate) fn zremrangebyscore(&mut self, key: &str, max: i64) -> usize {
        self.drop_if_expired(key);
        let Some(set) = self.entries.get_mut(key).and_then(Entry::sorted) else {
            return 0;
        };
        let before = set.len();
        set.retain(|_, score| *score > max);
        let removed = before - set.len();
        if set.is_empty() {
            self.del(key);
        }
        removed
    }

    /// The members of `key` with their scores, in no order.
    pub(crate) fn zmembers(&mut self, key: &str) -> Vec<(String, i64)> {
        self.drop_if_expired(key);
        self.entries
            .get_mut(key)
            .and_then(Entry::sorted)
            .map(|set| set.iter().map(|(m, s)| (m.clone(), *s)).collect())
            .unwrap_or_default()
    }

    /// The highest score of `key` (`ZRANGE key -1 -1 WITHSCORES`).
    pub(crate) fn zmax(&mut self, key: &str) -> Option<i64> {
        self.drop_if_expired(key);
        self.entries.get_mut(key)?.sorted()?.values().copied().max()
    }

    /// `SET key value NX PX ttl`: true when it was set.
    pub(crate) fn set_nx_px(&mut self, key: &str, value: String, ttl_ms: u64) -> bool {
        self.drop_if_expired(key);
        if self.entries.contains_key(key) {
            return false;
        }
        self.entries.insert(
            key.to_owned(),
            Entry {
                data: Data::Text(value),
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
        match self.entries.get_mut(key).map(|entry| &mut entry.data) {
            Some(Data::Text(text)) => {
                text.push_str(suffix);
                true
            }
            _ => false,
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

    /// Every live string key with its value and time left, for
    /// inspection.
    pub(crate) fn live(&mut self) -> Vec<(String, String, Option<Duration>)> {
        let now = self.now;
        self.entries
            .iter()
            .filter(|(_, entry)| entry.expires_at.is_none_or(|at| at > now))
            .filter_map(|(key, entry)| {
                let left = entry.expires_at.map(|at| at.saturating_duration_since(now));
                Some((key.clone(), entry.text()?.to_owned(), left))
            })
            .collect()
    }

    /// Every live key, of any kind.
    pub(crate) fn live_keys(&mut self) -> Vec<String> {
        let now = self.now;
        self.entries
            .iter()
            .filter(|(_, entry)| entry.expires_at.is_none_or(|at| at > now))
            .map(|(key, _)| key.clone())
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
    fn sorted_sets_answer_as_redis_does_and_go_when_emptied() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        at(&mut keys, start, 0);
        assert!(keys.zadd("z", 10, "a"));
        assert!(!keys.zadd("z", 30, "a"), "not new: its score moves");
        assert!(keys.zadd("z", 20, "b"));
        assert_eq!(keys.zscore("z", "a"), Some(30));
        assert_eq!((keys.zcard("z"), keys.zmax("z")), (2, Some(30)));
        assert_eq!(keys.get("z"), None, "not a string");
        assert!(!keys.set_nx_px("z", "x".into(), 10), "the key is taken");
        assert_eq!(keys.zremrangebyscore("z", 20), 1);
        assert_eq!(keys.zscore("z", "b"), None);
        assert!(keys.zrem("z", "a"));
        assert!(!keys.zrem("z", "a"));
        assert_eq!(keys.zcard("z"), 0);
        assert_eq!(keys.pttl("z"), -2, "an emptied set is gone");
        keys.zadd("z", 5, "c");
        assert!(keys.pexpire("z", 10));
        at(&mut keys, start, 10);
        assert_eq!(keys.zcard("z"), 0, "expired with its key");
    }

    #[test]
    fn scores_in_ms_pass_with_the_calls_clock() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        at(&mut keys, start, 0);
        let first = keys.now_ms();
        at(&mut keys, start, 250);
        assert_eq!(keys.now_ms() - first, 250);
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
