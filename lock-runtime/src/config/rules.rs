//! The rules a configuration and a lock request must follow, each stated
//! once: [`LockConfig::validate`](crate::LockConfig::validate), each lock
//! request, and the topologies all ask here.

use std::time::Duration;

use crate::error::LockError;

/// Shortest lease accepted: one the watchdog can keep. After the drift
/// allowance and the reaction margin (see [`crate::engine::validity`]) a 10 ms lease
/// is trusted for 4.9 to 7.4 ms, and its renewal, due after 2.5 to 3.3 ms
/// on a timer of millisecond grain, lands within that. A 3 ms lease, the
/// shortest with any time left, is trusted for under a millisecond: no
/// renewal can be timed inside it. The attribute rejects a shorter literal
/// `ttl` at compile time with the same bound.
pub(crate) const MIN_TTL: Duration = Duration::from_millis(10);

/// Longest lease accepted. A lease is a crash bound: one longer than a
/// year is a mistake (and would overflow clock arithmetic long before Redis).
pub(crate) const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Checks a lease length; `what` names it in the message (e.g. "default_ttl",
/// "the ttl of lock `stock:42`"). Redis takes whole milliseconds, so the
/// lease is judged as it will be sent.
pub(crate) fn check_ttl(ttl: Duration, what: impl std::fmt::Display) -> Result<(), LockError> {
    let sent = Duration::from_millis(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
    if sent < MIN_TTL {
        return Err(LockError::config(format!(
            "{what} is {ttl:?}; it must be at least {MIN_TTL:?}: a shorter lease leaves too little time, after the \
             clock-drift allowance (ttl/100 + 2 ms) and the reaction margin (ttl/20), to use the lock and renew it"
        )));
    }
    if ttl > MAX_TTL {
        return Err(LockError::config(format!(
            "{what} is {ttl:?}; it must be at most 365 days: a lease is how long a crashed owner blocks everyone"
        )));
    }
    Ok(())
}

/// Longest `max_hold` accepted: a cap on how long the watchdog keeps one
/// lock, and one beyond a year is a typo (clock arithmetic would overflow
/// on larger ones).
pub(crate) const MAX_HOLD: Duration = MAX_TTL;

/// Checks a `max_hold` cap; `what` names it in the message. The attribute
/// rejects a literal out of these bounds at compile time.
pub(crate) fn check_max_hold(cap: Duration, what: impl std::fmt::Display) -> Result<(), LockError> {
    if cap.is_zero() {
        return Err(LockError::config(format!(
            "{what} is zero: the lock would be given up as soon as it is taken"
        )));
    }
    if cap > MAX_HOLD {
        return Err(LockError::config(format!(
            "{what} is {cap:?}; it must be at most 365 days"
        )));
    }
    Ok(())
}

/// Redlock: each master listed once. One server listed twice counts as
/// two masters, so a single restart of it (losing its locks) is a
/// majority losing them, and the restart quarantine's rule (a restarted
/// master's grant counts only when every master granted) no longer keeps
/// a held lock from a second owner. Addresses are compared as written
/// (the database number aside); one server under two names (`localhost`
/// and `127.0.0.1`) is not caught.
pub(crate) fn check_distinct_masters(masters: &[redis::ConnectionInfo]) -> Result<(), LockError> {
    let addresses: Vec<String> = masters
        .iter()
        .map(|master| master.addr().to_string().to_ascii_lowercase())
        .collect();
    for (index, address) in addresses.iter().enumerate() {
        if addresses[..index].contains(address) {
            return Err(LockError::config(format!(
                "Redlock master `{address}` is listed twice: one server counted as two masters \
                 lets a single restart of it hand a held lock to a second owner; list each \
                 independent master once"
            )));
        }
    }
    Ok(())
}

/// Cluster seeds are doors to one cluster, so each must be reachable the
/// way every node of it is: over TCP, with the same user and password, TLS
/// (and `#insecure`) on all or none, one protocol, and database 0, the
/// only one a cluster has (as the `redis+cluster://` form says). The
/// `redis` crate refuses seeds that differ only at connect, as a
/// `LockError::Redis` that callers take for an outage and retry.
pub(crate) fn check_cluster_seeds(seeds: &[redis::ConnectionInfo]) -> Result<(), LockError> {
    let Some(first) = seeds.first() else {
        return Ok(());
    };
    for seed in seeds {
        if let redis::ConnectionAddr::Unix(path) = seed.addr() {
            return Err(LockError::config(format!(
                "cluster seed `{}` is a unix socket; a Cluster's nodes find each other over TCP: \
                 list them as `redis://host:port`",
                path.display()
            )));
        }
        let settings = seed.redis_settings();
        if settings.db() != 0 {
            return Err(LockError::config(format!(
                "cluster seed `{}` names database {}; a cluster has only database 0: drop the `/<db>`",
                seed.addr(),
                settings.db()
            )));
        }
        if let Some(what) = seed_difference(first, seed) {
            return Err(LockError::config(format!(
                "cluster seeds `{}` and `{}` differ in {what}; every seed of one cluster is \
                 reached alike: give them the same user and password, `rediss://` on all or none \
                 (`#insecure` likewise), and the same `protocol`",
                first.addr(),
                seed.addr()
            )));
        }
    }
    Ok(())
}

/// What, if anything, `seed` is reached with that `first` is not (never
/// the credentials themselves: only that they differ).
fn seed_difference(
    first: &redis::ConnectionInfo,
    seed: &redis::ConnectionInfo,
) -> Option<&'static str> {
    let (a, b) = (first.redis_settings(), seed.redis_settings());
    if a.username() != b.username() || a.password() != b.password() {
        Some("their credentials")
    } else if tls_of(first.addr()) != tls_of(seed.addr()) {
        Some("TLS")
    } else if a.protocol() != b.protocol() {
        Some("their protocol")
    } else {
        None
    }
}

/// Whether `addr` is reached over TLS, and if so whether insecurely.
fn tls_of(addr: &redis::ConnectionAddr) -> Option<bool> {
    match addr {
        redis::ConnectionAddr::TcpTls { insecure, .. } => Some(*insecure),
        _ => None,
    }
}

/// Most pooled connections accepted: the benchmark's best is 1 and more
/// measured slower; thousands would be a typo that opens as many sockets
/// (and reserves room for them) at start-up.
pub(crate) const MAX_POOL_SIZE: usize = 256;

/// Redlock: a lease longer than the restart quarantine would outlive it,
/// and a restarted master could then grant the lock again while this
/// lease still runs on the other masters. A quarantine longer than the
/// longest lease ([`MAX_TTL`]) protects nothing more, and one too long
/// for the server to write as an expiry would refuse every lock.
pub(crate) fn check_quarantine(
    ttl: Duration,
    quarantine: Duration,
    what: impl std::fmt::Display,
) -> Result<(), LockError> {
    if quarantine > MAX_TTL {
        return Err(LockError::config(format!(
            "Redlock's restart_quarantine is {quarantine:?}; it must be at most 365 days, the longest lease"
        )));
    }
    if ttl > quarantine {
        return Err(LockError::config(format!(
            "{what} is {ttl:?}, longer than Redlock's restart_quarantine ({quarantine:?}); \
             a master restarted without persistence could grant it again while it is held: \
             raise `LockConfig::restart_quarantine` to at least the longest ttl"
        )));
    }
    Ok(())
}

/// The longest holder label, in bytes: it rides in every owner token.
pub(crate) const MAX_HOLDER_LABEL_BYTES: usize = 128;

/// Checks a holder label (see `LockConfig::holder_label`).
pub(crate) fn check_holder_label(label: &str) -> Result<(), LockError> {
    if label.len() > MAX_HOLDER_LABEL_BYTES || label.chars().any(char::is_control) {
        return Err(LockError::config(format!(
            "the holder label is {} bytes long or holds control characters; \
             use at most {MAX_HOLDER_LABEL_BYTES} printable bytes, e.g. a pod name",
            label.len()
        )));
    }
    Ok(())
}

/// The longest lock name, in bytes. Names are often rendered from request
/// data; one this long is a mistake or an attack, and every acquire,
/// renewal and release would carry it (twice: the key and its channel).
pub(crate) const MAX_LOCK_NAME_BYTES: usize = 4096;

/// Checks a lock name. Any non-empty text up to [`MAX_LOCK_NAME_BYTES`] is
/// a valid name: braces, spaces, newlines and glob characters are escaped
/// or harmless in a key.
pub(crate) fn check_lock_name(name: &str) -> Result<(), LockError> {
    if name.is_empty() {
        return Err(LockError::config(
            "the lock key is empty; name the resource it guards, e.g. `stock:42`",
        ));
    }
    if name.len() > MAX_LOCK_NAME_BYTES {
        let start: String = name.chars().take(40).collect();
        return Err(LockError::config(format!(
            "the lock key `{start}...` is {} bytes long, over the limit of {MAX_LOCK_NAME_BYTES}; \
             lock on a short identifier of the resource (an id, or a hash of the long name)",
            name.len()
        )));
    }
    Ok(())
}

/// Checks the key prefix: a `{` in it would make Redis hash part of the
/// prefix instead of the lock's name, putting every lock in one cluster
/// slot (or splitting a lock from its channel).
pub(crate) fn check_prefix(prefix: &str) -> Result<(), LockError> {
    if prefix.contains('{') {
        return Err(LockError::config(format!(
            "key_prefix `{prefix}` contains `{{`; the lock name is the hash tag, so the prefix may not open one"
        )));
    }
    Ok(())
}

/// The one message for `wait_for_replicas` on a topology without replicas
/// to wait for (`kind` is `cluster`, `redlock` or `memory`).
pub(crate) fn replicas_unsupported(kind: &str) -> LockError {
    if kind == "memory" {
        return LockError::config(
            "wait_for_replicas needs a Redis server with replicas; the in-memory store has none",
        );
    }
    LockError::config(format!(
        "wait_for_replicas works with one server or Sentinel, not with {kind}: \
         a Cluster's shards and Redlock's masters are not waited for; list more Redlock masters instead"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_name_is_at_most_four_kibibytes() {
        assert!(check_lock_name(&"x".repeat(MAX_LOCK_NAME_BYTES)).is_ok());
        let huge = "order:".repeat(1 << 20);
        let text = check_lock_name(&huge).unwrap_err().to_string();
        assert!(
            text.contains("over the limit of 4096") && text.len() < 400,
            "{text}"
        );
    }

    #[test]
    fn a_redlock_lease_may_not_outlive_the_restart_quarantine() {
        let quarantine = Duration::from_secs(10);
        assert!(check_quarantine(quarantine, quarantine, "ttl").is_ok());
        let err = check_quarantine(Duration::from_secs(11), quarantine, "the ttl of lock `a`");
        let text = err.unwrap_err().to_string();
        assert!(
            text.contains("lock `a`") && text.contains("restart_quarantine"),
            "{text}"
        );
    }

    #[test]
    fn ttls_are_judged_as_sent() {
        assert!(check_ttl(Duration::from_millis(10), "ttl").is_ok());
        // 10.9 ms is sent as 10 ms, 9.9 ms as 9 ms.
        assert!(check_ttl(Duration::from_micros(10_900), "ttl").is_ok());
        assert!(check_ttl(Duration::from_micros(9_900), "ttl").is_err());
        assert!(check_ttl(Duration::ZERO, "ttl").is_err());
        assert!(check_ttl(MAX_TTL, "ttl").is_ok());
        assert!(check_ttl(MAX_TTL + Duration::from_secs(1), "ttl").is_err());
    }

    #[test]
    fn a_quarantine_outlasts_the_ttl_and_at_most_a_year() {
        let second = Duration::from_secs(1);
        assert!(check_quarantine(second, second, "ttl").is_ok());
        assert!(check_quarantine(MAX_TTL, MAX_TTL, "ttl").is_ok());
        assert!(check_quarantine(second * 2, second, "ttl").is_err());
        assert!(check_quarantine(second, Duration::MAX, "ttl").is_err());
    }

    #[test]
    fn redlock_masters_are_each_listed_once() {
        let masters = |urls: &[&str]| -> Vec<redis::ConnectionInfo> {
            urls.iter().map(|url| url.parse().unwrap()).collect()
        };
        let distinct = masters(&["redis://a:1", "redis://a:2", "redis://b:1"]);
        assert!(check_distinct_masters(&distinct).is_ok());
        for twice in [
            masters(&["redis://a:1", "redis://b:1", "redis://a:1"]),
            // Another database of the same server is the same server.
            masters(&["redis://a:1/0", "redis://b:1", "redis://a:1/3"]),
            masters(&["redis://A:1", "redis://b:1", "redis://a:1"]),
        ] {
            let err = check_distinct_masters(&twice).unwrap_err();
            assert!(err.to_string().contains("listed twice"), "{err}");
        }
    }

    #[test]
    fn a_max_hold_is_more_than_zero_and_at_most_a_year() {
        assert!(check_max_hold(Duration::from_millis(1), "max_hold").is_ok());
        assert!(check_max_hold(MAX_HOLD, "max_hold").is_ok());
        for cap in [
            Duration::ZERO,
            MAX_HOLD + Duration::from_secs(1),
            Duration::MAX,
        ] {
            assert!(
                matches!(check_max_hold(cap, "max_hold"), Err(LockError::Config(_))),
                "{cap:?}"
            );
        }
    }

    #[test]
    fn the_shortest_lease_can_be_renewed_in_time() {
        use crate::engine::validity::{renewal_interval, trusted_for};
        // Its renewal, due on a timer of millisecond grain, is sent while
        // it is trusted, with a millisecond left for the answer.
        let timer_grain = Duration::from_millis(1);
        assert!(renewal_interval(MIN_TTL) + 2 * timer_grain < trusted_for(MIN_TTL));
        assert!(check_ttl(MIN_TTL, "ttl").is_ok());
        assert!(check_ttl(MIN_TTL - Duration::from_micros(1), "ttl").is_err());
        assert!(check_ttl(Duration::from_millis(3), "ttl").is_err());
    }

    #[test]
    fn cluster_seeds_are_reached_alike() {
        let seeds = |urls: &[&str]| -> Vec<redis::ConnectionInfo> {
            urls.iter().map(|url| url.parse().unwrap()).collect()
        };
        for alike in [
            seeds(&["redis://u:pw@a:1", "redis://u:pw@b:1/0"]),
            seeds(&["redis://a:1?protocol=3", "redis://b:1?protocol=resp3"]),
            seeds(&[]),
        ] {
            assert!(check_cluster_seeds(&alike).is_ok(), "{alike:?}");
        }
        for (apart, says) in [
            (
                seeds(&["redis://:secret-a@a:1", "redis://:secret-b@b:1"]),
                "credentials",
            ),
            (
                seeds(&["redis://:secret-a@a:1", "redis://b:1"]),
                "credentials",
            ),
            (
                seeds(&["redis://a:1", "redis://b:1?protocol=3"]),
                "protocol",
            ),
            (seeds(&["redis://a:1", "redis://b:1/2"]), "database 2"),
            (seeds(&["unix:///tmp/redis.sock"]), "unix socket"),
        ] {
            let err = check_cluster_seeds(&apart).unwrap_err().to_string();
            assert!(err.contains(says) && !err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn a_prefix_may_not_open_a_hash_tag() {
        assert!(check_prefix("lock:").is_ok());
        assert!(check_prefix("a}b:").is_ok());
        assert!(check_prefix("app{1}:").is_err());
    }
}
