//! Shared pieces of the runnable examples in `src/bin/`.
//!
//! - [`DemoRedis`]: the Redis a demo talks to (found, or started for it).
//! - [`Flags`]: the examples' `--name value` command lines.
//! - [`shop`]: an HTTP order service whose handler is a
//!   `#[distributed_lock]` function, and a load driver for it.

pub mod demo_redis;
pub mod flags;
pub mod shop;

pub use demo_redis::{DemoRedis, data_connection, forget_demo_lock};
pub use flags::Flags;
