//! The oversell problem, and the lock that prevents it.
//!
//! Seeds a stock count in Redis, then lets buyers race to take one unit
//! each with a read-then-write (GET, check, SET), as naive order code does,
//! from several OS processes (copies of this program) with many tasks each.
//!
//! ```text
//! cargo run -p lock-examples --bin stock                 # with the lock: never oversells
//! cargo run -p lock-examples --bin stock -- --mode none  # no lock: oversells
//!     [--stock 200] [--buyers 400] [--processes 2] [--tasks 8] [--timeout 120]
//! ```
//! `--buyers` is the total across all processes; `--tasks` is per process.
//! A progress line goes to stderr; the summary table and, last, the
//! machine-readable line `result: mode=<m> sold=<n> remaining=<n> oversold=<n>`
//! go to stdout. With the lock, any oversell (or a sale the stock count
//! missed) makes the process exit non-zero.
//!
//! Redis: `REDIS_URL` if set, else 127.0.0.1:6379, else a throwaway
//! `redis-server` started for the run.

mod child;
mod options;
mod parent;
mod progress;
mod purchase;
mod summary;
mod tally;
mod worker;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The parent starts its worker processes as `stock --child <i> ...`.
    let result = if args.first().map(String::as_str) == Some(child::FLAG) {
        child::run(args).await
    } else {
        parent::run(args).await
    };
    result.unwrap_or_else(|err| {
        eprintln!("stock: {err}");
        ExitCode::FAILURE
    })
}
