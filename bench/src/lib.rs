//! Benchmarks of lock-runtime against hand-written redis-rs code ("raw")
//! and the peer crate rslock, on a private `redis-server`, and of
//! lock-runtime against rslock on three private Redlock masters.
//!
//! The benchmark binary (`benches/locks`, run with `cargo bench -p lock-bench`)
//! starts the servers, runs every [scenario](scenarios) of every
//! [setup] for every [`Contender`], interleaved and repeated, then
//! prints a table and writes `target/bench/results.json` and
//! `target/bench/chart.svg`. Two more binaries measure the flash sale
//! ([`hot_key`], `benches/hot_key`) and the client's instructions per
//! pair ([`client_cost`], `benches/client_cost`), and with the `cluster`
//! feature `benches/cluster` measures the multi-key lock on a Redis
//! Cluster ([`slots`] names its keys by slot). This library holds
//! everything but the rslock adapter, which needs rslock, a
//! dev-dependency.

pub mod chart;
pub mod client_cost;
pub mod contender;
pub mod cpu;
pub mod fair;
pub mod gaps;
pub mod hot_key;
pub mod meter;
pub mod multi;
pub mod pinning;
pub mod plan;
pub mod project;
pub mod ratios;
pub mod raw;
pub mod read_write;
pub mod report;
pub mod results;
pub mod samples;
pub mod scenarios;
pub mod semaphore;
pub mod server;
pub mod setup;
pub mod slots;
pub mod summary;
pub mod targets;

pub use contender::{Acquired, BenchError, BenchResult, Contender};
pub use plan::Plan;
pub use results::Results;
pub use samples::Samples;
pub use summary::{RunResult, Stat, Summary};

/// `target/bench` under the workspace root, whatever `CARGO_TARGET_DIR`
/// is: where every benchmark writes its tables, JSON and charts.
pub fn output_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("bench")
}
