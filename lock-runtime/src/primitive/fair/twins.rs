//! The in-memory twins of the fair lock's scripts ([`super::scripts`]):
//! the same steps, in the same order, over the in-memory store's
//! keyspace, with the same answers (deadlines on the store's clock,
//! [`Keyspace::now_ms`]). Read each next to its Lua.

use redis::Value;

use crate::memory::Keyspace;
use crate::memory::words::Words;
use crate::primitive::shared::{nth, number};

fn int(n: i64) -> Value {
    Value::Int(n)
}

/// The two keys of a call: the lock and its line.
fn keys2(k: &Words) -> Result<(&str, &str), String> {
    Ok((nth(k, 1, "KEYS")?, nth(k, 2, "KEYS")?))
}

/// A waiter's arrival in the line (its place is its token).
fn arrival(token: &str) -> String {
    format!("{token}<")
}

/// Arrivals are scored this far below zero (see `scripts/mod.rs`).
const ARRIVALS_BELOW: i64 = 10_000_000_000_000_000;

/// Which end of the line a hand-over reads: the oldest arrival, or (a
/// sabotaged release only) the newest.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LineEnd {
    Oldest,
    #[cfg_attr(not(feature = "sabotage"), allow(dead_code))]
    Newest,
}

/// The first waiter in `line` whose place is alive at `now`, with its
/// place's deadline; arrivals of waiters whose place ran out leave on the
/// way. `take`: its own entries leave too (it is handed the lock).
fn first_alive(keys: &mut Keyspace, line: &str, now: i64, take: bool) -> Option<(String, i64)> {
    alive_from(keys, line, now, take, LineEnd::Oldest)
}

fn alive_from(
    keys: &mut Keyspace,
    line: &str,
    now: i64,
    take: bool,
    from: LineEnd,
) -> Option<(String, i64)> {
    loop {
        let arrivals = keys
            .zmembers(line)
            .into_iter()
            .filter(|(_, score)| *score < 0);
        let order =
            |a: &(String, i64), b: &(String, i64)| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0));
        let (first, _) = match from {
            LineEnd::Oldest => arrivals.min_by(order)?,
            LineEnd::Newest => arrivals.max_by(order)?,
        };
        let waiter = first.strip_suffix('<').unwrap_or(&first).to_owned();
        let deadline = keys
            .zscore(line, &waiter)
            .filter(|deadline| *deadline > now);
        if deadline.is_none() || take {
            keys.zrem(line, &first);
            keys.zrem(line, &waiter);
        }
        if let Some(deadline) = deadline {
            return Some((waiter, deadline));
        }
    }
}

/// Both entries of `token` leave the line.
fn leave(keys: &mut Keyspace, line: &str, token: &str) {
    keys.zrem(line, &arrival(token));
    keys.zrem(line, token);
}

/// [`super::scripts::ACQUIRE`].
pub(super) fn acquire(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let (lock, line) = keys2(k)?;
    let token = nth(a, 1, "ARGV")?;
    let ttl = number(nth(a, 2, "ARGV")?, "the ttl")?;
    let place = number(nth(a, 3, "ARGV")?, "the place's lease")?;
    let waits = nth(a, 4, "ARGV")? == "1";
    let now = keys.now_ms();
    let fence = i64::try_from(keys.time_us()).unwrap_or(i64::MAX);
    let ttl_ms = u64::try_from(ttl).unwrap_or(0);
    let held = keys.get(lock).map(str::to_owned);
    if held.as_deref() == Some(token) {
        keys.pexpire(lock, ttl_ms);
        leave(keys, line, token);
        return Ok(Value::Array(vec![int(1), int(fence)]));
    }
    // Who is first matters only while the lock is free (see `acquire.lua`).
    let first = if held.is_none() {
        first_alive(keys, line, now, false)
    } else {
        None
    };
    if held.is_none() && first.as_ref().is_none_or(|(first, _)| first == token) {
        // Its arrival as the first in line; 0 when nobody alive waited.
        let arrived = match first {
            Some(_) => keys
                .zscore(line, &arrival(token))
                .map_or(0, |arrived| arrived + ARRIVALS_BELOW),
            None => 0,
        };
        keys.set_nx_px(lock, token.to_owned(), ttl_ms);
        leave(keys, line, token);
        return Ok(Value::Array(vec![int(1), int(fence), int(arrived)]));
    }
    let mut left = keys.pttl(lock);
    if left < 0
        && let Some((_, deadline)) = first
    {
        left = deadline - now;
    }
    if !waits {
        return Ok(Value::Array(vec![int(0), int(left), int(0)]));
    }
    // A waiter without a live place arrives now (see `acquire.lua`).
    let placed = keys
        .zscore(line, token)
        .is_some_and(|deadline| deadline > now);
    let arrived = match keys.zscore(line, &arrival(token)).filter(|_| placed) {
        Some(arrived) => arrived,
        None => {
            keys.zadd(line, fence - ARRIVALS_BELOW, &arrival(token));
            fence - ARRIVALS_BELOW
        }
    };
    keys.zadd(line, now.saturating_add(place), token);
    let last = keys.zmax(line).unwrap_or(now);
    keys.pexpire(line, u64::try_from(last - now).unwrap_or(0));
    Ok(Value::Array(vec![
        int(0),
        int(left),
        int(1),
        int(arrived + ARRIVALS_BELOW),
    ]))
}

/// [`super::scripts::RELEASE`].
pub(super) fn release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    release_from(keys, k, a, LineEnd::Oldest)
}

/// [`super::scripts::LIFO_RELEASE`].
#[cfg(feature = "sabotage")]
pub(super) fn lifo_release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    release_from(keys, k, a, LineEnd::Newest)
}

fn release_from(keys: &mut Keyspace, k: &Words, a: &Words, from: LineEnd) -> Result<Value, String> {
    let (lock, line) = keys2(k)?;
    let token = nth(a, 1, "ARGV")?;
    let given = number(nth(a, 2, "ARGV")?, "the fence")?;
    let channel = nth(a, 3, "ARGV")?;
    leave(keys, line, token);
    for served in a.iter().skip(4) {
        leave(keys, line, served);
    }
    if keys.get(lock) != Some(token) {
        return Ok(int(0));
    }
    let now = keys.now_ms();
    let Some((next, deadline)) = alive_from(keys, line, now, true, from) else {
        keys.del(lock);
        return Ok(int(1));
    };
    keys.set_px(
        lock,
        next.clone(),
        u64::try_from(deadline - now).unwrap_or(0),
    );
    let at = keys.time_us();
    let fence = i64::try_from(at)
        .unwrap_or(i64::MAX)
        .max(given.saturating_add(1));
    let digest = sha1_smol::Sha1::from(next.as_str()).digest();
    let mut message = format!("{at};g={digest}:{fence}");
    let behind = seen_behind(keys, line, now);
    if !behind.is_empty() {
        message.push_str(";n=");
        message.push_str(&behind.join(","));
    }
    keys.publish(channel, message);
    Ok(int(1))
}

/// The digests of the first live waiters in `line` (at most 8, among its
/// first 16 arrivals), in order; waiters whose place ran out leave on the
/// way (see `release.lua`).
fn seen_behind(keys: &mut Keyspace, line: &str, now: i64) -> Vec<String> {
    let mut arrivals: Vec<(String, i64)> = keys
        .zmembers(line)
        .into_iter()
        .filter(|(_, score)| *score < 0)
        .collect();
    arrivals.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let mut behind = Vec::new();
    for (arrival, _) in arrivals.into_iter().take(16) {
        let waiter = arrival.strip_suffix('<').unwrap_or(&arrival).to_owned();
        if keys.zscore(line, &waiter).is_some_and(|place| place > now) {
            behind.push(sha1_smol::Sha1::from(waiter.as_str()).digest().to_string());
            if behind.len() == 8 {
                break;
            }
        } else {
            keys.zrem(line, &arrival);
            keys.zrem(line, &waiter);
        }
    }
    behind
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::testing::{ints, strings};
    use std::time::{Duration, Instant};

    const KEYS: [&str; 2] = ["l:{a}:fair", "l:{a}:fair:q"];

    fn try_as(keys: &mut Keyspace, token: &str, waits: bool) -> Vec<i64> {
        let wait = if waits { "1" } else { "0" };
        let args = strings(&[token, "1000", "300", wait]);
        ints(&acquire(keys, &strings(&KEYS), &args).unwrap())
    }

    fn release_as(keys: &mut Keyspace, token: &str, fence: i64) -> i64 {
        let args = strings(&[token, &fence.to_string(), "l:{a}:fair:released", "PUBLISH"]);
        ints(&release(keys, &strings(&KEYS), &args).unwrap())[0]
    }

    #[test]
    fn waiters_are_granted_in_the_order_the_store_saw_them() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        let owner = try_as(&mut keys, "t1", true);
        assert_eq!(owner[0], 1);
        let t2 = try_as(&mut keys, "t2", true);
        assert_eq!(t2[..3], [0, 1000, 1]);
        assert_eq!(try_as(&mut keys, "t2", true)[3], t2[3], "its arrival, once");
        assert_eq!(try_as(&mut keys, "t3", true)[2], 1);
        // A single try never overtakes the line, and takes no place.
        assert_eq!(try_as(&mut keys, "t9", false)[0], 0);
        assert_eq!(keys.zcard("l:{a}:fair:q"), 4, "a place and an arrival each");
        // The release hands the lock to t2 and names it in its message.
        assert_eq!(release_as(&mut keys, "t1", owner[1]), 1);
        assert_eq!(keys.get("l:{a}:fair"), Some("t2"));
        assert_eq!(
            keys.pttl("l:{a}:fair"),
            300,
            "what was left of its place, until renewed"
        );
        let published = keys.finish();
        let digest = sha1_smol::Sha1::from("t2").digest().to_string();
        assert!(
            published[0].1.contains(&format!(";g={digest}:")),
            "{published:?}"
        );
        let behind = sha1_smol::Sha1::from("t3").digest().to_string();
        assert!(
            published[0].1.ends_with(&format!(";n={behind}")),
            "the waiter behind the new owner is named: {published:?}"
        );
        // t2's next try (a lost message) finds the lock its own.
        assert_eq!(try_as(&mut keys, "t2", true)[0], 1);
        assert_eq!(keys.pttl("l:{a}:fair"), 1000);
        // t3 is next, and nothing is left once everyone went.
        assert_eq!(release_as(&mut keys, "t2", 5), 1);
        assert_eq!(keys.get("l:{a}:fair"), Some("t3"));
        assert_eq!(release_as(&mut keys, "t3", 6), 1);
        for key in KEYS {
            assert_eq!(keys.pttl(key), -2, "{key} is left");
        }
    }

    #[test]
    fn a_waiter_whose_place_ran_out_leaves_the_line() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        let owner = try_as(&mut keys, "t1", true);
        try_as(&mut keys, "t2", true);
        keys.begin(start + Duration::from_millis(200), None);
        try_as(&mut keys, "t3", true);
        // t2's place (300 ms) ends; t3 renewed its at 200 ms.
        keys.begin(start + Duration::from_millis(301), None);
        assert_eq!(release_as(&mut keys, "t1", owner[1]), 1);
        assert_eq!(
            keys.get("l:{a}:fair"),
            Some("t3"),
            "the dead waiter is passed over"
        );
        // A waiter that gives up leaves its place at once.
        try_as(&mut keys, "t4", true);
        assert_eq!(release_as(&mut keys, "t4", 0), 0);
        assert_eq!(keys.zscore("l:{a}:fair:q", "t4"), None);
    }

    #[test]
    fn a_waiter_whose_place_ran_out_arrives_again_behind_those_that_kept_theirs() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        try_as(&mut keys, "t1", true);
        let stalled = try_as(&mut keys, "t2", true);
        keys.begin(start + Duration::from_millis(200), None);
        let kept = try_as(&mut keys, "t3", true);
        // t2 stalled past its place's lease; t3 renewed its own.
        keys.begin(start + Duration::from_millis(400), None);
        try_as(&mut keys, "t3", true);
        let again = try_as(&mut keys, "t2", true);
        assert!(again[3] > kept[3], "{again:?} came back ahead of {kept:?}");
        assert!(again[3] > stalled[3]);
    }

    #[test]
    fn a_grant_at_a_try_says_whether_it_waited_in_line() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        try_as(&mut keys, "t1", true);
        let waited = try_as(&mut keys, "t2", true);
        // The owner's lock expires unreleased; t2, first in line, takes it.
        keys.del("l:{a}:fair");
        let taken = try_as(&mut keys, "t2", true);
        assert_eq!(taken[..1], [1]);
        assert_eq!(taken[2], waited[3], "granted by its arrival");
        assert_eq!(release_as(&mut keys, "t2", taken[1]), 1);
        // t3 waits behind t1, its place runs out, and nobody else waits:
        // its try takes the lock as if it had never waited.
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        let owner = try_as(&mut keys, "t1", true);
        try_as(&mut keys, "t3", true);
        keys.begin(start + Duration::from_millis(400), None);
        assert_eq!(release_as(&mut keys, "t1", owner[1]), 1);
        let late = try_as(&mut keys, "t3", true);
        assert_eq!(late[..1], [1]);
        assert_eq!(late[2], 0, "its place had run out: {late:?}");
    }

    #[test]
    fn a_release_takes_the_places_of_waiters_served_in_process_out_first() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        let owner = try_as(&mut keys, "t1", true);
        for waiter in ["t2", "t3", "t4"] {
            try_as(&mut keys, waiter, true);
        }
        // t2 and t3 took t1's hold in process, in turn; its release names
        // them, and the lock goes to t4, the first who still waits.
        let args = strings(&[
            "t1",
            &owner[1].to_string(),
            "l:{a}:fair:released",
            "PUBLISH",
            "t2",
            "t3",
        ]);
        assert_eq!(
            ints(&release(&mut keys, &strings(&KEYS), &args).unwrap())[0],
            1
        );
        assert_eq!(keys.get("l:{a}:fair"), Some("t4"));
        assert_eq!(keys.zcard("l:{a}:fair:q"), 0, "every place left");
        let (_, message) = &keys.finish()[0];
        assert!(!message.contains(";n="), "nobody is behind t4: {message}");
    }

    #[test]
    fn a_release_hands_on_a_fence_above_the_givers() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        try_as(&mut keys, "t1", true);
        try_as(&mut keys, "t2", true);
        let ahead = i64::MAX / 4;
        assert_eq!(release_as(&mut keys, "t1", ahead), 1);
        let (_, message) = &keys.finish()[0];
        let fence: i64 = message.rsplit_once(':').unwrap().1.parse().unwrap();
        assert_eq!(fence, ahead + 1);
    }
}
