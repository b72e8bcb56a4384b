//! Redlock: one lock over N independent masters (no replication between
//! them), held when a majority (N/2 + 1) holds it.
//!
//! # Acquire
//! The acquire script runs on every master at once. Each master's call is
//! bounded by `min(connect_timeout + response_timeout, ttl / 10)`: a dead
//! or frozen master must not eat the lease, and with two rounds (below) at
//! most a fifth of it goes to waiting on masters. The caller counts the
//! lease from the moment it *sent* the request and trusts it for
//! `ttl - elapsed - drift - margin` (drift = ttl/100 + 2 ms, margin =
//! ttl/20); an answer that arrives after that is asked again.
//!
//! - A majority granted: decided at once, without waiting for the other
//!   masters (their calls still run to the end in the background, so the
//!   lock lands on every live master). The highest fence counter of the
//!   majority is the fence (see below). When the counters of a majority
//!   already stand at it (they move in step while every acquisition lands
//!   on every master), that is all; otherwise a second round confirms the
//!   lock on the masters whose counters are behind and raises them to it,
//!   until a majority stands at the fence: acquired.
//! - No majority: decided once every master answered (or hit its bound).
//!   If failed masters (error, timeout, never reached) alone make a
//!   majority impossible: [`LockError::QuorumNotReached`]; otherwise other
//!   owners are in the way: *busy*, and the waiter sleeps until enough of
//!   their leases could end.
//!
//! A round that does not end acquired first deletes our key (compare and
//! delete) on every master that may hold it, and waits for that, so a
//! failed attempt leaves nothing behind and a retry cannot be overtaken by
//! the clean-up of the previous try.
//!
//! # Renew and release
//! A renewal is confirmed for a lease when a majority renewed it, and is
//! *gone* when so many masters refused it that no majority is possible;
//! otherwise (failed masters) it is unknown, and the watchdog retries it
//! until the lease's validity, counted from the round's send, runs out.
//! Release runs on every master and returns once a majority answered; it
//! fails only when every master failed.
//! A release sent while a straggling grant of the same acquisition is
//! still on its way to a slow master can arrive first there: that master
//! then keeps the key, on a minority, until its lease runs out.
//!
//! # Fencing tokens
//! Every master has its own counter per key. The fence handed out is the
//! highest counter among the granting majority, and before the acquire
//! returns, a majority of masters have their counters at it (already, or
//! raised there by a second round on masters still holding our key). Renewals raise the counters again, on every
//! master they reach.
//!
//! **Guaranteed**: when a lock is acquired by a request sent after another
//! acquisition of the same key *returned*, its fence is strictly greater.
//! Two majorities share a master; on that master the earlier owner raised
//! the counter to its fence before returning, and the later owner's
//! grant there increments it. This needs no clock: it holds even when a
//! lease ran out early.
//!
//! **Not guaranteed**:
//! - A master that loses its data (restarted without persistence,
//!   `FLUSHALL`, the fence key evicted under `maxmemory`, a failover to a
//!   replica that lagged) restarts its counters: if it is the only master
//!   two majorities share, the later fence can be lower. Persist every
//!   master (`appendonly yes`, `appendfsync always`) and keep the fence
//!   keys out of eviction. A renewal repairs the counters of the locks it
//!   renews, not of others.
//! - Two acquisitions in flight at the same time are ordered only by who
//!   got the majority; the fence says which one got it later, not which
//!   request was sent first.
//! - Fences are not consecutive: failed attempts increment some counters.
//! - Mutual exclusion itself rests on leases, hence on clocks: a master
//!   whose clock jumps forward expires a key early (as with any Redlock).
//!
//! # Release messages
//! Waiters subscribe on one master at a time, moving to the next after
//! every connection failure. A release publishes on every master it
//! deleted on; a majority of masters, so usually the subscribed one too.
//! When the subscribed master did not hold the lock, the waiter wakes on
//! the owner's lease end or its backoff instead.

mod fan_out;
mod master;
mod votes;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;

use self::fan_out::fan_out;
use self::master::Master;
use self::votes::{AcquireVotes, RenewalVotes, Verdict, Vote, quorum};
use super::{AcquireReply, ClientSource, ReleaseFeed, Renewal, Renewed};
use crate::config::ReplicaAck;
use crate::keys::LockKeys;
use crate::scripts;
use crate::token::OwnerToken;
use crate::{LockConfig, LockError};

/// The masters of one Redlock deployment.
#[derive(Clone)]
pub(crate) struct RedlockBackend {
    masters: Arc<[Arc<Master>]>,
    next: Arc<AtomicUsize>,
    pool_size: usize,
    /// Upper bound of one call on one master.
    call_bound: Duration,
    /// Where the release listener subscribes first.
    first_reached: usize,
}

impl RedlockBackend {
    /// Connects to every master at once. Succeeds when a majority answers
    /// within the connect timeout; the others are retried in the
    /// background when next used.
    pub(crate) async fn connect(
        infos: &[redis::ConnectionInfo],
        config: &LockConfig,
    ) -> Result<Self, LockError> {
        if infos.is_empty() {
            return Err(LockError::config("Redlock needs a list of masters"));
        }
        let masters: Vec<Arc<Master>> = infos
            .iter()
            .map(|info| Master::new(info.clone(), config).map(Arc::new))
            .collect::<Result<_, _>>()?;
        let results = join_all(masters.iter().map(|master| master.connect())).await;
        let (total, needed) = (masters.len(), quorum(masters.len()));
        let reached = results.iter().filter(|result| result.is_ok()).count();
        for (master, result) in masters.iter().zip(&results) {
            if let Err(err) = result {
                tracing::warn!(master = %master.addr(), error = %err, "Redlock master unreachable at start-up");
            }
        }
        if reached < needed {
            let why = results
                .iter()
                .find_map(|result| result.as_ref().err())
                .map(ToString::to_string)
                .unwrap_or_default();
            return Err(LockError::Redis(redis::RedisError::from((
                redis::ErrorKind::Io,
                "too few Redlock masters reachable",
                format!("reached {reached} of {total}, a lock needs {needed}; {why}"),
            ))));
        }
        Ok(Self {
            first_reached: results.iter().position(Result::is_ok).unwrap_or(0),
            masters: masters.into(),
            next: Arc::new(AtomicUsize::new(0)),
            pool_size: config.pool_size,
            call_bound: config.connect_timeout + config.response_timeout,
        })
    }

    /// A pool slot, used on every master for one acquisition, its clean-up
    /// and its release, so that each master runs them in that order.
    pub(crate) fn pick(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.pool_size
    }

    /// Release messages come from one master at a time, the next one after
    /// each failure.
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        let clients: Arc<[redis::Client]> =
            self.masters.iter().map(|master| master.client()).collect();
        let turn = Arc::new(AtomicUsize::new(self.first_reached));
        ReleaseFeed::PubSub(ClientSource::new(move || {
            let client = clients[turn.fetch_add(1, Ordering::Relaxed) % clients.len()].clone();
            Box::pin(async move { Ok(client) })
        }))
    }

    /// Bound of one master's answer in a round on leases of `ttl_ms`.
    fn vote_bound(&self, ttl_ms: u64) -> Duration {
        self.call_bound.min(Duration::from_millis(ttl_ms) / 10)
    }

    /// One acquire round on every master (see the module docs).
    pub(crate) async fn acquire(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        ttl_ms: u64,
        replicas: Option<ReplicaAck>,
    ) -> Result<AcquireReply, LockError> {
        if replicas.is_some() {
            return Err(LockError::config(
                "wait_for_replicas does not apply to Redlock: its masters are independent; list more masters instead",
            ));
        }
        let bound = self.vote_bound(ttl_ms);
        let total = self.masters.len();
        let mut votes = AcquireVotes::new(total);
        let mut answered = 0;
        let (owned_keys, owned_token) = (keys.clone(), token.clone());
        let mut round = fan_out(&self.masters, 0..total, bound, "acquire", move |backend| {
            let (keys, token) = (owned_keys.clone(), owned_token.clone());
            async move { backend.acquire(conn, &keys, &token, ttl_ms, None).await }
        });
        while let Some((index, answer)) = round.recv().await {
            answered += 1;
            votes.add(
                index,
                match answer {
                    Ok(AcquireReply::Acquired { fence }) => Vote::Granted(fence),
                    Ok(AcquireReply::Busy { pttl }) => Vote::Busy(pttl),
                    Err(_) => Vote::Failed,
                },
            );
            if votes.decided().is_some() {
                break;
            }
        }
        let needed = quorum(total);
        let quorum_not_reached = |granted| LockError::QuorumNotReached {
            key: keys.name().to_owned(),
            granted,
            needed,
        };
        match votes.verdict(total - answered) {
            Verdict::Granted {
                fence,
                at_fence,
                behind,
            } => {
                // Counters in step (the usual case) already stand at the
                // fence on a majority: no second round.
                let raised = if at_fence >= needed {
                    0
                } else {
                    self.raise_fence(conn, keys, token, fence, behind, needed - at_fence, bound)
                        .await
                };
                if at_fence + raised >= needed {
                    return Ok(AcquireReply::Acquired { fence });
                }
                self.clean_up(conn, keys, token, 0..total, bound).await;
                Err(quorum_not_reached(at_fence + raised))
            }
            Verdict::Busy { pttl } => {
                self.clean_up(conn, keys, token, votes.maybe_ours(), bound)
                    .await;
                Ok(AcquireReply::Busy { pttl })
            }
            Verdict::Failed { granted } => {
                self.clean_up(conn, keys, token, votes.maybe_ours(), bound)
                    .await;
                Err(quorum_not_reached(granted))
            }
        }
    }

    /// Confirms the lock on `granted` and raises their counters to `fence`;
    /// answers on how many masters both happened (counting stops once
    /// `needed` did).
    #[allow(clippy::too_many_arguments)] // one round's full context
    async fn raise_fence(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        fence: u64,
        granted: Vec<usize>,
        needed: usize,
        bound: Duration,
    ) -> usize {
        let mut pending = granted.len();
        let mut invocation = scripts::RAISE_FENCE.key(keys.lock());
        invocation.key(keys.fence()).arg(token.as_str()).arg(fence);
        let invocation = Arc::new(invocation);
        let mut round = fan_out(&self.masters, granted, bound, "confirm", |backend| {
            let (invocation, mut connection) = (invocation.clone(), backend.pool[conn].clone());
            async move {
                let ours: i64 = invocation.invoke_async(&mut connection).await?;
                Ok(ours == 1)
            }
        });
        let mut confirmed = 0;
        while let Some((_, answer)) = round.recv().await {
            pending -= 1;
            confirmed += usize::from(matches!(answer, Ok(true)));
            if confirmed >= needed || confirmed + pending < needed {
                break;
            }
        }
        confirmed
    }

    /// Deletes our key, where it is ours, on `masters`; waits for each (or
    /// its bound), so a retry of this acquisition cannot overtake it.
    async fn clean_up(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        masters: impl IntoIterator<Item = usize>,
        bound: Duration,
    ) {
        let mut round = self.release_on(conn, keys, token, masters, bound);
        while round.recv().await.is_some() {}
    }

    /// Starts a release on each of `masters`.
    fn release_on(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
        masters: impl IntoIterator<Item = usize>,
        bound: Duration,
    ) -> tokio::sync::mpsc::UnboundedReceiver<(usize, Result<bool, LockError>)> {
        let (keys, token) = (keys.clone(), token.clone());
        fan_out(&self.masters, masters, bound, "release", move |backend| {
            let (keys, token) = (keys.clone(), token.clone());
            async move { backend.release(conn, &keys, &token).await }
        })
    }

    /// Deletes the lock on every master where it is ours; true when any
    /// master that answered deleted it. Returns once a majority answered
    /// (the calls on slower masters go on in the background), so a frozen
    /// master does not hold up the caller. Fails only when no master
    /// answered.
    pub(crate) async fn release(
        &self,
        conn: usize,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let all = 0..self.masters.len();
        let needed = quorum(self.masters.len());
        let mut round = self.release_on(conn, keys, token, all, self.call_bound);
        let (mut answered, mut deleted, mut first_error) = (0, false, None);
        while let Some((_, answer)) = round.recv().await {
            match answer {
                Ok(here) => {
                    answered += 1;
                    deleted |= here;
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
            Some(err) if answered == 0 => Err(err),
            _ => Ok(deleted),
        }
    }

    /// Renews a batch on every master at once, each on its watchdog
    /// connection; one answer per lease (see the module docs).
    pub(crate) async fn extend(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let shortest = batch.iter().map(|renewal| renewal.ttl_ms).min();
        let bound = self.vote_bound(shortest.unwrap_or(u64::MAX));
        let total = self.masters.len();
        let mut votes = RenewalVotes::new(total, batch.len());
        let (mut answered, mut first_error) = (0, None);
        let invocation = Arc::new(extend_fenced(batch));
        let leases = batch.len();
        let mut round = fan_out(&self.masters, 0..total, bound, "extend", |backend| {
            let (invocation, mut connection) = (invocation.clone(), backend.renewals.clone());
            async move {
                let renewed: Vec<i64> = invocation.invoke_async(&mut connection).await?;
                let renewed = Renewed::from_script(renewed, leases)?;
                Ok(renewed
                    .into_iter()
                    .map(|answer| answer == Renewed::Yes)
                    .collect::<Vec<_>>())
            }
        });
        while let Some((_, answer)) = round.recv().await {
            match answer {
                Ok(renewed) => {
                    answered += 1;
                    votes.add(Some(&renewed));
                }
                Err(err) => {
                    votes.add(None);
                    first_error.get_or_insert(err);
                }
            }
            if votes.all_decided() {
                break;
            }
        }
        match first_error {
            Some(err) if answered == 0 => Err(err),
            _ => Ok(votes.answers()),
        }
    }
}

/// The renewal of `batch`, as sent to every master.
fn extend_fenced(batch: &[Renewal<'_>]) -> redis::ScriptInvocation<'static> {
    let mut invocation = scripts::EXTEND_FENCED.prepare_invoke();
    for renewal in batch {
        invocation
            .key(renewal.keys.lock())
            .key(renewal.keys.fence())
            .arg(renewal.token.as_str())
            .arg(renewal.ttl_ms)
            .arg(renewal.fence);
    }
    invocation
}
