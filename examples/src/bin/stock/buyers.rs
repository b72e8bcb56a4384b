//! The buyers of one process (or, on the in-memory store, of one locker).

use std::sync::Arc;

use lock_examples::Data;
use lock_runtime::{LockError, Locker};
use tokio::task::JoinSet;

use crate::options::Mode;
use crate::purchase::{Keys, buy_locked, take_one};
use crate::tally::Tally;

/// What one group of buyers is to do.
pub struct Job {
    /// With or without the lock.
    pub mode: Mode,
    /// Buyers in total, shared by every group.
    pub buyers: u64,
    /// Buyer tasks in this group.
    pub tasks: u64,
    /// The SKU sold.
    pub sku: String,
    /// Its keys.
    pub keys: Keys,
}

/// Runs `job.tasks` buyer tasks on `locker` until the shared budget of
/// buyers is spent, and adds up what they did.
pub async fn run(job: Arc<Job>, locker: Locker, data: Data) -> Result<Tally, String> {
    let mut buyers = JoinSet::new();
    for _ in 0..job.tasks {
        buyers.spawn(buy_until_done(job.clone(), locker.clone(), data.clone()));
    }
    let mut tally = Tally::default();
    while let Some(done) = buyers.join_next().await {
        tally += done
            .map_err(|e| format!("a buyer task failed: {e}"))?
            .map_err(|e| e.to_string())?;
    }
    tally.waits = locker.stats().contended;
    Ok(tally)
}

/// One buyer task: takes buyer numbers from the shared counter until the
/// budget is spent, and buys one unit for each.
async fn buy_until_done(job: Arc<Job>, locker: Locker, data: Data) -> Result<Tally, LockError> {
    let mut tally = Tally::default();
    // Bounded: the counter only grows, and every turn takes a number.
    while data.incr(&job.keys.buyers).await? <= job.buyers {
        let bought = match job.mode {
            Mode::Lock => buy_locked(&locker, &job.sku, &data, &job.keys).await,
            Mode::None => take_one(&data, &job.keys).await,
        };
        match bought {
            Ok(true) => {
                tally.sold += 1;
                data.incr(&job.keys.sold).await?;
            }
            Ok(false) => tally.sold_out += 1,
            Err(LockError::Timeout { .. }) => tally.busy += 1,
            Err(LockError::Lost { .. }) => tally.lost += 1,
            Err(other) => return Err(other),
        }
    }
    Ok(tally)
}
