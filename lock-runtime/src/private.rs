//! What `#[distributed_lock]` expands to. Not a public API: only the
//! attribute's generated code calls into this module, and it may change in
//! any release.

use std::future::Future;
use std::time::Duration;

use crate::current::{held_by_this_task, holding};
use crate::{LockError, Locker};

/// The attribute's options, as written (None: the locker's default).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// `ttl = ".."`.
    pub ttl: Option<Duration>,
    /// `wait = ".."`.
    pub wait: Option<Duration>,
    /// `watchdog = ..`.
    pub watchdog: bool,
    /// `on_lost = ".."`.
    pub on_lost: OnLost,
}

/// `on_lost = "cancel" | "continue"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnLost {
    /// Drop the body at its next await and return `LockError::Lost`.
    Cancel,
    /// Let the body finish and log the loss.
    Continue,
}

/// The global locker, for an attribute without `locker = ..`.
pub fn global_locker() -> Result<Locker, LockError> {
    crate::global().cloned()
}

/// The locker named by `locker = ..`.
pub fn locker_from<S: crate::LockerSource + ?Sized>(source: &S) -> Result<Locker, LockError> {
    source.locker().cloned()
}

/// Converts a lock failure into the function's error type. A generic
/// function rather than an inline `From::from`, so that functions returning
/// `Result<_, LockError>` do not trip `clippy::useless_conversion`.
pub fn lock_error_into<E: From<LockError>>(error: LockError) -> E {
    E::from(error)
}

/// Acquires the lock, runs `body` while holding it, releases it.
///
/// `Ok(body's output)`, or the lock error (not acquired, or lost while
/// `on_lost = "cancel"`), which the generated code converts with `From`.
pub async fn run_locked<F: Future>(
    locker: Result<Locker, LockError>,
    key: String,
    options: Options,
    body: F,
) -> Result<F::Output, LockError> {
    let locker = locker?;
    if let Some(outer) = held_by_this_task(&locker, &key) {
        // Re-entered from inside a call that holds this very lock: waiting
        // would wait for ourselves. The outer call races the loss signal.
        if !outer.is_held() {
            return Err(LockError::Lost { key });
        }
        return Ok(body.await);
    }
    let mut request = locker.lock(key).watchdog(options.watchdog);
    if let Some(ttl) = options.ttl {
        request = request.ttl(ttl);
    }
    if let Some(wait) = options.wait {
        request = request.wait(wait);
    }
    let guard = request.acquire().await?;
    let handle = guard.handle();
    if !handle.is_held() {
        // Granted, but with no validity left to run the body in.
        return Err(LockError::Lost {
            key: guard.key().to_owned(),
        });
    }
    let outcome = match options.on_lost {
        OnLost::Cancel => {
            let lost = handle.lost();
            holding(&locker, handle.clone(), async {
                tokio::select! {
                    biased;
                    () = lost => None,
                    output = body => Some(output),
                }
            })
            .await
        }
        OnLost::Continue => Some(holding(&locker, handle.clone(), body).await),
    };
    let Some(output) = outcome else {
        tracing::warn!(
            key = guard.key(),
            fence = guard.fence(),
            "lock lost; the body was cancelled"
        );
        return Err(LockError::Lost {
            key: guard.key().to_owned(),
        });
    };
    // Finished, but was the lock still ours at the end? A process paused
    // past its lease (GC, swap, SIGSTOP) can finish before the watchdog
    // gets to say so; the local validity check catches that.
    let held_to_the_end = handle.is_held();
    let key = guard.key().to_owned();
    match guard.release().await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(key, "the body finished after its lock was lost"),
        // The body's work is done; the lease simply runs out.
        Err(err) => {
            tracing::warn!(key, error = %err, "release after the body failed; the lease will expire")
        }
    }
    if !held_to_the_end && options.on_lost == OnLost::Cancel {
        return Err(LockError::Lost { key });
    }
    Ok(output)
}
