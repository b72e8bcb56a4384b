//! [`Worker`]: the parent's handle on one worker process.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::child;
use crate::tally::Tally;

/// A running worker process. Dropping it kills the process, so a parent
/// that gives up (an error, a timeout) leaves no worker behind; a parent
/// that dies outright closes the worker's stdin, which stops it too.
pub struct Worker {
    index: u64,
    child: Child,
    /// Held open for the worker's whole life: its end of input is the
    /// worker's signal that the parent is gone.
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// What a worker is told to do.
pub struct Assignment<'a> {
    /// The Redis URL.
    pub url: &'a str,
    /// The SKU whose stock is sold.
    pub sku: &'a str,
    /// `lock` or `none`.
    pub mode: &'a str,
    /// Buyers in total, shared by all workers.
    pub buyers: u64,
    /// Buyer tasks in this worker.
    pub tasks: u64,
}

impl Worker {
    /// Starts `exe` (this very program) as worker number `index`.
    pub fn spawn(exe: &Path, index: u64, job: &Assignment<'_>) -> Result<Self, String> {
        let mut child = Command::new(exe)
            .arg("--child")
            .arg(index.to_string())
            .args(["--sku", job.sku, "--mode", job.mode])
            .args(["--buyers", &job.buyers.to_string()])
            .args(["--tasks", &job.tasks.to_string()])
            // Through the environment, not argv: a URL may carry a password,
            // and argv is visible to every user in `ps`.
            .env(child::URL_VAR, job.url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // Its errors go straight to the terminal.
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start worker {index} ({}): {e}", exe.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(format!("worker {index} has no stdin/stdout pipes"));
        };
        Ok(Self {
            index,
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        })
    }

    /// Waits until the worker says it is connected and ready.
    pub async fn ready(&mut self) -> Result<(), String> {
        while let Some(line) = self.next_line().await? {
            if line == child::READY {
                return Ok(());
            }
        }
        Err(self.ended_early("saying it was ready").await)
    }

    /// Tells the worker to start buying.
    pub async fn go(&mut self) -> Result<(), String> {
        let line = format!("{}\n", child::GO);
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("worker {}: cannot send `go`: {e}", self.index))
    }

    /// Waits for the worker's report and its exit.
    pub async fn finish(mut self) -> Result<Tally, String> {
        let mut report = None;
        while let Some(line) = self.next_line().await? {
            if let Some(tally) = Tally::from_line(&line) {
                report = Some(tally);
            }
        }
        // Its stdout is closed: the worker has exited or is about to.
        let status = self
            .child
            .wait()
            .await
            .map_err(|e| format!("worker {}: {e}", self.index))?;
        match report {
            Some(tally) if status.success() => Ok(tally),
            _ => Err(format!(
                "worker {} exited ({status}) without a report",
                self.index
            )),
        }
    }

    async fn next_line(&mut self) -> Result<Option<String>, String> {
        self.stdout
            .next_line()
            .await
            .map_err(|e| format!("worker {}: {e}", self.index))
    }

    /// The error for a worker whose output ended before `what`.
    async fn ended_early(&mut self, what: &str) -> String {
        match self.child.wait().await {
            Ok(status) => format!("worker {} exited ({status}) before {what}", self.index),
            Err(e) => format!("worker {}: {e}", self.index),
        }
    }
}
