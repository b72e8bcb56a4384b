//! What the primitives of the family share beyond the engine: a lease in
//! the whole milliseconds Redis takes, the error of a user that may not
//! run a primitive's own commands, and the give-back of one that passes
//! nothing in process.

use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::engine::handover::GiveBack;
use crate::error::LockError;

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
    |_, _, _, _| Box::pin(std::future::ready(Ok(false))) as BoxFuture<'static, _>;
