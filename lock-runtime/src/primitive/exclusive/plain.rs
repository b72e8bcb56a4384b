//! Taking a free lock with plain commands: `SET key token NX PX ttl` and
//! then `TIME`, sent together (one round trip, run back to back on the
//! connection). The server runs no script: the uncontended acquire costs
//! it little more than a bare `SET NX`.
//!
//! The fence is the clock `TIME` reads, just after the `SET` took the lock
//! and while the lock is still ours: every other grant of the key ends
//! before ours begins or begins after ours ends, so fences rise (see
//! [`super::scripts`]). Only a gap longer than the lease between the two
//! commands could read the clock after our lease ended, and then the
//! answer comes back later than the lease: the acquisition discards a
//! late grant unused (see `crate::engine::validity`).
//!
//! When the `SET` finds the key taken, nothing was changed and nothing is
//! known yet (someone else's, or ours from a try whose reply was lost):
//! the caller runs the acquire script, which tells the two apart, marks a
//! busy lock for its waiters, and answers the owner's remaining lease.
//! An acquisition that already met a busy lock goes to the script at once.
//! No `MULTI`/`EXEC`: nothing needs them, and a user's ACL need not allow
//! them.
//!
//! # Redlock
//! On a Redlock master the pipeline is `SET key token NX PX ttl`, `INCR`
//! of the master's fence counter and `GET` of its up mark (see
//! [`super::scripts::ACQUIRE_COUNTED`]): the increment is the fence, for
//! the same reason as the clock above (it comes after the grant, and any
//! later owner's increment after our lease). When the `SET` took the lock
//! but the counter has not been seeded from the clock yet, or the up mark
//! does not say that the restart quarantine has passed, the grant is not
//! finished: the script runs on that master too (the lock is ours there,
//! so it answers a grant, with the seeded fence and the quarantine still
//! to run). An `INCR` whose `SET` found the key taken counts for nothing:
//! fences skip a number, which they may.

use redis::{FromRedisValue, ParsingError, Value};

use crate::backend::plain::PlainCommands;
use crate::backend::resp;

/// The pipeline that takes `lock` for `token` if it is free, then reads
/// the clock. Sized up front: it runs on every uncontended acquisition.
pub(crate) fn take_if_free(lock: &str, token: &str, ttl_ms: u64) -> PlainCommands {
    let mut pipe = PlainCommands::with_capacity(7, lock.len() + token.len() + 40);
    set_nx_px(&mut pipe, lock, token, ttl_ms).command("TIME");
    pipe
}

/// Appends `SET lock token NX PX ttl_ms` to `pipe`.
fn set_nx_px<'p>(
    pipe: &'p mut PlainCommands,
    lock: &str,
    token: &str,
    ttl_ms: u64,
) -> &'p mut PlainCommands {
    pipe.command("SET")
        .arg(lock)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
}

/// The answer of [`take_if_free`]: the fence when the `SET` took the
/// lock, None when the key was there. Read straight from the replies,
/// without the `String` and tuples a generic reading allocates: this runs
/// on every uncontended acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer(pub(crate) Option<u64>);

impl FromRedisValue for Answer {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let [set, clock] = replies::<2>(&value)?;
        let [seconds, micros] = replies::<2>(clock)?;
        let (seconds, micros) = (number(seconds)?, number(micros)?);
        // The fence is the clock in microseconds.
        Ok(Answer(took(set)?.then(|| {
            seconds.saturating_mul(1_000_000).saturating_add(micros)
        })))
    }
}

/// The `N` replies of a pipeline (or of a command answering an array).
fn replies<const N: usize>(value: &Value) -> Result<&[Value; N], ParsingError> {
    match value {
        Value::Array(items) => items
            .as_slice()
            .try_into()
            .map_err(|_| format!("{N} replies expected, got {}", items.len()).into()),
        other => Err(format!("an array of {N} replies expected, got {other:?}").into()),
    }
}

/// Whether a `SET NX` took the key: `OK`, or nil when it was there.
fn took(set: &Value) -> Result<bool, ParsingError> {
    match set {
        Value::Okay => Ok(true),
        Value::SimpleString(text) if text == "OK" => Ok(true),
        Value::Nil => Ok(false),
        other => Err(format!("`SET NX` answered {other:?}").into()),
    }
}

/// A whole number the server wrote as text (`TIME`) or as an integer.
fn number(value: &Value) -> Result<u64, ParsingError> {
    let parsed = match value {
        Value::BulkString(text) => resp::whole_number(text),
        Value::SimpleString(text) => resp::whole_number(text.as_bytes()),
        Value::Int(number) => u64::try_from(*number).ok(),
        _ => None,
    };
    parsed.ok_or_else(|| format!("a whole number expected, got {value:?}").into())
}

/// The pipeline that takes `lock` for `token` on a Redlock master if it
/// is free, counts `counter` up and reads `up_mark`.
pub(crate) fn take_if_free_counted(
    lock: &str,
    token: &str,
    ttl_ms: u64,
    counter: &str,
    up_mark: &str,
) -> PlainCommands {
    let bytes = lock.len() + token.len() + counter.len() + up_mark.len() + 40;
    let mut pipe = PlainCommands::with_capacity(10, bytes);
    set_nx_px(&mut pipe, lock, token, ttl_ms)
        .command("INCR")
        .arg(counter)
        .command("GET")
        .arg(up_mark);
    pipe
}

/// The answer of [`take_if_free_counted`], read straight from the
/// replies (see [`Answer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CountedAnswer {
    /// The `SET` took the lock.
    taken: bool,
    /// The counter after the increment (it may be negative only if
    /// something else wrote it; then it is not seeded).
    counter: i64,
    /// The up mark's value when it is a number of ms; None when it is
    /// missing or says something else (a fresh mark).
    passed_ms: Option<u64>,
}

impl FromRedisValue for CountedAnswer {
    fn from_redis_value(value: Value) -> Result<Self, ParsingError> {
        let [set, counter, up_mark] = replies::<3>(&value)?;
        let counter = match counter {
            Value::Int(counter) => *counter,
            other => return Err(format!("`INCR` answered {other:?}").into()),
        };
        let passed_ms = match up_mark {
            Value::Nil => None,
            mark => number(mark).ok(),
        };
        Ok(CountedAnswer {
            taken: took(set)?,
            counter,
            passed_ms,
        })
    }
}

/// The fence when the lock was taken and the grant needs nothing more: the
/// counter was seeded and the up mark says the restart quarantine
/// (`quarantine_ms`) has passed. None otherwise (see the module docs).
pub(crate) fn counted_fence_of(answer: CountedAnswer, quarantine_ms: u64) -> Option<u64> {
    let passed = answer
        .passed_ms
        .is_some_and(|passed| passed >= quarantine_ms);
    let seeded = answer.counter >= super::scripts::SEEDED;
    (answer.taken && seeded && passed).then(|| answer.counter.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a pipeline sends, in order; never in `MULTI`/`EXEC`.
    fn sent_words(pipe: &PlainCommands) -> Vec<String> {
        let mut packed = Vec::new();
        pipe.write_resp(&mut packed);
        String::from_utf8(packed)
            .unwrap()
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with(['*', '$']))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_pipeline_is_set_nx_then_time() {
        let pipe = take_if_free("lock:{a}", "web/00", 1500);
        assert_eq!(pipe.len(), 2);
        assert_eq!(
            sent_words(&pipe),
            ["SET", "lock:{a}", "web/00", "NX", "PX", "1500", "TIME"]
        );
    }

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    fn pipeline_answer(set: Value) -> Value {
        let clock = Value::Array(vec![bulk("1732412345"), bulk("678901")]);
        Value::Array(vec![set, clock])
    }

    #[test]
    fn the_fence_is_the_clock_in_microseconds_when_the_set_took_it() {
        let taken = Answer::from_redis_value(pipeline_answer(Value::Okay)).unwrap();
        assert_eq!(taken, Answer(Some(1_732_412_345_678_901)));
        // RESP3 servers and proxies may write the status as a simple string.
        let simple = Value::SimpleString("OK".to_owned());
        assert_eq!(
            Answer::from_redis_value(pipeline_answer(simple)).unwrap(),
            taken
        );
        let busy = Answer::from_redis_value(pipeline_answer(Value::Nil)).unwrap();
        assert_eq!(busy, Answer(None));
    }

    #[test]
    fn an_answer_of_another_shape_is_an_error_not_a_grant() {
        let odd = [
            Value::Nil,
            Value::Array(vec![Value::Okay]),
            pipeline_answer(Value::Int(1)),
            Value::Array(vec![Value::Okay, Value::Array(vec![bulk("x"), bulk("1")])]),
            Value::Array(vec![Value::Okay, Value::Array(vec![bulk("1")])]),
        ];
        for value in odd {
            assert!(
                Answer::from_redis_value(value.clone()).is_err(),
                "{value:?}"
            );
        }
    }

    #[test]
    fn the_counted_pipeline_is_set_nx_then_incr_then_get() {
        let pipe = take_if_free_counted(
            "lock:{a}",
            "web/00",
            1500,
            "lock:fence-counter",
            "lock:up-for",
        );
        assert_eq!(pipe.len(), 3);
        assert_eq!(
            sent_words(&pipe),
            [
                "SET",
                "lock:{a}",
                "web/00",
                "NX",
                "PX",
                "1500",
                "INCR",
                "lock:fence-counter",
                "GET",
                "lock:up-for"
            ]
        );
    }

    fn counted(set: Value, counter: i64, up_mark: Value) -> CountedAnswer {
        CountedAnswer::from_redis_value(Value::Array(vec![set, Value::Int(counter), up_mark]))
            .unwrap()
    }

    #[test]
    fn a_counted_grant_is_finished_only_with_a_seeded_counter_past_the_quarantine() {
        let passed = || bulk("30000");
        let seeded = 1_732_412_345_678_901;
        assert_eq!(
            counted_fence_of(counted(Value::Okay, seeded, passed()), 30_000),
            Some(seeded as u64)
        );
        // Busy: the script tells whose it is.
        assert_eq!(
            counted_fence_of(counted(Value::Nil, seeded, passed()), 30_000),
            None
        );
        // A counter counted up from nothing is seeded by the script first.
        assert_eq!(
            counted_fence_of(counted(Value::Okay, 7, passed()), 30_000),
            None
        );
        // No mark (a new or emptied master), a fresh one, or one written
        // for a shorter quarantine: the script reads the uptime.
        for mark in [Value::Nil, bulk("fresh:30000")] {
            assert_eq!(
                counted_fence_of(counted(Value::Okay, seeded, mark), 30_000),
                None
            );
        }
        assert_eq!(
            counted_fence_of(counted(Value::Okay, seeded, passed()), 60_000),
            None
        );
    }

    #[test]
    fn a_counted_answer_of_another_shape_is_an_error() {
        let not_a_count = Value::Array(vec![Value::Okay, bulk("12"), Value::Nil]);
        assert!(CountedAnswer::from_redis_value(not_a_count).is_err());
        let too_short = Value::Array(vec![Value::Okay, Value::Int(12)]);
        assert!(CountedAnswer::from_redis_value(too_short).is_err());
    }

    #[test]
    fn the_scripts_seed_below_the_same_floor() {
        use super::super::scripts::{ACQUIRE_COUNTED, RAISE_COUNTER, SEEDED};
        let floor = format!("if fence < {SEEDED} then");
        assert!(ACQUIRE_COUNTED.source().contains(&floor));
        // A raise that finds the counter gone seeds it too (so does a
        // renewal: see `engine::renewal`).
        let floor = format!("if counter < {SEEDED} then");
        assert!(RAISE_COUNTER.source().contains(&floor));
    }
}
