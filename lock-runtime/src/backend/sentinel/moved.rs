//! Reading a failed call: did the master move, and did the call take effect?

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// The error is what a client sees when the master it talks to went away
/// or stopped being the master: ask the sentinels where it is now.
///
/// Connection trouble (refused, dropped, timed out) covers a dead or
/// unreachable master; `READONLY` a master demoted to a replica that still
/// accepts connections; `MASTERDOWN` and `LOADING` a replica that is still
/// catching up with a new master.
pub(super) fn suggests_failover(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || refused_by_role(err)
}

/// The server certainly did not carry out the call: it never got it (the
/// connection was refused), or refused it for its role before any write
/// (a script stops at its first write on a replica). Only such a call may
/// be repeated at once on a new master without a second thought; a
/// dropped or timed-out call may have run.
pub(super) fn not_carried_out(err: &RedisError) -> bool {
    err.is_connection_refusal() || refused_by_role(err)
}

fn refused_by_role(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown | ServerErrorKind::BusyLoading
        )
    )
}
