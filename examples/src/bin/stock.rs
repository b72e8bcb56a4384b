//! The oversell problem, and the lock that prevents it.
//!
//! Seeds a stock count in Redis, then lets many buyers race to take one unit
//! each with a read-then-write (GET, check, SET), as naive order code does.
//!
//! ```text
//! cargo run -p lock-examples --bin stock                 # with the lock: never oversells
//! cargo run -p lock-examples --bin stock -- --mode none  # no lock: oversells
//!     [--stock N] [--buyers N] [--tasks N]
//! ```
//! The last line is machine-readable:
//! `result: mode=<m> sold=<n> remaining=<n> oversold=<n>`; with the lock,
//! any oversell makes the process exit non-zero.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lock_examples::DemoRedis;
use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// One purchase: read the stock, and if any is left, take one unit.
/// A read-then-write like this is exactly what races without a lock.
async fn take_one(redis: &mut MultiplexedConnection, stock_key: &str) -> Result<bool, LockError> {
    let left: u64 = redis.get(stock_key).await?;
    if left == 0 {
        return Ok(false);
    }
    // The "payment" between the check and the write.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let () = redis.set(stock_key, left - 1).await?;
    Ok(true)
}

/// The same purchase, run by at most one buyer at a time per SKU, across
/// every process.
#[distributed_lock(key = "stock:<sku>", ttl = "3s", wait = "30s", locker = locker)]
async fn buy_locked(
    locker: &Locker,
    sku: &str,
    redis: &mut MultiplexedConnection,
    stock_key: &str,
) -> Result<bool, LockError> {
    take_one(redis, stock_key).await
}

struct Options {
    locked: bool,
    stock: u64,
    buyers: u64,
    tasks: u64,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        locked: true,
        stock: 100,
        buyers: 200,
        tasks: 16,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: `{value}` is not a number"))
        };
        match flag.as_str() {
            "--mode" => match value.as_str() {
                "lock" => options.locked = true,
                "none" => options.locked = false,
                other => return Err(format!("--mode is `lock` or `none`, not `{other}`")),
            },
            "--stock" => options.stock = number()?,
            "--buyers" => options.buyers = number()?,
            "--tasks" => options.tasks = number()?.max(1),
            other => {
                return Err(format!(
                    "unknown flag {other}; see the doc comment of stock.rs"
                ));
            }
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("stock: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<ExitCode, String> {
    let options = options()?;
    let server = DemoRedis::find_or_start()?;
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let locker = Locker::connect(LockConfig::from_url(server.url()).map_err(|e| text(&e))?)
        .await
        .map_err(|e| text(&e))?;
    let redis = redis::Client::open(server.url())
        .map_err(|e| text(&e))?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| text(&e))?;
    let sku = format!("demo-{}", std::process::id());
    let stock_key = format!("stock:{sku}");
    let () = redis
        .clone()
        .set(&stock_key, options.stock)
        .await
        .map_err(|e| text(&e))?;

    let next_buyer = Arc::new(AtomicU64::new(0));
    let sold = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..options.tasks {
        let (locker, mut redis) = (locker.clone(), redis.clone());
        let (next_buyer, sold, stock_key, sku) = (
            next_buyer.clone(),
            sold.clone(),
            stock_key.clone(),
            sku.clone(),
        );
        let (buyers, locked) = (options.buyers, options.locked);
        tasks.push(tokio::spawn(async move {
            while next_buyer.fetch_add(1, Ordering::Relaxed) < buyers {
                let bought = if locked {
                    buy_locked(&locker, &sku, &mut redis, &stock_key).await?
                } else {
                    take_one(&mut redis, &stock_key).await?
                };
                if bought {
                    sold.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<(), LockError>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| text(&e))?.map_err(|e| text(&e))?;
    }
    let elapsed = started.elapsed();
    let remaining: u64 = redis.clone().get(&stock_key).await.map_err(|e| text(&e))?;
    let _: () = redis.clone().del(&stock_key).await.map_err(|e| text(&e))?;
    let sold = sold.load(Ordering::Relaxed);
    let oversold = sold.saturating_sub(options.stock);
    let mode = if options.locked { "lock" } else { "none" };
    let stats = locker.stats();
    println!("{:<12} {:>10}", "mode", mode);
    println!("{:<12} {:>10}", "stock", options.stock);
    println!("{:<12} {:>10}", "buyers", options.buyers);
    println!("{:<12} {:>10}", "sold", sold);
    println!("{:<12} {:>10}", "remaining", remaining);
    println!("{:<12} {:>10}", "oversold", oversold);
    println!("{:<12} {:>10}", "lock waits", stats.contended);
    println!("{:<12} {:>10.2?}", "elapsed", elapsed);
    println!("result: mode={mode} sold={sold} remaining={remaining} oversold={oversold}");
    Ok(if options.locked && oversold > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
