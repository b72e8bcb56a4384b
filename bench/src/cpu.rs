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
