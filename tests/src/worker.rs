//! Worker processes for multi-process tests: each is a separate OS process
//! with its own `Locker`, like another instance of a service.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running worker process; killed (and reaped) on drop.
pub struct Worker {
    child: Option<Child>,
}

impl Worker {
    /// Starts `exe` (a test binary's path, e.g. `env!("CARGO_BIN_EXE_lock_worker")`)
    /// with `args`, its stdout piped so the test can read what it reports.
    pub fn spawn(exe: &str, args: &[&str]) -> Self {
        let mut command = Command::new(exe);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Die with the test process, even if it is killed.
        crate::sys::kill_with_parent(&mut command);
        let child = command
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start worker {exe}: {err}"));
        Self { child: Some(child) }
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Reads stdout lines until one starts with `prefix` and returns it;
    /// panics (after killing the worker) if none comes within `limit`.
    pub fn expect_line(&mut self, prefix: &str, limit: Duration) -> String {
        let Some(stdout) = self.child.as_mut().and_then(|c| c.stdout.take()) else {
            panic!("worker stdout already consumed");
        };
        let (sender, receiver) = std::sync::mpsc::channel();
        let wanted = prefix.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with(&wanted) {
                    let _ = sender.send(line);
                    return;
                }
            }
        });
        match receiver.recv_timeout(limit) {
            Ok(line) => line,
            Err(_) => {
                let output = self.kill_and_collect();
                panic!(
                    "worker printed no `{prefix}` line within {limit:?}; stderr:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
    }

    /// Waits for the worker to exit within `limit` and returns its output;
    /// panics (after killing it) if it runs longer.
    pub fn finish(mut self, limit: Duration) -> Output {
        let deadline = Instant::now() + limit;
        loop {
            let child = self.child.as_mut().expect("worker already finished");
            if child.try_wait().ok().flatten().is_some() {
                let child = self.child.take().expect("checked above");
                return child.wait_with_output().expect("collect worker output");
            }
            if Instant::now() >= deadline {
                let output = self.kill_and_collect();
                panic!(
                    "worker still running after {limit:?}; stderr:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// kill -9, as a crash or an OOM kill would.
    pub fn kill9(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn kill_and_collect(&mut self) -> Output {
        let mut child = self.child.take().expect("worker already finished");
        let _ = child.kill();
        child.wait_with_output().expect("collect worker output")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
