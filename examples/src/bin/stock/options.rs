//! The command line of the parent process, and the one it gives its
//! children.

use std::time::Duration;

use lock_examples::Flags;

/// Read-then-write with or without the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each purchase is a `#[distributed_lock]` function.
    Lock,
    /// No lock: the race is on.
    None,
}

impl Mode {
    /// Parses `lock` or `none`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "lock" => Ok(Mode::Lock),
            "none" => Ok(Mode::None),
            other => Err(format!("--mode is `lock` or `none`, not `{other}`")),
        }
    }

    /// The name used on the command line and in the result line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Lock => "lock",
            Mode::None => "none",
        }
    }
}

/// What the run looks like.
#[derive(Clone, Debug)]
pub struct Options {
    /// With or without the lock.
    pub mode: Mode,
    /// Units in stock at the start.
    pub stock: u64,
    /// Buyers in total, shared by all processes.
    pub buyers: u64,
    /// Worker processes.
    pub processes: u64,
    /// Concurrent buyer tasks in each process.
    pub tasks: u64,
    /// The whole run must finish within this, or the children are killed.
    pub timeout: Duration,
}

/// Upper bounds that keep a typo from forking a thousand processes.
const MAX_PROCESSES: u64 = 64;
const MAX_TASKS: u64 = 4096;

impl Options {
    /// Parses the parent's command line (without the program name).
    pub fn parse(args: Vec<String>) -> Result<Self, String> {
        let known = ["mode", "stock", "buyers", "processes", "tasks", "timeout"];
        let flags = Flags::parse(args, &known)?;
        let options = Options {
            mode: Mode::parse(flags.text("mode").unwrap_or("lock"))?,
            stock: flags.number("stock", 200)?,
            buyers: flags.number("buyers", 400)?,
            processes: flags.number("processes", 2)?,
            tasks: flags.number("tasks", 8)?,
            timeout: flags.seconds("timeout", Duration::from_secs(120))?,
        };
        if !(1..=MAX_PROCESSES).contains(&options.processes) {
            return Err(format!("--processes must be 1 to {MAX_PROCESSES}"));
        }
        if !(1..=MAX_TASKS).contains(&options.tasks) {
            return Err(format!("--tasks must be 1 to {MAX_TASKS}"));
        }
        if options.timeout.is_zero() {
            return Err("--timeout must be at least 1 second".to_owned());
        }
        Ok(options)
    }
}
