//! The in-memory twin of the renewal script (`extend.lua`): the same steps
//! over the in-memory store's keyspace, with the same answers (deadlines
//! on the store's clock, [`Keyspace::now_ms`]).

use redis::Value;

use crate::memory::Keyspace;
use crate::memory::words::Words;
use crate::owner::WAITED;

/// `extend.lua`.
pub(crate) fn extend(keys: &mut Keyspace, k: &Words, a: &Words) -> Result<Value, String> {
    let mut renewed = Vec::with_capacity(k.len());
    for (i, key) in k.iter().enumerate() {
        let arg = |n: usize| {
            a.get(3 * i + n)
                .ok_or_else(|| format!("ARGV[{}] is missing", 3 * i + n + 1))
        };
        let (kind, token) = (arg(0)?, arg(1)?);
        let ttl: u64 = arg(2)?
            .parse()
            .map_err(|_| format!("the ttl `{}` is not a whole number", arg(2).unwrap_or("")))?;
        let ours = match kind {
            "k" => {
                let held = keys.get(key).unwrap_or("");
                let mine = held
                    .strip_prefix(token)
                    .is_some_and(|rest| rest.is_empty() || rest == WAITED);
                if mine {
                    keys.pexpire(key, ttl);
                }
                mine
            }
            "m" => {
                let now = keys.now_ms();
                match keys.zscore(key, token) {
                    Some(deadline) if deadline > now => {
                        let ttl = i64::try_from(ttl).unwrap_or(i64::MAX / 2);
                        keys.zadd(key, now.saturating_add(ttl), token);
                        let last = keys.zmax(key).unwrap_or(now);
                        keys.pexpire(key, u64::try_from(last - now).unwrap_or(0));
                        true
                    }
                    Some(_) => {
                        keys.zrem(key, token);
                        false
                    }
                    None => false,
                }
            }
            other => return Err(format!("a lease of unknown kind {other}")),
        };
        renewed.push(Value::Int(i64::from(ours)));
    }
    Ok(Value::Array(renewed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::testing::strings;
    use std::time::Instant;

    #[test]
    fn renews_what_is_ours_and_answers_no_for_the_rest() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        keys.set_nx_px("lock:{a}", "t1~".to_owned(), 100);
        keys.set_nx_px("lock:{b}", "t9".to_owned(), 100);
        let answer = extend(
            &mut keys,
            &strings(&["lock:{a}", "lock:{b}", "lock:{c}"]),
            &strings(&["k", "t1", "5000", "k", "t2", "5000", "k", "t3", "5000"]),
        )
        .unwrap();
        assert_eq!(
            answer,
            Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(0)])
        );
        assert_eq!(keys.pttl("lock:{a}"), 5000);
        assert_eq!(keys.pttl("lock:{b}"), 100);
    }

    #[test]
    fn a_member_is_renewed_until_its_deadline_and_lost_after_it() {
        let start = Instant::now();
        let mut keys = Keyspace::default();
        keys.begin(start, None);
        let now = keys.now_ms();
        keys.zadd("set", now + 100, "t1");
        keys.zadd("set", now + 50, "t2");
        keys.pexpire("set", 100);
        let renew = |keys: &mut Keyspace, token: &str| {
            let answer = extend(keys, &strings(&["set"]), &strings(&["m", token, "1000"]));
            match answer.unwrap() {
                Value::Array(values) => values[0].clone(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(renew(&mut keys, "t1"), Value::Int(1));
        assert_eq!(keys.zscore("set", "t1"), Some(now + 1000));
        assert_eq!(keys.pttl("set"), 1000, "the set lasts as its latest member");
        assert_eq!(renew(&mut keys, "t9"), Value::Int(0), "never a member");
        keys.begin(start + std::time::Duration::from_millis(60), None);
        assert_eq!(renew(&mut keys, "t2"), Value::Int(0), "its deadline passed");
        assert_eq!(keys.zscore("set", "t2"), None, "and it is gone");
        assert_eq!(keys.zcard("set"), 1);
    }

    #[test]
    fn a_lease_of_an_unknown_kind_is_an_error() {
        let mut keys = Keyspace::default();
        keys.begin(Instant::now(), None);
        let answer = extend(
            &mut keys,
            &strings(&["lock:{a}"]),
            &strings(&["z", "t1", "5000"]),
        );
        assert!(answer.is_err());
        let short = extend(&mut keys, &strings(&["lock:{a}"]), &strings(&["k", "t1"]));
        assert!(short.is_err());
    }
}
