//! The semaphore's chaos checker: from what holders of permits recorded,
//! the most permits held at once by holds that completed without a loss
//! signal. Pure logic: the only input is text.
//!
//! Each holder appends, per hold, `begin <id> <permits> <t>` once granted
//! and `end <id> <ok|lost> <t>` once its body is over, before it gives the
//! permits back (`t`: ns of CLOCK_MONOTONIC, comparable across the
//! processes of one machine). A recorded interval lies inside the real
//! hold, so the recorded holds overlap no more than the real ones do.
//!
//! **The rule**: at no instant do holds that ended `ok` (never told of a
//! loss, still valid at their end) hold more than the limit. A hold whose
//! worker was killed has no `end` and counts for nothing, nor does one
//! told of its loss: the library only promises them their permits until
//! the signal.

use std::collections::HashMap;

/// One hold that completed without a loss signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hold {
    /// Permits it held.
    pub permits: u32,
    /// When it began, in ns.
    pub begin: u64,
    /// When its body was over, in ns.
    pub end: u64,
}

/// What one run's histories add up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Holds that completed without a loss signal.
    pub completed: usize,
    /// Holds told of a loss.
    pub told: usize,
    /// Holds that never ended (their worker was killed).
    pub open: usize,
    /// The most permits the completed holds held at once.
    pub most: u32,
    /// When they first did, in ns.
    pub most_at: u64,
}

/// Reads the lines of every history: the completed holds, and how many
/// were told or never ended. A line that does not parse (a worker killed
/// while writing it) ends nothing.
pub fn read(histories: &[String]) -> (Vec<Hold>, Tally) {
    let mut holds = Vec::new();
    let mut tally = Tally::default();
    for history in histories {
        let mut begun: HashMap<&str, (u32, u64)> = HashMap::new();
        for line in history.lines() {
            match line.split(' ').collect::<Vec<_>>()[..] {
                ["begin", id, permits, t] => {
                    if let (Ok(permits), Ok(t)) = (permits.parse(), t.parse()) {
                        begun.insert(id, (permits, t));
                    }
                }
                ["end", id, outcome, t] => {
                    let (Some((permits, begin)), Ok(end)) = (begun.remove(id), t.parse()) else {
                        continue;
                    };
                    if outcome == "ok" {
                        tally.completed += 1;
                        holds.push(Hold {
                            permits,
                            begin,
                            end,
                        });
                    } else {
                        tally.told += 1;
                    }
                }
                _ => {}
            }
        }
        tally.open += begun.len();
    }
    let (most, most_at) = most_at_once(&holds);
    tally.most = most;
    tally.most_at = most_at;
    (holds, tally)
}

/// The most permits `holds` held at once, and the instant it was first
/// reached. Holds that touch (one ends when the next begins) do not
/// overlap.
pub fn most_at_once(holds: &[Hold]) -> (u32, u64) {
    // Ends sort before begins at one instant.
    let mut steps: Vec<(u64, bool, u32)> = holds
        .iter()
        .flat_map(|hold| {
            [
                (hold.begin, true, hold.permits),
                (hold.end, false, hold.permits),
            ]
        })
        .collect();
    steps.sort_unstable();
    let (mut now, mut most, mut most_at) = (0u32, 0, 0);
    for (t, begins, permits) in steps {
        if begins {
            now += permits;
            if now > most {
                (most, most_at) = (now, t);
            }
        } else {
            now = now.saturating_sub(permits);
        }
    }
    (most, most_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_completed_holds_are_counted_by_their_permits() {
        let a = "begin a1 2 10\nend a1 ok 50\nbegin a2 1 60\nend a2 ok 70\n".to_owned();
        let b = "begin b1 1 20\nend b1 ok 40\n".to_owned();
        let (_, tally) = read(&[a, b]);
        assert_eq!((tally.completed, tally.most, tally.most_at), (3, 3, 20));
    }

    #[test]
    fn a_bad_history_is_caught_and_told_or_killed_holds_do_not_count() {
        // Three one-permit holds at once under a limit of two: caught.
        let bad = "begin x 1 0\nbegin y 1 1\nbegin z 1 2\nend x ok 9\nend y ok 9\nend z ok 9\n";
        assert_eq!(read(&[bad.to_owned()]).1.most, 3);
        // The same, with one told and one killed (no end, a torn line).
        let fine = "begin x 1 0\nbegin y 1 1\nbegin z 1 2\nend x ok 9\nend y lost 9\nend z o";
        let (_, tally) = read(&[fine.to_owned()]);
        assert_eq!((tally.most, tally.told, tally.open), (1, 1, 1));
    }

    #[test]
    fn holds_that_touch_do_not_overlap() {
        let holds = [
            Hold {
                permits: 1,
                begin: 0,
                end: 5,
            },
            Hold {
                permits: 1,
                begin: 5,
                end: 9,
            },
        ];
        assert_eq!(most_at_once(&holds).0, 1);
    }
}
