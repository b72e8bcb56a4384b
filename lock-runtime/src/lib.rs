//! Distributed locks on Redis for async Rust.
//!
//! One atomic command takes a lock, only its owner can release it, a
//! watchdog renews it while the owner works, and if it is ever lost the
//! owner is told before anyone else can take it. Each acquisition also gets
//! a fencing token, strictly increasing per key, so the stores you write to
//! can turn away a stale owner.
//!
//! ```no_run
//! use lock_runtime::{LockConfig, LockError};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), LockError> {
//! lock_runtime::init(LockConfig::from_url("redis://127.0.0.1/")?).await?;
//!
//! let guard = lock_runtime::global()?
//!     .lock("stock:42")
//!     .ttl(Duration::from_secs(3))
//!     .wait(Duration::from_secs(2))
//!     .acquire()
//!     .await?;
//! // ... the critical section; guard.fence() goes with every write ...
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! The same code runs on one server, a Redis Cluster (feature `cluster`),
//! a master followed through Sentinel (feature `sentinel`) or Redlock over
//! independent masters: the URL picks the deployment (see [`LockConfig`]).
//!
//! Redis layout: one key per lock, `<prefix>{<key>}`, holding the owner
//! token (the fence is not stored: the holder has it) with the lease as
//! its expiry (nothing is left once a lock is released or its lease has
//! passed), and the channel `<prefix>{<key>}:released`, in the same
//! cluster hash slot, where releases are announced. Redlock adds two keys
//! per master shared by every lock: `<prefix>fence-counter` and
//! `<prefix>up-for` (the restart quarantine's mark). See `ARCHITECTURE.md`
//! for the map of the code.

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

/// Compiles every Rust block of the README, so the front door never lies.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
