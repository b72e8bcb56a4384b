//! Load for the HTTP order service: many concurrent orders, little stock.
//!
//! ```text
//! cargo run -p lock-examples --bin http_load -- [--stock 50] [--requests 200]
//! ```
//! Starts the service of `http_service` in-process on a free loopback
//! port, stocks a SKU, sends every order at once over raw HTTP/1.1, and
//! prints what came back: `201` sold, `409` busy (the lock stayed taken for
//! the handler's whole wait), `422` sold out. The last line is
//! machine-readable:
//! `result: sold=<n> busy=<n> sold_out=<n> failed=<n> stock_after=<n> oversold=<n>`;
//! the process exits non-zero unless sold + stock after = stock before and
//! every request got one of those three answers.

use std::process::ExitCode;

use clap::Parser;
use lock_examples::Backing;
use lock_examples::shop::{Shop, bind_loopback, load};

/// Sends many concurrent orders for little stock to the order service of
/// `http_service`, run in this process, and checks the books. Locks and
/// stock live in the Redis `REDIS_URL` names, else in a throwaway
/// redis-server of its own, else in this process.
#[derive(Parser)]
struct Cli {
    /// Units in stock at the start.
    #[arg(long, default_value_t = 50)]
    stock: u64,
    /// Orders sent, all at once.
    #[arg(long, default_value_t = 200)]
    requests: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("http_load: the books do not balance (see above)");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("http_load: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<bool, String> {
    let Cli { stock, requests } = cli;
    let backing = Backing::choose()?;
    println!("{}", backing.describe());
    let shop = Shop::on(&backing).await.map_err(|e| e.to_string())?;
    let (listener, addr) = bind_loopback(0).await.map_err(|e| e.to_string())?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service = tokio::spawn(shop.clone().serve(listener, async {
        let _ = stopped.await;
    }));
    // Unique per run, so runs against a shared Redis do not mix.
    let sku = format!("load-{}", std::process::id());
    eprintln!(
        "sending {requests} concurrent orders for {stock} units of SKU {sku} to http://{addr}"
    );
    let report = load::run(&shop, addr, &sku, stock, requests).await;
    let _ = stop.send(());
    let _ = service.await;
    shop.forget(&sku).await.map_err(|e| e.to_string())?;
    let report = report.map_err(|e| e.to_string())?;
    println!("{report}");
    Ok(report.is_correct())
}
