//! Reading a failed call: did the master move, and did the call take effect?

use redis::{RedisError, ServerErrorKind};

/// The error is what a client sees when the master it talks to went away
/// or stopped being the master: ask the sentinels where it is now.
///
/// Connection trouble (refused, dropped, timed out) covers a dead or
/// unreachable master; `READONLY` a master demoted to a replica that still
/// accepts connections; `NOREPLICAS` a master configured with
/// `min-replicas-to-write` that lost its replicas (as an old master does
/// once its replica was promoted); `MASTERDOWN` and `LOADING` a replica
/// that is still catching up with a new master.
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

/// Whether the server refused the call for its role: the error of a
/// script, or of a pipeline (the plain acquire, `SET NX` then `TIME`,
/// whose `SET` is its only write: its first error). Each error an error
/// holds is read, and its code compared as written: the redis crate knows
/// no kind for `NOREPLICAS`.
fn refused_by_role(err: &RedisError) -> bool {
    let Some(errors) = err.clone().into_server_errors() else {
        return false;
    };
    errors.iter().any(|(_, error)| {
        matches!(
            error.kind(),
            Some(
                ServerErrorKind::ReadOnly
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::BusyLoading
            )
        ) || error.code() == "NOREPLICAS"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error exactly as a Redis 7 replica answers a script's write.
    fn server_error(reply: &[u8]) -> RedisError {
        match redis::parse_redis_value(reply) {
            Ok(redis::Value::ServerError(err)) => err.into(),
            other => panic!("not an error reply: {other:?}"),
        }
    }

    #[test]
    fn a_demoted_master_refusing_a_script_write_means_moved_and_not_run() {
        let err = server_error(
            b"-READONLY You can't write against a read only replica. script: a89560b0f647941db62afd5e9537e975d3cab926, on @user_script:1.\r\n",
        );
        assert!(suggests_failover(&err));
        assert!(not_carried_out(&err));
    }

    #[test]
    fn a_replica_catching_up_or_a_master_without_replicas_means_moved_and_not_run() {
        for reply in [
            &b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"[..],
            b"-LOADING Redis is loading the dataset in memory\r\n",
            b"-NOREPLICAS Not enough good replicas to write. script: f23d, on @user_script:2.\r\n",
        ] {
            let err = server_error(reply);
            assert!(suggests_failover(&err), "{err}");
            assert!(not_carried_out(&err), "{err}");
        }
    }

    #[test]
    fn a_dropped_or_timed_out_call_may_have_run() {
        for kind in [
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::TimedOut,
        ] {
            let err = RedisError::from(std::io::Error::from(kind));
            assert!(suggests_failover(&err), "{kind:?}");
            assert!(!not_carried_out(&err), "{kind:?}");
        }
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(suggests_failover(&refused) && not_carried_out(&refused));
    }

    #[test]
    fn a_script_error_is_not_a_failover() {
        let err = server_error(b"-ERR wrong number of arguments for 'evalsha' command\r\n");
        assert!(!suggests_failover(&err));
        assert!(!not_carried_out(&err));
    }
}
