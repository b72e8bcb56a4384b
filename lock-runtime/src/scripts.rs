//! The Lua scripts, in one place. Each runs atomically on the server; the
//! client sends them by SHA and reloads them after a `NOSCRIPT` (a restarted
//! or flushed server), which [`redis::Script`] does for us.
//!
//! Why scripts and not plain commands: every check-then-act on a lock key
//! (is it mine? then delete it) must be one atomic step, or a lease that
//! expires between the check and the act lets us delete another owner's lock.

use std::sync::LazyLock;

use redis::Script;

/// Takes the lock, or reports how long the current owner still holds it.
///
/// `KEYS[1]` lock, `KEYS[2]` fence counter; `ARGV[1]` owner token, `ARGV[2]` ttl in ms.
/// Returns `{1, fence}` when the caller owns the lock, `{0, pttl}` otherwise.
/// A retry with the same token after a lost reply finds the lock already
/// ours and only refreshes its lease, so it succeeds instead of reporting busy.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_SOURCE));

/// The Lua of [`ACQUIRE`] (a cluster node may need it sent in full).
// The common case first: a free lock costs SET NX + INCR.
pub(crate) const ACQUIRE_SOURCE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return {0, redis.call('PTTL', KEYS[1])}
"#;

/// Deletes the lock only if the caller still owns it, and then tells waiters.
///
/// `KEYS[1]` lock, `KEYS[2]` release channel; `ARGV[1]` owner token.
/// Returns 1 when deleted, 0 when the lock was gone or someone else's.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH', KEYS[2], '1')
    return 1
end
return 0
"#,
    )
});

/// Renews a batch of leases in one command (the watchdog's tick).
///
/// `KEYS[i]` lock i; `ARGV[2i-1]` its owner token, `ARGV[2i]` its ttl in ms.
/// Returns one 1 (renewed) or 0 (no longer ours) per key, in order.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_SOURCE));

/// The Lua of [`EXTEND`] (a cluster node may need it sent in full).
pub(crate) const EXTEND_SOURCE: &str = r#"
local renewed = {}
for i, key in ipairs(KEYS) do
    if redis.call('GET', key) == ARGV[2 * i - 1] then
        redis.call('PEXPIRE', key, ARGV[2 * i])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
"#;

/// Redlock, after a majority granted: confirms the lock is still ours on
/// this master and raises its fence counter to the fence handed out (the
/// highest of the majority's counters), so any later majority, which shares
/// a master with this one, counts on from there.
///
/// `KEYS[1]` lock, `KEYS[2]` fence counter; `ARGV[1]` owner token, `ARGV[2]` fence.
/// Returns 1 when the lock is ours (and the counter is now at least the
/// fence), 0 when it is not.
pub(crate) static RAISE_FENCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[2], ARGV[2])
end
return 1
"#,
    )
});

/// Redlock's renewal batch: [`EXTEND`], and every fence counter of the
/// batch raised to its holder's fence, whether or not this master still
/// holds that lock. Raising is always safe (the fence was handed out, so
/// counters only catch up with it) and repairs a master that came back
/// empty after a restart.
///
/// `KEYS[2i-1]` lock i, `KEYS[2i]` its fence counter; `ARGV[3i-2]` owner
/// token, `ARGV[3i-1]` ttl in ms, `ARGV[3i]` fence.
/// Returns one 1 (renewed) or 0 (not ours here) per lock, in order.
pub(crate) static EXTEND_FENCED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local renewed = {}
for i = 1, #KEYS / 2 do
    local lock, fence = KEYS[2 * i - 1], KEYS[2 * i]
    local wanted = tonumber(ARGV[3 * i])
    if tonumber(redis.call('GET', fence) or '0') < wanted then
        redis.call('SET', fence, ARGV[3 * i])
    end
    if redis.call('GET', lock) == ARGV[3 * i - 2] then
        redis.call('PEXPIRE', lock, ARGV[3 * i - 1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
"#,
    )
});
