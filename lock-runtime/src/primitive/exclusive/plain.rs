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

/// The pipeline that takes `lock` for `token` if it is free, then reads
/// the clock.
pub(crate) fn take_if_free(lock: &str, token: &str, ttl_ms: u64) -> redis::Pipeline {
    // Sized up front, as this runs on every uncontended acquisition.
    let mut set = redis::Cmd::with_capacity(6, lock.len() + token.len() + 30);
    set.arg("SET")
        .arg(lock)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms);
    let mut time = redis::Cmd::with_capacity(1, 4);
    time.arg("TIME");
    let mut pipe = redis::Pipeline::with_capacity(2);
    pipe.add_command(set).add_command(time);
    pipe
}

/// The answer of [`take_if_free`]: whether the `SET` took the lock, and
/// the server's clock just after (seconds, microseconds).
pub(crate) type Answer = (Option<String>, (u64, u64));

/// The fence when the lock was taken; None when the key was there.
pub(crate) fn fence_of((set, (seconds, micros)): Answer) -> Option<u64> {
    set.map(|_| seconds.saturating_mul(1_000_000).saturating_add(micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipeline_is_set_nx_then_time() {
        let pipe = take_if_free("lock:{a}", "web/00", 1500);
        assert!(!pipe.is_transaction());
        let sent = String::from_utf8(pipe.get_packed_pipeline()).unwrap();
        let words: Vec<&str> = sent
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with(['*', '$']))
            .collect();
        assert_eq!(
            words,
            ["SET", "lock:{a}", "web/00", "NX", "PX", "1500", "TIME"]
        );
    }

    #[test]
    fn the_fence_is_the_clock_in_microseconds_when_the_set_took_it() {
        let taken = (Some("OK".to_owned()), (1_732_412_345, 678_901));
        assert_eq!(fence_of(taken), Some(1_732_412_345_678_901));
        assert_eq!(fence_of((None, (1_732_412_345, 678_901))), None);
    }
}
