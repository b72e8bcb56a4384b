//! Real `redis-server` processes for the tests and the benchmark:
//! [`RedisServer`] starts a private one on a free loopback port and can
//! fault it (kill, pause, resume, restart); [`process`] holds the raw
//! process calls it needs, for the test workers too. [`RedisCluster`]
//! joins three of them into a Redis Cluster (with online slot migration),
//! and [`urls`] names several servers in one URL for the lock library.
//!
//! A crate of its own, apart from `lock-tests`, so that the benchmark
//! builds `lock-runtime` as users do: with its default features, not the
//! tests' `sabotage` and `metrics`.
//!
//! `redis-server` must be on `PATH` (`apt-get install -y redis-server`).

// Raw libc calls; `unsafe` is allowed here rather than crate-wide.
pub mod cluster;
#[allow(unsafe_code)]
pub mod process;
pub mod redis_server;
pub mod urls;

pub use cluster::RedisCluster;
pub use redis_server::RedisServer;
