//! The in-memory twins of the exclusive lock's node scripts
//! ([`super::scripts`]): the same steps, in the same order, over the
//! in-memory store's keyspace, with the same answers. Read each next to
//! its Lua; a change to one is a change to both.

use redis::Value;

use crate::memory::Keyspace;
use crate::memory::words::Words;
use crate::owner::{KEPT, WAITED};
use crate::primitive::shared::{is_mine, nth};

/// A whole number of the ttl's kind (the shared `number` reads `i64`).
fn number(text: &str, what: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{what} `{text}` is not a whole number"))
}

fn int(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// [`super::scripts::ACQUIRE`].
pub(super) fn acquire(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (lock, token) = (nth(k, 1, "KEYS")?, nth(a, 1, "ARGV")?);
    let ttl = number(nth(a, 2, "ARGV")?, "the ttl")?;
    let line = a.get(2).unwrap_or("");
    if !keys.set_nx_px(lock, token.to_owned(), ttl) {
        let held = keys.get(lock).unwrap_or("").to_owned();
        let kept = held.ends_with(KEPT);
        if is_mine(&held, token) {
            keys.pexpire(lock, ttl);
        } else if kept && held.strip_suffix(KEPT) != Some(line) {
            keys.set_px(lock, format!("{token}{WAITED}"), ttl);
        } else {
            if !held.is_empty() && !kept && !held.ends_with(WAITED) {
                keys.append(lock, WAITED);
            }
            return Ok(Value::Array(vec![int(0), Value::Int(keys.pttl(lock))]));
        }
    }
    Ok(Value::Array(vec![int(1), int(keys.time_us())]))
}

/// [`super::scripts::YIELD`].
pub(super) fn yield_to_others(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (lock, token, line) = (nth(k, 1, "KEYS")?, nth(a, 1, "ARGV")?, nth(a, 2, "ARGV")?);
    let grace = number(nth(a, 3, "ARGV")?, "the grace")?;
    let channel = nth(a, 4, "ARGV")?;
    if !keys.get(lock).is_some_and(|held| is_mine(held, token)) {
        return Ok(int(0));
    }
    keys.set_px(lock, format!("{line}{KEPT}"), grace);
    let at = keys.time_us();
    keys.publish(channel, format!("{at}:{line}"));
    Ok(int(1))
}

/// [`super::scripts::RELEASE`]. `ARGV[3]`, the publish command, makes no
/// difference in memory. (The in-memory store holds no Redlock values.)
pub(super) fn release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (lock, token, channel) = (nth(k, 1, "KEYS")?, nth(a, 1, "ARGV")?, nth(a, 2, "ARGV")?);
    let Some(held) = keys.get(lock).filter(|held| is_mine(held, token)) else {
        return Ok(int(0));
    };
    let waited = held.ends_with(WAITED);
    keys.del(lock);
    if waited {
        let at = keys.time_us();
        keys.publish(channel, at.to_string());
    }
    Ok(int(1))
}

/// [`super::scripts::PASS`].
pub(super) fn pass(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (lock, giver, taker) = (nth(k, 1, "KEYS")?, nth(a, 1, "ARGV")?, nth(a, 2, "ARGV")?);
    let ttl = number(nth(a, 3, "ARGV")?, "the ttl")?;
    let given = number(nth(a, 4, "ARGV")?, "the fence")?;
    let Some(held) = keys.get(lock).filter(|held| is_mine(held, giver)) else {
        return Ok(Value::Array(vec![int(0), int(0)]));
    };
    let marked = held.ends_with(WAITED);
    let value = if marked {
        format!("{taker}{WAITED}")
    } else {
        taker.to_owned()
    };
    keys.set_px(lock, value, ttl);
    let fence = keys.time_us().max(given.saturating_add(1));
    Ok(Value::Array(vec![
        int(if marked { 2 } else { 1 }),
        int(fence),
    ]))
}

/// [`super::scripts::BLIND_RELEASE`].
#[cfg(feature = "sabotage")]
pub(super) fn blind_release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    keys.del(nth(k, 1, "KEYS")?);
    keys.publish(nth(a, 2, "ARGV")?, "1".to_owned());
    Ok(int(1))
}

/// [`super::scripts::BLIND_PASS`].
#[cfg(feature = "sabotage")]
pub(super) fn blind_pass(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (lock, taker) = (nth(k, 1, "KEYS")?, nth(a, 2, "ARGV")?);
    let ttl = number(nth(a, 3, "ARGV")?, "the ttl")?;
    let given = number(nth(a, 4, "ARGV")?, "the fence")?;
    keys.set_px(lock, taker.to_owned(), ttl);
    let fence = keys.time_us().max(given.saturating_add(1));
    Ok(Value::Array(vec![int(1), int(fence)]))
}

/// [`super::scripts::INSPECT`].
pub(super) fn inspect(keys: &mut Keyspace, k: &Words, _: &Words) -> Result<Value, String> {
    let lock = nth(k, 1, "KEYS")?;
    let Some(held) = keys.get(lock).map(str::to_owned) else {
        return Ok(Value::Array(vec![
            Value::BulkString(Vec::new()),
            Value::Int(-2),
        ]));
    };
    Ok(Value::Array(vec![
        Value::BulkString(held.into_bytes()),
        Value::Int(keys.pttl(lock)),
    ]))
}

/// [`super::scripts::FORCE_RELEASE`].
pub(super) fn force_release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (lock, channel) = (nth(k, 1, "KEYS")?, nth(a, 1, "ARGV")?);
    if !keys.del(lock) {
        return Ok(int(0));
    }
    let at = keys.time_us();
    keys.publish(channel, at.to_string());
    Ok(int(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::testing::{ints, strings};
    use std::time::{Duration, Instant};

    #[test]
    fn acquire_is_idempotent_for_its_owner_and_busy_for_others() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        let lock = strings(&["lock:{a}"]);
        let first = ints(&acquire(&mut keys, &lock, &strings(&["t1", "1000"])).unwrap());
        assert_eq!(first[0], 1);
        assert_eq!(keys.get("lock:{a}"), Some("t1"), "the token, nothing else");
        let other = ints(&acquire(&mut keys, &lock, &strings(&["t2", "1000"])).unwrap());
        assert_eq!(other, [0, 1000]);
        assert_eq!(keys.get("lock:{a}"), Some("t1~"), "marked: someone waits");
        ints(&acquire(&mut keys, &lock, &strings(&["t3", "1000"])).unwrap());
        assert_eq!(keys.get("lock:{a}"), Some("t1~"), "marked once");
        keys.begin(Instant::now() + Duration::from_millis(5), None);
        let again = ints(&acquire(&mut keys, &lock, &strings(&["t1", "2000"])).unwrap());
        assert_eq!(again[0], 1, "a retry finds it ours, marked or not");
        assert!(again[1] >= first[1], "with the clock now as its fence");
        assert_eq!(keys.pttl("lock:{a}"), 2000);
        // A token that is a prefix of the owner's is not the owner.
        let prefix = ints(&acquire(&mut keys, &lock, &strings(&["t", "1000"])).unwrap());
        assert_eq!(prefix[0], 0);
    }

    #[test]
    fn fences_rise_from_one_owner_to_the_next() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        let lock = strings(&["lock:{a}"]);
        let first = ints(&acquire(&mut keys, &lock, &strings(&["t1", "10"])).unwrap())[1];
        keys.begin(start + Duration::from_millis(10), None);
        let second = ints(&acquire(&mut keys, &lock, &strings(&["t2", "10"])).unwrap())[1];
        assert!(second > first);
    }

    #[test]
    fn only_the_owner_releases_and_renews() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        let lock = strings(&["lock:{a}"]);
        acquire(&mut keys, &lock, &strings(&["t1", "1000"])).unwrap();
        let release_as = |keys: &mut Keyspace, token: &str| {
            ints(
                &release(
                    keys,
                    &lock,
                    &strings(&[token, "lock:{a}:released", "PUBLISH"]),
                )
                .unwrap(),
            )
        };
        let extend_as = |keys: &mut Keyspace, token: &str| {
            let args = strings(&["k", token, "5000"]);
            ints(&crate::engine::renewal::twin::extend(keys, &lock, &args).unwrap())
        };
        assert_eq!(release_as(&mut keys, "t2"), [0]);
        assert_eq!(extend_as(&mut keys, "t2"), [0]);
        assert!(keys.finish().is_empty(), "nothing published");
        assert_eq!(extend_as(&mut keys, "t1"), [1]);
        assert_eq!(keys.pttl("lock:{a}"), 5000);
        assert_eq!(release_as(&mut keys, "t1"), [1]);
        assert!(keys.finish().is_empty(), "nobody waited: no message");
        assert_eq!(keys.pttl("lock:{a}"), -2);
        // A waiter's busy try marks the lock; its release then tells.
        acquire(&mut keys, &lock, &strings(&["t1", "1000"])).unwrap();
        acquire(&mut keys, &lock, &strings(&["t2", "1000"])).unwrap();
        assert_eq!(extend_as(&mut keys, "t1"), [1], "marked, still ours");
        assert_eq!(release_as(&mut keys, "t1"), [1]);
        assert_eq!(channels(keys.finish()), ["lock:{a}:released"]);
    }

    /// The channels of what a call published.
    fn channels(published: Vec<(String, String)>) -> Vec<String> {
        published.into_iter().map(|(channel, _)| channel).collect()
    }

    #[test]
    fn a_lock_let_go_of_for_others_is_busy_to_its_line_and_free_to_anyone_else() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        let lock = strings(&["lock:{a}"]);
        let line = "0123456789abcdef0123456789abcdef";
        acquire(&mut keys, &lock, &strings(&["t1", "1000", line])).unwrap();
        let give_way = |keys: &mut Keyspace, token: &str| {
            let args = strings(&[token, line, "50", "lock:{a}:released", "PUBLISH"]);
            ints(&yield_to_others(keys, &lock, &args).unwrap())
        };
        assert_eq!(give_way(&mut keys, "t2"), [0], "not the holder's");
        assert!(keys.finish().is_empty());
        assert_eq!(give_way(&mut keys, "t1"), [1]);
        let published = keys.finish();
        assert_eq!(published.len(), 1);
        let (channel, message) = &published[0];
        assert_eq!(channel, "lock:{a}:released");
        assert!(message.ends_with(&format!(":{line}")), "{message}");
        // The line keeps off it, and does not mark it.
        let own = ints(&acquire(&mut keys, &lock, &strings(&["t3", "1000", line])).unwrap());
        assert_eq!(own, [0, 50]);
        assert_eq!(keys.get("lock:{a}"), Some(format!("{line}^").as_str()));
        // Anyone else takes it, marked: its release will wake the line.
        let other = ints(&acquire(&mut keys, &lock, &strings(&["u1", "1000", ""])).unwrap());
        assert_eq!(other[0], 1);
        assert_eq!(keys.get("lock:{a}"), Some("u1~"));
        assert_eq!(release_as_line(&mut keys, "u1"), [1]);
        assert_eq!(channels(keys.finish()), ["lock:{a}:released"]);
        // Not taken, it ends with its grace and nothing is left.
        acquire(&mut keys, &lock, &strings(&["t4", "1000", line])).unwrap();
        assert_eq!(give_way(&mut keys, "t4"), [1]);
        keys.begin(start + Duration::from_millis(51), None);
        assert_eq!(keys.get("lock:{a}"), None);
        let back = ints(&acquire(&mut keys, &lock, &strings(&["t5", "1000", line])).unwrap());
        assert_eq!(back[0], 1, "the line takes it again");
    }

    fn release_as_line(keys: &mut Keyspace, token: &str) -> Vec<i64> {
        let args = strings(&[token, "lock:{a}:released", "PUBLISH"]);
        ints(&release(keys, &strings(&["lock:{a}"]), &args).unwrap())
    }

    #[test]
    fn a_pass_moves_the_lock_keeps_its_mark_and_raises_the_fence() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        let lock = strings(&["lock:{a}"]);
        let first = ints(&acquire(&mut keys, &lock, &strings(&["t1", "1000"])).unwrap())[1];
        let pass_as = |keys: &mut Keyspace, giver: &str, taker: &str, fence: i64| {
            let args = strings(&[giver, taker, "2000", &fence.to_string()]);
            ints(&pass(keys, &lock, &args).unwrap())
        };
        // Not the giver's: nothing changes.
        assert_eq!(pass_as(&mut keys, "t9", "t2", first), [0, 0]);
        assert_eq!(keys.get("lock:{a}"), Some("t1"));
        // Unmarked; a giver's fence ahead of the clock is still exceeded.
        let ahead = first + 60_000_000;
        let second = pass_as(&mut keys, "t1", "t2", ahead);
        assert_eq!(second, [1, ahead + 1]);
        assert_eq!(keys.get("lock:{a}"), Some("t2"));
        assert_eq!(keys.pttl("lock:{a}"), 2000, "the taker's lease");
        // Someone else waits: the mark stays with the lock.
        acquire(&mut keys, &lock, &strings(&["t8", "1000"])).unwrap();
        let third = pass_as(&mut keys, "t2", "t3", second[1]);
        assert_eq!(third[0], 2);
        assert!(third[1] > second[1]);
        assert_eq!(keys.get("lock:{a}"), Some("t3~"));
        assert_eq!(
            pass_as(&mut keys, "t2", "t4", third[1]),
            [0, 0],
            "the giver gave it away"
        );
        assert!(keys.finish().is_empty(), "a pass announces nothing");
    }

    #[test]
    fn inspect_shows_the_value_and_force_release_deletes_anyones_lock() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        let lock = strings(&["lock:{a}"]);
        let free = inspect(&mut keys, &lock, &Words::default()).unwrap();
        assert_eq!(
            free,
            Value::Array(vec![Value::BulkString(Vec::new()), Value::Int(-2)])
        );
        acquire(&mut keys, &lock, &strings(&["h/t1", "1000"])).unwrap();
        let Value::Array(held) = inspect(&mut keys, &lock, &Words::default()).unwrap() else {
            panic!("not an array");
        };
        assert_eq!(held[0], Value::BulkString(b"h/t1".to_vec()));
        assert_eq!(held[1], Value::Int(1000));
        let channel = strings(&["lock:{a}:released", "PUBLISH"]);
        assert_eq!(
            ints(&force_release(&mut keys, &lock, &channel).unwrap()),
            [1]
        );
        assert_eq!(channels(keys.finish()), ["lock:{a}:released"]);
        assert_eq!(
            ints(&force_release(&mut keys, &lock, &channel).unwrap()),
            [0]
        );
        assert!(
            keys.finish().is_empty(),
            "nothing deleted, nothing published"
        );
    }

    #[test]
    fn a_malformed_call_is_an_error_not_a_panic() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        assert!(acquire(&mut keys, &Words::default(), &Words::default()).is_err());
        let lock = strings(&["lock:{a}"]);
        assert!(acquire(&mut keys, &lock, &strings(&["t1", "soon"])).is_err());
    }
}
