//! Shared pieces of the runnable examples in `src/bin/`.
//!
//! - [`Backing`]: where a demo's locks and data live: `REDIS_URL`, else a
//!   throwaway `redis-server` of its own, else the in-memory store.
//! - [`Data`]: a demo's own data, in Redis or in this process.
//! - [`shop`]: an HTTP order service whose handler is a
//!   `#[distributed_lock]` function, and a load driver for it.
//!
//! Each example's command line is a `clap` derive (`--help` lists it).

pub mod backing;
pub mod data;
pub mod shop;

pub use backing::Backing;
pub use data::Data;

/// Compiles every Rust block of the README (its axum service needs this
/// package's dependencies), so the front door never lies.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The same for the other pages outside the guide (whose pages are
/// `lock_runtime::guide`, compiled with the runtime's own documentation).
#[doc = include_str!("../../SECURITY.md")]
#[doc = include_str!("../../bench/README.md")]
#[cfg(doctest)]
pub struct PageDoctests;
