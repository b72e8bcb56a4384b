//! The faults the test driver injected, as it recorded them: one [`Fault`]
//! per line, instants in ns of CLOCK_MONOTONIC.
//!
//! The checker uses them to excuse what a fault explains (a frozen holder
//! cannot be told while frozen, a killed worker ends no section and may tear
//! its last line) and to count which faults actually hit a section.

use std::fmt;

use super::event::{name, number};

/// What was done to a server (informative: the rules do not depend on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerFault {
    /// SIGSTOP then SIGCONT.
    Freeze,
    /// Stopped and started again.
    Restart,
    /// A replica was promoted.
    Failover,
    /// Slots moved between cluster nodes.
    Migrate,
    /// kill -9 (and not started again within the fault).
    Kill,
}

impl ServerFault {
    fn as_str(self) -> &'static str {
        match self {
            ServerFault::Freeze => "freeze",
            ServerFault::Restart => "restart",
            ServerFault::Failover => "failover",
            ServerFault::Migrate => "migrate",
            ServerFault::Kill => "kill",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "freeze" => Some(ServerFault::Freeze),
            "restart" => Some(ServerFault::Restart),
            "failover" => Some(ServerFault::Failover),
            "migrate" => Some(ServerFault::Migrate),
            "kill" => Some(ServerFault::Kill),
            _ => None,
        }
    }
}

impl fmt::Display for ServerFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fault the driver injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `freeze <worker> <start> <end>`: the worker was SIGSTOPped at `start`
    /// and SIGCONTed at `end`.
    Freeze {
        /// The worker.
        worker: String,
        /// SIGSTOP.
        start: u64,
        /// SIGCONT.
        end: u64,
    },
    /// `kill <worker> <t>`: kill -9; the process is gone after `t`.
    Kill {
        /// The worker.
        worker: String,
        /// When.
        t: u64,
    },
    /// `cut <worker> <start> <end>`: the worker's path to the lock service
    /// was blackholed in `[start, end)`.
    Cut {
        /// The worker.
        worker: String,
        /// Traffic stopped.
        start: u64,
        /// Traffic flowed again.
        end: u64,
    },
    /// `dropped_reply <worker> <t>`: the fault proxy dropped one reply to
    /// the worker at about `t`.
    DroppedReply {
        /// The worker.
        worker: String,
        /// About when.
        t: u64,
    },
    /// `server <what> <start> <end>`: a fault on a server.
    Server {
        /// What was done.
        what: ServerFault,
        /// It began.
        start: u64,
        /// It was over.
        end: u64,
    },
}

impl Fault {
    /// Parses one line written with `Display`; None for a foreign line.
    pub fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split(' ').collect();
        let fault = match fields.as_slice() {
            ["freeze", worker, start, end] => Fault::Freeze {
                worker: name(worker)?,
                start: number(start)?,
                end: number(end)?,
            },
            ["kill", worker, t] => Fault::Kill {
                worker: name(worker)?,
                t: number(t)?,
            },
            ["cut", worker, start, end] => Fault::Cut {
                worker: name(worker)?,
                start: number(start)?,
                end: number(end)?,
            },
            ["dropped_reply", worker, t] => Fault::DroppedReply {
                worker: name(worker)?,
                t: number(t)?,
            },
            ["server", what, start, end] => Fault::Server {
                what: ServerFault::parse(what)?,
                start: number(start)?,
                end: number(end)?,
            },
            _ => return None,
        };
        Some(fault)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Freeze { worker, start, end } => write!(f, "freeze {worker} {start} {end}"),
            Fault::Kill { worker, t } => write!(f, "kill {worker} {t}"),
            Fault::Cut { worker, start, end } => write!(f, "cut {worker} {start} {end}"),
            Fault::DroppedReply { worker, t } => write!(f, "dropped_reply {worker} {t}"),
            Fault::Server { what, start, end } => write!(f, "server {what} {start} {end}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_round_trip_through_text() {
        let faults = [
            (
                Fault::Freeze {
                    worker: "w1".into(),
                    start: 10,
                    end: 20,
                },
                "freeze w1 10 20",
            ),
            (
                Fault::Kill {
                    worker: "w2".into(),
                    t: 30,
                },
                "kill w2 30",
            ),
            (
                Fault::Cut {
                    worker: "w3".into(),
                    start: 40,
                    end: 50,
                },
                "cut w3 40 50",
            ),
            (
                Fault::DroppedReply {
                    worker: "w4".into(),
                    t: 60,
                },
                "dropped_reply w4 60",
            ),
            (
                Fault::Server {
                    what: ServerFault::Failover,
                    start: 70,
                    end: 80,
                },
                "server failover 70 80",
            ),
        ];
        for (fault, text) in faults {
            assert_eq!(fault.to_string(), text);
            assert_eq!(Fault::parse(text), Some(fault));
        }
        for what in ["freeze", "restart", "failover", "migrate", "kill"] {
            let line = format!("server {what} 1 2");
            assert_eq!(Fault::parse(&line).map(|f| f.to_string()), Some(line));
        }
    }

    #[test]
    fn parse_rejects_foreign_lines() {
        for line in [
            "",
            "freeze w1 10",
            "kill w2",
            "kill w2 3 4",
            "cut w3 40 5x",
            "server reboot 1 2",
            "pause w1 1 2",
            "dropped_reply  w4 60",
        ] {
            assert_eq!(Fault::parse(line), None, "{line:?}");
        }
    }
}
