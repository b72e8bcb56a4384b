//! A separate OS process for the multi-process tests: it takes locks from
//! its own `Locker`, exactly as another service instance would.
//!
//! ```text
//! lock_worker count <url> <lock-key> <counter-key> <tasks> <iterations> [--no-lock | --attribute] [--store <url>]
//!     Each task adds one to <counter-key> <iterations> times with a
//!     non-atomic GET, pause, SET, under the lock unless --no-lock; with
//!     --attribute, through a `#[distributed_lock]` fn on the global locker.
//!     --store: keep the counter on this plain server instead of at <url>
//!     (so the lock can live on a Cluster, behind Sentinel or on Redlock).
//! lock_worker config-from-env
//!     Prints `ok <config>` or `config error <message>` for LockConfig::from_env().
//! lock_worker chaos <worker> <lock-url> <store-url> <resources> <tasks> <seconds> <history-file>
//!     Tasks take locks on random resources through `#[distributed_lock]`
//!     and write to the fenced store on <store-url>, recording a history
//!     (`lock_tests::history`) in <history-file>; prints `ready`, then
//!     `done` at the end.
//! lock_worker victim <url> <lock-key>
//!     Takes the lock (500 ms lease, on_lost = "continue"), prints
//!     `acquired <fence>`, waits until a newer owner has written to the
//!     fenced store (which needs its lease to have run out: the test freezes
//!     it), then writes there itself and prints
//!     `late-write accepted=<bool> held=<bool> told=<bool>` (told: its
//!     loss signal came, within 5 s of the write).
//! lock_worker hold <url> <lock-key> <ttl-ms>
//!     Takes the lock, prints `acquired <fence>`, and keeps it (renewed by
//!     the watchdog) until killed, or for at most 60 s.
//! lock_worker hold-fixed <url> <lock-key> <ttl-ms>
//!     Takes the lock with a fixed lease (no renewals), prints
//!     `acquired <fence>`, then `lost` the moment its loss signal comes
//!     (within twice the lease), and exits.
//! lock_worker fair <url> <lock-key> <ttl-ms> <hold-ms>
//!     Reads commands from stdin, one per line: `wait <label>` starts a
//!     waiter of the fair lock <lock-key> (ttl <ttl-ms>, a 120 s wait),
//!     which prints `granted <label> <fence>` when it holds it, keeps it
//!     <hold-ms>, releases it and prints `released <label> <held>` (or
//!     `failed <label> <error>`). Exits once stdin closed and every waiter
//!     finished.
//! lock_worker read-hold <url> <lock-key> <ttl-ms>
//!     Takes a read of the read/write lock <lock-key>, prints
//!     `acquired <fence>`, and keeps it (renewed) until killed, or for at
//!     most 60 s; prints `lost` and exits when a loss signal comes.
//! lock_worker read-loop <url> <lock-key> <ttl-ms> <tasks> <hold-ms> <seconds>
//!     <tasks> readers of <lock-key> each take a read, hold it <hold-ms>
//!     and take the next, for <seconds>; prints `ready` once that many
//!     reads were granted, then `done <grants> <most at once>`.
//! lock_worker rw-chaos <worker> <lock-url> <store-url> <resources> <tasks> <seconds> <history-file>
//!     Tasks take reads and writes of read/write locks on random resources
//!     and read or bump a version (kept on the plain server <store-url>)
//!     under them, recording a history
//!     (`lock_tests::history::read_write`) in <history-file>; prints
//!     `ready`, then `done` at the end.
//! lock_worker permits <url> <key> <limit> <permits> <ttl-ms> <rounds> <hold-ms>
//!     Takes <permits> of the semaphore <key> (limit <limit>) <rounds>
//!     times, printing `acquired <fence> <slots>`, holding them <hold-ms>
//!     counted inside on the server (`inside:<key>`, the most ever in
//!     `most:<key>`), then `released <held>`; with <rounds> 0, takes them
//!     once and holds them until killed. Prints `lost` and exits when a
//!     loss signal comes. Counts on the server `PERMITS_STORE_URL` names
//!     when set (on Redlock, one master outside the test's faults).
//! lock_worker permits-chaos <url> <key> <limit> <permits> <ttl-ms> <hold-ms> <history-file>
//!     Takes <permits> of the semaphore <key> again and again, each time
//!     for <hold-ms>, until killed, recording every hold in
//!     <history-file> for the semaphore's checker (`lock_tests::permits`);
//!     prints `ready` once connected.
//! lock_worker transfer <url> <store-url> <accounts> <tasks> <rounds> <ttl-ms> [--no-lock]
//!     <tasks> tasks each move one unit <rounds> times between two random
//!     accounts (`acct:<n>`, n below <accounts>, balances kept on the plain
//!     server <store-url>), named to `lock_all` in a random order, with a
//!     racy GET, GET, pause, SET, SET; without the keys held under
//!     --no-lock (the control run, which loses money). Prints `done <moves>`.
//! lock_worker hold-all <url> <ttl-ms> <key>...
//!     Takes every <key> at once with `lock_all`, prints
//!     `acquired <fences>`, and keeps them (renewed) until killed, or for
//!     at most 60 s.
//! lock_worker drop-at-exit <url> <lock-key> <ttl-ms> <current-thread | multi-thread> [--after-input]
//!     What `#[tokio::main]` does with a guard alive at the end of `main`:
//!     on a runtime of that flavour, takes the lock, prints `acquired`,
//!     drops the guard, and returns from `main` at once (with
//!     --after-input: once a line came on stdin, or stdin closed).
//! ```

mod chaos;
mod fair;
mod multi;
mod permits;
mod permits_chaos;
mod read_write;
mod rw_chaos;

use std::process::ExitCode;
use std::time::Duration;

use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, url, key, ttl_ms, flavour, rest @ ..] = args.as_slice()
        && mode == "drop-at-exit"
    {
        let after_input = rest.iter().any(|flag| flag == "--after-input");
        return match drop_at_exit(url, key, ttl_ms, flavour, after_input) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("lock_worker: {err}");
                ExitCode::FAILURE
            }
        };
    }
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
            ["count", url, key, counter, tasks, iterations, rest @ ..] => {
                let (rest, store) = match rest {
                    [head @ .., "--store", store] => (head, *store),
                    rest => (rest, *url),
                };
                let guarding = match rest {
                    [] => Guarding::Guard,
                    ["--attribute"] => Guarding::Attribute,
                    ["--no-lock"] => Guarding::NoLock,
                    other => return Err(format!("unknown count option {other:?}")),
                };
                let (tasks, iterations) = (parse(tasks)?, parse(iterations)?);
                let target = Counter {
                    store,
                    key: counter,
                };
                count(url, key, target, tasks, iterations, guarding).await
            }
            ["config-from-env"] => {
                match LockConfig::from_env() {
                    Ok(config) => println!("ok {config:?}"),
                    Err(LockError::Config(message)) => println!("config error {message}"),
                    Err(other) => println!("other error {other}"),
                }
                Ok(())
            }
            [
                "chaos",
                worker,
                lock_url,
                store_url,
                resources,
                tasks,
                seconds,
                history,
            ] => {
                chaos::run(chaos::ChaosArgs {
                    worker,
                    lock_url,
                    store_url,
                    resources: parse(resources)?,
                    tasks: parse(tasks)?,
                    seconds: parse(seconds)?,
                    history,
                })
                .await
            }
            ["victim", url, key] => victim(url, key).await,
            ["hold", url, key, ttl_ms] => hold(url, key, parse(ttl_ms)?).await,
            ["hold-fixed", url, key, ttl_ms] => hold_fixed(url, key, parse(ttl_ms)?).await,
            ["fair", url, key, ttl_ms, hold_ms] => {
                fair::run(url, key, parse(ttl_ms)?, parse(hold_ms)?).await
            }
            ["read-hold", url, key, ttl_ms] => read_write::hold(url, key, parse(ttl_ms)?).await,
            ["read-loop", url, key, ttl_ms, tasks, hold_ms, seconds] => {
                read_write::run_loop(read_write::Loop {
                    url,
                    key,
                    ttl_ms: parse(ttl_ms)?,
                    tasks: parse(tasks)?,
                    hold_ms: parse(hold_ms)?,
                    seconds: parse(seconds)?,
                })
                .await
            }
            ["permits", url, key, limit, permits, ttl_ms, rounds, hold_ms] => {
                permits::run(permits::PermitsArgs {
                    url,
                    key,
                    limit: parse(limit)?,
                    permits: parse(permits)?,
                    ttl: Duration::from_millis(parse(ttl_ms)?),
                    rounds: parse(rounds)?,
                    hold: Duration::from_millis(parse(hold_ms)?),
                })
                .await
            }
            [
                "rw-chaos",
                worker,
                url,
                store_url,
                resources,
                tasks,
                seconds,
                history,
            ] => {
                rw_chaos::run(rw_chaos::RwChaos {
                    worker,
                    url,
                    store_url,
                    resources: parse(resources)?,
                    tasks: parse(tasks)?,
                    seconds: parse(seconds)?,
                    history,
                })
                .await
            }
            [
                "permits-chaos",
                url,
                key,
                limit,
                permits,
                ttl_ms,
                hold_ms,
                history,
            ] => {
                permits_chaos::run(permits_chaos::ChaosPermits {
                    url,
                    key,
                    limit: parse(limit)?,
                    permits: parse(permits)?,
                    ttl: Duration::from_millis(parse(ttl_ms)?),
                    hold: Duration::from_millis(parse(hold_ms)?),
                    history,
                })
                .await
            }
            [
                "transfer",
                url,
                store,
                accounts,
                tasks,
                rounds,
                ttl_ms,
                rest @ ..,
            ] => {
                let unlocked = match rest {
                    [] => false,
                    ["--no-lock"] => true,
                    other => return Err(format!("unknown transfer option {other:?}")),
                };
                multi::transfer(multi::Transfers {
                    url,
                    store,
                    accounts: parse(accounts)?,
                    tasks: parse(tasks)?,
                    rounds: parse(rounds)?,
                    ttl: Duration::from_millis(parse(ttl_ms)?),
                    unlocked,
                })
                .await
            }
            ["hold-all", url, ttl_ms, keys @ ..] => {
                multi::hold_all(url, Duration::from_millis(parse(ttl_ms)?), keys).await
            }
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

/// Takes the lock on a runtime of `flavour` and drops its guard as
/// `main` ends (see the doc comment at the top).
fn drop_at_exit(
    url: &str,
    key: &str,
    ttl_ms: &str,
    flavour: &str,
    after_input: bool,
) -> Result<(), String> {
    let mut builder = match flavour {
        "current-thread" => tokio::runtime::Builder::new_current_thread(),
        "multi-thread" => tokio::runtime::Builder::new_multi_thread(),
        other => return Err(format!("unknown runtime flavour {other}")),
    };
    let runtime = builder.enable_all().build().map_err(text)?;
    let ttl = Duration::from_millis(parse(ttl_ms)?);
    runtime.block_on(async {
        let config = LockConfig::from_url(url).map_err(text)?;
        let locker = Locker::connect(config).await.map_err(text)?;
        let guard = locker.lock(key).ttl(ttl).acquire().await.map_err(text)?;
        println!("acquired");
        if after_input {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map_err(text)?;
        }
        drop(guard);
        Ok::<(), String>(())
    })?;
    // The runtime ends, and so does `main`: nothing waits for the release
    // the drop handed to the library's thread but the library itself.
    Ok(())
}

fn parse<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("not a number: {text}"))
}

/// How `count` guards its read-modify-write.
#[derive(Clone, Copy)]
enum Guarding {
    /// `locker.lock(..).acquire()` and `guard.release()`.
    Guard,
    /// A `#[distributed_lock]` fn on the global locker.
    Attribute,
    /// Nothing: the control run, which loses updates.
    NoLock,
}

/// Where `count` keeps its counter: a key on a plain server.
struct Counter<'a> {
    store: &'a str,
    key: &'a str,
}

async fn count(
    url: &str,
    key: &str,
    counter: Counter<'_>,
    tasks: usize,
    iterations: usize,
    guarding: Guarding,
) -> Result<(), String> {
    let config = LockConfig::from_url(url).map_err(text)?;
    let locker = Locker::connect(config).await.map_err(text)?;
    lock_runtime::init_with(locker.clone()).map_err(text)?;
    let Counter {
        store,
        key: counter,
    } = counter;
    let client = redis::Client::open(store).map_err(text)?;
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
                match guarding {
                    Guarding::Guard => {
                        let request = locker.lock(key.as_str()).ttl(Duration::from_secs(5));
                        let guard = request.wait(Duration::from_secs(60)).acquire().await?;
                        add_one(&mut redis, &counter).await?;
                        guard.release().await?;
                    }
                    Guarding::Attribute => add_one_locked(&key, &mut redis, &counter).await?,
                    Guarding::NoLock => add_one(&mut redis, &counter).await?,
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

/// A non-atomic increment: GET, pause, SET. The pause widens the race
/// window, so that without the lock updates do get lost.
async fn add_one(redis: &mut MultiplexedConnection, counter: &str) -> Result<(), LockError> {
    let value: Option<u64> = redis.get(counter).await?;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let () = redis.set(counter, value.unwrap_or(0) + 1).await?;
    Ok(())
}

/// [`add_one`] under the attribute, on the global locker.
#[distributed_lock(key = "<lock_key>", ttl = "5s", wait = "60s")]
async fn add_one_locked(
    lock_key: &str,
    redis: &mut MultiplexedConnection,
    counter: &str,
) -> Result<(), LockError> {
    add_one(redis, counter).await
}

/// The body of `victim`: a holder that goes on writing after its lease.
#[distributed_lock(key = "<key>", ttl = "500ms", wait = "5s", on_lost = "continue")]
async fn write_late(
    key: &str,
    store: &mut MultiplexedConnection,
) -> Result<(bool, bool, bool), LockError> {
    let Some(lock) = lock_runtime::current() else {
        return Err(LockError::Config("no lock in an annotated body".into()));
    };
    println!("acquired {}", lock.fence());
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let (highest, log) = lock_tests::history::store_keys(key);
    // Wait for the successor's write: an observable state, not a guess of
    // how long the test takes to freeze this process. A read that fails
    // (this process was frozen and starved a while) is simply tried again.
    loop {
        let written: Result<Option<u64>, _> = store.get(&highest).await;
        if matches!(written, Ok(Some(_))) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let accepted: i64 = redis::Script::new(lock_tests::history::STORE_SCRIPT)
        .key(highest)
        .key(log)
        .arg(lock.fence())
        .arg("victim.1")
        .arg(1)
        .invoke_async(store)
        .await?;
    // Told of the loss: the signal, not only the lease's local validity.
    let told = tokio::time::timeout(Duration::from_secs(5), lock.lost())
        .await
        .is_ok();
    Ok((accepted == 1, lock.is_held(), told))
}

async fn victim(url: &str, key: &str) -> Result<(), String> {
    lock_runtime::init(LockConfig::from_url(url).map_err(text)?)
        .await
        .map_err(text)?;
    let client = redis::Client::open(url).map_err(text)?;
    // Generous: after its freeze this process may be starved for a while.
    let patient = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(Duration::from_secs(5)))
        .set_connection_timeout(Some(Duration::from_secs(5)));
    let mut store = client
        .get_multiplexed_async_connection_with_config(&patient)
        .await
        .map_err(text)?;
    let (accepted, held, told) = write_late(key, &mut store).await.map_err(text)?;
    println!("late-write accepted={accepted} held={held} told={told}");
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

async fn hold_fixed(url: &str, key: &str, ttl_ms: u64) -> Result<(), String> {
    let locker = Locker::connect(LockConfig::from_url(url).map_err(text)?)
        .await
        .map_err(text)?;
    let ttl = Duration::from_millis(ttl_ms);
    let guard = locker
        .lock(key)
        .ttl(ttl)
        .watchdog(false)
        .acquire()
        .await
        .map_err(text)?;
    println!("acquired {}", guard.fence());
    tokio::time::timeout(ttl * 2, guard.lost())
        .await
        .map_err(|_| "no loss signal within twice the lease".to_owned())?;
    println!("lost");
    Ok(())
}

fn text(err: impl std::fmt::Display) -> String {
    err.to_string()
}
