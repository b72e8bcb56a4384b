//! The in-memory twins of the multi-key lock's scripts
//! ([`super::scripts`]): the same steps, in the same order, over the
//! in-memory store's keyspace, with the same answers. Read each next to
//! its Lua; a change to one is a change to both.

use redis::Value;

use crate::memory::Keyspace;
use crate::memory::words::Words;
use crate::owner::{KEPT, WAITED};
use crate::primitive::shared::{is_mine, nth};

fn int(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// [`super::scripts::ACQUIRE`].
pub(super) fn acquire(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let token = nth(a, 1, "ARGV")?;
    let ttl_text = nth(a, 2, "ARGV")?;
    let ttl: u64 = ttl_text
        .parse()
        .map_err(|_| format!("the ttl `{ttl_text}` is not a whole number"))?;
    for (index, lock) in k.iter().enumerate() {
        let Some(held) = keys.get(lock).map(str::to_owned) else {
            continue;
        };
        if is_mine(&held, token) || held.ends_with(KEPT) {
            continue;
        }
        if !held.ends_with(WAITED) {
            keys.append(lock, WAITED);
        }
        let pttl = keys.pttl(lock);
        return Ok(Value::Array(vec![
            int(0),
            Value::Int(pttl),
            int(u64::try_from(index + 1).unwrap_or(u64::MAX)),
        ]));
    }
    for lock in k.iter() {
        match keys.get(lock).map(str::to_owned) {
            Some(held) if is_mine(&held, token) => {
                keys.pexpire(lock, ttl);
            }
            Some(_) => keys.set_px(lock, format!("{token}{WAITED}"), ttl),
            None => keys.set_px(lock, token.to_owned(), ttl),
        }
    }
    Ok(Value::Array(vec![int(1), int(keys.time_us())]))
}

/// [`super::scripts::RELEASE`]. `ARGV[2]`, the publish command, makes no
/// difference in memory.
pub(super) fn release(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let token = nth(a, 1, "ARGV")?;
    let mut released = 0;
    for (index, lock) in k.iter().enumerate() {
        let Some(held) = keys.get(lock).filter(|held| is_mine(held, token)) else {
            continue;
        };
        let waited = held.ends_with(WAITED);
        keys.del(lock);
        released = 1;
        if waited {
            let channel = nth(a, 3 + index, "ARGV")?.to_owned();
            let at = keys.time_us();
            keys.publish(&channel, at.to_string());
        }
    }
    Ok(int(released))
}
