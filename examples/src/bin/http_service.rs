//! An HTTP order service whose handler carries `#[distributed_lock]`.
//!
//! ```text
//! cargo run -p lock-examples --bin http_service -- [--port 3000] [--stock 10]
//! curl -i -X POST http://127.0.0.1:3000/orders/42   # 201, then 422 once sold out
//! curl -i http://127.0.0.1:3000/stock/42
//! ```
//! Stocks SKU 42 and serves on 127.0.0.1 until Ctrl-C. Start a second copy
//! on another port against the same `REDIS_URL` and the two never sell the
//! same unit. The handler is in `src/shop/orders.rs`, its error mapping
//! (lock timeout -> 409 + `Retry-After`) in `src/shop/error.rs`.

use std::process::ExitCode;

use clap::Parser;
use lock_examples::Backing;
use lock_examples::shop::{Shop, bind_loopback};

/// The SKU the demo stocks.
const SKU: &str = "42";

/// An HTTP order service whose `POST /orders/{sku}` handler is a
/// `#[distributed_lock]` function. Locks and stock live in the Redis
/// `REDIS_URL` names, else in a throwaway redis-server of its own, else
/// in this process.
#[derive(Parser)]
struct Cli {
    /// Port to serve on, on 127.0.0.1.
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// Units of SKU 42 in stock at the start.
    #[arg(long, default_value_t = 10)]
    stock: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("http_service: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    // Kept alive until the end of `run`: a throwaway server stops on drop.
    let backing = Backing::choose()?;
    println!("{}", backing.describe());
    let shop = Shop::on(&backing).await.map_err(|e| e.to_string())?;
    let stock = cli.stock;
    shop.restock(SKU, stock).await.map_err(|e| e.to_string())?;
    let (listener, addr) = bind_loopback(cli.port)
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", cli.port))?;
    println!("selling {stock} units of SKU {SKU} on http://{addr} (Ctrl-C to stop)");
    println!("  curl -i -X POST http://{addr}/orders/{SKU}");
    println!("  curl -i http://{addr}/stock/{SKU}");
    let shutdown = async {
        // If the signal handler cannot be installed, serve until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    // Graceful: orders in flight finish, and release their locks, first.
    shop.serve(listener, shutdown)
        .await
        .map_err(|e| e.to_string())?;
    println!("stopped");
    Ok(())
}
