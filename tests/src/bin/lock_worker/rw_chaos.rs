//! `lock_worker rw-chaos`: tasks that take reads and writes of a few
//! read/write locks and read or bump a version under them, recording a
//! history for the read/write checker (`lock_tests::history::read_write`).
//!
//! Written ahead, one line per event: `acq` once a hold is granted, `rel`
//! before it is released, so that each recorded interval lies inside the
//! real hold; a writer records `writing` before it sets the version and
//! `wrote` after; a reader records the version it read. One section in
//! eight holds for one and a half leases, so that the watchdog has to
//! renew it.

use std::fs::File;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, Locker};
use lock_tests::monotonic_ns;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;

/// The lease every hold takes.
const TTL: Duration = Duration::from_secs(1);

/// What one worker was asked to do.
pub struct RwChaos<'a> {
    pub worker: &'a str,
    pub url: &'a str,
    pub store_url: &'a str,
    pub resources: u64,
    pub tasks: u64,
    pub seconds: u64,
    pub history: &'a str,
}

/// The history file, appended to by every task.
struct History(Mutex<File>);

impl History {
    /// Appends one event line, or ends the worker (a history with a hole
    /// in it would pass a run it should not).
    fn record(&self, line: String) {
        let mut file = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = writeln!(file, "{line} {}", monotonic_ns()) {
            eprintln!("lock_worker: cannot record `{line}`: {err}");
            std::process::exit(3);
        }
    }
}

/// A held side of a lock.
enum Held {
    Read(lock_runtime::ReadGuard),
    Write(lock_runtime::WriteGuard),
}

/// Runs the worker until its deadline.
pub async fn run(args: RwChaos<'_>) -> Result<(), String> {
    let config = LockConfig::from_url(args.url)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500));
    let locker = Locker::connect(config).await.map_err(|e| e.to_string())?;
    let client = redis::Client::open(args.store_url).map_err(|e| e.to_string())?;
    let store = ConnectionManager::new(client)
        .await
        .map_err(|e| e.to_string())?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(args.history)
        .map_err(|e| format!("open {}: {e}", args.history))?;
    let history = std::sync::Arc::new(History(Mutex::new(file)));
    println!("ready");
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut tasks = Vec::new();
    for task in 0..args.tasks {
        let (locker, store, history) = (locker.clone(), store.clone(), history.clone());
        let (worker, resources) = (args.worker.to_owned(), args.resources);
        tasks.push(tokio::spawn(async move {
            let mut random = u64::from(std::process::id()) << 16 | task | 1;
            let mut draw = move |n: u64| {
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                random % n.max(1)
            };
            let mut round = 0u64;
            while Instant::now() < deadline {
                round += 1;
                let sid = format!("{worker}.{task}.{round}");
                let res = format!("r{}", draw(resources));
                let writes = draw(4) == 0;
                let long = round.is_multiple_of(8);
                let pause = Duration::from_millis(1 + draw(4));
                let section = Section {
                    history: &history,
                    store: store.clone(),
                    sid,
                    res,
                };
                if section.run(&locker, writes, long, pause).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())?;
    }
    println!("done");
    Ok(())
}

/// One hold: its history, the store, its id and its resource.
struct Section<'a> {
    history: &'a History,
    store: ConnectionManager,
    sid: String,
    res: String,
}

impl Section<'_> {
    async fn run(
        mut self,
        locker: &Locker,
        writes: bool,
        long: bool,
        pause: Duration,
    ) -> Result<(), String> {
        let key = format!("rwchaos:{}", self.res);
        let held = if writes {
            let write = locker.write_lock(&key).ttl(TTL).wait(TTL * 3);
            Held::Write(write.acquire().await.map_err(|e| e.to_string())?)
        } else {
            let read = locker.read_lock(&key).ttl(TTL).wait(TTL * 3);
            Held::Read(read.acquire().await.map_err(|e| e.to_string())?)
        };
        let side = if writes { "w" } else { "r" };
        let (sid, res) = (self.sid.clone(), self.res.clone());
        self.history.record(format!("acq {sid} {side} {res}"));
        let worked = self.work(writes, long, pause).await;
        // Recorded whatever the work did: the interval ends before the
        // release, never after it.
        self.history.record(format!("rel {sid}"));
        match held {
            Held::Read(read) => read.release().await.map_err(|e| e.to_string())?,
            Held::Write(write) => write.release().await.map_err(|e| e.to_string())?,
        };
        worked
    }

    /// Under the hold: read the version, or bump it; then hold on.
    async fn work(&mut self, writes: bool, long: bool, pause: Duration) -> Result<(), String> {
        let (sid, res) = (self.sid.clone(), self.res.clone());
        tokio::time::sleep(pause).await;
        let version_key = format!("rwchaos:version:{res}");
        let version: u64 = self
            .store
            .get::<_, Option<u64>>(&version_key)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or(0);
        if writes {
            let next = version + 1;
            self.history.record(format!("writing {sid} {res} {next}"));
            let () = self
                .store
                .set(&version_key, next)
                .await
                .map_err(|e| e.to_string())?;
            self.history.record(format!("wrote {sid}"));
        } else {
            self.history.record(format!("read {sid} {res} {version}"));
        }
        tokio::time::sleep(if long { TTL * 3 / 2 } else { pause }).await;
        Ok(())
    }
}
