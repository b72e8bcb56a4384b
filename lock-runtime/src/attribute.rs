//! What a `#[distributed_lock]` function does at run time: take the lock
//! (or, nested in a call that holds it, wait its turn), run the body as its
//! `on_lost` says, release. The generated code reaches this through
//! [`crate::__private`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::lost::{self, OnLost};
use crate::engine::reentrancy::{Frame, held_by_this_task, holding};
use crate::error::LockError;
use crate::host::Host;
use crate::locker::Locker;

mod answer;
mod mode;
mod multi;
mod permits;

use self::answer::{answer, lost, run_guarded};
pub use self::mode::Mode;
use self::mode::{BodyGuard, with_options};

/// The attribute's options, as written (None: the locker's default).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// `ttl = ".."`.
    pub ttl: Option<Duration>,
    /// `wait = ".."`.
    pub wait: Option<Duration>,
    /// `watchdog = ..`.
    pub watchdog: bool,
    /// `fair = ..`: the fair lock rather than the exclusive one.
    pub fair: bool,
    /// `on_lost = ".."`.
    pub on_lost: OnLost,
    /// `on_release_error = ".."`.
    pub on_release_error: OnReleaseError,
    /// `reentrant = ..`: whether a call nested in one that holds the same
    /// key runs under that lock (`true`) or fails at once.
    pub reentrant: bool,
    /// `max_hold = ".."`.
    pub max_hold: Option<Duration>,
    /// `mode = ".."`: the exclusive lock, or a side of the read/write lock.
    pub mode: Mode,
    /// `limit = ..` (and `permits = ..`): the call takes permits of a
    /// semaphore, not the lock.
    pub semaphore: Option<Permits>,
    /// The key template as written (`"stock:<sku>"`): the bounded name of
    /// the lock in metrics and traces.
    pub template: &'static str,
}

/// `limit = K, permits = n`: how many of a semaphore's permits a call
/// takes.
#[derive(Clone, Copy, Debug)]
pub struct Permits {
    /// `limit = ..`.
    pub limit: u32,
    /// `permits = ..` (1 when not written).
    pub permits: u32,
}

/// What an annotated call answers when the release after its body failed
/// (`on_release_error = ".."`). Either way the failure is logged and
/// counted ([`LockerStats::release_errors`](crate::LockerStats)), and the
/// lock stays held until its lease ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnReleaseError {
    /// The body's output (the default): what the body did took effect,
    /// and a caller told otherwise might run it again.
    Warn,
    /// [`LockError::ReleaseFailed`], in place of the body's output.
    Fail,
}

/// Acquires the lock, runs `body` while holding it, releases it.
///
/// `Ok(body's output)`, or the lock error (not acquired, or lost while
/// `on_lost = "cancel"`), which the generated code converts with `From`.
///
/// The body is boxed here, before the call's own future exists: held
/// inline (an `async fn` keeps its arguments for its whole run), it would
/// make each annotated layer's future the size of the one it calls and
/// then some (nested annotated calls then overflow a stack), and it would
/// be copied at every move of the call's future.
pub fn run_locked<F: Future>(
    locker: Result<Locker, LockError>,
    key: String,
    options: Options,
    body: F,
) -> impl Future<Output = Result<F::Output, LockError>> {
    locked(locker, key, options, Box::pin(body))
}

/// [`run_locked`], its body boxed.
async fn locked<F: Future>(
    locker: Result<Locker, LockError>,
    key: String,
    options: Options,
    body: Pin<Box<F>>,
) -> Result<F::Output, LockError> {
    let locker = locker?;
    if let Some(permits) = options.semaphore {
        return permits::run_with_permits(&locker, key, permits, options, body).await;
    }
    if let Some(holder) = held_by_this_task(locker.core(), &key, options.nests_under()) {
        if let Some(refused) = options.mode.refused_under(holder.kind, &key) {
            return Err(refused);
        }
        // Boxed: a nested call's state is several times that of a
        // holding call's, and every annotated call would carry (and move)
        // room for it.
        return Box::pin(run_nested(&locker, key, holder, options, body)).await;
    }
    let guard = mode::acquire!(&locker, key, &options);
    let handle = guard.handle();
    let frame = Frame::new(locker.core(), options.kind(), handle.clone());
    let held = Held {
        guard: Some(guard),
        frame: frame.clone(),
        host: &locker.core().host,
    };
    let outcome = run_body(&locker, options.on_lost, frame, body).await;
    // Taken back at once: the body ended, and `holding` waited for any
    // nested call's step.
    let released = match held.into_guard() {
        Some(guard) => guard.release().await,
        None => Ok(true),
    };
    let gone = "its lock was lost";
    answer(
        outcome,
        released,
        options.on_release_error,
        &handle,
        handle.key(),
        gone,
    )
}

/// Acquires every key of `keys` at once (`keys = [..]`), runs `body`
/// while holding them, releases them ([`Locker::lock_all`]).
///
/// `Ok(body's output)`, or the lock error, as [`run_locked`].
pub fn run_locked_all<F: Future>(
    locker: Result<Locker, LockError>,
    keys: Vec<String>,
    options: Options,
    body: F,
) -> impl Future<Output = Result<F::Output, LockError>> {
    // Boxed at once, as in `run_locked`.
    let body = Box::pin(body);
    async move { multi::run_with_keys(&locker?, keys, options, body).await }
}

/// The guard of a holding call, until its body ended and the call releases
/// it. Dropped with the call (cancelled by its caller), it lets go of the
/// lock as the body's end does: only once no nested call moved out of the
/// body is mid-step (see [`crate::engine::reentrancy`]). Such a step is waited for
/// in the background, while the watchdog keeps the lease; the guard's own
/// drop then releases the lock.
struct Held<'a> {
    guard: Option<BodyGuard>,
    frame: Arc<Frame>,
    host: &'a Host,
}

impl Held<'_> {
    fn into_guard(mut self) -> Option<BodyGuard> {
        self.guard.take()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        // Usually done already, by the body's own drop: from here on a
        // nested call's next step sees the end.
        self.frame.nested.finish();
        if self.frame.nested.idle() {
            return;
        }
        // Outside any runtime (an in-memory locker's call dropped there),
        // nothing can wait: released at once, as before.
        if let Ok(runtime) = self.host.runtime() {
            let frame = self.frame.clone();
            runtime.spawn(async move {
                frame.nested.settled().await;
                drop(guard);
            });
        }
    }
}

/// A call nested in one that holds its key: no acquisition, one nested call
/// at a time per holder (see [`crate::engine::reentrancy`]). The holder's lease
/// governs, so the nested call's `ttl`, `watchdog` and `max_hold` do not
/// apply; its `wait` bounds its wait for its turn, and its `on_lost` is its
/// own. It never outlives the holder's body: if that ends first (the
/// nested call was moved out of it), the nested body is stopped and the
/// call answers [`LockError::Lost`].
async fn run_nested<F: Future>(
    locker: &Locker,
    key: String,
    holder: Arc<Frame>,
    options: Options,
    body: F,
) -> Result<F::Output, LockError> {
    if !options.reentrant {
        return Err(LockError::HeldByThisTask { key });
    }
    let mut request = locker.lock(key.as_str());
    if let Some(ttl) = options.ttl {
        request = request.ttl(ttl);
    }
    if let Some(wait) = options.wait {
        request = request.wait(wait);
    }
    let wait = request.resolved_wait();
    let nested = &holder.nested;
    // The wait runs on the locker's clock: a sibling that holds the turn
    // may be waiting on Redis, which an application's paused clock knows
    // nothing of. So its timer is made inside the host's context, when
    // first polled.
    let waited = locker
        .core()
        .host
        .enter(async move { tokio::time::sleep(wait).await });
    let turn = tokio::select! {
        biased;
        () = nested.ended() => return Err(lost(&holder.handle, key)),
        turn = nested.turns.acquire() => turn,
        () = waited => return Err(LockError::Timeout { key, waited: wait }),
    };
    let Ok(_turn) = turn else {
        // Never closed; a closed line would mean the holder is gone.
        return Err(lost(&holder.handle, key));
    };
    if !holder.handle.is_held() {
        return Err(lost(&holder.handle, key));
    }
    // Its own frame ends with the holder's body, even if this call is not
    // polled again, so that calls nested in it stop too.
    let running = run_body(locker, options.on_lost, Frame::nested_in(&holder), body);
    // Each poll counted, so that the holder lets go only after a step
    // running when its body ended (see `crate::engine::reentrancy`).
    nested
        .step(async {
            tokio::select! {
                biased;
                () = nested.ended() => Err(lost(&holder.handle, key)),
                output = running => output.ok_or_else(|| lost(&holder.handle, key)),
            }
        })
        .await
}

/// Runs `body` as the call of `frame`, holding its lock, as `on_lost`
/// says (see [`run_guarded`]).
async fn run_body<F: Future>(
    locker: &Locker,
    on_lost: OnLost,
    frame: Arc<Frame>,
    body: F,
) -> Option<F::Output> {
    let handle = &frame.handle;
    // The frame wraps the loss's race, so that a cancelled body still
    // waits, in `holding`, for a nested call's step. Each layer is pinned
    // where it is made and lent to the next: a future passed by value is
    // copied into every layer that holds it.
    let guarded = std::pin::pin!(lost::guarded(handle.lease(), on_lost, body));
    let held = std::pin::pin!(holding(frame.clone(), guarded));
    run_guarded(locker, handle, on_lost, held).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            ttl: None,
            wait: None,
            watchdog: true,
            fair: false,
            on_lost: OnLost::Cancel,
            on_release_error: OnReleaseError::Warn,
            reentrant: true,
            max_hold: None,
            mode: Mode::Exclusive,
            semaphore: None,
            template: "t",
        }
    }

    /// A body whose future keeps 16 KiB across an await.
    async fn large_body() -> usize {
        let buffer = [1u8; 16 * 1024];
        tokio::task::yield_now().await;
        buffer.iter().map(|&b| usize::from(b)).sum()
    }

    #[test]
    fn an_annotated_call_does_not_hold_its_body_inline() {
        let body = large_body();
        let body_size = std::mem::size_of_val(&body);
        assert!(body_size >= 16 * 1024);
        let locker = Err(LockError::config("not connected"));
        let one = run_locked(locker, "k".to_owned(), options(), body);
        assert!(
            std::mem::size_of_val(&one) < body_size / 2,
            "the call's future is {} bytes for a body of {body_size}",
            std::mem::size_of_val(&one)
        );
        let locker = Err(LockError::config("not connected"));
        let several = run_locked_all(locker, vec!["k".to_owned()], options(), large_body());
        assert!(std::mem::size_of_val(&several) < body_size / 2);
    }
}
