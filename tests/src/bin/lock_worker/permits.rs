//! `lock_worker permits <url> <key> <limit> <permits> <ttl-ms> <rounds> <hold-ms>`:
//! a holder of permits of a semaphore (see the doc comment of `main.rs`).

use std::time::Duration;

use lock_runtime::{LockConfig, Locker};

/// How long an acquisition waits at most, and how long a holder of
/// `rounds = 0` holds: longer than any test runs.
const LONG: Duration = Duration::from_secs(60);

/// Counts the permits inside their bodies on the server, and keeps the
/// most ever counted: `KEYS[1]` the count, `KEYS[2]` the most,
/// `ARGV[1]` the permits entering (negative: leaving).
const INSIDE: &str = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) \
    if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end \
    return n";

/// The arguments of `permits`.
pub struct PermitsArgs<'a> {
    pub url: &'a str,
    pub key: &'a str,
    pub limit: u32,
    pub permits: u32,
    pub ttl: Duration,
    /// How many times to take and give back; 0: take once and hold until
    /// killed (or [`LONG`]).
    pub rounds: u32,
    pub hold: Duration,
}

/// Takes the permits `rounds` times, each time printing
/// `acquired <fence> <slots>`, counting itself inside on the server (or on
/// the one `PERMITS_STORE_URL` names) while it holds them (`inside:<key>`, the most in `most:<key>`), then
/// `released <held>`; `lost` as soon as a loss signal comes.
pub async fn run(args: PermitsArgs<'_>) -> Result<(), String> {
    let config = LockConfig::from_url(args.url).map_err(|e| e.to_string())?;
    let locker = Locker::connect(config).await.map_err(|e| e.to_string())?;
    // Redlock's masters are no place to count: the test names a server.
    let store = std::env::var("PERMITS_STORE_URL").unwrap_or_else(|_| args.url.to_owned());
    let client = redis::Client::open(store).map_err(|e| e.to_string())?;
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let script = redis::Script::new(INSIDE);
    let (inside, most) = (format!("inside:{}", args.key), format!("most:{}", args.key));
    let holding_on = args.rounds == 0;
    for _ in 0..args.rounds.max(1) {
        let guard = locker
            .semaphore(args.key, args.limit)
            .permits(args.permits)
            .ttl(args.ttl)
            .wait(LONG)
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        let keys = [inside.as_str(), most.as_str()];
        count(&script, &mut redis, keys, i64::from(args.permits)).await?;
        println!("acquired {} {:?}", guard.fence(), guard.slots());
        let hold = if holding_on { LONG } else { args.hold };
        let told = tokio::select! {
            () = tokio::time::sleep(hold) => false,
            () = guard.lost() => true,
        };
        if told {
            println!("lost");
            return Ok(());
        }
        count(&script, &mut redis, keys, -i64::from(args.permits)).await?;
        let held = guard.release().await.map_err(|e| e.to_string())?;
        println!("released {held}");
    }
    Ok(())
}

/// Counts `permits` in (or out, below zero) on the server.
async fn count(
    script: &redis::Script,
    redis: &mut redis::aio::MultiplexedConnection,
    [inside, most]: [&str; 2],
    permits: i64,
) -> Result<i64, String> {
    let mut call = script.key(inside);
    call.key(most).arg(permits);
    call.invoke_async(redis).await.map_err(|e| e.to_string())
}
