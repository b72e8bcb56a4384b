//! [`Admin`]: the benchmark's own connections to the servers of a setup:
//! flushing between runs, and what `INFO` says about commands and CPU
//! (summed over the servers).

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::{BenchResult, Samples};

/// A Redlock master's up mark under the default key prefix.
const UP_MARK: &str = "lock:up-for";

/// A new server marked as a Redlock master past its restart quarantine,
/// as a long-running one is: a benchmark measures steady state, not the
/// uptime check a new master's first grants pay for.
pub fn settled_master() -> lock_servers::RedisServer {
    let master = lock_servers::RedisServer::start();
    master.cmd(&["SET", UP_MARK, &u64::MAX.to_string()]);
    master
}

/// Administrative connections, one per server, separate from every
/// contender's.
#[derive(Clone)]
pub struct Admin {
    conns: Vec<MultiplexedConnection>,
}

/// Counters read from the servers at one moment, summed.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerCounters {
    /// Calls of every command (including those run inside scripts).
    pub commands: u64,
    /// `EVALSHA` and `EVAL` calls.
    pub scripts: u64,
    /// `SET` calls (inside scripts too, and a hand-written `SET NX PX`).
    pub sets: u64,
    /// `DEL` calls (inside scripts too: a release that deleted).
    pub dels: u64,
    /// `EXEC` calls (transactions committed or aborted).
    pub execs: u64,
    /// The server's user plus system CPU time, in seconds.
    pub cpu_s: f64,
}

impl Admin {
    /// Connects to the server at `url`.
    pub async fn connect(url: &str) -> BenchResult<Self> {
        Self::connect_all(&[url.to_owned()]).await
    }

    /// Connects to every server of `urls` (at least one).
    pub async fn connect_all(urls: &[String]) -> BenchResult<Self> {
        if urls.is_empty() {
            return Err("admin: no server to connect to".into());
        }
        let mut conns = Vec::with_capacity(urls.len());
        for url in urls {
            let client = redis::Client::open(url.as_str())?;
            conns.push(client.get_multiplexed_async_connection().await?);
        }
        Ok(Self { conns })
    }

    /// Deletes every key on every server, so each run starts empty, but for
    /// a Redlock master's up mark (`lock:up-for`): a running deployment
    /// keeps it, and without it every run would pay the uptime check of a
    /// master that just started.
    pub async fn flush(&self) -> BenchResult<()> {
        for conn in &self.conns {
            let mut conn = conn.clone();
            let mark: Option<String> = redis::cmd("GET")
                .arg(UP_MARK)
                .query_async(&mut conn)
                .await?;
            redis::cmd("FLUSHALL").query_async::<()>(&mut conn).await?;
            if let Some(mark) = mark {
                redis::cmd("SET")
                    .arg(UP_MARK)
                    .arg(mark)
                    .query_async::<()>(&mut conn)
                    .await?;
            }
        }
        Ok(())
    }

    /// Deletes every key on every node of a Redis Cluster (each node
    /// holds only its own slots' keys, so every primary is flushed): a
    /// cluster has no Redlock up mark to keep, and a `GET` of it would be
    /// redirected by every node but one.
    pub async fn flush_cluster(&self) -> BenchResult<()> {
        for conn in &self.conns {
            let mut conn = conn.clone();
            redis::cmd("FLUSHALL").query_async::<()>(&mut conn).await?;
        }
        Ok(())
    }

    /// The first server's `redis_version`.
    pub async fn version(&self) -> BenchResult<String> {
        let info = self.info("server").await?;
        Ok(field(&info, "redis_version")
            .unwrap_or("unknown")
            .to_owned())
    }

    /// Command and CPU counters now, summed over the servers.
    pub async fn counters(&self) -> BenchResult<ServerCounters> {
        let mut total = ServerCounters::default();
        for index in 0..self.conns.len() {
            let counters = self.server_counters(index).await?;
            total.commands += counters.commands;
            total.scripts += counters.scripts;
            total.sets += counters.sets;
            total.dels += counters.dels;
            total.execs += counters.execs;
            total.cpu_s += counters.cpu_s;
        }
        Ok(total)
    }

    /// Command and CPU counters of the server at `index`.
    async fn server_counters(&self, index: usize) -> BenchResult<ServerCounters> {
        let commands = self.server_info(index, "commandstats").await?;
        let cpu = self.server_info(index, "cpu").await?;
        let mut counters = ServerCounters::default();
        for line in commands.lines() {
            let Some((name, stats)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let calls = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            counters.commands += calls;
            match name {
                "evalsha" | "eval" => counters.scripts += calls,
                "set" => counters.sets += calls,
                "del" => counters.dels += calls,
                "exec" => counters.execs += calls,
                _ => {}
            }
        }
        let seconds = |name| {
            field(&cpu, name)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        counters.cpu_s = seconds("used_cpu_user") + seconds("used_cpu_sys");
        Ok(counters)
    }

    /// Median round trip of `pings` sequential `PING`s on a multiplexed
    /// connection to the first server, in microseconds, each sent after `idle` of doing
    /// nothing (zero: back to back), within `limit` in all.
    ///
    /// Back to back, this is the warm loopback round trip. After an idle
    /// pause it includes waking the idle CPUs of both processes, which on
    /// a virtual machine costs far more than the round trip itself: the
    /// fair unit for a handoff, which also starts after the holder idled.
    pub async fn round_trip_us(
        &self,
        pings: usize,
        idle: Duration,
        limit: Duration,
    ) -> BenchResult<f64> {
        let mut conn = self.conns[0].clone();
        let mut samples = Samples::default();
        let started = Instant::now();
        for _ in 0..pings {
            if !idle.is_zero() {
                tokio::time::sleep(idle).await;
            }
            let sent = Instant::now();
            redis::cmd("PING").query_async::<String>(&mut conn).await?;
            samples.push(sent.elapsed());
            if started.elapsed() > limit {
                break;
            }
        }
        Ok(samples.quantile_us(0.5))
    }

    async fn info(&self, section: &str) -> BenchResult<String> {
        self.server_info(0, section).await
    }

    async fn server_info(&self, index: usize, section: &str) -> BenchResult<String> {
        let mut conn = self.conns[index].clone();
        Ok(redis::cmd("INFO")
            .arg(section)
            .query_async(&mut conn)
            .await?)
    }
}

/// The value of `name:value` in an `INFO` reply.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_info_fields() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n";
        assert_eq!(field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(field(info, "redis_git"), None);
    }
}
