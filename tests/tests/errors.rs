//! Error messages a user reads: they say what failed and where, and never
//! carry a secret.

use std::time::Duration;

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::{SilentListener, closed_port};

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
