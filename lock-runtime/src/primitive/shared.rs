//! What the primitives of the family share beyond the engine: a lease in
//! the whole milliseconds Redis takes, the error of a user that may not
//! run a primitive's own commands, the give-back of one that passes
//! nothing in process, and what the scripts' in-memory twins read of a
//! call.

use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::engine::handover::GiveBack;
use crate::error::LockError;
use crate::memory::words::Words;
use crate::owner::WAITED;

/// `duration` in whole milliseconds, at least 1.
pub(crate) fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A script refused one of `what`'s commands (the connect-time check
/// covers only what every lock needs): a [`LockError::Config`] that says
/// to grant `commands`; any other error as it is.
pub(crate) fn not_permitted(err: LockError, what: &str, commands: &str) -> LockError {
    match &err {
        LockError::Redis(redis)
            if redis.code() == Some("NOPERM")
                || redis.to_string().contains("can't run this command") =>
        {
            LockError::config(format!(
                "the Redis user may not run {what}'s commands on its keys ({redis}); grant it `{commands}` (the least-privilege ACL: see the README, \"Least privilege\")"
            ))
        }
        _ => err,
    }
}

/// The give-back of a primitive that passes nothing in process: nothing
/// to hand back.
pub(crate) const GIVE_BACK_NOTHING: GiveBack =
    |_, _, _, _, _| Box::pin(std::future::ready(Ok(false))) as BoxFuture<'static, _>;

/// For a twin: `KEYS[n]`/`ARGV[n]` of a call, 1-based as in Lua.
pub(crate) fn nth<'a>(list: &'a Words, n: usize, what: &str) -> Result<&'a str, String> {
    list.get(n - 1)
        .ok_or_else(|| format!("{what}[{n}] is missing"))
}

/// For a twin: `text` as a whole number, or the error naming `what`.
pub(crate) fn number(text: &str, what: &str) -> Result<i64, String> {
    text.parse()
        .map_err(|_| format!("{what} `{text}` is not a whole number"))
}

/// For a twin: whether `held` is `token`'s value, marked or not.
pub(crate) fn is_mine(held: &str, token: &str) -> bool {
    held.strip_prefix(token)
        .is_some_and(|rest| rest.is_empty() || rest == WAITED)
}
