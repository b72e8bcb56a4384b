//! The in-memory twins of the semaphore's scripts ([`super::scripts`]):
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

/// The owner of a claim (`<slot>#<token>`).
fn owner(claim: &str) -> Option<&str> {
    let (slot, token) = claim.split_once('#')?;
    (!slot.is_empty() && slot.bytes().all(|b| b.is_ascii_digit())).then_some(token)
}

/// The limit a record (`=<limit>`) names.
fn recorded_limit(keys: &mut Keyspace, set: &str) -> Option<(String, i64)> {
    let (record, _) = keys
        .zmembers(set)
        .into_iter()
        .find(|(_, score)| *score == 0)?;
    let limit = record.strip_prefix('=')?.parse().ok()?;
    Some((record, limit))
}

/// Leases that ended leave, then every claim no live lease backs. The
/// live claims' slots, with their owners.
fn reap(keys: &mut Keyspace, set: &str, now: i64) -> Vec<(i64, String)> {
    for (member, score) in keys.zmembers(set) {
        if score > 0 && score <= now {
            keys.zrem(set, &member);
        }
    }
    let mut live = Vec::new();
    for (claim, score) in keys.zmembers(set) {
        if score >= 0 {
            continue;
        }
        match owner(&claim) {
            Some(token) if keys.zscore(set, token).is_some() => {
                live.push((-score - 1, token.to_owned()));
            }
            _ => {
                keys.zrem(set, &claim);
            }
        }
    }
    live
}

/// The set lives as long as its latest lease.
fn expire(keys: &mut Keyspace, set: &str, now: i64) {
    if let Some(last) = keys.zmax(set) {
        keys.pexpire(set, u64::try_from(last - now).unwrap_or(0));
    }
}

fn granted(fence: i64, slots: &[i64]) -> Value {
    let mut answer = vec![int(1), int(fence)];
    answer.extend(slots.iter().copied().map(int));
    Value::Array(answer)
}

/// [`super::scripts::ACQUIRE`].
pub(super) fn acquire(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let set = nth(k, 1, "KEYS")?;
    let token = nth(a, 1, "ARGV")?;
    let ttl = number(nth(a, 2, "ARGV")?, "the ttl")?;
    let limit = number(nth(a, 3, "ARGV")?, "the limit")?;
    let permits = number(nth(a, 4, "ARGV")?, "the permits")?;
    let now = keys.now_ms();
    let fence = i64::try_from(keys.time_us()).unwrap_or(i64::MAX);
    let live = reap(keys, set, now);
    let held = i64::try_from(live.len()).unwrap_or(i64::MAX);
    let mut mine: Vec<i64> = live
        .iter()
        .filter(|(_, owner)| owner == token)
        .map(|(slot, _)| *slot)
        .collect();
    if !mine.is_empty() {
        keys.zadd(set, now.saturating_add(ttl), token);
        expire(keys, set, now);
        mine.sort_unstable();
        return Ok(granted(fence, &mine));
    }
    if let Some((record, recorded)) = recorded_limit(keys, set)
        && recorded != limit
    {
        if held > 0 {
            return Ok(Value::Array(vec![int(-1), int(recorded)]));
        }
        keys.zrem(set, &record);
    }
    if held + permits > limit {
        let first = keys
            .zmembers(set)
            .into_iter()
            .filter(|(_, score)| *score > 0)
            .map(|(_, score)| score)
            .min()
            .unwrap_or(now);
        return Ok(Value::Array(vec![int(0), int(first - now)]));
    }
    let mut slots = Vec::new();
    let mut slot = 0;
    while i64::try_from(slots.len()).unwrap_or(i64::MAX) < permits && slot < limit {
        if !live.iter().any(|(taken, _)| *taken == slot) {
            slots.push(slot);
            keys.zadd(set, -(slot + 1), &format!("{slot}#{token}"));
        }
        slot += 1;
    }
    keys.zadd(set, 0, &format!("={limit}"));
    keys.zadd(set, now.saturating_add(ttl), token);
    expire(keys, set, now);
    Ok(granted(fence, &slots))
}

/// [`super::scripts::RELEASE`].
pub(super) fn release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let set = nth(k, 1, "KEYS")?;
    let token = nth(a, 1, "ARGV")?;
    let channel = nth(a, 2, "ARGV")?;
    let now = keys.now_ms();
    let deadline = keys.zscore(set, token);
    keys.zrem(set, token);
    let held = i64::try_from(reap(keys, set, now).len()).unwrap_or(i64::MAX);
    let recorded = recorded_limit(keys, set);
    if !keys.zmembers(set).iter().any(|(_, score)| *score > 0) {
        keys.del(set);
    }
    if deadline.is_none_or(|deadline| deadline <= now) {
        return Ok(int(0));
    }
    let limit = recorded.map_or(held, |(_, limit)| limit);
    let at = keys.time_us();
    let by = sha1_smol::Sha1::from(token).digest();
    keys.publish(channel, format!("{at};f={};by={by}", limit - held));
    Ok(int(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::testing::{ints, strings};
    use std::time::{Duration, Instant};

    const SET: &str = "l:{a}:sem";

    fn take(keys: &mut Keyspace, token: &str, limit: u32, permits: u32) -> Vec<i64> {
        let args = strings(&[token, "1000", &limit.to_string(), &permits.to_string()]);
        ints(&acquire(keys, &strings(&[SET]), &args).unwrap())
    }

    fn give_back(keys: &mut Keyspace, token: &str) -> i64 {
        let args = strings(&[token, "l:{a}:sem:released", "PUBLISH"]);
        ints(&release(keys, &strings(&[SET]), &args).unwrap())[0]
    }

    #[test]
    fn permits_are_all_or_nothing_within_the_limit_on_the_lowest_free_slots() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        assert_eq!(take(&mut keys, "a", 4, 2)[2..], [0, 1]);
        assert_eq!(take(&mut keys, "b", 4, 1)[2..], [2]);
        assert_eq!(
            take(&mut keys, "c", 4, 2)[..2],
            [0, 1000],
            "two of one free"
        );
        assert_eq!(give_back(&mut keys, "a"), 1);
        let message = keys.finish()[0].1.clone();
        let by = sha1_smol::Sha1::from("a").digest();
        assert!(message.ends_with(&format!(";f=3;by={by}")), "{message}");
        assert_eq!(take(&mut keys, "c", 4, 2)[2..], [0, 1]);
        // A retry after a lost reply finds its own grant.
        assert_eq!(take(&mut keys, "c", 4, 2)[2..], [0, 1]);
        assert_eq!(give_back(&mut keys, "b"), 1);
        assert_eq!(give_back(&mut keys, "c"), 1);
        assert_eq!(give_back(&mut keys, "c"), 0, "nothing held twice");
        assert_eq!(keys.pttl(SET), -2, "nothing is left");
    }

    #[test]
    fn a_lease_that_ended_gives_its_permits_back() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        take(&mut keys, "a", 2, 2);
        assert_eq!(take(&mut keys, "b", 2, 1)[0], 0);
        keys.begin(start + Duration::from_millis(1001), None);
        assert_eq!(take(&mut keys, "b", 2, 1)[2..], [0]);
        assert_eq!(give_back(&mut keys, "a"), 0, "its lease had ended");
        assert_eq!(keys.zcard(SET), 3, "b's lease, claim and the limit");
    }

    #[test]
    fn another_limit_is_refused_while_permits_are_held_and_taken_after() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        take(&mut keys, "a", 4, 1);
        assert_eq!(take(&mut keys, "b", 3, 1), [-1, 4]);
        give_back(&mut keys, "a");
        assert_eq!(take(&mut keys, "b", 3, 1)[0], 1);
        assert_eq!(take(&mut keys, "c", 4, 1), [-1, 3]);
    }
}
