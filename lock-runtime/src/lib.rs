//! Distributed locks on Redis and Valkey for async Rust.
//!
//! Put [`#[distributed_lock]`](distributed_lock) on the `async fn` that must
//! run alone, configure the process-wide connection once at start-up, and
//! at most one caller across every process and machine runs the body for a
//! given key at a time:
//!
//! ```no_run
//! use lock_runtime::{distributed_lock, LockConfig, LockError};
//!
//! #[distributed_lock(key = "stock:<sku>", ttl = "3s", wait = "2s")]
//! async fn deduct(sku: u64, qty: u32) -> Result<u64, LockError> {
//!     // The held lock: its key, its fencing token, its loss signal.
//!     let lock = lock_runtime::current().expect("inside an annotated body");
//!     // ... read the stock, check it, write it back along with lock.fence() ...
//!     Ok(lock.fence())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), LockError> {
//!     lock_runtime::init(LockConfig::from_env()?).await?; // REDIS_URL
//!     deduct(42, 1).await?;
//!     Ok(())
//! }
//! ```
//!
//! One atomic command takes the lock, only its owner can release it, a
//! watchdog renews it while the body runs, and if it is ever lost the body
//! is told (and by default cancelled) before anyone else can take it. Each
//! grant carries a fencing token, strictly increasing per key, so the
//! stores you write to can turn away a stale owner.
//!
//! # Where to start
//!
//! - [`distributed_lock`]: the attribute and its whole contract (return
//!   type, key rendering, [`current`], nesting, every argument).
//! - [`init`] once at start-up with a [`LockConfig`] (usually
//!   [`LockConfig::from_env`]); or a [`Locker`] of your own, named with
//!   `locker = ..`.
//! - Without the attribute: [`Locker::lock`] gives a [`LockRequest`],
//!   whose `acquire` gives a [`LockGuard`]; several keys at once, all or
//!   none and without deadlock: [`Locker::lock_all`], a [`MultiGuard`]
//!   (`keys = [..]` on the attribute).
//! - Every failure is a [`LockError`].
//! - Tests without Redis: [`LockConfig::in_memory`] and
//!   [`memory::MemoryStore`]; the recipe is in [`guide::testing`].
//!
//! # Deployments
//!
//! The URL picks the deployment; the code does not change:
//!
//! | URL | locks live on | feature |
//! |---|---|---|
//! | `redis://host:port/db` (`rediss://`: TLS) | one server | (`tls`) |
//! | `redis+cluster://host:port,host:port` | a Redis or Valkey Cluster | `cluster` |
//! | `redis+sentinel://host:port,host:port/<master>` | the master Sentinel names | `sentinel` |
//! | `redis+redlock://host:port,host:port,host:port` | a majority of independent masters | |
//! | `memory://` | this process's in-memory store | |
//!
//! Tested on Redis 7.0 (the minimum: a Cluster's release messages use
//! sharded pub/sub) and Valkey 8.1. Each deployment's detail is in
//! [`guide::deployments`].
//!
//! # Features
//!
//! All off by default: `cluster`, `sentinel`, `tls` (rustls with ring),
//! `tls-webpki-roots` (with `tls`, the Mozilla roots compiled in), and
//! `metrics` (through the `metrics` facade; see [`guide::operations`]).
//! A URL that needs a feature the build lacks is a [`LockError::Config`]
//! naming it.
//!
//! # The guide
//!
//! [`guide::how_it_works`], [`guide::guarantees`], [`guide::deployments`],
//! [`guide::operations`], [`guide::testing`], [`guide::chaos`].

mod attribute;
mod backend;
mod config;
mod engine;
mod error;
mod host;
mod keys;
mod locker;
pub mod memory;
mod metrics;
mod owner;
mod primitive;
#[cfg(feature = "sabotage")]
mod sabotage;

/// What `#[distributed_lock]` expands to: the generated code's one door
/// into this crate, not a public API.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use config::LockConfig;
pub use engine::handle::LockHandle;
pub use engine::reentrancy::current;
pub use engine::stats::LockerStats;
pub use error::LockError;
pub use lock_macros::distributed_lock;
pub use locker::Locker;
pub use locker::global::{global, init, init_with};
pub use locker::source::LockerSource;
pub use primitive::exclusive::guard::LockGuard;
pub use primitive::exclusive::inspect::LockInfo;
pub use primitive::exclusive::request::LockRequest;
pub use primitive::fair::guard::FairGuard;
pub use primitive::fair::request::FairLockRequest;
pub use primitive::multi::MULTI_MAX_KEYS;
pub use primitive::multi::guard::MultiGuard;
pub use primitive::multi::request::MultiLockRequest;
pub use primitive::read_write::guard::{ReadGuard, WriteGuard};
pub use primitive::read_write::request::{ReadLockRequest, WriteLockRequest};
pub use primitive::semaphore::SEMAPHORE_MAX_LIMIT;
pub use primitive::semaphore::guard::PermitGuard;
pub use primitive::semaphore::request::SemaphoreRequest;

/// The guide: how the library works, what it guarantees, each deployment,
/// operations, testing, and the chaos suite that checks it. The same pages
/// are the repository's `docs/` folder.
pub mod guide {
    /// [guarantees]: crate::guide::guarantees
    #[doc = include_str!("../guide/how-it-works.md")]
    pub mod how_it_works {}

    /// [how-it-works]: crate::guide::how_it_works
    /// [deployments]: crate::guide::deployments
    /// [chaos]: crate::guide::chaos
    /// [sentinel]: crate::guide::deployments#sentinel
    /// [wait-for-replicas]: crate::guide::deployments#wait-for-replicas
    #[doc = include_str!("../guide/guarantees.md")]
    pub mod guarantees {}

    #[doc = include_str!("../guide/deployments.md")]
    pub mod deployments {}

    /// [how-it-works]: crate::guide::how_it_works
    #[doc = include_str!("../guide/operations.md")]
    pub mod operations {}

    #[doc = include_str!("../guide/testing.md")]
    pub mod testing {}

    /// [guarantees]: crate::guide::guarantees
    #[doc = include_str!("../guide/chaos.md")]
    pub mod chaos {}
}
