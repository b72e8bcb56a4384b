//! A separate OS process for the multi-process tests: it takes locks from
//! its own `Locker`, exactly as another service instance would.
//!
//! ```text
//! lock_worker count <url> <lock-key> <counter-key> <tasks> <iterations> [--no-lock | --attribute]
//!     Each task adds one to <counter-key> <iterations> times with a
//!     non-atomic GET, pause, SET, under the lock unless --no-lock; with
//!     --attribute, through a `#[distributed_lock]` fn on the global locker.
//! lock_worker config-from-env
//!     Prints `ok <config>` or `config error <message>` for LockConfig::from_env().
//! lock_worker hold <url> <lock-key> <ttl-ms>
//!     Takes the lock, prints `acquired <fence>`, and keeps it (renewed by
//!     the watchdog) until killed, or for at most 60 s.
//! ```

use std::process::ExitCode;
use std::time::Duration;

use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};
use redis::AsyncCommands;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("lock_worker: cannot start a runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match args
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["count", url, key, counter, tasks, iterations, "--attribute"] => {
                count_with_attribute(url, key, counter, parse(tasks)?, parse(iterations)?).await
            }
            ["count", url, key, counter, tasks, iterations, rest @ ..] => {
                let use_lock = !rest.contains(&"--no-lock");
                count(
                    url,
                    key,
                    counter,
                    parse(tasks)?,
                    parse(iterations)?,
                    use_lock,
                )
                .await
            }
            ["config-from-env"] => {
                match LockConfig::from_env() {
                    Ok(config) => println!("ok {config:?}"),
                    Err(LockError::Config(message)) => println!("config error {message}"),
                    Err(other) => println!("other error {other}"),
                }
                Ok(())
            }
            ["hold", url, key, ttl_ms] => hold(url, key, parse(ttl_ms)?).await,
            _ => Err(format!(
                "usage: see the doc comment of lock_worker.rs; got {args:?}"
            )),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lock_worker: {err}");
            ExitCode::FAILURE
        }
    }
}

fn parse<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("not a number: {text}"))
}

async fn count(
    url: &str,
    key: &str,
    counter: &str,
    tasks: usize,
    iterations: usize,
    use_lock: bool,
) -> Result<(), String> {
    let locker = Locker::connect(LockConfig::from_url(url).map_err(text)?)
        .await
        .map_err(text)?;
    let client = redis::Client::open(url).map_err(text)?;
    let redis = client
        .get_multiplexed_async_connection()
        .await
        .map_err(text)?;
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (locker, mut redis) = (locker.clone(), redis.clone());
        let (key, counter) = (key.to_owned(), counter.to_owned());
        handles.push(tokio::spawn(async move {
            for _ in 0..iterations {
                let guard = if use_lock {
                    let request = locker.lock(key.as_str()).ttl(Duration::from_secs(5));
                    Some(request.wait(Duration::from_secs(60)).acquire().await?)
                } else {
                    None
                };
                let value: Option<u64> = redis.get(&counter).await?;
                // Widen the race window: without the lock, updates get lost.
                tokio::time::sleep(Duration::from_millis(1)).await;
                let () = redis.set(&counter, value.unwrap_or(0) + 1).await?;
                if let Some(guard) = guard {
                    guard.release().await?;
                }
            }
            Ok::<(), LockError>(())
        }));
    }
    for handle in handles {
        handle.await.map_err(text)?.map_err(text)?;
    }
    println!("done");
    Ok(())
}

/// The read-modify-write of `count`, guarded by the attribute instead.
#[distributed_lock(key = "<lock_key>", ttl = "5s", wait = "60s")]
async fn add_one(
    lock_key: &str,
    redis: &mut redis::aio::MultiplexedConnection,
    counter: &str,
) -> Result<(), LockError> {
    let value: Option<u64> = redis.get(counter).await?;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let () = redis.set(counter, value.unwrap_or(0) + 1).await?;
    Ok(())
}

async fn count_with_attribute(
    url: &str,
    key: &str,
    counter: &str,
    tasks: usize,
    iterations: usize,
) -> Result<(), String> {
    lock_runtime::init(LockConfig::from_url(url).map_err(text)?)
        .await
        .map_err(text)?;
    let client = redis::Client::open(url).map_err(text)?;
    let redis = client
        .get_multiplexed_async_connection()
        .await
        .map_err(text)?;
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let mut redis = redis.clone();
        let (key, counter) = (key.to_owned(), counter.to_owned());
        handles.push(tokio::spawn(async move {
            for _ in 0..iterations {
                add_one(&key, &mut redis, &counter).await?;
            }
            Ok::<(), LockError>(())
        }));
    }
    for handle in handles {
        handle.await.map_err(text)?.map_err(text)?;
    }
    println!("done");
    Ok(())
}

async fn hold(url: &str, key: &str, ttl_ms: u64) -> Result<(), String> {
    let locker = Locker::connect(LockConfig::from_url(url).map_err(text)?)
        .await
        .map_err(text)?;
    let guard = locker
        .lock(key)
        .ttl(Duration::from_millis(ttl_ms))
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .map_err(text)?;
    println!("acquired {}", guard.fence());
    tokio::time::sleep(Duration::from_secs(60)).await;
    guard.release().await.map_err(text)?;
    Ok(())
}

fn text(err: impl std::fmt::Display) -> String {
    err.to_string()
}
