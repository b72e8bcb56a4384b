//! The progress line on stderr: rewritten in place on a terminal, a plain
//! line every second otherwise (so CI logs stay readable).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often a non-terminal gets a line.
const PLAIN_EVERY: Duration = Duration::from_secs(1);

/// Where the run stands, as read from Redis.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    /// Buyers started (the shared counter; it overshoots the budget by up
    /// to one per task at the end, hence capped by the caller).
    pub buyers: u64,
    /// Units handed out.
    pub sold: u64,
    /// The stock count as stored.
    pub remaining: u64,
}

/// Prints [`Snapshot`]s.
pub struct Progress {
    buyers: u64,
    terminal: bool,
    last_plain: Option<Instant>,
    width: usize,
}

impl Progress {
    /// A progress line for a run of `buyers` buyers.
    pub fn new(buyers: u64) -> Self {
        Self {
            buyers,
            terminal: std::io::stderr().is_terminal(),
            last_plain: None,
            width: 0,
        }
    }

    /// Shows `now`, `elapsed` into the run (on a non-terminal, at most
    /// once a second).
    pub fn show(&mut self, now: Snapshot, elapsed: Duration) {
        let due = self.last_plain.is_none_or(|at| at.elapsed() >= PLAIN_EVERY);
        if self.terminal || due {
            self.print(now, elapsed);
        }
    }

    /// Shows the final state and ends the line, so that what follows
    /// starts on a fresh one.
    pub fn finish(&mut self, last: Option<Snapshot>, elapsed: Duration) {
        if let Some(last) = last {
            self.print(last, elapsed);
        }
        if self.terminal && self.width > 0 {
            eprintln!();
        }
    }

    fn print(&mut self, now: Snapshot, elapsed: Duration) {
        let line = format!(
            "buyers {}/{}  sold {}  stock left {}  {:.1} s",
            now.buyers.min(self.buyers),
            self.buyers,
            now.sold,
            now.remaining,
            elapsed.as_secs_f64()
        );
        let mut stderr = std::io::stderr().lock();
        if self.terminal {
            // Pad over a longer previous line.
            let _ = write!(stderr, "\r{line:<width$}", width = self.width);
            let _ = stderr.flush();
            self.width = line.len();
        } else {
            let _ = writeln!(stderr, "{line}");
            self.last_plain = Some(Instant::now());
        }
    }
}
