//! The chaos checker: what worker processes record about each critical
//! section, the fenced store they write to, and the verdict over both.
//!
//! Each acquisition yields one [`Record`] (key, fence, start, end, outcome),
//! written by the worker as a line of text as soon as the section ends, so a
//! worker killed with -9 loses only the section it was in. Each section
//! writes once to a Redis-side fenced store ([`STORE_SCRIPT`]): the write is
//! rejected when a larger fence has already written. [`check`] then proves,
//! from the records and the store's log, that no two sections that both
//! believed they held a key overlapped, and that every stale write was
//! turned away.

use std::collections::HashMap;
use std::fmt;

/// The fenced store. `KEYS[1]` highest fence written, `KEYS[2]` the log;
/// `ARGV[1]` the writer's fence, `ARGV[2]` its id. Returns 1 (accepted) or 0.
/// Every write, accepted or not, is appended to the log in server order.
pub const STORE_SCRIPT: &str = r#"
local highest = tonumber(redis.call('GET', KEYS[1]) or '0')
local fence = tonumber(ARGV[1])
if fence < highest then
    redis.call('RPUSH', KEYS[2], 'R ' .. ARGV[1] .. ' ' .. ARGV[2])
    return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], 'A ' .. ARGV[1] .. ' ' .. ARGV[2])
return 1
"#;

/// The store's keys for one protected resource: (highest fence, log).
pub fn store_keys(resource: &str) -> (String, String) {
    (
        format!("store:{{{resource}}}:highest"),
        format!("store:{{{resource}}}:log"),
    )
}

/// How a section ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The body finished and the lock was held to its end.
    Completed,
    /// The loss was signalled (body cancelled, or finished knowing it).
    Lost,
    /// Something else failed inside the section (e.g. the store was down).
    Failed,
}

/// What became of the section's write to the fenced store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// The store took it.
    Accepted,
    /// The store turned it away: a larger fence had written.
    Rejected,
    /// No answer: not sent, or the section ended first.
    Unknown,
}

/// One acquisition, as its worker saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Which worker process and task (`pid/task`).
    pub writer: String,
    /// The resource.
    pub key: String,
    /// Its fencing token.
    pub fence: u64,
    /// CLOCK_MONOTONIC when the body started.
    pub start_ns: u64,
    /// CLOCK_MONOTONIC when the body ended (or was cancelled).
    pub end_ns: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// What the store said to its write.
    pub write: Write,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Completed => "completed",
            Outcome::Lost => "lost",
            Outcome::Failed => "failed",
        };
        let write = match self.write {
            Write::Accepted => "accepted",
            Write::Rejected => "rejected",
            Write::Unknown => "unknown",
        };
        write!(
            f,
            "{} {} {} {} {} {outcome} {write}",
            self.writer, self.key, self.fence, self.start_ns, self.end_ns
        )
    }
}

impl Record {
    /// Parses a line written with `Display`; None for a torn or foreign line
    /// (a worker killed mid-write leaves at most one).
    pub fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [writer, key, fence, start, end, outcome, write] = fields.as_slice() else {
            return None;
        };
        Some(Self {
            writer: (*writer).to_owned(),
            key: (*key).to_owned(),
            fence: fence.parse().ok()?,
            start_ns: start.parse().ok()?,
            end_ns: end.parse().ok()?,
            outcome: match *outcome {
                "completed" => Outcome::Completed,
                "lost" => Outcome::Lost,
                "failed" => Outcome::Failed,
                _ => return None,
            },
            write: match *write {
                "accepted" => Write::Accepted,
                "rejected" => Write::Rejected,
                "unknown" => Write::Unknown,
                _ => return None,
            },
        })
    }

    fn overlaps(&self, other: &Record) -> bool {
        self.start_ns < other.end_ns && other.start_ns < self.end_ns
    }
}

/// One entry of the store's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreEntry {
    /// Whether the store took the write.
    pub accepted: bool,
    /// The writer's fence.
    pub fence: u64,
}

impl StoreEntry {
    /// Parses `A <fence> <writer>` / `R <fence> <writer>`.
    pub fn parse(entry: &str) -> Option<Self> {
        let mut fields = entry.split_whitespace();
        let accepted = match fields.next()? {
            "A" => true,
            "R" => false,
            _ => return None,
        };
        Some(Self {
            accepted,
            fence: fields.next()?.parse().ok()?,
        })
    }
}

/// What the checker found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Acquisitions recorded.
    pub acquisitions: usize,
    /// Writes the store turned away as stale.
    pub stale_rejected: usize,
    /// Every broken rule, in words.
    pub violations: Vec<String>,
}

/// Checks the records of every worker against each other and against the
/// store's log (per resource, in server order).
pub fn check(records: &[Record], logs: &HashMap<String, Vec<StoreEntry>>) -> Verdict {
    let mut verdict = Verdict {
        acquisitions: records.len(),
        ..Verdict::default()
    };
    let mut by_key: HashMap<&str, Vec<&Record>> = HashMap::new();
    for record in records {
        by_key.entry(&record.key).or_default().push(record);
    }
    for (key, mut sections) in by_key {
        sections.sort_by_key(|r| (r.fence, r.start_ns));
        check_fences_unique(key, &sections, &mut verdict.violations);
        check_overlaps(key, &sections, &mut verdict.violations);
        check_completed_order(key, &sections, &mut verdict.violations);
    }
    for (key, log) in logs {
        verdict.stale_rejected += log.iter().filter(|e| !e.accepted).count();
        check_store_log(key, log, &mut verdict.violations);
    }
    check_writes_match_log(records, logs, &mut verdict.violations);
    verdict
}

/// A fence is handed out once: two sections with one fence mean two owners.
fn check_fences_unique(key: &str, sections: &[&Record], violations: &mut Vec<String>) {
    for pair in sections.windows(2) {
        if pair[0].fence == pair[1].fence {
            violations.push(format!(
                "{key}: fence {} granted twice ({} and {})",
                pair[0].fence, pair[0].writer, pair[1].writer
            ));
        }
    }
}

/// Two sections that overlap in time: the newer owner is legitimate only if
/// the older one was told of its loss, and two completed sections (both
/// held to the end) must never overlap.
fn check_overlaps(key: &str, sections: &[&Record], violations: &mut Vec<String>) {
    for (i, older) in sections.iter().enumerate() {
        for newer in &sections[i + 1..] {
            if !older.overlaps(newer) {
                continue;
            }
            if older.outcome == Outcome::Completed && newer.outcome == Outcome::Completed {
                violations.push(format!(
                    "{key}: completed sections overlap: fence {} ({}) and fence {} ({})",
                    older.fence, older.writer, newer.fence, newer.writer
                ));
            } else if older.outcome == Outcome::Completed {
                violations.push(format!(
                    "{key}: fence {} ({}) completed while fence {} ({}) held the lock: a silent loss",
                    older.fence, older.writer, newer.fence, newer.writer
                ));
            }
        }
    }
}

/// Completed sections, in time order, carry strictly increasing fences.
fn check_completed_order(key: &str, sections: &[&Record], violations: &mut Vec<String>) {
    let mut completed: Vec<&&Record> = sections
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .collect();
    completed.sort_by_key(|r| r.start_ns);
    for pair in completed.windows(2) {
        if pair[0].fence >= pair[1].fence {
            violations.push(format!(
                "{key}: fence went from {} to {} between completed sections",
                pair[0].fence, pair[1].fence
            ));
        }
    }
}

/// The store accepted strictly increasing fences, and rejected exactly the
/// writes below the highest fence written before them.
fn check_store_log(key: &str, log: &[StoreEntry], violations: &mut Vec<String>) {
    let mut highest = 0;
    for entry in log {
        let stale = entry.fence < highest;
        if entry.accepted && stale {
            violations.push(format!(
                "{key}: stale write with fence {} accepted after fence {highest}",
                entry.fence
            ));
        }
        if !entry.accepted && !stale {
            violations.push(format!(
                "{key}: current write with fence {} rejected",
                entry.fence
            ));
        }
        if entry.accepted {
            highest = highest.max(entry.fence);
        }
    }
}

/// Every write a worker saw answered is in the store's log, with that answer.
fn check_writes_match_log(
    records: &[Record],
    logs: &HashMap<String, Vec<StoreEntry>>,
    violations: &mut Vec<String>,
) {
    for record in records {
        let expected = match record.write {
            Write::Accepted => true,
            Write::Rejected => false,
            Write::Unknown => continue,
        };
        let found = logs.get(&record.key).is_some_and(|log| {
            log.iter()
                .any(|e| e.fence == record.fence && e.accepted == expected)
        });
        if !found {
            violations.push(format!(
                "{}: the worker saw fence {} {:?}, the store has no such entry",
                record.key, record.fence, record.write
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fence: u64, start: u64, end: u64, outcome: Outcome) -> Record {
        Record {
            writer: format!("w{fence}"),
            key: "k".into(),
            fence,
            start_ns: start,
            end_ns: end,
            outcome,
            write: Write::Unknown,
        }
    }

    fn verdict(records: &[Record]) -> Verdict {
        check(records, &HashMap::new())
    }

    #[test]
    fn a_clean_history_passes() {
        let records = [
            record(1, 0, 10, Outcome::Completed),
            record(2, 11, 20, Outcome::Completed),
            // Paused past its lease, told so: may overlap the next owner.
            record(3, 21, 90, Outcome::Lost),
            record(4, 60, 70, Outcome::Completed),
        ];
        let verdict = verdict(&records);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        assert_eq!(verdict.acquisitions, 4);
    }

    #[test]
    fn overlapping_completed_sections_are_caught() {
        let records = [
            record(1, 0, 10, Outcome::Completed),
            record(2, 5, 20, Outcome::Completed),
        ];
        assert_eq!(verdict(&records).violations.len(), 1);
    }

    #[test]
    fn a_silent_loss_is_caught() {
        // The older owner "completed" while the newer one already held it.
        let records = [
            record(1, 0, 30, Outcome::Completed),
            record(2, 10, 20, Outcome::Lost),
        ];
        let violations = verdict(&records).violations;
        assert!(
            violations.iter().any(|v| v.contains("silent loss")),
            "{violations:?}"
        );
    }

    #[test]
    fn a_fence_granted_twice_is_caught() {
        let records = [
            record(5, 0, 10, Outcome::Completed),
            record(5, 20, 30, Outcome::Completed),
        ];
        let violations = verdict(&records).violations;
        assert!(
            violations.iter().any(|v| v.contains("granted twice")),
            "{violations:?}"
        );
    }

    #[test]
    fn fences_going_backwards_are_caught() {
        let records = [
            record(7, 0, 10, Outcome::Completed),
            record(6, 20, 30, Outcome::Completed),
        ];
        let violations = verdict(&records).violations;
        assert!(
            violations.iter().any(|v| v.contains("went from 7 to 6")),
            "{violations:?}"
        );
    }

    #[test]
    fn the_store_log_is_checked() {
        let entry = |accepted, fence| StoreEntry { accepted, fence };
        let good = vec![
            entry(true, 1),
            entry(true, 3),
            entry(false, 2),
            entry(true, 4),
        ];
        let bad = vec![entry(true, 3), entry(true, 2), entry(false, 5)];
        let logs = HashMap::from([("good".to_owned(), good), ("bad".to_owned(), bad)]);
        let verdict = check(&[], &logs);
        assert_eq!(verdict.stale_rejected, 2);
        assert_eq!(verdict.violations.len(), 2, "{:?}", verdict.violations);
    }

    #[test]
    fn a_write_the_store_never_saw_is_caught() {
        let mut accepted = record(1, 0, 10, Outcome::Completed);
        accepted.write = Write::Accepted;
        let verdict = check(&[accepted], &HashMap::new());
        assert_eq!(verdict.violations.len(), 1);
    }

    #[test]
    fn records_survive_a_round_trip_through_text() {
        let mut original = record(42, 100, 200, Outcome::Lost);
        original.write = Write::Rejected;
        assert_eq!(Record::parse(&original.to_string()), Some(original));
        assert_eq!(Record::parse("torn line 12"), None);
        assert_eq!(
            StoreEntry::parse("R 7 123/4"),
            Some(StoreEntry {
                accepted: false,
                fence: 7
            })
        );
    }
}
