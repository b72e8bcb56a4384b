//! A new socket's first words: the login and the database, as redis-rs
//! sends them (without its `CLIENT SETINFO`, whose answer it ignores).

use redis::{ErrorKind, RedisConnectionInfo, RedisResult, Value};

use super::wire::Wire;

/// Logs in with the URL's user and password, if it has them, and selects
/// its database, if not 0; the errors are redis-rs's.
pub(super) async fn log_in(wire: &Wire, settings: &RedisConnectionInfo) -> RedisResult<()> {
    let mut pipeline = redis::pipe();
    let password = settings.password();
    if let Some(password) = password {
        pipeline.cmd("AUTH");
        if let Some(user) = settings.username() {
            pipeline.arg(user);
        }
        pipeline.arg(password);
    }
    let db = settings.db();
    if db != 0 {
        pipeline.cmd("SELECT").arg(db);
    }
    let count = pipeline.len();
    let mut replies = wire
        .request(&pipeline.get_packed_pipeline(), 0, count)
        .await?
        .into_iter();
    if password.is_some() {
        let login = replies.next();
        if !matches!(login, Some(Value::Okay)) {
            // An old server (before ACLs) knows no user: once more without.
            if settings.username().is_some() && refused_arity(login.as_ref()) {
                let mut again = redis::cmd("AUTH");
                again.arg(password);
                let login = wire.request(&again.get_packed_command(), 0, 1).await?;
                if matches!(login.first(), Some(Value::Okay)) {
                    return select_checked(replies.next());
                }
            }
            return Err((ErrorKind::AuthenticationFailed, "Password authentication failed").into());
        }
    }
    select_checked(replies.next())
}

/// Whether the login was refused for its number of arguments.
fn refused_arity(login: Option<&Value>) -> bool {
    matches!(login, Some(Value::ServerError(err))
        if err.details().is_some_and(|why| why.contains("wrong number of arguments")))
}

/// The `SELECT`'s answer, if one was sent, as an error when it is one.
fn select_checked(select: Option<Value>) -> RedisResult<()> {
    match select {
        Some(Value::ServerError(err)) => Err((
            ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "Redis server refused to switch database",
            err.details().unwrap_or_default().to_owned(),
        )
            .into()),
        _ => Ok(()),
    }
}
