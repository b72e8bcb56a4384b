//! Error messages a user reads: they say what failed and where, and never
//! carry a secret.

use std::time::Duration;

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::{RedisServer, SilentListener, closed_port};

/// A server that refuses connections: the error names the address it
/// tried, and not the password of the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_names_the_server_and_hides_the_password() {
    let port = closed_port();
    let url = format!("redis://:s3cret-pw@127.0.0.1:{port}/");
    let err = Locker::connect(LockConfig::from_url(&url).unwrap())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(!message.contains("s3cret-pw"), "{message}");
    assert!(!format!("{err:?}").contains("s3cret-pw"), "{err:?}");
}

/// A server that accepts and never answers: the timeout names it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_names_itself_in_the_timeout() {
    let silent = SilentListener::start();
    let config = LockConfig::from_url(&silent.url())
        .unwrap()
        .connect_timeout(Duration::from_millis(300));
    let err = Locker::connect(config).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&format!("127.0.0.1:{}", silent.port())),
        "{message}"
    );
    assert!(message.contains("no answer within"), "{message}");
}

/// Makes `server` require `password` from its default user, as
/// `requirepass` does.
fn require_password(server: &RedisServer, password: &str) {
    let rule = format!(">{password}");
    let answer = server.cmd(&["ACL", "SETUSER", "default", "on", "resetpass", &rule]);
    assert_eq!(answer, redis::Value::Okay);
}

/// A server that requires a password, reached by a URL without one: the
/// connection opens, but every command is refused (`NOAUTH`). `connect`
/// fails, naming the server and where the password goes, rather than
/// every lock failing later with a pipeline of `NOAUTH` errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_password_fails_connect_and_says_where_it_goes() {
    let server = RedisServer::start();
    require_password(&server, "s3cret-pw");
    let result = Locker::connect(LockConfig::from_url(&server.url()).unwrap()).await;
    let err = result.expect_err("connect to a server that refuses every command");
    let message = err.to_string();
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    assert!(
        message.contains(&format!("127.0.0.1:{}", server.port())),
        "{message}"
    );
    assert!(message.contains("password"), "{message}");
    assert!(message.contains("redis://"), "{message}");
}

/// The same on Redlock: masters that refuse every command are not
/// reachable masters. Without the check, `connect` succeeded and each
/// acquisition waited its whole wait, then answered `QuorumNotReached`
/// ("reached 0 of the 2 masters"), with no word of the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_masters_that_require_a_password_fail_connect() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    for master in &masters {
        require_password(master, "s3cret-pw");
    }
    let url = lock_tests::fixtures::redlock_url(&masters);
    let result = Locker::connect(LockConfig::from_url(&url).unwrap()).await;
    let err = result.expect_err("connect to masters that refuse every command");
    let message = err.to_string();
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    assert!(message.contains("password"), "{message}");
}

/// A cell `locker = ..` names, never filled.
static ORDERS: std::sync::OnceLock<Locker> = std::sync::OnceLock::new();

#[lock_runtime::distributed_lock(key = "order:<id>", locker = ORDERS)]
async fn ship(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

/// An annotated fn whose `locker = ..` cell was never filled: the error
/// says to fill the cell. It said only to call `lock_runtime::init`, which
/// sets the global locker and leaves the cell as empty as before.
#[tokio::test]
async fn an_empty_locker_cell_says_to_fill_the_cell() {
    let err = ship(1).await.unwrap_err();
    assert!(matches!(err, LockError::NotInitialized), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("locker = "), "{message}");
    assert!(message.contains(".set("), "{message}");
}
