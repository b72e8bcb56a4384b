//! The command line, of the parent process and of the workers it starts.

use std::time::Duration;

use clap::{Parser, ValueEnum};

/// Read-then-write with or without the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Each purchase is a `#[distributed_lock]` function.
    Lock,
    /// No lock: the race is on.
    None,
}

impl Mode {
    /// The name used on the command line and in the result line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Lock => "lock",
            Mode::None => "none",
        }
    }
}

/// Buyers race for the stock of one SKU, each with a read-then-write (GET,
/// check, SET); with the lock, never more are sold than there were.
///
/// Locks and stock live in the Redis `REDIS_URL` names, else in a
/// throwaway redis-server of its own, else in this process (the race then
/// runs between lockers of one process). The first line says which; the
/// last is `result: mode=<m> sold=<n> remaining=<n> oversold=<n>`.
#[derive(Clone, Debug, Parser)]
pub struct Cli {
    /// `lock`: every purchase holds the SKU's lock; `none`: no lock.
    #[arg(long, value_enum, default_value_t = Mode::Lock)]
    pub mode: Mode,
    /// Units in stock at the start.
    #[arg(long, default_value_t = 200)]
    pub stock: u64,
    /// Buyers in total, shared by all processes.
    #[arg(long, default_value_t = 400)]
    pub buyers: u64,
    /// Worker processes (lockers, on the in-memory store).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub processes: u64,
    /// Concurrent buyer tasks in each process.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub tasks: u64,
    /// Seconds the whole run may take before the workers are stopped.
    #[arg(long = "timeout", value_name = "SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_secs: u64,
    /// Set by the parent on the workers it starts: this worker's number.
    #[arg(long, hide = true)]
    pub child: Option<u64>,
    /// Set by the parent on its workers: the SKU of the run.
    #[arg(long, hide = true)]
    pub sku: Option<String>,
}

impl Cli {
    /// The whole run must finish within this, or the workers are stopped.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }
}
