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

mod acquire;
mod at_exit;
mod attribute;
mod backend;
mod background;
mod clock;
mod config;
mod core;
mod error;
mod forks;
mod global;
mod guard;
mod handle;
mod handover;
mod hash_tag;
mod host;
mod inspect;
mod keys;
mod lease;
mod locker;
mod locker_source;
mod lost;
pub mod memory;
mod primitive;
mod reentrancy;
mod request;
mod retry;
#[cfg(feature = "sabotage")]
mod sabotage;
mod stats;
mod telemetry;
mod token;
mod validity;
mod wait;
mod watchdog;

/// What `#[distributed_lock]` expands to: the generated code's one door
/// into this crate, not a public API.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use config::LockConfig;
pub use error::LockError;
pub use global::{global, init, init_with};
pub use guard::LockGuard;
pub use handle::LockHandle;
pub use inspect::LockInfo;
pub use lock_macros::distributed_lock;
pub use locker::Locker;
pub use locker_source::LockerSource;
pub use reentrancy::current;
pub use request::LockRequest;
pub use stats::LockerStats;

/// Compiles every Rust block of the README, so the front door never lies.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
