//! [`Meter`]: what a stretch of a run cost, on the server and in this
//! process, so that throughput differences can be traced to one side.

use std::time::{Duration, Instant};

use crate::server::{Admin, ServerCounters};
use crate::{BenchResult, RunResult, cpu};

/// Counters at the start of a measured stretch.
#[derive(Debug)]
pub struct Meter {
    server: ServerCounters,
    client_cpu: Option<Duration>,
    started: Instant,
}

/// What the stretch cost.
#[derive(Clone, Copy, Debug)]
pub struct Cost {
    /// Length of the stretch.
    pub elapsed: Duration,
    /// Commands the server ran (including those inside scripts).
    pub redis_commands: u64,
    /// Scripts (`EVALSHA`/`EVAL`) the server ran.
    pub redis_scripts: u64,
    /// Server CPU seconds.
    pub redis_cpu_s: f64,
    /// CPU seconds of this process (every thread, the benchmark's own
    /// bookkeeping included); NaN where unknown.
    pub client_cpu_s: f64,
}

impl Meter {
    /// Starts measuring.
    pub async fn start(admin: &Admin) -> BenchResult<Self> {
        Ok(Self {
            server: admin.counters().await?,
            client_cpu: cpu::process_time(),
            started: Instant::now(),
        })
    }

    /// Stops measuring.
    pub async fn stop(self, admin: &Admin) -> BenchResult<Cost> {
        let elapsed = self.started.elapsed();
        let client_cpu_s = match (self.client_cpu, cpu::process_time()) {
            (Some(before), Some(after)) => after.saturating_sub(before).as_secs_f64(),
            _ => f64::NAN,
        };
        let server = admin.counters().await?;
        Ok(Cost {
            elapsed,
            redis_commands: server.commands.saturating_sub(self.server.commands),
            redis_scripts: server.scripts.saturating_sub(self.server.scripts),
            redis_cpu_s: server.cpu_s - self.server.cpu_s,
            client_cpu_s,
        })
    }
}

impl Cost {
    /// Adds the per-operation costs of `ops` operations to `result`:
    /// server and client CPU µs per op, server commands per op.
    pub fn per_op(&self, ops: f64, result: RunResult) -> RunResult {
        result
            .with("redis_cpu_us_per_op", self.redis_cpu_s * 1e6 / ops)
            .with("client_cpu_us_per_op", self.client_cpu_s * 1e6 / ops)
            .with("redis_cmds_per_op", self.redis_commands as f64 / ops)
    }
}
