//! What a worker records about its critical sections: one [`Event`] per line
//! of text, appended as it happens, and a worker's whole file as a
//! [`WorkerHistory`].
//!
//! Each line is written on its own, so a worker killed with -9 can tear at
//! most the line it was writing: the last one. A line is only trusted once
//! its newline is there, because a line cut inside its final number would
//! still parse, to a wrong instant.

use std::fmt;

/// What the section does when it is told of its loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The body is cancelled by the library when the lock is lost.
    Cancel,
    /// The body ignores the signal and runs on (a badly behaved holder).
    Continue,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Cancel => "cancel",
            Mode::Continue => "continue",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "cancel" => Some(Mode::Cancel),
            "continue" => Some(Mode::Continue),
            _ => None,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a locked call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call returned the body's result.
    Ok,
    /// The call reported the lock lost.
    Lost,
    /// The call timed out (e.g. acquiring).
    Timeout,
    /// The call failed otherwise.
    Error,
    /// The worker was killed before the call returned. Never recorded by a
    /// worker (a killed process records nothing): the checker assigns it.
    Killed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Lost => "lost",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
            Outcome::Killed => "killed",
        }
    }

    /// The outcomes an `end` line may carry (`killed` is not one).
    fn parse_recorded(text: &str) -> Option<Self> {
        match text {
            "ok" => Some(Outcome::Ok),
            "lost" => Some(Outcome::Lost),
            "timeout" => Some(Outcome::Timeout),
            "error" => Some(Outcome::Error),
            _ => None,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing a worker did or observed, at instant `t` (ns of
/// CLOCK_MONOTONIC). `sid` names the section (`<worker>.<seq>`, unique in a
/// run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `invoke <sid> <key> <mode> <t>`: about to call the locked function.
    Invoke {
        /// The section.
        sid: String,
        /// The resource it locks.
        key: String,
        /// What its body does when told of a loss.
        mode: Mode,
        /// When.
        t: u64,
    },
    /// `begin <sid> <fence> <t>`: first statement of the critical section.
    Begin {
        /// The section.
        sid: String,
        /// The fencing token the library handed it.
        fence: u64,
        /// When.
        t: u64,
    },
    /// `arrived <sid> <arrival> <t>`: a fair lock was granted to the
    /// section after it waited in line, which the server first saw at
    /// `arrival` (µs on the server's clock); recorded before `begin`.
    Arrived {
        /// The section.
        sid: String,
        /// When the server first saw it wait (µs).
        arrival: u64,
        /// When.
        t: u64,
    },
    /// `write <sid> <n> <t>`: about to send fenced write number `n` (1, 2, ...).
    Write {
        /// The section.
        sid: String,
        /// The write's number within the section.
        n: u32,
        /// When.
        t: u64,
    },
    /// `done <sid> <t>`: last statement of the body.
    Done {
        /// The section.
        sid: String,
        /// When.
        t: u64,
    },
    /// `told <sid> <t>`: a watcher saw the library's loss signal complete.
    Told {
        /// The section.
        sid: String,
        /// When.
        t: u64,
    },
    /// `end <sid> <outcome> <t>`: the locked call returned.
    End {
        /// The section.
        sid: String,
        /// What it returned (never [`Outcome::Killed`]).
        outcome: Outcome,
        /// When.
        t: u64,
    },
}

impl Event {
    /// The section the event belongs to.
    pub fn sid(&self) -> &str {
        match self {
            Event::Invoke { sid, .. }
            | Event::Begin { sid, .. }
            | Event::Arrived { sid, .. }
            | Event::Write { sid, .. }
            | Event::Done { sid, .. }
            | Event::Told { sid, .. }
            | Event::End { sid, .. } => sid,
        }
    }

    /// When it happened.
    pub fn t(&self) -> u64 {
        match self {
            Event::Invoke { t, .. }
            | Event::Begin { t, .. }
            | Event::Arrived { t, .. }
            | Event::Write { t, .. }
            | Event::Done { t, .. }
            | Event::Told { t, .. }
            | Event::End { t, .. } => *t,
        }
    }

    /// Parses one line written with `Display` (without its newline); None
    /// for a torn or foreign line.
    pub fn parse(line: &str) -> Option<Self> {
        // Exactly one space between fields: anything else was not written
        // by `Display`.
        let fields: Vec<&str> = line.split(' ').collect();
        let event = match fields.as_slice() {
            ["invoke", sid, key, mode, t] => Event::Invoke {
                sid: name(sid)?,
                key: name(key)?,
                mode: Mode::parse(mode)?,
                t: number(t)?,
            },
            ["begin", sid, fence, t] => Event::Begin {
                sid: name(sid)?,
                fence: number(fence)?,
                t: number(t)?,
            },
            ["arrived", sid, arrival, t] => Event::Arrived {
                sid: name(sid)?,
                arrival: number(arrival)?,
                t: number(t)?,
            },
            ["write", sid, n, t] => Event::Write {
                sid: name(sid)?,
                n: number(n)?,
                t: number(t)?,
            },
            ["done", sid, t] => Event::Done {
                sid: name(sid)?,
                t: number(t)?,
            },
            ["told", sid, t] => Event::Told {
                sid: name(sid)?,
                t: number(t)?,
            },
            ["end", sid, outcome, t] => Event::End {
                sid: name(sid)?,
                outcome: Outcome::parse_recorded(outcome)?,
                t: number(t)?,
            },
            _ => return None,
        };
        Some(event)
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Invoke { sid, key, mode, t } => write!(f, "invoke {sid} {key} {mode} {t}"),
            Event::Begin { sid, fence, t } => write!(f, "begin {sid} {fence} {t}"),
            Event::Arrived { sid, arrival, t } => write!(f, "arrived {sid} {arrival} {t}"),
            Event::Write { sid, n, t } => write!(f, "write {sid} {n} {t}"),
            Event::Done { sid, t } => write!(f, "done {sid} {t}"),
            Event::Told { sid, t } => write!(f, "told {sid} {t}"),
            Event::End { sid, outcome, t } => write!(f, "end {sid} {outcome} {t}"),
        }
    }
}

/// A non-empty name field (the split already excludes spaces).
pub(super) fn name(field: &str) -> Option<String> {
    (!field.is_empty()).then(|| field.to_owned())
}

/// A decimal number of plain digits, as `Display` writes it (`str::parse`
/// alone would also take a leading `+`).
pub(super) fn number<T: std::str::FromStr>(field: &str) -> Option<T> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    field.parse().ok()
}

/// One worker's recorded events, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerHistory {
    /// The worker's id, as the driver's faults name it (e.g. `w3`).
    pub worker: String,
    /// Every line that parsed, in file order.
    pub events: Vec<Event>,
    /// Lines that did not parse (or lacked their newline).
    pub torn_lines: usize,
    /// Whether the last non-empty line was one of them: the only place a
    /// kill may tear.
    pub last_line_torn: bool,
}

impl WorkerHistory {
    /// Parses a worker's whole file. Empty lines are skipped; a line that
    /// does not parse, or a last line without its newline, counts in
    /// `torn_lines` (the checker decides whether that is allowed).
    pub fn parse(worker: &str, text: &str) -> Self {
        let mut history = WorkerHistory {
            worker: worker.to_owned(),
            ..WorkerHistory::default()
        };
        let mut lines = text.split('\n').peekable();
        while let Some(line) = lines.next() {
            // The piece after the last newline is empty in a complete file.
            let terminated = lines.peek().is_some();
            if line.is_empty() {
                continue;
            }
            match Event::parse(line).filter(|_| terminated) {
                Some(event) => {
                    history.events.push(event);
                    history.last_line_torn = false;
                }
                None => {
                    history.torn_lines += 1;
                    history.last_line_torn = true;
                }
            }
        }
        history
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kinds() -> Vec<Event> {
        vec![
            Event::Invoke {
                sid: "w3.17".into(),
                key: "r0".into(),
                mode: Mode::Cancel,
                t: 1_000,
            },
            Event::Invoke {
                sid: "w3.18".into(),
                key: "r1".into(),
                mode: Mode::Continue,
                t: 1_001,
            },
            Event::Begin {
                sid: "w3.17".into(),
                fence: 1_752_000_000_123_456,
                t: 18_446_744_073_709_551_615,
            },
            Event::Write {
                sid: "w3.17".into(),
                n: 2,
                t: 1_003,
            },
            Event::Done {
                sid: "w3.17".into(),
                t: 1_004,
            },
            Event::Told {
                sid: "w3.17".into(),
                t: 1_005,
            },
            Event::End {
                sid: "w3.17".into(),
                outcome: Outcome::Ok,
                t: 1_006,
            },
            Event::End {
                sid: "w3.18".into(),
                outcome: Outcome::Lost,
                t: 1_007,
            },
            Event::End {
                sid: "w3.19".into(),
                outcome: Outcome::Timeout,
                t: 1_008,
            },
            Event::End {
                sid: "w3.20".into(),
                outcome: Outcome::Error,
                t: 1_009,
            },
            Event::Arrived {
                sid: "w3.21".into(),
                arrival: 1_752_000_000_123_000,
                t: 1_010,
            },
        ]
    }

    #[test]
    fn events_round_trip_through_text() {
        for event in all_kinds() {
            let line = event.to_string();
            assert_eq!(Event::parse(&line), Some(event), "{line}");
        }
    }

    #[test]
    fn the_text_is_exactly_the_documented_format() {
        let lines: Vec<String> = all_kinds().iter().map(ToString::to_string).collect();
        assert_eq!(lines[0], "invoke w3.17 r0 cancel 1000");
        assert_eq!(lines[1], "invoke w3.18 r1 continue 1001");
        assert_eq!(
            lines[2],
            "begin w3.17 1752000000123456 18446744073709551615"
        );
        assert_eq!(lines[3], "write w3.17 2 1003");
        assert_eq!(lines[4], "done w3.17 1004");
        assert_eq!(lines[5], "told w3.17 1005");
        assert_eq!(lines[6], "end w3.17 ok 1006");
        assert_eq!(lines[9], "end w3.20 error 1009");
        assert_eq!(lines[10], "arrived w3.21 1752000000123000 1010");
    }

    #[test]
    fn parse_rejects_torn_and_foreign_lines() {
        for line in [
            "",
            "invoke w3.17 r0 cancel",
            "invoke w3.17 r0 cancel ",
            "invoke w3.17 r0 cance",
            "invoke w3.17 r0 pause 1000",
            "begin w3.17 17",
            "begin w3.17 +17 1000",
            "begin w3.17 1.7e15 1000",
            "begin  w3.17 17 1000",
            "write w3.17 2 1003 9",
            "write w3.17 99999999999 1003",
            "done w3.17",
            "told",
            "end w3.17 killed 1006",
            "end w3.17 ok",
            "end w3.17 ok 10x",
            "finish w3.17 1006",
            "begin w3.17 18446744073709551616 1000",
            "arrived w3.17 1000",
            "arrived w3.17 -5 1000",
        ] {
            assert_eq!(Event::parse(line), None, "{line:?}");
        }
    }

    #[test]
    fn a_history_counts_its_torn_lines() {
        let text = "invoke w1.1 r0 cancel 10\n\nbegin w1.1 5 11\nbegin w1.1 5\ndone w1.1 12\n";
        let history = WorkerHistory::parse("w1", text);
        assert_eq!(history.worker, "w1");
        assert_eq!(history.events.len(), 3);
        assert_eq!(history.torn_lines, 1);
        assert!(!history.last_line_torn);

        // Killed mid-line: the last line lacks its newline, even if what is
        // left of it would parse (its instant would be cut short).
        let history = WorkerHistory::parse("w1", "invoke w1.1 r0 cancel 10\nbegin w1.1 5 11");
        assert_eq!(history.events.len(), 1);
        assert_eq!(history.torn_lines, 1);
        assert!(history.last_line_torn);

        let history = WorkerHistory::parse("w1", "");
        assert_eq!((history.events.len(), history.torn_lines), (0, 0));
    }
}
