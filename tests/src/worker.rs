//! Worker processes for multi-process tests: each is a separate OS process
//! with its own `Locker`, like another instance of a service.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// A running worker process; killed (and reaped) on drop.
pub struct Worker {
    child: Option<Child>,
    /// Its standard input, for a worker that takes commands there.
    commands: Option<ChildStdin>,
    /// Lines the worker printed, read by a thread as they come.
    lines: Receiver<String>,
}

impl Worker {
    /// Starts `exe` (a test binary's path, e.g. `env!("CARGO_BIN_EXE_lock_worker")`)
    /// with `args`, its stdout piped so the test can read what it reports.
    pub fn spawn(exe: &str, args: &[&str]) -> Self {
        Self::spawn_with_env(exe, args, &[])
    }

    /// [`Worker::spawn`] with environment variables set for the worker.
    pub fn spawn_with_env(exe: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start(exe, args, env, false)
    }

    /// [`Worker::spawn`] for a worker that reads commands, one per line,
    /// from its standard input ([`Worker::tell`]).
    pub fn spawn_commanded(exe: &str, args: &[&str]) -> Self {
        Self::start(exe, args, &[], true)
    }

    /// Sends `line` to the worker's standard input.
    ///
    /// # Panics
    ///
    /// If the worker was not spawned to take commands, or it exited.
    pub fn tell(&mut self, line: &str) {
        let commands = self
            .commands
            .as_mut()
            .expect("a worker spawned to take commands");
        writeln!(commands, "{line}")
            .and_then(|()| commands.flush())
            .unwrap_or_else(|err| panic!("cannot tell the worker `{line}`: {err}"));
    }

    /// Closes the worker's standard input: a worker that takes commands
    /// finishes what they started, then exits.
    pub fn end_commands(&mut self) {
        self.commands = None;
    }

    fn start(exe: &str, args: &[&str], env: &[(&str, &str)], commanded: bool) -> Self {
        let mut command = Command::new(exe);
        command
            .args(args)
            .envs(env.iter().copied())
            .stdin(if commanded {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Die with the test process, even if it is killed.
        lock_servers::process::kill_with_parent(&mut command);
        let mut child = command
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start worker {exe}: {err}"));
        let commands = child.stdin.take();
        let (sender, lines) = std::sync::mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if sender.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        Self {
            child: Some(child),
            commands,
            lines,
        }
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Waits for the next stdout line that starts with `prefix` and returns
    /// it; panics (after killing the worker) if none comes within `limit`.
    pub fn expect_line(&mut self, prefix: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(_) => {
                    let output = self.kill_and_collect();
                    panic!(
                        "worker printed no `{prefix}` line within {limit:?}; stderr:\n{}",
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
            }
        }
    }

    /// Waits up to `limit` for the next stdout line that starts with
    /// `prefix`; None when none came (the worker is left running).
    pub fn line_within(&mut self, prefix: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
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

    /// SIGSTOP: the whole process freezes, as in a long GC pause or swap.
    pub fn pause(&self) {
        if let Err(err) = lock_servers::process::send_signal(self.pid(), libc::SIGSTOP) {
            panic!("cannot SIGSTOP worker {}: {err}", self.pid());
        }
    }

    /// SIGCONT after [`Self::pause`].
    pub fn resume(&self) {
        if let Err(err) = lock_servers::process::send_signal(self.pid(), libc::SIGCONT) {
            panic!("cannot SIGCONT worker {}: {err}", self.pid());
        }
    }

    /// Whether the process is still running (not exited, not killed).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
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
