//! The in-memory twins of the read/write lock's scripts
//! ([`super::scripts`]): the same steps, in the same order, over the
//! in-memory store's keyspace, with the same answers (deadlines on the
//! store's clock, [`Keyspace::now_ms`]). Read each next to its Lua.

use redis::Value;

use crate::memory::Keyspace;
use crate::memory::words::Words;
use crate::primitive::shared::{nth, number};

fn ints(items: &[i64]) -> Value {
    Value::Array(items.iter().copied().map(Value::Int).collect())
}

/// The first three keys of every call: the writer, the readers, the
/// intents.
fn keys3(k: &Words) -> Result<(&str, &str, &str), String> {
    Ok((nth(k, 1, "KEYS")?, nth(k, 2, "KEYS")?, nth(k, 3, "KEYS")?))
}

/// The last two: the waiting readers and the readers' turn.
fn keys45(k: &Words) -> Result<(&str, &str), String> {
    Ok((nth(k, 4, "KEYS")?, nth(k, 5, "KEYS")?))
}

/// `EXISTS` for the string and the sorted sets the scripts keep.
fn exists(keys: &mut Keyspace, key: &str) -> bool {
    keys.get(key).is_some() || keys.zcard(key) > 0
}

/// `member` scored `deadline` in `set`, which lasts as its latest member.
fn keep_until(keys: &mut Keyspace, set: &str, member: &str, deadline: i64, now: i64) {
    keys.zadd(set, deadline, member);
    let last = keys.zmax(set).unwrap_or(now);
    keys.pexpire(set, u64::try_from(last - now).unwrap_or(0));
}

/// The fence of a grant now: the store's clock in µs.
fn fence_now(keys: &mut Keyspace) -> i64 {
    i64::try_from(keys.time_us()).unwrap_or(i64::MAX)
}

fn ms(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// `PEXPIRE key ms GT`, else `PEXPIRE key ms NX`: the set lasts at least
/// `ms` more.
fn last_at_least(keys: &mut Keyspace, set: &str, ms_left: u64) {
    if keys.pttl(set) < i64::try_from(ms_left).unwrap_or(i64::MAX) {
        keys.pexpire(set, ms_left);
    }
}

/// [`super::scripts::READ`].
pub(super) fn read(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (writer, readers, intents) = keys3(k)?;
    let (waiting, turn) = keys45(k)?;
    let token = nth(a, 1, "ARGV")?;
    let ttl = number(nth(a, 2, "ARGV")?, "the ttl")?;
    let place = number(nth(a, 3, "ARGV")?, "the place's lease")?;
    let waits = nth(a, 4, "ARGV")? == "1";
    let now = keys.now_ms();
    let fence = fence_now(keys);
    let refused = |keys: &mut Keyspace, left: i64| {
        if !waits {
            return ints(&[0, left, 0]);
        }
        keys.zadd(waiting, now.saturating_add(place), token);
        last_at_least(keys, waiting, ms(place));
        ints(&[0, left, 1])
    };
    if keys.get(writer).is_some() {
        let left = keys.pttl(writer);
        return Ok(refused(keys, left));
    }
    if keys.zcard(intents) > 0 && keys.get(turn).is_none() {
        let mine = keys.zscore(readers, token);
        keys.zremrangebyscore(intents, now);
        let first_intent = keys.zmembers(intents).into_iter().map(|(_, s)| s).min();
        if let Some(deadline) = first_intent
            && mine.is_none_or(|mine| mine <= now)
        {
            return Ok(refused(keys, deadline - now));
        }
    }
    keys.zadd(readers, now.saturating_add(ttl), token);
    last_at_least(keys, readers, ms(ttl));
    if keys.zcard(waiting) > 0 {
        keys.zrem(waiting, token);
        keys.zremrangebyscore(waiting, now);
        if keys.zcard(waiting) == 0 {
            keys.del(turn);
        }
    }
    Ok(ints(&[1, fence]))
}

/// [`super::scripts::WRITE`].
pub(super) fn write(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (writer, readers, intents) = keys3(k)?;
    let (_, turn) = keys45(k)?;
    let token = nth(a, 1, "ARGV")?;
    let ttl = number(nth(a, 2, "ARGV")?, "the ttl")?;
    let intent = number(nth(a, 3, "ARGV")?, "the intent's lease")?;
    let waits = nth(a, 4, "ARGV")? == "1";
    let now = keys.now_ms();
    let fence = fence_now(keys);
    let held = keys.get(writer).map(str::to_owned);
    if held.as_deref() == Some(token) {
        keys.pexpire(writer, ms(ttl));
        keys.zrem(intents, token);
        return Ok(ints(&[1, fence]));
    }
    let mut reading = None;
    if keys.zcard(readers) > 0 {
        keys.zremrangebyscore(readers, now);
        reading = keys.zmax(readers);
    }
    let turn_left = if held.is_none() { keys.pttl(turn) } else { -2 };
    if held.is_none() && reading.is_none() && turn_left < 0 {
        keys.set_px(writer, token.to_owned(), ms(ttl));
        keys.zrem(intents, token);
        return Ok(ints(&[1, fence]));
    }
    let left = match reading {
        _ if held.is_some() => keys.pttl(writer),
        Some(last) => last - now,
        None => turn_left,
    };
    if !waits {
        return Ok(ints(&[0, left, 0]));
    }
    keys.zremrangebyscore(intents, now);
    keep_until(keys, intents, token, now.saturating_add(intent), now);
    Ok(ints(&[0, left, 1]))
}

/// [`super::scripts::RELEASE`].
pub(super) fn release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (writer, readers, intents) = keys3(k)?;
    let (waiting, turn) = keys45(k)?;
    let token = nth(a, 1, "ARGV")?;
    let what = nth(a, 2, "ARGV")?;
    let (read_channel, write_channel) = (nth(a, 3, "ARGV")?, nth(a, 4, "ARGV")?);
    let turn_lease = number(nth(a, 6, "ARGV")?, "the turn's lease")?;
    let now = keys.now_ms();
    let mut released = false;
    let wrote = matches!(what, "w" | "?") && keys.get(writer) == Some(token);
    if wrote {
        keys.del(writer);
        released = true;
    }
    if matches!(what, "r" | "?")
        && let Some(deadline) = keys.zscore(readers, token)
    {
        keys.zrem(readers, token);
        released |= deadline > now;
    }
    let places = matches!(what, "?" | "p");
    let mut intended = places && keys.zrem(intents, token);
    if places && keys.zrem(waiting, token) {
        keys.zremrangebyscore(waiting, now);
        if keys.zcard(waiting) == 0 && keys.del(turn) {
            intended = true;
        }
    }
    if !released && !intended {
        return Ok(Value::Int(0));
    }
    let answer = Value::Int(i64::from(released));
    let at = keys.time_us();
    let by = sha1_smol::Sha1::from(token).digest();
    let writers_wait = keys.zcard(intents) > 0;
    if wrote && writers_wait && keys.zcard(waiting) > 0 {
        keys.zremrangebyscore(waiting, now);
        if keys.zcard(waiting) > 0 {
            keys.set_px(turn, "1".to_owned(), ms(turn_lease));
            keys.publish(read_channel, format!("{at};all;by={by}"));
            return Ok(answer);
        }
    }
    if writers_wait && keys.get(turn).is_none() {
        keys.zremrangebyscore(intents, now);
        if keys.zcard(intents) > 0 && keys.get(writer).is_none() {
            keys.zremrangebyscore(readers, now);
            if !exists(keys, readers) {
                keys.publish(write_channel, format!("{at};1;by={by}"));
            }
            return Ok(answer);
        }
    }
    if wrote || (intended && keys.get(writer).is_none()) {
        keys.publish(read_channel, format!("{at};all;by={by}"));
    }
    Ok(answer)
}

/// [`super::scripts::DOWNGRADE`].
pub(super) fn downgrade(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (writer, readers, intents) = keys3(k)?;
    let token = nth(a, 1, "ARGV")?;
    let ttl = number(nth(a, 2, "ARGV")?, "the ttl")?;
    let given = number(nth(a, 3, "ARGV")?, "the fence")?;
    let channel = nth(a, 4, "ARGV")?;
    let now = keys.now_ms();
    if keys.get(writer) != Some(token) {
        return Ok(ints(&[0]));
    }
    keys.del(writer);
    keys.zremrangebyscore(readers, now);
    keep_until(keys, readers, token, now.saturating_add(ttl), now);
    let at = keys.time_us();
    let fence = i64::try_from(at)
        .unwrap_or(i64::MAX)
        .max(given.saturating_add(1));
    keys.zremrangebyscore(intents, now);
    if keys.zcard(intents) == 0 {
        let by = sha1_smol::Sha1::from(token).digest();
        keys.publish(channel, format!("{at};all;by={by}"));
    }
    Ok(ints(&[1, fence]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::testing::strings;
    use std::time::{Duration, Instant};

    fn answer(value: Value) -> Vec<i64> {
        match value {
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::Int(n) => n,
                    other => panic!("not an integer: {other:?}"),
                })
                .collect(),
            Value::Int(n) => vec![n],
            other => panic!("unexpected answer {other:?}"),
        }
    }

    const KEYS: [&str; 5] = [
        "l:{a}:rw:w",
        "l:{a}:rw:r",
        "l:{a}:rw:i",
        "l:{a}:rw:q",
        "l:{a}:rw:t",
    ];

    fn read_as(keys: &mut Keyspace, token: &str) -> Vec<i64> {
        let args = strings(&[token, "1000", "300", "0"]);
        answer(read(keys, &strings(&KEYS), &args).unwrap())
    }

    fn wait_to_read(keys: &mut Keyspace, token: &str) -> Vec<i64> {
        let args = strings(&[token, "1000", "300", "1"]);
        answer(read(keys, &strings(&KEYS), &args).unwrap())
    }

    fn write_as(keys: &mut Keyspace, token: &str, waits: bool) -> Vec<i64> {
        let wait = if waits { "1" } else { "0" };
        let args = strings(&[token, "1000", "300", wait]);
        answer(write(keys, &strings(&KEYS), &args).unwrap())
    }

    fn release_as(keys: &mut Keyspace, token: &str) -> i64 {
        let args = strings(&[token, "?", "r", "w", "PUBLISH", "300"]);
        answer(release(keys, &strings(&KEYS), &args).unwrap())[0]
    }

    fn store(at: Instant) -> Keyspace {
        let mut keys = Keyspace::default();
        keys.begin(at, None);
        keys
    }

    #[test]
    fn readers_share_and_a_writer_waits_for_them() {
        let mut keys = store(Instant::now());
        assert_eq!(read_as(&mut keys, "r1")[0], 1);
        assert_eq!(read_as(&mut keys, "r2")[0], 1);
        assert_eq!(read_as(&mut keys, "r1")[0], 1, "a retry finds it ours");
        assert_eq!(write_as(&mut keys, "w1", true)[..1], [0]);
        assert_eq!(release_as(&mut keys, "r1"), 1);
        assert!(keys.finish().is_empty(), "a reader remains: nobody told");
        assert_eq!(release_as(&mut keys, "r2"), 1);
        let told = keys.finish();
        assert_eq!(told.len(), 1);
        assert_eq!(told[0].0, "w", "the last reader out wakes a writer");
        assert_eq!(write_as(&mut keys, "w1", true)[0], 1);
        assert_eq!(keys.zcard(KEYS[2]), 0, "the intent went with the grant");
        assert_eq!(keys.zcard(KEYS[1]), 0, "no reader is left");
    }

    #[test]
    fn an_intent_turns_new_readers_away_until_it_ends() {
        let start = Instant::now();
        let mut keys = store(start);
        assert_eq!(read_as(&mut keys, "r1")[0], 1);
        assert_eq!(write_as(&mut keys, "w1", true), vec![0, 1000, 1]);
        assert_eq!(read_as(&mut keys, "r2"), vec![0, 300, 0]);
        keys.begin(start + Duration::from_millis(301), None);
        assert_eq!(read_as(&mut keys, "r2")[0], 1, "the intent's lease ended");
    }

    #[test]
    fn a_writers_release_wakes_every_reader_and_leaves_nothing() {
        let mut keys = store(Instant::now());
        assert_eq!(write_as(&mut keys, "w1", false)[0], 1);
        assert_eq!(read_as(&mut keys, "r1")[0], 0);
        assert_eq!(write_as(&mut keys, "w2", false), vec![0, 1000, 0]);
        assert_eq!(release_as(&mut keys, "w1"), 1);
        let told = keys.finish();
        assert_eq!(told.len(), 1);
        assert_eq!(told[0].0, "r");
        assert!(told[0].1.contains(";all;by="));
        assert_eq!(keys.live().len(), 0);
        assert_eq!(keys.len(), 0, "nothing of the lock is left");
    }

    #[test]
    fn a_dead_reader_stops_counting_at_its_own_deadline() {
        let start = Instant::now();
        let mut keys = store(start);
        assert_eq!(read_as(&mut keys, "dead")[0], 1);
        keys.begin(start + Duration::from_millis(600), None);
        assert_eq!(read_as(&mut keys, "live")[0], 1);
        keys.begin(start + Duration::from_millis(1001), None);
        assert_eq!(write_as(&mut keys, "w1", true)[..1], [0], "live reads on");
        assert_eq!(keys.zscore(KEYS[1], "dead"), None, "reaped");
        assert_eq!(release_as(&mut keys, "dead"), 0, "its lease had ended");
    }

    #[test]
    fn a_writers_release_opens_a_turn_for_the_readers_who_waited() {
        let mut keys = store(Instant::now());
        assert_eq!(write_as(&mut keys, "w1", false)[0], 1);
        assert_eq!(wait_to_read(&mut keys, "r1"), vec![0, 1000, 1]);
        assert_eq!(write_as(&mut keys, "w2", true)[..1], [0]);
        assert_eq!(release_as(&mut keys, "w1"), 1);
        let told = keys.finish();
        assert_eq!(told.len(), 1);
        assert_eq!(told[0].0, "r", "the waiting readers are woken");
        assert_eq!(
            write_as(&mut keys, "w2", true),
            vec![0, 300, 1],
            "their turn"
        );
        assert_eq!(wait_to_read(&mut keys, "r1")[0], 1, "past the intent");
        assert_eq!(
            keys.pttl(KEYS[4]),
            -2,
            "the turn ended with the last waiter"
        );
        assert_eq!(release_as(&mut keys, "r1"), 1);
        assert_eq!(write_as(&mut keys, "w2", true)[0], 1);
    }

    #[test]
    fn a_downgrade_keeps_the_token_holding_a_read() {
        let mut keys = store(Instant::now());
        assert_eq!(write_as(&mut keys, "w1", false)[0], 1);
        let args = strings(&["w1", "1000", "5", "r", "PUBLISH"]);
        let down = answer(downgrade(&mut keys, &strings(&KEYS), &args).unwrap());
        assert_eq!(down[0], 1);
        assert!(down[1] > 5);
        assert_eq!(read_as(&mut keys, "r2")[0], 1, "readers share it now");
        assert_eq!(write_as(&mut keys, "w2", false)[0], 0, "writers do not");
        let again = answer(downgrade(&mut keys, &strings(&KEYS), &args).unwrap());
        assert_eq!(again, vec![0], "the write is gone");
    }
}
