//! Redlock's topology: N independent masters (no replication between
//! them), each with its own connections. A call runs on every master at
//! once ([`RedlockBackend::fan_out`]); what the answers mean, and how many
//! make a majority decision, is the primitive's business
//! (`crate::primitive::exclusive::quorum`).
//!
//! Masters unreachable at start-up are retried in the background when next
//! used ([`master`]); a locker starts when a majority answers.

mod calls;
mod fan_out;
mod master;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub(crate) use self::fan_out::Round;
use futures_util::future::join_all;

use self::master::Master;
use super::ReleaseFeed;
use super::flights::InFlight;
use super::script::LuaScript;
use super::single::SingleBackend;
use crate::config::LockConfig;
use crate::error::LockError;

/// The masters of one Redlock deployment.
#[derive(Clone)]
pub(crate) struct RedlockBackend {
    masters: Arc<[Arc<Master>]>,
    next: Arc<AtomicUsize>,
    pool_size: usize,
    /// Upper bound of one call on one master.
    call_bound: Duration,
    /// For how long after its start a master's grants count only when
    /// every master granted.
    quarantine: Duration,
}

/// Masters a majority of `masters` needs: N/2 + 1.
pub(crate) fn quorum(masters: usize) -> usize {
    quorum_among(masters, 1)
}

/// Masters a grant needs when up to `holders` may hold one resource at
/// once (a semaphore's limit K): floor(N*K/(K+1)) + 1, the fewest for
/// which any K + 1 grants share a master, whose script refuses the extra
/// one (with K = 1, a majority).
pub(crate) fn quorum_among(masters: usize, holders: u32) -> usize {
    let holders = usize::try_from(holders.max(1)).unwrap_or(usize::MAX);
    masters.saturating_mul(holders) / holders.saturating_add(1) + 1
}

impl RedlockBackend {
    /// Connects to every master at once, and loads `scripts` on each.
    /// Succeeds when a majority answers within the connect timeout; the
    /// others are retried in the background when next used.
    pub(crate) async fn connect(
        infos: &[redis::ConnectionInfo],
        config: &LockConfig,
        scripts: &'static [&'static LuaScript],
    ) -> Result<Self, LockError> {
        if infos.is_empty() {
            return Err(LockError::config("Redlock needs a list of masters"));
        }
        let masters: Vec<Arc<Master>> = infos
            .iter()
            .map(|info| Master::new(info.clone(), config, scripts).map(Arc::new))
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
            masters: masters.into(),
            next: Arc::new(AtomicUsize::new(0)),
            pool_size: config.pool_size,
            call_bound: config.call_bound(),
            quarantine: config.quarantine(),
        })
    }

    /// The restart quarantine (see `LockConfig::restart_quarantine`);
    /// every lease must be at most this long.
    pub(crate) fn quarantine(&self) -> Duration {
        self.quarantine
    }

    /// How many masters there are.
    pub(crate) fn len(&self) -> usize {
        self.masters.len()
    }

    /// A pool slot, used on every master for one acquisition, its clean-up
    /// and its release, so that each master runs them in that order.
    pub(crate) fn pick(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.pool_size
    }

    /// Bound of one master's answer in a round on leases of `ttl`: a dead
    /// or frozen master must not eat the lease, so at most a tenth of it.
    pub(crate) fn vote_bound(&self, ttl: Duration) -> Duration {
        self.call_bound.min(ttl / 10)
    }

    /// Release messages come from every master (see [`ReleaseFeed::EachOf`]).
    pub(crate) fn release_feed(&self) -> ReleaseFeed {
        ReleaseFeed::EachOf(self.masters.iter().map(|master| master.client()).collect())
    }

    /// Starts `call` on each master of `masters` (given its index), each
    /// bounded by `bound`; the round yields `(master, answer)` as answers
    /// arrive and ends when every call has ended. The calls run to their
    /// end whether or not anyone still reads their answers, each carrying
    /// `flight` (when given) for its master until it ends.
    pub(crate) fn fan_out<T, Fut>(
        &self,
        masters: impl IntoIterator<Item = usize>,
        bound: Duration,
        what: &'static str,
        flight: Option<&InFlight>,
        call: impl Fn(usize, Arc<SingleBackend>) -> Fut,
    ) -> Round<T>
    where
        T: Send + 'static,
        Fut: std::future::Future<Output = Result<T, LockError>> + Send + 'static,
    {
        fan_out::fan_out(&self.masters, masters, bound, what, flight, call)
    }
}
