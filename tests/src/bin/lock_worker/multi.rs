//! `lock_worker transfer ..` and `lock_worker hold-all ..`: holders of
//! several keys at once (see the doc comment of `main.rs`).

use std::time::Duration;

use lock_runtime::{LockConfig, Locker};
use redis::AsyncCommands;

/// How long an acquisition waits at most, and how long `hold-all` holds:
/// longer than any test runs.
const LONG: Duration = Duration::from_secs(60);

/// The arguments of `transfer`.
pub struct Transfers<'a> {
    pub url: &'a str,
    /// Where the balances are kept (a plain server).
    pub store: &'a str,
    pub accounts: u32,
    pub tasks: u32,
    pub rounds: u32,
    pub ttl: Duration,
    /// Move money without taking the accounts' keys (the control run).
    pub unlocked: bool,
}

/// The key of account `n`'s lock, and of its balance on the store.
fn account(n: u32) -> String {
    format!("acct:{n}")
}

/// A small generator of its own, seeded per task: which accounts, in
/// which order.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, below: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        u32::try_from(self.0 % u64::from(below)).unwrap_or(0)
    }
}

/// `tasks` tasks each move one unit `rounds` times between two random
/// distinct accounts (named in a random order), reading both balances,
/// pausing, then writing both: a race unless the two keys are held.
/// Prints `done <moves>` at the end.
pub async fn transfer(args: Transfers<'_>) -> Result<(), String> {
    if args.accounts < 2 {
        return Err("a transfer needs at least two accounts".to_owned());
    }
    let config = LockConfig::from_url(args.url).map_err(|e| e.to_string())?;
    let locker = Locker::connect(config).await.map_err(|e| e.to_string())?;
    let client = redis::Client::open(args.store).map_err(|e| e.to_string())?;
    let redis = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let seed = u64::from(std::process::id()) << 16;
    let mut handles = Vec::new();
    for task in 0..args.tasks {
        let (locker, mut redis) = (locker.clone(), redis.clone());
        let (accounts, rounds, ttl, unlocked) =
            (args.accounts, args.rounds, args.ttl, args.unlocked);
        handles.push(tokio::spawn(async move {
            let mut dice = Dice(seed | u64::from(task) | 1);
            for _ in 0..rounds {
                let from = dice.roll(accounts);
                let to = (from + 1 + dice.roll(accounts - 1)) % accounts;
                let (from_key, to_key) = (account(from), account(to));
                let guard = if unlocked {
                    None
                } else {
                    let request = locker.lock_all([to_key.clone(), from_key.clone()]);
                    Some(
                        request
                            .ttl(ttl)
                            .wait(LONG)
                            .acquire()
                            .await
                            .map_err(|e| e.to_string())?,
                    )
                };
                let from_balance: i64 = redis.get(&from_key).await.map_err(|e| e.to_string())?;
                let to_balance: i64 = redis.get(&to_key).await.map_err(|e| e.to_string())?;
                tokio::time::sleep(Duration::from_millis(2)).await;
                let () = redis
                    .set(&from_key, from_balance - 1)
                    .await
                    .map_err(|e| e.to_string())?;
                let () = redis
                    .set(&to_key, to_balance + 1)
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(guard) = guard
                    && !guard.release().await.map_err(|e| e.to_string())?
                {
                    return Err("a hold was lost during a transfer".to_owned());
                }
            }
            Ok::<u32, String>(rounds)
        }));
    }
    let mut moves = 0;
    for handle in handles {
        moves += handle.await.map_err(|e| e.to_string())??;
    }
    println!("done {moves}");
    Ok(())
}

/// Takes every key of `keys` at once, prints `acquired <fences>`, and
/// keeps them (renewed) until killed, or for at most [`LONG`].
pub async fn hold_all(url: &str, ttl: Duration, keys: &[&str]) -> Result<(), String> {
    let config = LockConfig::from_url(url).map_err(|e| e.to_string())?;
    let locker = Locker::connect(config).await.map_err(|e| e.to_string())?;
    let guard = locker
        .lock_all(keys.iter().copied())
        .ttl(ttl)
        .wait(LONG)
        .acquire()
        .await
        .map_err(|e| e.to_string())?;
    println!("acquired {:?}", guard.fences());
    tokio::time::sleep(LONG).await;
    drop(guard);
    Ok(())
}
