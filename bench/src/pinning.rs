//! `--pinned`: the benchmark's servers on a core of their own, the
//! client on the others, as when Redis runs on its own machine.
//!
//! Unpinned, every process competes for every core, as on a small host
//! that runs everything: the numbers then depend on how the scheduler
//! happens to place the client's threads next to the server. Pinned, the
//! client's throughput is bounded by its own CPU work per operation, which
//! is what a service running its locks against a remote Redis pays.
//!
//! Affinity is set with `taskset` (util-linux), on every thread of a
//! process: the client pins itself before it starts a thread, so the
//! threads it starts later (runtimes, the lock library's own) inherit it.

use std::process::Command;

use crate::BenchResult;

/// Which cores the client and the servers run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cores {
    /// The client's cores, as `taskset` reads them (`0` or `0-2`).
    pub client: String,
    /// The servers' core.
    pub server: String,
}

impl Cores {
    /// The last of `cpus` cores for the servers, the others for the
    /// client; fails below two cores.
    pub fn split(cpus: usize) -> BenchResult<Self> {
        let server = cpus
            .checked_sub(1)
            .filter(|&last| last >= 1)
            .ok_or_else(|| format!("--pinned needs at least 2 cores; this machine has {cpus}"))?;
        let client = if server == 1 {
            "0".to_owned()
        } else {
            format!("0-{}", server - 1)
        };
        Ok(Self {
            client,
            server: server.to_string(),
        })
    }

    /// Of this machine.
    pub fn of_this_machine() -> BenchResult<Self> {
        Self::split(std::thread::available_parallelism().map_or(1, usize::from))
    }
}

/// Runs every thread of process `pid` on `cores` from now on.
pub fn pin(pid: u32, cores: &str) -> BenchResult<()> {
    let status = Command::new("taskset")
        .args([
            "--all-tasks",
            "--cpu-list",
            "--pid",
            cores,
            &pid.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|err| {
            format!("--pinned runs `taskset` (util-linux), which failed to start: {err}")
        })?;
    if !status.success() {
        return Err(
            format!("taskset could not pin process {pid} to cores {cores}: {status}").into(),
        );
    }
    Ok(())
}

/// The cores process `pid` may run on, as `taskset` reports them.
pub fn cores_of(pid: u32) -> BenchResult<String> {
    let output = Command::new("taskset")
        .args(["--cpu-list", "--pid", &pid.to_string()])
        .output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.rsplit(':')
        .next()
        .map(|cores| cores.trim().to_owned())
        .filter(|cores| !cores.is_empty())
        .ok_or_else(|| format!("taskset did not report the cores of process {pid}: {text}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_core_serves_and_the_others_run_the_client() {
        assert_eq!(
            Cores::split(2).unwrap(),
            Cores {
                client: "0".into(),
                server: "1".into()
            }
        );
        assert_eq!(
            Cores::split(8).unwrap(),
            Cores {
                client: "0-6".into(),
                server: "7".into()
            }
        );
        assert!(Cores::split(1).is_err());
        assert!(Cores::split(0).is_err());
    }

    #[test]
    fn a_pinned_child_runs_where_it_was_pinned() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let pinned = pin(child.id(), "0").and_then(|()| cores_of(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(pinned.unwrap(), "0");
    }
}
