//! Configuration mistakes are reported as `LockError::Config`, before any I/O.

use std::time::Duration;

use lock_runtime::{LockConfig, LockError, Locker};

fn is_config_error<T: std::fmt::Debug>(result: Result<T, LockError>) -> String {
    match result {
        Err(LockError::Config(message)) => message,
        other => panic!("expected LockError::Config, got {other:?}"),
    }
}

#[test]
fn bad_urls_are_config_errors() {
    for url in [
        "",
        "   ",
        "http://127.0.0.1/",
        "not a url",
        "redis://127.0.0.1:notaport/",
    ] {
        let message = is_config_error(LockConfig::from_url(url));
        assert!(!message.is_empty());
    }
}

/// A URL of another scheme, or one the parser refuses, says what a Redis
/// URL looks like, as the README promises of every invalid value (they
/// said "Redis URL did not parse - InvalidClientConfig").
#[test]
fn an_unparsable_url_says_what_a_redis_url_looks_like() {
    for url in ["http://127.0.0.1/", "https://redis.internal:6379/"] {
        let message = is_config_error(LockConfig::from_url(url));
        assert!(
            message.contains("is not a Redis URL") && message.contains("redis://"),
            "{url}: {message}"
        );
    }
    for url in ["redis://127.0.0.1:99999/", "redis://127.0.0.1:notaport/"] {
        let message = is_config_error(LockConfig::from_url(url));
        assert!(message.contains("host[:port]"), "{url}: {message}");
    }
    // redis-rs's own name for a socket is one server, not a topology.
    assert!(LockConfig::from_url("redis+unix:///run/redis.sock").is_ok());
}

#[tokio::test]
async fn bad_values_are_config_errors_before_connecting() {
    // Port 1 on loopback: connecting would fail differently, with a Redis error.
    let base = || LockConfig::from_url("redis://127.0.0.1:1/").unwrap();
    let cases = [
        (base().default_ttl(Duration::ZERO), "default_ttl"),
        (base().pool_size(0), "pool_size"),
        // Would open (and reserve room for) as many sockets at start-up.
        (base().pool_size(usize::MAX), "pool_size"),
        (base().pool_size(1 << 40), "pool_size"),
        (base().connect_timeout(Duration::ZERO), "connect_timeout"),
        (base().response_timeout(Duration::ZERO), "response_timeout"),
        (
            base().retry_backoff(Duration::ZERO, Duration::ZERO),
            "retry_backoff",
        ),
    ];
    for (config, setting) in cases {
        let message = is_config_error(Locker::connect(config).await);
        assert!(
            message.contains(setting),
            "`{message}` does not name {setting}"
        );
    }
}

/// A request's `max_hold` out of bounds is refused before anything is
/// taken: zero, or beyond a year (clock arithmetic on a larger one would
/// overflow after the server granted the lock).
#[tokio::test]
async fn a_max_hold_out_of_bounds_is_a_config_error_and_takes_nothing() {
    let store = lock_runtime::memory::MemoryStore::new();
    let locker = Locker::connect(LockConfig::in_memory_store(&store))
        .await
        .unwrap();
    let year = Duration::from_secs(365 * 24 * 3600);
    for cap in [Duration::ZERO, year + Duration::from_secs(1), Duration::MAX] {
        let refused = locker.lock("capped").max_hold(cap).acquire().await;
        let message = is_config_error(refused);
        assert!(message.contains("max_hold"), "{message}");
        assert!(store.holders().is_empty(), "{cap:?} left the lock held");
    }
    let guard = locker
        .lock("capped")
        .max_hold(year)
        .acquire()
        .await
        .unwrap();
    assert!(guard.release().await.unwrap());
}

/// `from_env` runs in a worker process, so the variable can be set per run
/// without mutating this test process's environment.
fn from_env_in_a_child(value: Option<&str>) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lock_worker"));
    command.arg("config-from-env").env_remove("REDIS_URL");
    if let Some(value) = value {
        command.env("REDIS_URL", value);
    }
    let output = command.output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn from_env_reads_redis_url() {
    let ok = from_env_in_a_child(Some("redis://127.0.0.1:6399/"));
    assert!(
        ok.starts_with("ok ") && ok.contains("127.0.0.1:6399"),
        "{ok}"
    );
    let unset = from_env_in_a_child(None);
    assert!(
        unset.starts_with("config error") && unset.contains("REDIS_URL is not set"),
        "{unset}"
    );
    let garbage = from_env_in_a_child(Some("garbage"));
    assert!(
        garbage.starts_with("config error") && garbage.contains("cannot parse"),
        "{garbage}"
    );
}

/// Cluster seeds that cannot work together (different passwords, TLS and
/// plain, a unix socket, a database number) are a `LockError::Config` from
/// `validate` and `Locker::connect`, not a `LockError::Redis` (the kind
/// kept for "server unreachable or failing", which callers retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_seeds_that_cannot_work_together_are_config_errors() {
    let cases = [
        (
            "two passwords",
            LockConfig::cluster(["redis://:a@127.0.0.1:1", "redis://:b@127.0.0.1:2"]),
        ),
        (
            "TLS and plain",
            LockConfig::cluster(["rediss://127.0.0.1:1", "redis://127.0.0.1:2"]),
        ),
        (
            "a unix socket",
            LockConfig::cluster(["unix:///tmp/redis.sock"]),
        ),
        // `redis+cluster://h:1,h:2/5` is refused as a Config error; the
        // constructor takes the same database.
        ("database 5", LockConfig::cluster(["redis://127.0.0.1:1/5"])),
    ];
    for (what, config) in cases {
        let config = config.unwrap();
        assert!(
            matches!(config.validate(), Err(LockError::Config(_))),
            "{what}: validate passed"
        );
        let outcome = Locker::connect(config).await;
        assert!(
            matches!(outcome, Err(LockError::Config(_))),
            "{what}: {:?}",
            outcome.err()
        );
    }
}

/// A `/` in a password ends the host part early too: such a URL does not
/// parse, and its error used to blame the database number ("Invalid
/// database number"), a missing piece ("did not parse") or, on a
/// Cluster, a database to drop. It says to percent-encode the `/`, as
/// the README promises of every invalid value, and shows no part of the
/// password.
#[test]
fn an_unencoded_slash_in_a_password_is_a_config_error_that_says_to_encode_it() {
    // The password's parts, as they would show.
    let shows_password = |message: &str| message.contains(":12") || message.contains("34@");
    let forms = [
        "redis://orders:12/34@redis.internal:6379/",
        "redis://:12/34@redis.internal:6379/",
        "redis://orders:12/3@redis.internal:6379/",
        "redis+cluster://orders:12/34@h1:7000,h2:7000",
        "redis+redlock://:12/34@h1:1,h2:1,h3:1",
        "redis+sentinel://orders:12/34@h1:26379/mymaster",
    ];
    for url in forms {
        let message = is_config_error(LockConfig::from_url(url));
        assert!(
            message.contains("%2F") && !shows_password(&message),
            "{url}: {message}"
        );
    }
    let nodes = [
        LockConfig::cluster(["redis://orders:12/34@h1:7000"]),
        LockConfig::redlock(["redis://:12/34@h1:1", "redis://h2:1", "redis://h3:1"]),
        LockConfig::sentinel(["redis://:12/34@h1:26379"], "mymaster"),
    ];
    for config in nodes {
        let message = is_config_error(config);
        assert!(
            message.contains("%2F") && !shows_password(&message),
            "{message}"
        );
    }
    // An `@` that the URL's own parts hold stays theirs.
    for fine in [
        "redis+sentinel://h1:26379/my@master",
        "redis://orders:12%2F34@redis.internal:6379/",
        "unix:///run/redis@1.sock",
    ] {
        assert!(LockConfig::from_url(fine).is_ok(), "{fine}");
    }
}

/// A password holding an unencoded `?` or `#` after digits
/// (`orders:1234?x@host`) reads as host `orders`, port 1234, and the rest
/// as a query or fragment: such a URL parsed, and its connect errors and
/// `Debug` named `orders:1234`, the password's start. The README says it
/// does not parse and that its error shows no part of the password.
#[test]
fn an_unencoded_question_mark_or_hash_in_a_password_is_a_config_error() {
    let secret = "1234";
    let forms = [
        "redis://orders:1234?x@redis.internal:6379/",
        "redis://orders:1234#x@redis.internal:6379/",
        "rediss://orders:1234#x@redis.internal:6379/",
        "redis+cluster://orders:1234?x@h1:7000,h2:7000",
        "redis+cluster://orders:1234#x@h1:7000,h2:7000",
        "redis+redlock://:1234?x@h1:1,h2:1,h3:1",
        "redis+sentinel://orders:1234#x@h1:26379/mymaster",
    ];
    for url in forms {
        let message = is_config_error(LockConfig::from_url(url));
        assert!(
            message.contains("percent-encode") && !message.contains(secret),
            "{url}: {message}"
        );
    }
    let nodes = [
        LockConfig::cluster(["redis://orders:1234?x@h1:7000"]),
        LockConfig::redlock(["redis://:1234#x@h1:1", "redis://h2:1", "redis://h3:1"]),
        LockConfig::sentinel(["redis://:1234?x@h1:26379"], "mymaster"),
    ];
    for config in nodes {
        let message = is_config_error(config);
        assert!(!message.contains(secret), "{message}");
    }
    // An `@` in a query after the path stays a query's business.
    for fine in [
        "redis+sentinel://h1:26379/mymaster?sentinel_password=p@ss",
        "redis://127.0.0.1:6379/?protocol=3",
        "redis://127.0.0.1:6379?protocol=3",
        "unix:///run/redis.sock?pass=se@cret",
        "redis://orders:pw%3Fx@redis.internal:6379/",
    ] {
        assert!(LockConfig::from_url(fine).is_ok(), "{fine}");
    }
}
