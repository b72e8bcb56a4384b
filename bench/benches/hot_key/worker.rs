//! One worker process of the flash sale: `tasks` buyers deducting the
//! stock in a loop, one [`Way`], from the agreed start for the agreed
//! time; prints one [`WorkerReport`] line.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_bench::BenchResult;
use lock_bench::gaps::Section;
use lock_bench::hot_key::{
    Arrivals, PAUSE_MAX, SKU, SPIN_SLEEP, STOCK_KEY, TTL, WORK, Way, Work, WorkerArgs, WorkerReport,
};
use lock_runtime::{LockConfig, LockError, distributed_lock};
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Script};
use tokio::time::Instant;

/// A deduction's failure.
#[derive(Debug)]
enum BuyError {
    Lock(LockError),
    Redis(redis::RedisError),
    Other(String),
}

impl std::fmt::Display for BuyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuyError::Lock(err) => write!(f, "lock: {err}"),
            BuyError::Redis(err) => write!(f, "redis: {err}"),
            BuyError::Other(what) => f.write_str(what),
        }
    }
}

impl From<LockError> for BuyError {
    fn from(error: LockError) -> Self {
        BuyError::Lock(error)
    }
}

impl From<redis::RedisError> for BuyError {
    fn from(error: redis::RedisError) -> Self {
        BuyError::Redis(error)
    }
}

/// The pauses of one buyer, when its `arrivals` ask for them: uniform in
/// `[0, PAUSE_MAX)`, from a xorshift seeded by the OS (no syscall per
/// pause).
struct Pauses(Option<u64>);

impl Pauses {
    fn new(arrivals: Arrivals) -> Self {
        let mut seed = [0u8; 8];
        // A failed seed leaves zeros; the `| 1` keeps the xorshift moving.
        let _ = getrandom::fill(&mut seed);
        Self((arrivals == Arrivals::Paused).then(|| u64::from_le_bytes(seed) | 1))
    }

    /// Pauses before the buyer's next request, if it pauses at all.
    async fn pause(&mut self) {
        let Some(state) = self.0.as_mut() else {
            return;
        };
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let max = u64::try_from(PAUSE_MAX.as_micros()).unwrap_or(u64::MAX);
        tokio::time::sleep(Duration::from_micros(*state % max)).await;
    }
}

/// Longest one deduction may take, waiting included (a bound, never reached).
const ATTEMPT_BOUND: Duration = Duration::from_secs(60);

/// One deduction that went through: when its critical section began, and
/// how long it took; and the section on the machine's clock, which the
/// other worker process shares.
struct Deduction {
    entered: Instant,
    body: Duration,
    /// Of the body, the payment (`WORK` asked for; the runtime's timer
    /// decides how long it really lasts).
    work: Duration,
    /// Of the body, the read before the payment.
    read: Duration,
    section: Section,
}

/// Now, in µs since the Unix epoch.
fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

/// The payment: `WORK` taken as `work` says; returns how long it took.
async fn pay(work: Work) -> Duration {
    let started = Instant::now();
    match work {
        Work::TokioSleep => tokio::time::sleep(WORK).await,
        Work::ThreadSleep => {
            // A panic in a sleep cannot happen; a lost one only ends the
            // work early, which the measured time shows.
            let _ = tokio::task::spawn_blocking(|| std::thread::sleep(WORK)).await;
        }
    }
    started.elapsed()
}

/// The critical section: read, pay, write.
async fn read_pay_write(data: &MultiplexedConnection, work: Work) -> Result<Deduction, BuyError> {
    let (entered, start_us) = (Instant::now(), epoch_us());
    let mut conn = data.clone();
    let left: u64 = conn.get(STOCK_KEY).await?;
    let read = entered.elapsed();
    let work = pay(work).await;
    let () = conn.set(STOCK_KEY, left.saturating_sub(1)).await?;
    Ok(Deduction {
        entered,
        body: entered.elapsed(),
        work,
        read,
        section: Section {
            start_us,
            end_us: epoch_us(),
            worker: 0,
        },
    })
}

/// The project: the attribute, on the global locker (`TTL` is 3 s).
#[distributed_lock(key = "hot:<sku>", ttl = "3s", wait = "60s")]
async fn deduct_locked(
    sku: &str,
    data: &MultiplexedConnection,
    work: Work,
) -> Result<Deduction, BuyError> {
    read_pay_write(data, work).await
}

/// The project's fair lock, on the global locker.
async fn deduct_fairly(data: &MultiplexedConnection, work: Work) -> Result<Deduction, BuyError> {
    let guard = lock_runtime::global()?
        .fair_lock(format!("hot:{SKU}"))
        .ttl(TTL)
        .wait(ATTEMPT_BOUND)
        .acquire()
        .await?;
    let deduction = read_pay_write(data, work).await;
    guard.release().await?;
    deduction
}

static UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// What people write by hand: `SET NX PX`, sleep 10 ms, again; then a
/// compare-and-delete.
async fn deduct_spinning(
    data: &MultiplexedConnection,
    token: &str,
    work: Work,
) -> Result<Deduction, BuyError> {
    let key = format!("hot:{SKU}");
    let mut conn = data.clone();
    let options = redis::SetOptions::default()
        .conditional_set(redis::ExistenceCheck::NX)
        .with_expiration(redis::SetExpiry::PX(
            u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX),
        ));
    loop {
        let taken: Option<String> = conn.set_options(&key, token, options.clone()).await?;
        if taken.is_some() {
            break;
        }
        tokio::time::sleep(SPIN_SLEEP).await;
    }
    let deduction = read_pay_write(data, work).await;
    let _: i64 = UNLOCK.key(&key).arg(token).invoke_async(&mut conn).await?;
    deduction
}

/// No lock: optimistic `WATCH`/`MULTI`/`EXEC` on a connection of the
/// buyer's own (`WATCH` belongs to a connection), again when aborted.
async fn deduct_optimistic(
    conn: &mut MultiplexedConnection,
    work: Work,
) -> Result<Deduction, BuyError> {
    loop {
        let (entered, start_us) = (Instant::now(), epoch_us());
        redis::cmd("WATCH")
            .arg(STOCK_KEY)
            .query_async::<()>(conn)
            .await?;
        let left: u64 = conn.get(STOCK_KEY).await?;
        let read = entered.elapsed();
        let work = pay(work).await;
        let committed: Option<()> = redis::pipe()
            .atomic()
            .set(STOCK_KEY, left.saturating_sub(1))
            .ignore()
            .query_async(conn)
            .await?;
        if committed.is_some() {
            return Ok(Deduction {
                entered,
                body: entered.elapsed(),
                work,
                read,
                section: Section {
                    start_us,
                    end_us: epoch_us(),
                    worker: 0,
                },
            });
        }
    }
}

/// Runs the worker described by `args` and prints its report.
pub fn main(args: &[String]) -> BenchResult<()> {
    let args = WorkerArgs::parse(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(work(args))?;
    println!("{}", report.to_line());
    Ok(())
}

async fn work(args: WorkerArgs) -> BenchResult<WorkerReport> {
    let client = redis::Client::open(args.url.as_str())?;
    let data = client.get_multiplexed_async_connection().await?;
    let rslock = match args.way {
        Way::Rslock => {
            let manager = rslock::LockManager::new(vec![args.url.clone()]);
            manager.query_redis_for_key_value(b"warm-up").await?;
            Some(manager)
        }
        _ => None,
    };
    if matches!(args.way, Way::Project | Way::Fair) {
        lock_runtime::init(LockConfig::from_url(&args.url)?).await?;
    }
    // Each optimistic buyer needs a connection of its own.
    let mut own = Vec::new();
    for _ in 0..args.tasks {
        own.push(match args.way {
            Way::WatchMulti => Some(client.get_multiplexed_async_connection().await?),
            _ => None,
        });
    }
    let now_ms = u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
    let start = Instant::now() + Duration::from_millis(args.start_at_ms.saturating_sub(now_ms));
    let deadline = start + args.run_for;
    let report = Arc::new(Mutex::new(WorkerReport::default()));
    let mut tasks = Vec::new();
    for (n, own) in own.into_iter().enumerate() {
        let (data, rslock, report) = (data.clone(), rslock.clone(), report.clone());
        let (way, work) = (args.way, args.work);
        let mut pauses = Pauses::new(args.arrivals);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start).await;
            let mut own = own;
            let token = format!("{}-{n}", std::process::id());
            while Instant::now() < deadline {
                pauses.pause().await;
                let asked = Instant::now();
                let attempt = async {
                    match way {
                        Way::Project => deduct_locked(SKU, &data, work).await,
                        Way::Fair => deduct_fairly(&data, work).await,
                        Way::SetnxSpin => deduct_spinning(&data, &token, work).await,
                        Way::WatchMulti => match own.as_mut() {
                            Some(conn) => deduct_optimistic(conn, work).await,
                            None => Err(BuyError::Other("no connection".into())),
                        },
                        Way::Rslock => match &rslock {
                            Some(manager) => {
                                let key = format!("hot:{SKU}");
                                let lock = manager
                                    .acquire_no_guard(key.as_bytes(), TTL)
                                    .await
                                    .map_err(|e| BuyError::Other(e.to_string()))?;
                                let deduction = read_pay_write(&data, work).await;
                                manager.unlock(&lock).await;
                                deduction
                            }
                            None => Err(BuyError::Other("no rslock manager".into())),
                        },
                    }
                };
                // An attempt runs to its end (cut off, one could have
                // written without being counted); deductions that began
                // after the deadline count as writes, not as throughput.
                let outcome = match tokio::time::timeout(ATTEMPT_BOUND, attempt).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(BuyError::Other(format!(
                        "no deduction within {ATTEMPT_BOUND:?}"
                    ))),
                };
                let mut report = report.lock().unwrap_or_else(|e| e.into_inner());
                if outcome.is_ok() {
                    report.writes += 1;
                }
                match outcome {
                    Ok(deduction) if deduction.entered < deadline => {
                        report.ops += 1;
                        let waited = deduction.entered.saturating_duration_since(asked);
                        report
                            .waits_us
                            .push(u64::try_from(waited.as_micros()).unwrap_or(u64::MAX));
                        report.body_us +=
                            u64::try_from(deduction.body.as_micros()).unwrap_or(u64::MAX);
                        report.work_us +=
                            u64::try_from(deduction.work.as_micros()).unwrap_or(u64::MAX);
                        report.read_us +=
                            u64::try_from(deduction.read.as_micros()).unwrap_or(u64::MAX);
                        report.sections.push(deduction.section);
                    }
                    Ok(_) => {}
                    Err(err) => {
                        report.errors += 1;
                        if report.errors == 1 {
                            eprintln!("hot_key worker ({}): {err}", way.name());
                        }
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }

    let mut report = report.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if matches!(args.way, Way::Project | Way::Fair) {
        let stats = lock_runtime::global()?.stats();
        report.server_ends = stats.released.saturating_sub(stats.handovers_in_process);
        report.tries = stats.tries;
    }
    Ok(report)
}
