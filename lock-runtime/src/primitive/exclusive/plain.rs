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
//! late grant unused (see `crate::validity`).
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

/// The pipeline that takes `lock` for `token` if it is free, then reads
/// the clock.
pub(crate) fn take_if_free(lock: &str, token: &str, ttl_ms: u64) -> redis::Pipeline {
    let mut time = redis::Cmd::with_capacity(1, 4);
    time.arg("TIME");
    let mut pipe = redis::Pipeline::with_capacity(2);
    pipe.add_command(set_nx_px(lock, token, ttl_ms))
        .add_command(time);
    pipe
}

/// `SET lock token NX PX ttl_ms`, sized up front: it runs on every
/// uncontended acquisition.
fn set_nx_px(lock: &str, token: &str, ttl_ms: u64) -> redis::Cmd {
    let mut set = redis::Cmd::with_capacity(6, lock.len() + token.len() + 30);
    set.arg("SET")
        .arg(lock)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms);
    set
}

/// The answer of [`take_if_free`]: whether the `SET` took the lock, and
/// the server's clock just after (seconds, microseconds).
pub(crate) type Answer = (Option<String>, (u64, u64));

/// The fence when the lock was taken; None when the key was there.
pub(crate) fn fence_of((set, (seconds, micros)): Answer) -> Option<u64> {
    set.map(|_| seconds.saturating_mul(1_000_000).saturating_add(micros))
}

/// The pipeline that takes `lock` for `token` on a Redlock master if it
/// is free, counts `counter` up and reads `up_mark`.
pub(crate) fn take_if_free_counted(
    lock: &str,
    token: &str,
    ttl_ms: u64,
    counter: &str,
    up_mark: &str,
) -> redis::Pipeline {
    let mut incr = redis::Cmd::with_capacity(2, counter.len() + 4);
    incr.arg("INCR").arg(counter);
    let mut mark = redis::Cmd::with_capacity(2, up_mark.len() + 3);
    mark.arg("GET").arg(up_mark);
    let mut pipe = redis::Pipeline::with_capacity(3);
    pipe.add_command(set_nx_px(lock, token, ttl_ms))
        .add_command(incr)
        .add_command(mark);
    pipe
}

/// The answer of [`take_if_free_counted`]: whether the `SET` took the
/// lock, the counter after the increment, and the up mark.
pub(crate) type CountedAnswer = (Option<String>, i64, Option<String>);

/// The fence when the lock was taken and the grant needs nothing more: the
/// counter was seeded and the up mark says the restart quarantine
/// (`quarantine_ms`) has passed. None otherwise (see the module docs).
pub(crate) fn counted_fence_of(
    (set, counter, up_mark): CountedAnswer,
    quarantine_ms: u64,
) -> Option<u64> {
    let passed = up_mark
        .and_then(|mark| mark.parse::<u64>().ok())
        .is_some_and(|passed| passed >= quarantine_ms);
    let seeded = counter >= super::scripts::SEEDED;
    (set.is_some() && seeded && passed).then(|| counter.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a pipeline sends, in order; never in `MULTI`/`EXEC`.
    fn sent_words(pipe: &redis::Pipeline) -> Vec<String> {
        assert!(!pipe.is_transaction());
        String::from_utf8(pipe.get_packed_pipeline())
            .unwrap()
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with(['*', '$']))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_pipeline_is_set_nx_then_time() {
        let pipe = take_if_free("lock:{a}", "web/00", 1500);
        assert_eq!(
            sent_words(&pipe),
            ["SET", "lock:{a}", "web/00", "NX", "PX", "1500", "TIME"]
        );
    }

    #[test]
    fn the_fence_is_the_clock_in_microseconds_when_the_set_took_it() {
        let taken = (Some("OK".to_owned()), (1_732_412_345, 678_901));
        assert_eq!(fence_of(taken), Some(1_732_412_345_678_901));
        assert_eq!(fence_of((None, (1_732_412_345, 678_901))), None);
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

    #[test]
    fn a_counted_grant_is_finished_only_with_a_seeded_counter_past_the_quarantine() {
        let ok = || Some("OK".to_owned());
        let passed = || Some("30000".to_owned());
        let seeded = 1_732_412_345_678_901;
        assert_eq!(
            counted_fence_of((ok(), seeded, passed()), 30_000),
            Some(seeded as u64)
        );
        // Busy: the script tells whose it is.
        assert_eq!(counted_fence_of((None, seeded, passed()), 30_000), None);
        // A counter counted up from nothing is seeded by the script first.
        assert_eq!(counted_fence_of((ok(), 7, passed()), 30_000), None);
        // No mark (a new or emptied master), a fresh one, or one written
        // for a shorter quarantine: the script reads the uptime.
        assert_eq!(counted_fence_of((ok(), seeded, None), 30_000), None);
        let fresh = Some("fresh:30000".to_owned());
        assert_eq!(counted_fence_of((ok(), seeded, fresh), 30_000), None);
        assert_eq!(counted_fence_of((ok(), seeded, passed()), 60_000), None);
    }

    #[test]
    fn the_script_seeds_below_the_same_floor() {
        let floor = format!("if fence < {} then", super::super::scripts::SEEDED);
        assert!(
            super::super::scripts::ACQUIRE_COUNTED
                .source()
                .contains(&floor)
        );
    }
}
