//! A new socket's first words, as redis-rs sends them: the login, the
//! database, and the client's name for `CLIENT LIST` (whose answer is
//! ignored, but awaited: a server that accepts connections and never
//! answers fails the connect, within its timeout).

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
    if settings.skip_set_lib_name() {
        pipeline.cmd("PING");
    } else {
        let name = settings.lib_name().unwrap_or(env!("CARGO_PKG_NAME"));
        let version = settings.lib_ver().unwrap_or(env!("CARGO_PKG_VERSION"));
        pipeline
            .cmd("CLIENT")
            .arg("SETINFO")
            .arg("LIB-NAME")
            .arg(name);
        pipeline
            .cmd("CLIENT")
            .arg("SETINFO")
            .arg("LIB-VER")
            .arg(version);
    }
    let count = pipeline.len();
    let mut replies = wire
        .request(|out| out.extend(pipeline.get_packed_pipeline()), 0, count)
        .await?
        .into_iter();
    if password.is_some() {
        let login = replies.next();
        if !matches!(login, Some(Value::Okay)) {
            // An old server (before ACLs) knows no user: once more without.
            if settings.username().is_some() && refused_arity(login.as_ref()) {
                let mut again = redis::cmd("AUTH");
                again.arg(password);
                let login = wire
                    .request(|out| again.write_packed_command(out), 0, 1)
                    .await?;
                if matches!(login.first(), Some(Value::Okay)) {
                    return select_checked(db, replies.next());
                }
            }
            return Err((
                ErrorKind::AuthenticationFailed,
                "Password authentication failed",
            )
                .into());
        }
    }
    select_checked(db, replies.next())
}

/// Whether the login was refused for its number of arguments.
fn refused_arity(login: Option<&Value>) -> bool {
    matches!(login, Some(Value::ServerError(err))
        if err.details().is_some_and(|why| why.contains("wrong number of arguments")))
}

/// The `SELECT`'s answer (sent for any database but 0), as an error when
/// it is one.
fn select_checked(db: i64, select: Option<Value>) -> RedisResult<()> {
    if db == 0 {
        return Ok(());
    }
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
