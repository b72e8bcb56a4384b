//! Support library for the `lock-tests` integration tests.
//!
//! The integration tests run against real `redis-server` processes rather
//! than mocks, so that timeouts, crashes and restarts behave exactly as they
//! would in production. This crate provides:
//!
//! - [`RedisServer`]: starts a private `redis-server` on a free loopback port
//!   and can fault it (kill, pause, resume, restart).
//! - [`net`]: helpers for "server unreachable" tests: a port nothing listens
//!   on ([`closed_port`]) and a listener that accepts but never answers
//!   ([`SilentListener`]).
//! - [`FaultProxy`]: a TCP proxy between client and server that adds
//!   latency, blackholes traffic, resets connections, or drops the reply to
//!   one command.
//! - [`Worker`]: a separate OS process that takes locks, for multi-process
//!   tests (and for killing a holder with -9).
//! - [`exclusion`]: the mutual-exclusion check every topology runs.
//! - [`fixtures`]: what the tests share (a test locker, reads of the
//!   server's state, [`fixtures::eventually`]).
//! - [`RedisCluster`]: three servers joined into a Redis Cluster, with
//!   online slot migration.
//! - [`sentinel`]: a master, a replica and three sentinels ([`SentinelSetup`]).
//! - [`tls`]: a private CA made at run time, and servers that speak TLS.
//! - [`conformance`]: the deployments the conformance suite holds every
//!   backend to, one [`conformance::Site`] per test.
//! - [`permits`]: the semaphore's chaos checker (never more than the limit
//!   held at once by holds that were not told of a loss).
//!
//! `redis-server` must be on `PATH` (`apt-get install -y redis-server`).

pub mod chaos;
pub use lock_servers::cluster;
pub mod conformance;
pub mod exclusion;
pub mod fault_proxy;
pub mod fixtures;
pub mod history;
pub mod net;
pub mod permits;
pub use lock_servers::redis_server;
pub mod sentinel;
pub mod starvation;
pub mod tls;
// Raw libc calls; `unsafe` is allowed here rather than crate-wide.
#[allow(unsafe_code)]
mod sys;
pub mod worker;

pub use fault_proxy::FaultProxy;
pub use lock_servers::RedisCluster;
pub use lock_servers::RedisServer;
pub use net::{SilentListener, closed_port};
pub use sentinel::SentinelSetup;
pub use worker::Worker;

/// CPU time this process has used so far (all threads), to tell a busy
/// loop from a sleeping task.
pub fn process_cpu_time() -> std::time::Duration {
    sys::process_cpu_time()
}

/// Nanoseconds on the machine-wide monotonic clock (CLOCK_MONOTONIC), so
/// that times recorded by different test processes can be compared.
pub fn monotonic_ns() -> u64 {
    sys::monotonic_ns()
}
