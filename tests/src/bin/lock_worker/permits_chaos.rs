//! `lock_worker permits-chaos <url> <key> <limit> <permits> <ttl-ms> <hold-ms> <history>`:
//! a holder of permits under faults, recording each hold for the
//! semaphore's checker (`lock_tests::permits`).

use std::fs::OpenOptions;
use std::io::Write as _;
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::monotonic_ns;

/// Longest a worker runs: the driver kills it long before.
const LONGEST: Duration = Duration::from_secs(600);

/// The arguments of `permits-chaos`.
pub struct ChaosPermits<'a> {
    pub url: &'a str,
    pub key: &'a str,
    pub limit: u32,
    pub permits: u32,
    pub ttl: Duration,
    pub hold: Duration,
    pub history: &'a str,
}

/// Takes and gives back the permits until killed, appending `begin` once
/// granted and `end ok` (or `end lost`, when told of a loss or no longer
/// valid) once the body is over, each before the step that follows it.
/// Failed acquisitions (a failover, a frozen server) are tried again.
pub async fn run(args: ChaosPermits<'_>) -> Result<(), String> {
    let config = LockConfig::from_url(args.url).map_err(|e| e.to_string())?;
    let locker = Locker::connect(config).await.map_err(|e| e.to_string())?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(args.history)
        .map_err(|e| e.to_string())?;
    let mut record = |line: String| {
        file.write_all(line.as_bytes())
            .map_err(|e| format!("cannot record `{}`: {e}", line.trim_end()))
    };
    let started = Instant::now();
    let pid = std::process::id();
    let mut seq = 0u64;
    println!("ready");
    while started.elapsed() < LONGEST {
        let request = locker
            .semaphore(args.key, args.limit)
            .permits(args.permits)
            .ttl(args.ttl)
            .wait(args.ttl * 10);
        let guard = match request.acquire().await {
            Ok(guard) => guard,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        seq += 1;
        let id = format!("{pid}.{seq}");
        record(format!("begin {id} {} {}\n", args.permits, monotonic_ns()))?;
        let told = tokio::select! {
            biased;
            () = guard.lost() => true,
            () = tokio::time::sleep(args.hold) => false,
        };
        // Valid to its end, or it says it was lost.
        let outcome = if told || !guard.is_held() {
            "lost"
        } else {
            "ok"
        };
        record(format!("end {id} {outcome} {}\n", monotonic_ns()))?;
        let _ = guard.release().await;
    }
    Ok(())
}
