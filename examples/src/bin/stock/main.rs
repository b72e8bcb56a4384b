//! The oversell problem, and the lock that prevents it.
//!
//! Seeds a stock count, then lets buyers race to take one unit each with a
//! read-then-write (GET, check, SET), as naive order code does, from
//! several OS processes (copies of this program) with many tasks each.
//!
//! ```text
//! cargo run -p lock-examples --bin stock                 # with the lock: never oversells
//! cargo run -p lock-examples --bin stock -- --mode none  # no lock: oversells
//! cargo run -p lock-examples --bin stock -- --help       # the flags
//! ```
//! `--buyers` is the total across all processes; `--tasks` is per process.
//! The first line says where the locks and stock live: `REDIS_URL`, else a
//! throwaway `redis-server`, else the in-memory store, where the processes
//! become lockers of this one process. A progress line goes to stderr; the
//! summary table and, last, the machine-readable line
//! `result: mode=<m> sold=<n> remaining=<n> oversold=<n>` go to stdout.
//! With the lock, any oversell (or a sale the stock count missed) makes the
//! process exit non-zero.

mod buyers;
mod child;
mod options;
mod parent;
mod progress;
mod purchase;
mod summary;
mod tally;
mod worker;

use std::process::ExitCode;

use clap::Parser;

use crate::options::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // The parent starts its worker processes as `stock --child <i> ...`.
    let result = match cli.child {
        Some(index) => child::run(index, cli).await,
        None => parent::run(cli).await,
    };
    result.unwrap_or_else(|err| {
        eprintln!("stock: {err}");
        ExitCode::FAILURE
    })
}
