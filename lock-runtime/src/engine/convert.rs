//! A hold turned into another hold of the same owner token, in one step
//! of the primitive's on the server (a write downgraded to a read): there
//! is no moment when the token holds neither. The engine makes the new
//! lease (its kind, from the new primitive), watches it as any hold, and
//! retires the old one without letting go of anything.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use crate::backend::{Backend, Route};
use crate::engine::core::Core;
use crate::engine::fence::FenceBasis;
use crate::engine::lease::{FirstLease, Grant, Lease, Role};
use crate::engine::primitive::Primitive;
use crate::engine::release::{Hold, Retired};
use crate::engine::stats::Counters;
use crate::error::LockError;
use crate::owner::OwnerToken;

/// What the step that changes a hold is given: where the hold was taken,
/// its token, its fence and its ttl.
pub(crate) struct Change {
    pub(crate) backend: Backend,
    pub(crate) route: Route,
    pub(crate) token: OwnerToken,
    pub(crate) fence: u64,
    pub(crate) ttl: Duration,
}

/// Turns `hold` into a hold of `into` by `step`, which answers the new
/// hold's fence, or None when the old hold was no longer ours
/// ([`LockError::Lost`]). Returns within two bounded round trips. On an
/// error the old hold is let go of in the background (its primitive's
/// release lets go of either), and its lease bounds it either way.
pub(crate) async fn convert<P, Q, F>(
    hold: Hold<P>,
    into: Q,
    step: impl FnOnce(Change) -> F + Send,
) -> Result<Hold<Q>, LockError>
where
    P: Primitive,
    Q: Primitive,
    F: Future<Output = Result<Option<u64>, LockError>> + Send,
{
    let core = hold.core().clone();
    core.host.check_runtime()?;
    let lease = hold.handle().lease().clone();
    let bound = core.config.two_calls_bound();
    let sent_at = core.clock().now();
    let changing = async {
        let change = Change {
            backend: core.backend.clone(),
            route: lease.route,
            token: lease.token.clone(),
            fence: lease.fence,
            ttl: lease.ttl,
        };
        match tokio::time::timeout(bound, step(change)).await {
            Ok(answer) => answer,
            Err(_) => Err(LockError::redis_timeout("downgrade", bound)),
        }
    };
    // Boxed for the same reason as an acquisition (see `Asked::attempt`).
    let changing: BoxFuture<'_, Result<Option<u64>, LockError>> =
        Box::pin(core.host.enter(changing));
    let fence = match changing.await {
        Ok(Some(fence)) => fence,
        // The hold's drop lets go of it, and finds it gone if it is.
        Ok(None) => {
            return Err(LockError::Lost {
                key: lease.keys.name().to_owned(),
            });
        }
        Err(err) => return Err(err),
    };
    let retired = hold.retire();
    Ok(follow(&core, into, fence, sent_at, retired))
}

/// The hold of `into` that follows a retired one, confirmed by a step sent at
/// `sent_at`.
fn follow<Q: Primitive>(
    core: &Arc<Core>,
    into: Q,
    fence: u64,
    sent_at: Instant,
    retired: Retired,
) -> Hold<Q> {
    let old = &retired.lease;
    let lease = Arc::new(Lease::new(Grant {
        id: core.next_lease_id(),
        keys: old.keys.clone(),
        also: old.also.clone(),
        leased: into.leased(),
        role: Role::Hold,
        token: old.token.clone(),
        fence,
        ttl: old.ttl,
        route: old.route,
        sent_at,
        granted_at: old.granted_at(),
        fence_basis: FenceBasis::issued_now(fence),
        clock: old.clock,
        // The cap counts from the first hold (the watchdog counts it from
        // this send): a change does not start it again.
        max_hold: old
            .max_hold
            .map(|cap| cap.saturating_sub(sent_at.saturating_duration_since(old.granted_at()))),
        labels: old.labels,
        first_lease: FirstLease::Ttl,
    }));
    Counters::bump(&core.counters.acquired);
    let watched = core
        .watchdog
        .watch(lease.clone(), retired.renews, sent_at, None);
    Hold::new(
        lease,
        core.clone(),
        into,
        retired.landing,
        watched,
        retired.renews,
        None,
    )
}
