//! The direct connection against real `redis-server` processes: replies
//! reach the request that asked under concurrency, cancellation and
//! timeouts, and a broken socket fails its calls and is replaced.

use std::pin::pin;
use std::task::Context;
use std::time::{Duration, Instant};

use lock_servers::RedisServer;
use redis::Value;
use redis::aio::ConnectionLike;

use super::DirectConnection;
use super::wire::as_on_library_thread;

const CONNECT: Duration = Duration::from_secs(2);
const RESPONSE: Duration = Duration::from_secs(1);

async fn connect(server: &RedisServer) -> DirectConnection {
    let info = redis::IntoConnectionInfo::into_connection_info(server.url().as_str()).unwrap();
    DirectConnection::connect(info, CONNECT, Some(RESPONSE))
        .await
        .unwrap()
}

/// Polls `call` once, with a waker that never wakes: a request polled so
/// is queued, and its caller leads the batch (or writes it) as a real one
/// would. Whether it is still pending.
fn pending_after_one_poll<F: std::future::Future>(call: std::pin::Pin<&mut F>) -> bool {
    let waker = futures_util::task::noop_waker();
    call.poll(&mut Context::from_waker(&waker)).is_pending()
}

async fn get(connection: &mut DirectConnection, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(connection)
        .await
        .unwrap()
}

/// A `GET` of `key` that must time out (the server is paused): how long
/// it waited for that.
async fn get_timing_out(connection: &mut DirectConnection, key: &str) -> Duration {
    let started = Instant::now();
    let err = redis::cmd("GET")
        .arg(key)
        .query_async::<Option<String>>(connection)
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_gets_its_own_replies_among_many() {
    let server = RedisServer::start();
    let connection = connect(&server).await;
    let mut tasks = Vec::new();
    for task in 0..32 {
        let mut connection = connection.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..50 {
                let key = format!("k{task}");
                let value = format!("{task}-{round}");
                let () = redis::cmd("SET")
                    .arg(&key)
                    .arg(&value)
                    .query_async(&mut connection)
                    .await
                    .unwrap();
                let (read, length): (String, usize) = redis::pipe()
                    .cmd("GET")
                    .arg(&key)
                    .cmd("STRLEN")
                    .arg(&key)
                    .query_async(&mut connection)
                    .await
                    .unwrap();
                assert_eq!((read.as_str(), length), (value.as_str(), value.len()));
                // An error reply answers its own request, with its code.
                let missing = redis::cmd("EVALSHA")
                    .arg("0000000000000000000000000000000000000000")
                    .arg(0)
                    .query_async::<Value>(&mut connection)
                    .await
                    .unwrap_err();
                assert_eq!(missing.code(), Some("NOSCRIPT"), "{missing}");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut connection = connection;
    let keys: i64 = redis::cmd("DBSIZE")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(keys, 32);
}

#[tokio::test]
async fn a_leader_dropped_in_its_yield_still_has_its_batch_written() {
    let server = RedisServer::start();
    let connection = connect(&server).await;
    let mut first = connection.clone();
    let set = redis::cmd("SET").arg("dropped").arg("written").clone();
    {
        let leading = pin!(set.query_async::<()>(&mut first));
        assert!(pending_after_one_poll(leading));
    }
    let mut second = connection.clone();
    assert_eq!(
        get(&mut second, "dropped").await.as_deref(),
        Some("written")
    );
}

#[tokio::test]
async fn a_caller_on_the_library_thread_takes_over_a_yielding_batch() {
    let server = RedisServer::start();
    let connection = connect(&server).await;
    let mut first = connection.clone();
    let set = redis::cmd("SET").arg("led").arg("1").clone();
    let mut leading = pin!(set.query_async::<()>(&mut first));
    assert!(pending_after_one_poll(leading.as_mut()));
    // Never polled again before this one is answered: it wrote both.
    let mut second = connection.clone();
    let get_led = redis::cmd("GET").arg("led").clone();
    let mut taking_over = pin!(get_led.query_async::<Option<String>>(&mut second));
    assert!(as_on_library_thread(|| pending_after_one_poll(
        taking_over.as_mut()
    )));
    assert_eq!(taking_over.await.unwrap().as_deref(), Some("1"));
    leading.await.unwrap();
}

#[tokio::test]
async fn a_frozen_server_times_out_and_later_replies_find_their_callers() {
    let server = RedisServer::start();
    let mut connection = connect(&server).await;
    let () = redis::cmd("SET")
        .arg("before")
        .arg("1")
        .query_async(&mut connection)
        .await
        .unwrap();
    server.pause();
    let waited = get_timing_out(&mut connection, "before").await;
    assert!(waited >= RESPONSE, "{waited:?}");
    server.resume();
    // The abandoned GET's reply arrives first, and goes to nobody.
    let () = redis::cmd("SET")
        .arg("after")
        .arg("2")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(get(&mut connection, "after").await.as_deref(), Some("2"));
}

/// The reader's one timer is armed for the oldest request: a request sent
/// after it, and one sent while another already waits, each time out at
/// their own deadline, never before it.
#[tokio::test]
async fn each_request_times_out_at_its_own_deadline_under_one_timer() {
    let server = RedisServer::start();
    let mut connection = connect(&server).await;
    // Answered at once: the timer is now armed for a deadline that
    // passes while the next requests wait.
    assert_eq!(get(&mut connection, "k").await, None);
    tokio::time::sleep(RESPONSE / 2).await;
    server.pause();
    let mut first_connection = connection.clone();
    let first = tokio::spawn(async move { get_timing_out(&mut first_connection, "k").await });
    tokio::time::sleep(RESPONSE / 2).await;
    let second_waited = get_timing_out(&mut connection, "k").await;
    let first_waited = first.await.unwrap();
    assert!(first_waited >= RESPONSE, "{first_waited:?}");
    assert!(second_waited >= RESPONSE, "{second_waited:?}");
    // Not held for a later deadline either: the second request was sent
    // while the first waited, and its timeout is its own.
    assert!(second_waited < RESPONSE * 3, "{second_waited:?}");
    server.resume();
    assert_eq!(get(&mut connection, "k").await, None);
}

#[tokio::test]
async fn a_killed_server_fails_the_call_and_the_next_call_reconnects() {
    let mut server = RedisServer::start();
    let mut connection = connect(&server).await;
    assert_eq!(get(&mut connection, "k").await, None);
    server.kill();
    let err = redis::cmd("GET")
        .arg("k")
        .query_async::<Option<String>>(&mut connection)
        .await
        .unwrap_err();
    assert!(
        err.is_connection_dropped() || err.is_connection_refusal(),
        "{err}"
    );
    server.start_again();
    let pong: String = redis::cmd("PING")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn a_server_that_never_answers_fails_the_connect_within_its_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/", silent.local_addr().unwrap());
    let info = redis::IntoConnectionInfo::into_connection_info(url.as_str()).unwrap();
    let bound = Duration::from_millis(300);
    let started = Instant::now();
    let err = match DirectConnection::connect(info, bound, Some(RESPONSE)).await {
        Ok(_) => panic!("a silent server was connected to"),
        Err(err) => err,
    };
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() >= bound, "{:?}", started.elapsed());
}

#[tokio::test]
async fn the_login_and_database_are_those_of_the_url() {
    let server = RedisServer::start();
    server.cmd(&["CONFIG", "SET", "requirepass", "secret"]);
    let url = format!("redis://:secret@127.0.0.1:{}/3", server.port());
    let info = redis::IntoConnectionInfo::into_connection_info(url.as_str()).unwrap();
    let mut connection = DirectConnection::connect(info, CONNECT, Some(RESPONSE))
        .await
        .unwrap();
    assert_eq!(connection.get_db(), 3);
    let client: String = redis::cmd("CLIENT")
        .arg("INFO")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(client.contains(" db=3 "), "{client}");
    let wrong = format!("redis://:nope@127.0.0.1:{}/", server.port());
    let info = redis::IntoConnectionInfo::into_connection_info(wrong.as_str()).unwrap();
    let refused = DirectConnection::connect(info, CONNECT, Some(RESPONSE)).await;
    let err = refused.err().expect("a wrong password was accepted");
    assert_eq!(err.kind(), redis::ErrorKind::AuthenticationFailed, "{err}");
}
