//! The in-memory lock store: lockers with no Redis at all, for a
//! single-process service or for the tests of an application's own code.
//!
//! ```
//! use lock_runtime::{LockConfig, Locker};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lock_runtime::LockError> {
//! let locker = Locker::connect(LockConfig::in_memory()).await?;
//! let guard = locker.lock("stock:42").acquire().await?;
//! assert!(locker.lock("stock:42").try_acquire().await?.is_none());
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! Everything a locker does on Redis, it does here with the same code:
//! leases that expire, owner-only release, idempotent acquisition, rising
//! fences, waiters woken on release, the watchdog, loss signals, nested
//! calls. Only the server is different: a [`MemoryStore`], whose calls
//! each run at once as the in-process twin of a lock script. Its time is
//! tokio's, on the runtime that calls: with `tokio::time::pause()` a test
//! runs a 30 s lease in microseconds.
//!
//! What it cannot give: locks between processes (each process has its own
//! stores), and anything about a server's failures (there is none).

mod keyspace;
mod store;

#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod words;

pub(crate) use keyspace::Keyspace;
pub(crate) use store::Listener;
pub use store::{HeldLock, MemoryStore};
use words::Words;

/// A lock script's in-memory twin: `KEYS` and `ARGV` in, the script's
/// answer out (or why the call is malformed).
pub(crate) type Twin = fn(&mut Keyspace, &Words, &Words) -> Result<redis::Value, String>;
