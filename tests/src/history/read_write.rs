//! The read/write lock's checker: judges a run of `lock_worker rw-chaos`
//! from the lines its workers recorded and the instants the driver killed
//! them, trusting nothing the lock library says about itself.
//!
//! Each line is `<event> <sid> [..] <t>`, `t` in ns of CLOCK_MONOTONIC:
//! `acq <sid> <r|w> <res>` once a hold was granted, `rel <sid>` before it
//! is released, `writing <sid> <res> <v>` before a writer sets the version
//! of `res` to `v`, `wrote <sid>` after, `read <sid> <res> <v>` for the
//! version a reader read. A recorded interval, `acq` to `rel`, lies inside
//! the real hold; one a killed worker never closed ends at the kill.
//!
//! # The rules
//!
//! - **RW1 exclusion.** Per resource, no write interval overlaps any other
//!   interval (a read or a write).
//! - **RW2 reads see the last write.** A read returns the version of the
//!   last write recorded `wrote` before the reader's `acq`, or one a writer
//!   began (`writing`) before that `acq` and never confirmed (its worker was
//!   killed between the two records).
//!
//! [`RwVerdict`] counts what the run exercised (reads, writes, reads that
//! overlapped another read), so that a run that observed too little fails.

use std::collections::HashMap;

/// One hold, rebuilt from its lines.
#[derive(Clone, Debug, Default)]
struct Hold {
    writes: bool,
    res: String,
    start: u64,
    end: Option<u64>,
    writing: Option<(u64, u64)>,
    wrote: Option<u64>,
    read: Option<u64>,
}

/// What a run showed.
#[derive(Debug, Default)]
pub struct RwVerdict {
    /// Each broken rule, one line each.
    pub violations: Vec<String>,
    /// Reads recorded.
    pub reads: usize,
    /// Writes confirmed.
    pub writes: usize,
    /// Reads whose interval overlapped another read's of the same resource.
    pub shared_reads: usize,
}

/// Judges the lines of every worker (`histories`, by worker name; a sid
/// starts with its worker's name and a dot) against the instants the
/// driver killed workers (`kills`, by worker name) and the run's end.
pub fn check_read_write(
    histories: &[(String, String)],
    kills: &HashMap<String, u64>,
    run_end: u64,
) -> RwVerdict {
    let mut verdict = RwVerdict::default();
    let mut holds: HashMap<String, Hold> = HashMap::new();
    for (worker, text) in histories {
        for line in text.lines() {
            let words: Vec<&str> = line.split(' ').collect();
            let Some(t) = words.last().and_then(|t| t.parse::<u64>().ok()) else {
                // A torn last line of a killed worker.
                if !kills.contains_key(worker) {
                    verdict
                        .violations
                        .push(format!("{worker}: unreadable line `{line}`"));
                }
                continue;
            };
            let hold = holds
                .entry(words.get(1).unwrap_or(&"").to_string())
                .or_default();
            match words.as_slice() {
                ["acq", _, side, res, _] => {
                    hold.writes = *side == "w";
                    hold.res = (*res).to_owned();
                    hold.start = t;
                }
                ["rel", ..] => hold.end = Some(t),
                ["writing", _, _, v, _] => hold.writing = v.parse().ok().map(|v| (v, t)),
                ["wrote", ..] => hold.wrote = Some(t),
                ["read", _, _, v, _] => hold.read = v.parse().ok(),
                _ => verdict
                    .violations
                    .push(format!("{worker}: unknown line `{line}`")),
            }
        }
    }
    // A hold never released ends when its worker was killed, else at the
    // end of the run.
    let mut by_res: HashMap<String, Vec<(String, Hold)>> = HashMap::new();
    for (sid, mut hold) in holds {
        let worker = sid.split('.').next().unwrap_or("");
        if hold.end.is_none() {
            hold.end = Some(kills.get(worker).copied().unwrap_or(run_end));
        }
        by_res
            .entry(hold.res.clone())
            .or_default()
            .push((sid, hold));
    }
    for (res, holds) in &by_res {
        exclusion(res, holds, &mut verdict);
        reads_see_last_write(res, holds, &mut verdict);
    }
    verdict
}

/// RW1, and the count of reads that shared their resource.
fn exclusion(res: &str, holds: &[(String, Hold)], verdict: &mut RwVerdict) {
    for (i, (sid, hold)) in holds.iter().enumerate() {
        let end = hold.end.unwrap_or(hold.start);
        let mut shared = false;
        for (j, (other_sid, other)) in holds.iter().enumerate() {
            let other_end = other.end.unwrap_or(other.start);
            if i == j || !(other.start < end && hold.start < other_end) {
                continue;
            }
            if hold.writes && (i < j || !other.writes) {
                verdict.violations.push(format!(
                    "RW1 {res}: write {sid} [{}, {end}] overlaps {} {other_sid} [{}, {other_end}]",
                    hold.start,
                    if other.writes { "write" } else { "read" },
                    other.start,
                ));
            }
            shared |= !hold.writes && !other.writes;
        }
        if !hold.writes && hold.read.is_some() {
            verdict.reads += 1;
            verdict.shared_reads += usize::from(shared);
        }
        if hold.writes && hold.wrote.is_some() {
            verdict.writes += 1;
        }
    }
}

/// RW2.
fn reads_see_last_write(res: &str, holds: &[(String, Hold)], verdict: &mut RwVerdict) {
    for (sid, hold) in holds {
        let Some(seen) = hold.read else {
            continue;
        };
        let last = holds
            .iter()
            .filter_map(|(_, w)| Some((w.wrote?, w.writing?.0)))
            .filter(|&(wrote, _)| wrote < hold.start)
            .max()
            .map_or(0, |(_, v)| v);
        let unconfirmed = holds.iter().any(|(_, w)| {
            w.wrote.is_none() && w.writing.is_some_and(|(v, t)| v == seen && t < hold.start)
        });
        if seen != last && !unconfirmed {
            verdict.violations.push(format!(
                "RW2 {res}: read {sid} (granted at {}) saw version {seen}, the last write before it was {last}",
                hold.start
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(lines: &str) -> RwVerdict {
        let histories = vec![("a".to_owned(), lines.to_owned())];
        check_read_write(&histories, &HashMap::new(), 1_000)
    }

    #[test]
    fn a_clean_history_passes_and_counts_shared_reads() {
        let verdict = judge(
            "acq a.1 w r0 10\nwriting a.1 r0 1 11\nwrote a.1 12\nrel a.1 13\n\
             acq a.2 r r0 20\nacq a.3 r r0 21\nread a.2 r0 1 22\nread a.3 r0 1 23\nrel a.2 24\nrel a.3 25\n",
        );
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        assert_eq!(
            (verdict.reads, verdict.writes, verdict.shared_reads),
            (2, 1, 2)
        );
    }

    #[test]
    fn a_reader_beside_a_writer_is_caught() {
        let verdict = judge(
            "acq a.1 w r0 10\nacq a.2 r r0 11\nread a.2 r0 0 12\nwriting a.1 r0 1 13\nwrote a.1 14\nrel a.2 15\nrel a.1 16\n",
        );
        assert!(
            verdict.violations.iter().any(|v| v.starts_with("RW1")),
            "{:?}",
            verdict.violations
        );
    }

    #[test]
    fn a_stale_read_is_caught() {
        let verdict = judge(
            "acq a.1 w r0 10\nwriting a.1 r0 1 11\nwrote a.1 12\nrel a.1 13\nacq a.2 r r0 20\nread a.2 r0 0 21\nrel a.2 22\n",
        );
        assert!(
            verdict.violations.iter().any(|v| v.starts_with("RW2")),
            "{:?}",
            verdict.violations
        );
    }

    #[test]
    fn a_killed_writers_unconfirmed_version_may_be_read() {
        let histories = vec![
            (
                "a".to_owned(),
                "acq a.1 w r0 10\nwriting a.1 r0 1 11\n".to_owned(),
            ),
            (
                "b".to_owned(),
                "acq b.1 r r0 50\nread b.1 r0 1 51\nrel b.1 52\n".to_owned(),
            ),
        ];
        let kills = HashMap::from([("a".to_owned(), 20)]);
        let verdict = check_read_write(&histories, &kills, 1_000);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    }
}
