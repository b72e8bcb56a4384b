//! The Redlock round, as every primitive runs it: a call fanned out to
//! every master, the answers counted by the primitive's rule as they come
//! ([`run_everywhere`]), the masters a failed round may have left holding
//! something undone ([`undo_on`]), and letting go everywhere while
//! answering at the pace of the masters a decision needs
//! ([`let_go_everywhere`]). What a vote means, and how many masters make a
//! decision, is the primitive's. A primitive whose holders are leases in
//! each master's own data (readers, permits) runs its tries as one
//! [`round::grant_round`], counted by [`votes`].

pub(crate) mod round;
pub(crate) mod votes;

use std::sync::Arc;
use std::time::Duration;

use crate::backend::Route;
use crate::backend::flights::{InFlight, Landing};
use crate::backend::redlock::{RedlockBackend, Round};
use crate::backend::script::ScriptCall;
use crate::error::LockError;

/// Runs `call` on each of `on` (pool slot `route.conn` of every master),
/// answers as they come; see [`RedlockBackend::fan_out`].
pub(crate) fn run_everywhere<T: redis::FromRedisValue + Send + 'static>(
    masters: &RedlockBackend,
    on: impl IntoIterator<Item = usize>,
    route: Route,
    call: ScriptCall,
    bound: Duration,
    flight: Option<&InFlight>,
) -> Round<T> {
    let call = Arc::new(call);
    masters.fan_out(on, bound, "a lock script", flight, move |_, master| {
        let call = call.clone();
        async move { master.run(route, &call).await }
    })
}

/// Runs the letting-go `call` on `on`, and waits for each (or its bound):
/// a retry of the same acquisition, sent after this, cannot overtake it.
pub(crate) async fn undo_on(
    masters: &RedlockBackend,
    on: impl IntoIterator<Item = usize>,
    route: Route,
    call: ScriptCall,
    bound: Duration,
) {
    let mut round =
        run_everywhere::<i64>(masters, on, route, call, bound, None).decisive_from(usize::MAX);
    while round.recv().await.is_some() {}
}

/// Runs a letting-go `call` (answering 1 when it let go of something) on
/// every master, each after `landing` landed there; true when any master
/// that answered let go. Returns once `needed` answered (the calls on
/// slower masters go on in the background, each in its order); fails
/// when fewer did and none of them let go (the masters that did not
/// answer may hold it: "not there" would be a guess).
pub(crate) async fn let_go_everywhere(
    masters: &RedlockBackend,
    route: Route,
    call: ScriptCall,
    landing: Option<&Landing>,
    needed: usize,
) -> Result<bool, LockError> {
    let total = masters.len();
    let bound = masters.vote_bound(Duration::MAX);
    let call = Arc::new(call);
    let landing = landing.cloned();
    let mut round = masters
        .fan_out(
            0..total,
            bound,
            "a lock script",
            None,
            move |index, master| {
                let (call, landing) = (call.clone(), landing.clone());
                async move {
                    if let Some(landing) = landing {
                        landing.landed_on(index).await;
                    }
                    master.run::<i64>(route, &call).await
                }
            },
        )
        .decisive_from(needed);
    let (mut answered, mut deleted, mut first_error) = (0, false, None);
    while let Some((_, answer)) = round.recv().await {
        match answer {
            Ok(here) => {
                answered += 1;
                deleted |= here == 1;
            }
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
        if answered >= needed {
            break;
        }
    }
    match first_error {
        Some(err) if answered < needed && !deleted => Err(err),
        _ => Ok(deleted),
    }
}

/// A master whose connection failed (refused, never reached, or dropped
/// under the call) is down for now: its manager reconnects meanwhile, so an
/// acquisition asks such a majority once more at once, and then gives up.
/// One that timed out or answered an error may only be slow.
pub(crate) fn is_down(err: &LockError) -> bool {
    matches!(err, LockError::Redis(err)
        if (err.is_connection_refusal() || err.is_connection_dropped()) && !err.is_timeout())
}
