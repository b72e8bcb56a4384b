//! What the server's user may do, checked once when a locker connects.
//!
//! Redis checks a script's own commands against the ACL of the user who
//! runs it, and only when it runs them. A user without `EVALSHA` (or
//! without a command a script calls) would take a free lock with plain
//! commands and then fail at every release and renewal: its locks would
//! stay for their whole lease, and every other acquirer would meet the
//! same refusal. So [`Backend::check_permissions`](super::Backend::check_permissions)
//! runs one script ([`PROBE`]) on every node it can reach at connect: the
//! script itself needs `EVALSHA` (or `EVAL`, which a node without it in
//! its cache runs it by) and the lock keys, and inside it
//! `redis.acl_check_cmd` (Redis 7) tells, without running anything,
//! whether the user may run each command the locks need on their keys
//! and channels. What is missing is a [`LockError::Config`] that names it.
//!
//! A server before Redis 7 has no `acl_check_cmd`: only the script's own
//! call is checked there.

use std::sync::LazyLock;

use super::script::LuaScript;
use crate::error::LockError;

/// What the locks of one locker need of the server's user.
pub(crate) struct Needs {
    /// Commands, as Redis names them (`EVALSHA`, `GET`, ...).
    pub(crate) commands: Vec<&'static str>,
    /// Keys a lock call names (a lock's key; on Redlock, the keys every
    /// lock shares too), all in one hash slot but on Redlock.
    pub(crate) keys: Vec<String>,
    /// A release channel.
    pub(crate) channel: String,
}

/// Answers the commands of `ARGV[2..]` that the caller may not run on the
/// keys `KEYS` and the channel `ARGV[1]` (each with arguments of the
/// shape the locks use). A command the server does not know (an older
/// server) is not reported: nothing will send it there.
pub(crate) static PROBE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("permissions.lua")));

/// The error for `denied` commands on the server at `server`.
pub(crate) fn denied(server: &str, denied: &[String]) -> LockError {
    let grants: Vec<String> = denied.iter().map(|name| format!("+{name}")).collect();
    LockError::config(format!(
        "the Redis user this locker logs in as at {server} may not run {} on the lock keys and channels it needs; grant it `{}` (the least-privilege ACL: see the README, \"Least privilege\")",
        denied.join(", "),
        grants.join(" ")
    ))
}

/// Reads a refusal of the probe's own call (`NOPERM`: no `EVALSHA`, no
/// `EVAL`, or the keys under the prefix are not the user's) as a
/// [`LockError::Config`] that says so; anything else stays as it is.
pub(crate) fn refused(server: &str, err: LockError) -> LockError {
    match &err {
        LockError::Redis(redis) if redis.code() == Some("NOPERM") => LockError::config(format!(
            "the Redis user this locker logs in as at {server} may not run the lock scripts on its keys: {}; grant it `+evalsha +eval` and the keys and channels under the key prefix (the least-privilege ACL: see the README, \"Least privilege\")",
            redis.detail().unwrap_or("no permission")
        )),
        _ => err,
    }
}
