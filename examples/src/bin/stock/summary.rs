//! [`Summary`]: the table at the end, and the verdict.

use std::fmt;
use std::time::Duration;

use crate::options::{Cli, Mode};
use crate::tally::Tally;

/// The outcome of a whole run.
pub struct Summary {
    /// What was asked for.
    pub options: Cli,
    /// All workers' tallies added up.
    pub tally: Tally,
    /// The stock count left in Redis.
    pub remaining: u64,
    /// From `go` to the last worker's report.
    pub elapsed: Duration,
}

impl Summary {
    /// Units sold beyond the stock there was.
    pub fn oversold(&self) -> u64 {
        self.tally.sold.saturating_sub(self.options.stock)
    }

    /// Sales the stock count never saw: two buyers read 7 and both wrote
    /// 6, so the count dropped by one for two sales.
    pub fn lost_writes(&self) -> u64 {
        let recorded = self.options.stock.saturating_sub(self.remaining);
        self.tally.sold.saturating_sub(recorded)
    }

    /// The lock's promise: nothing oversold, every sale counted.
    pub fn is_correct(&self) -> bool {
        self.oversold() == 0 && self.tally.sold + self.remaining == self.options.stock
    }

    fn per_second(&self) -> u64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            // Display only: a rounded rate is what a reader wants.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let rate = (self.tally.sold as f64 / secs).round() as u64;
            rate
        } else {
            0
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        let t = &self.tally;
        let mode = match o.mode {
            Mode::Lock => "with #[distributed_lock]",
            Mode::None => "no lock",
        };
        writeln!(
            f,
            "stock deduction, {mode}: {} processes x {} tasks",
            o.processes, o.tasks
        )?;
        let mut rows = vec![
            ("stock", o.stock.to_string()),
            ("buyers", o.buyers.to_string()),
            ("sold", t.sold.to_string()),
            ("sold out", t.sold_out.to_string()),
            ("remaining", self.remaining.to_string()),
            ("oversold", self.oversold().to_string()),
            ("lost writes", self.lost_writes().to_string()),
            ("lock waits", t.waits.to_string()),
        ];
        // Rare outcomes, shown only when they happened.
        if t.busy > 0 {
            rows.push(("gave up (busy)", t.busy.to_string()));
        }
        if t.lost > 0 {
            rows.push(("lock lost", t.lost.to_string()));
        }
        rows.push(("elapsed", format!("{} ms", self.elapsed.as_millis())));
        rows.push(("deductions/s", self.per_second().to_string()));
        for (name, value) in rows {
            writeln!(f, "  {name:<16}{value:>10}")?;
        }
        writeln!(
            f,
            "result: mode={} sold={} remaining={} oversold={}",
            o.mode.name(),
            t.sold,
            self.remaining,
            self.oversold()
        )
    }
}
