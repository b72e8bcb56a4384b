//! CPU time used by this process, from `/proc`.

use std::time::Duration;

/// Kernel clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`,
/// fixed at 100 in the Linux ABI).
const USER_HZ: u64 = 100;

/// CPU time of every live thread of this process so far: the sum of each
/// thread's nanosecond run time (`/proc/self/task/*/schedstat`), or the
/// process's 10 ms resolution total (`/proc/self/stat`) where that is
/// missing; `None` where `/proc` is unavailable.
pub fn process_time() -> Option<Duration> {
    threads_time().or_else(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        parse_stat(&stat)
    })
}

/// The sum of the first field (run time, ns) of every thread's schedstat.
fn threads_time() -> Option<Duration> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        // A thread that exits meanwhile simply no longer counts.
        let Ok(schedstat) = std::fs::read_to_string(path) else {
            continue;
        };
        total += schedstat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// What the threads of one name (`comm`: `tokio-rt-worker`,
/// `lock-runtime`, ...) of this process did: run time, and how often they
/// gave up the core (parked) or had it taken (preempted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadsUsage {
    /// The threads' name.
    pub name: String,
    /// Their run time (`schedstat`, ns).
    pub run: Duration,
    /// Voluntary context switches: the thread blocked (parked, waited).
    pub voluntary: u64,
    /// Involuntary ones: another thread took the core.
    pub involuntary: u64,
}

/// This process's live threads, grouped by name (sorted), as counted so
/// far; empty where `/proc` is unavailable. Subtract two snapshots with
/// [`usage_between`] for a window.
pub fn threads_usage() -> Vec<ThreadsUsage> {
    let mut by_name: std::collections::BTreeMap<String, ThreadsUsage> = Default::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    for task in tasks.flatten() {
        let path = task.path();
        // A thread that exits meanwhile simply no longer counts.
        let read = |file: &str| std::fs::read_to_string(path.join(file)).ok();
        let (Some(comm), Some(schedstat), Some(status)) =
            (read("comm"), read("schedstat"), read("status"))
        else {
            continue;
        };
        let name = comm.trim().to_owned();
        let entry = by_name.entry(name.clone()).or_insert_with(|| ThreadsUsage {
            name,
            ..ThreadsUsage::default()
        });
        let run_ns = schedstat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
        entry.run += Duration::from_nanos(run_ns);
        entry.voluntary += status_count(&status, "voluntary_ctxt_switches:");
        entry.involuntary += status_count(&status, "nonvoluntary_ctxt_switches:");
    }
    by_name.into_values().collect()
}

/// What each name's threads did between two snapshots of
/// [`threads_usage`] (names missing from `before` started meanwhile).
pub fn usage_between(before: &[ThreadsUsage], after: &[ThreadsUsage]) -> Vec<ThreadsUsage> {
    after
        .iter()
        .map(|now| {
            let then = before.iter().find(|b| b.name == now.name);
            let then = then.cloned().unwrap_or_default();
            ThreadsUsage {
                name: now.name.clone(),
                run: now.run.saturating_sub(then.run),
                voluntary: now.voluntary.saturating_sub(then.voluntary),
                involuntary: now.involuntary.saturating_sub(then.involuntary),
            }
        })
        .collect()
}

/// The number after `field` in a `/proc/<pid>/task/<tid>/status` text.
fn status_count(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or(0)
}

/// Fields 14 (utime) and 15 (stime) of a `stat` line, counted after the
/// parenthesised command name (which may itself contain spaces).
fn parse_stat(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 1_000 / USER_HZ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_and_stime() {
        let line = "42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0";
        assert_eq!(parse_stat(line), Some(Duration::from_secs(3)));
    }

    #[test]
    fn reads_context_switch_counts() {
        let status = "Name:\tprobe\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_count(status, "voluntary_ctxt_switches:"), 12);
        assert_eq!(status_count(status, "nonvoluntary_ctxt_switches:"), 3);
        assert_eq!(status_count(status, "missing:"), 0);
    }

    #[test]
    fn a_sleeping_thread_switches_voluntarily() {
        let before = threads_usage();
        std::thread::Builder::new()
            .name("cpu-test-nap".into())
            .spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                let during = threads_usage();
                let nap = usage_between(&before, &during);
                let nap = nap.iter().find(|u| u.name == "cpu-test-nap").unwrap();
                assert!(nap.voluntary >= 1, "{nap:?}");
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn reads_this_process() {
        let before = process_time().unwrap();
        let mut x = 0u64;
        for i in 0..10_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(process_time().unwrap() > before);
    }
}
