//! Letting go of a hold: now, within a bound ([`Hold::release`]), or when
//! its holder drops it, in the background ([`Drop`]); passed to the next
//! task of the locker waiting for it, let go for the callers outside the
//! locker after the line's share, or released (see
//! [`crate::engine::handover`]). Every primitive's guard is a [`Hold`] of
//! that primitive.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::backend::Backend;
use crate::backend::flights::Landing;
use crate::engine::core::Core;
use crate::engine::handle::LockHandle;
use crate::engine::handover::Handover;
use crate::engine::lease::{Lease, LeaseState};
use crate::engine::lost;
use crate::engine::primitive::{PassCall, Passed, Primitive};
use crate::engine::retry::retried_once;
use crate::engine::stats::Counters;
use crate::engine::wait::{Line, Turn};
use crate::engine::watchdog::Watched;
use crate::error::LockError;
use crate::owner::OwnerToken;

/// A held lease of primitive `P`, until it is let go of.
pub(crate) struct Hold<P: Primitive> {
    handle: LockHandle,
    core: Arc<Core>,
    primitive: P,
    /// The acquisition's calls still running on slow Redlock masters: a
    /// release waits for them, each master for its own, so that it cannot
    /// overtake one.
    landing: Option<Landing>,
    /// The watchdog's watch over the lease, until released. It keeps the
    /// holder's turn in its locker's line for the key: the next task in
    /// line tries once the release is done, or as soon as the lease is
    /// lost.
    watched: Option<Watched>,
    /// The watchdog renews the lease (a hold it becomes is renewed too,
    /// see [`crate::engine::convert`]).
    renews: bool,
    released: bool,
    /// `release()` began, and may have let go of the hold before it was
    /// cut or failed: the drop's release then finds it gone for that
    /// reason.
    release_began: bool,
    /// What this holder knows of the server's line (a lock its releases
    /// hand over, see [`Line`]): the first waiter behind it, when it
    /// waits in this locker, is handed the lock in process. Boxed: most
    /// holds have none, and a guard stays small.
    line: Option<Box<Line>>,
}

impl<P: Primitive> Hold<P> {
    pub(crate) fn new(
        lease: Arc<Lease>,
        core: Arc<Core>,
        primitive: P,
        landing: Option<Landing>,
        watched: Watched,
        renews: bool,
        line: Option<Box<Line>>,
    ) -> Self {
        Self {
            line,
            handle: LockHandle::new(lease),
            core,
            primitive,
            landing,
            watched: Some(watched),
            renews,
            released: false,
            release_began: false,
        }
    }

    /// The view of the hold its holder may hand out.
    pub(crate) fn handle(&self) -> &LockHandle {
        &self.handle
    }

    /// The primitive it holds, as its request made it.
    pub(crate) fn primitive(&self) -> &P {
        &self.primitive
    }

    fn lease(&self) -> &Arc<Lease> {
        self.handle.lease()
    }

    /// The locker's parts the hold was taken with.
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Ends the hold here without letting go of it on the server, where a
    /// step of the primitive's made it another hold of the same token (see
    /// [`crate::engine::convert`]): its lease counts as released and is
    /// watched no more, and the holder's turn in its locker's line goes to
    /// the next task.
    pub(crate) fn retire(mut self) -> Retired {
        self.lease().mark_released();
        drop(self.watched.take().map(Watched::end));
        Counters::bump(&self.core.counters.released);
        self.released = true;
        Retired {
            lease: self.lease().clone(),
            landing: self.landing.take(),
            renews: self.renews,
        }
    }
}

/// What a retired hold leaves to the hold that follows it.
pub(crate) struct Retired {
    pub(crate) lease: Arc<Lease>,
    pub(crate) landing: Option<Landing>,
    pub(crate) renews: bool,
}

impl<P: Primitive> Hold<P> {
    /// Lets go of the hold (see the primitive's guard for what a user is
    /// told): true when it was still ours. Returns within two bounded
    /// round trips; on an error (or if this future is dropped before the
    /// answer), the drop tries once more in the background.
    pub(crate) async fn release(mut self) -> Result<bool, LockError> {
        self.release_began = true;
        self.lease().mark_released();
        let mut turn = self.watched.take().and_then(Watched::end);
        let bound = self.core.config.two_calls_bound();
        // Borrowed, not taken: if this future is dropped before the calls
        // still in flight landed, the hold's drop waits for them, so that
        // its release does not overtake an acquisition's late second step.
        let landing = self.landing.as_ref();
        let (core, lease, primitive) = (self.core.clone(), self.lease().clone(), &self.primitive);
        let line = self.line.as_deref();
        // Only the in-memory store is used outside a runtime: its calls
        // never wait, and a timer would need a runtime.
        let bounded = self.core.host.check_runtime().is_ok();
        let releasing = async move {
            let letting_go = let_go(&core, &lease, primitive, landing, &mut turn, line, false);
            if !bounded {
                return letting_go.await;
            }
            match tokio::time::timeout(bound, letting_go).await {
                Ok(result) => result,
                Err(_) => Err(LockError::redis_timeout("release", bound)),
            }
            // The turn goes to the next in line here, with the hold if it
            // was passed.
        };
        // Boxed for the same reason as an acquisition (see `Asked`), and
        // before it is wrapped, as there.
        let releasing: BoxFuture<'_, Result<bool, LockError>> = Box::pin(releasing);
        let deleted = self.core.host.enter(releasing).await.inspect_err(|_| {
            release_failed(&self.core, self.handle.lease());
        })?;
        self.released = true;
        Ok(deleted)
    }
}

/// Lets go of `lease`'s lock if it is still ours, after the acquisition's
/// calls still in flight ended: passes it to the next task in `turn`'s
/// line when there is one (see [`crate::engine::handover`]), else deletes it.
/// True when it was still ours. A lock its releases hand over goes to the
/// next in the server's `line` in process, when that one waits in this
/// locker. `sent_before`: a release of this lease was sent already
/// and cut before its answer, so a lock found gone may be that release's
/// doing rather than a loss.
async fn let_go<P: Primitive>(
    core: &Core,
    lease: &Lease,
    primitive: &P,
    landing: Option<&Landing>,
    turn: &mut Option<Turn>,
    line: Option<&Line>,
    mut sent_before: bool,
) -> Result<bool, LockError> {
    if P::HANDS_OVER
        && !sent_before
        && let Some(line) = line
        && let Some(next) = line.behind.first()
        && let Some(mut handover) =
            Handover::in_process(lease, core, P::GIVE_BACK, core.clock().now())
    {
        handover.served = line.served.clone();
        let rest = line.behind.rest();
        let passing = core
            .releases
            .pass(primitive.channel(), next, handover, rest);
        match passing {
            None => {
                Counters::bump(&core.counters.released);
                // The taker's task runs first, and its body's first call
                // reaches the server before anything the giver sends next
                // (its next try, say): 15 µs from one body to the next in
                // the flash sale, not 30.
                tokio::task::yield_now().await;
                return Ok(true);
            }
            // Not waiting here: it may wait in another process, so the
            // server's release decides.
            Some(handover) => handover.void(),
        }
    }
    if P::PASSES
        && let Some(turn) = turn.as_mut().filter(|turn| turn.should_pass())
        && let Backend::Node(node) = &core.backend
    {
        if turn.may_pass_in_process()
            && let Some(handover) =
                Handover::in_process(lease, core, P::GIVE_BACK, core.clock().now())
        {
            turn.pass(handover, None);
            Counters::bump(&core.counters.released);
            return Ok(true);
        }
        let mut handover = Handover::prepare(
            &lease.keys,
            core,
            P::GIVE_BACK,
            OwnerToken::random(&core.holder),
            lease.ttl,
            lease.route,
            core.clock().now(),
        );
        let pass = PassCall {
            route: lease.route,
            giver: &lease.token,
            given_fence: lease.fence,
            taker: &handover.token,
            ttl: lease.ttl,
        };
        match primitive.pass(node, &pass).await {
            Ok(Passed::To { fence, marked }) => {
                handover.passed(fence);
                turn.pass(handover, Some(marked));
                count_released(core, lease);
                return Ok(true);
            }
            Ok(Passed::NotOurs) => {
                handover.void();
                lost::found_gone_at_release(lease, &core.counters);
                return Ok(false);
            }
            // Unknown whether it passed: release the taker's token, and
            // if it was not there, the giver's (on the pass's route, so
            // after it). The lock was ours to the end if either was there.
            Err(err) => {
                tracing::debug!(key = lease.keys.name(), error = %err, "passing the lock failed; releasing it");
                match handover.give_back().await {
                    Some(true) => {
                        count_released(core, lease);
                        return Ok(true);
                    }
                    Some(false) => {}
                    // The pass may have happened, and the giver's token
                    // be gone for that reason.
                    None => sent_before = true,
                }
            }
        }
    }
    // After its share while others wait, the line lets the lock go for
    // them (see `crate::engine::handover`).
    let grace = turn.as_mut().filter(|_| P::PASSES).and_then(Turn::yields);
    if let (Some(grace), Backend::Node(node)) = (grace, &core.backend) {
        let (route, token) = (lease.route, &lease.token);
        return release(core, lease, sent_before, || {
            primitive.yield_to_others(node, route, token, core.line, grace)
        })
        .await;
    }
    if let Some(line) = line.filter(|line| !line.served.is_empty()) {
        return release(core, lease, sent_before, || {
            primitive.release_served(
                &core.backend,
                lease.route,
                &lease.token,
                lease.fence,
                &line.served,
            )
        })
        .await;
    }
    release(core, lease, sent_before, || {
        primitive.release(
            &core.backend,
            lease.route,
            &lease.token,
            lease.fence,
            landing,
        )
    })
    .await
}

/// Lets go of `lease`'s lock by `call` (a delete, or a yield to others)
/// if it is still ours; counts it released, or a lock found gone as lost
/// unless an earlier call may have let go of it (`sent_before`, or this
/// call's own first try whose connection broke).
async fn release<Fut>(
    core: &Core,
    lease: &Lease,
    sent_before: bool,
    mut call: impl FnMut() -> Fut,
) -> Result<bool, LockError>
where
    Fut: std::future::Future<Output = Result<bool, LockError>>,
{
    let mut calls = 0;
    let deleted = retried_once("release", || {
        calls += 1;
        call()
    })
    .await?;
    // A lock already reported lost (its hold cap, or a lease that ran out
    // while its key lingered) is counted once, as lost. One found gone is
    // counted lost now, unless an earlier call may have deleted it: then
    // it counts as released.
    let found_gone = !deleted && calls == 1 && !sent_before;
    if found_gone {
        lost::found_gone_at_release(lease, &core.counters);
    } else {
        count_released(core, lease);
    }
    Ok(deleted)
}

/// Counts a release of `lease`'s lock that failed.
fn release_failed(core: &Core, lease: &Lease) {
    Counters::bump(&core.counters.release_errors);
    crate::metrics::release_failed(lease.labels);
}

/// Counts `lease`'s lock released (deleted or passed on), unless it was
/// already reported lost (its hold cap, or a body that ran past its
/// validity while the key lingered): a lock is counted once.
fn count_released(core: &Core, lease: &Lease) {
    if lease.state() != LeaseState::Lost {
        Counters::bump(&core.counters.released);
    }
}

impl<P: Primitive> Drop for Hold<P> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.lease().mark_released();
        let mut turn = self.watched.take().and_then(Watched::end);
        let (core, lease, landing) = (self.core.clone(), self.lease().clone(), self.landing.take());
        let primitive = self.primitive.clone();
        let bound = self.core.config.two_calls_bound();
        let sent_before = self.release_began;
        let line = self.line.take();
        self.core.host.detach(bound, async move {
            let mut given_up = GivenUp {
                core: core.clone(),
                lease: lease.clone(),
                counted: false,
                failure_counted: false,
            };
            let letting_go = let_go(&core, &lease, &primitive, landing.as_ref(), &mut turn, line.as_deref(), sent_before);
            match letting_go.await {
                Ok(_) => given_up.counted = true,
                Err(err) => {
                    release_failed(&core, &lease);
                    given_up.failure_counted = true;
                    tracing::warn!(key = lease.keys.name(), error = %err, "background release failed; the lease will expire");
                }
            }
            // The next in line takes the lock passed to it, or tries once
            // the lock is free.
            drop(turn);
        });
    }
}

/// A lock its guard's drop gives up: counted released if the release in
/// the background ends without having counted it (it failed, or was cut
/// at its bound), since its holder let it go and nothing will report it
/// lost any more; its lease runs out on the server. A lock acquired ends
/// counted once, released or lost.
struct GivenUp {
    core: Arc<Core>,
    lease: Arc<Lease>,
    /// The release answered, and counted the lock itself.
    counted: bool,
    /// The release failed, and was counted as such.
    failure_counted: bool,
}

impl Drop for GivenUp {
    fn drop(&mut self) {
        if !self.counted {
            count_released(&self.core, &self.lease);
        }
        // Cut at its bound: a failure too.
        if !self.counted && !self.failure_counted {
            release_failed(&self.core, &self.lease);
        }
    }
}
