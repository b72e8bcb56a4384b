//! The scripts as a cluster runs them.
//!
//! Each is sent by SHA and, on a node that answers `NOSCRIPT`, in full
//! ([`ScriptCall`](super::call::ScriptCall)): the redis crate's own reload
//! sends `SCRIPT LOAD` to every node and waits for all of them, so one
//! frozen node would stall every lock on a restarted or flushed one.
//!
//! The acquire and batch-extend scripts are the same as on one server
//! ([`crate::scripts`]); only the release script changes, for two reasons:
//!
//! - Release messages go out with `SPUBLISH`, so they reach only the shard
//!   that owns the channel's slot instead of being broadcast to every node.
//! - The channel is passed as an argument, not a key. A script's keys decide
//!   its routing and, while a slot migrates, a declared key that does not
//!   exist on the source node (a channel never exists as a key) makes Redis
//!   answer `TRYAGAIN` until the migration ends. `SPUBLISH` inside the script
//!   is still checked to be in the script's slot, which the `{key}` hash tag
//!   guarantees.

use std::sync::LazyLock;

use crate::scripts as common;

/// A script's Lua and its SHA1.
pub(crate) struct LuaScript {
    pub(crate) source: &'static str,
    pub(crate) hash: String,
}

impl LuaScript {
    fn new(source: &'static str) -> Self {
        Self {
            source,
            hash: redis::Script::new(source).get_hash().to_owned(),
        }
    }
}

/// [`crate::scripts::ACQUIRE`].
pub(crate) static ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(common::ACQUIRE_SOURCE));

/// [`crate::scripts::EXTEND`].
pub(crate) static EXTEND: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(common::EXTEND_SOURCE));

/// Deletes the lock only if the caller still owns it, then tells waiters on
/// the lock's shard.
///
/// `KEYS[1]` lock; `ARGV[1]` owner token, `ARGV[2]` release channel.
/// Returns 1 when deleted, 0 when the lock was gone or someone else's.
/// A server without sharded pub/sub (before Redis 7) rejects `SPUBLISH`;
/// the message then goes out with a cluster-wide `PUBLISH` instead.
pub(crate) static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    if not pcall(redis.call, 'SPUBLISH', ARGV[2], '1') then
        redis.call('PUBLISH', ARGV[2], '1')
    end
    return 1
end
return 0
"#,
    )
});
