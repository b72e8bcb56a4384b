//! Renewing leases on the server: the watchdog's batches.
//!
//! Every holder of every primitive is a lease with an owner token, kept on
//! the server in one of a few ways (its [`LeaseKind`]). One batch renews
//! leases of any mix of kinds in one command per node: each entry carries
//! its kind, and the script ([`scripts::EXTEND`]) renews each as its kind
//! says, answering one outcome per entry. On Redlock the same batch runs on
//! every master, and a lease counts renewed where a majority renewed it
//! ([`votes`]).

mod scripts;
pub(crate) mod twin;
mod votes;

use std::sync::Arc;
use std::time::Duration;

use self::votes::RenewalVotes;
use crate::backend::redlock::{RedlockBackend, quorum_among};
use crate::backend::{Backend, BatchEntry};
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::owner::OwnerToken;

/// Redlock's fence counters (one per master, shared by every lock of a
/// locker) stand at least here once seeded from a master's clock (µs
/// since the Unix epoch, 1e15 is 2001); a counter below it was counted up
/// from nothing (a master that came back empty) and is seeded before its
/// next fence is handed out, by a grant or by a renewal that raises it.
pub(crate) const SEEDED: i64 = 1_000_000_000_000_000;

/// How a lease is kept on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaseKind {
    /// A key that holds the owner token (marked by a waiter or not), whose
    /// expiry is the lease: the exclusive lock's.
    Key,
    /// A member of a sorted set, the owner token, scored by its deadline
    /// on the server's clock (ms): many holders of one resource at once
    /// (readers, permits, places in a queue), each with a lease of its own.
    Member,
}

impl LeaseKind {
    /// The letter the renewal scripts know the kind by.
    fn letter(self) -> &'static str {
        match self {
            LeaseKind::Key => "k",
            LeaseKind::Member => "m",
        }
    }
}

/// One entry of a renewal batch.
pub(crate) struct Renewal<'a> {
    pub(crate) kind: LeaseKind,
    /// The resource; the lease's key is its lock key followed by `suffix`.
    pub(crate) keys: &'a LockKeys,
    /// Further resources held under the same lease, keyed the same way
    /// (see [`crate::engine::lease::Lease::also`]).
    pub(crate) also: &'a [LockKeys],
    pub(crate) suffix: &'static str,
    /// How many may hold the resource at once (see
    /// [`crate::engine::lease::Leased::holders`]): on Redlock, how many
    /// masters must renew it.
    pub(crate) holders: u32,
    pub(crate) token: &'a OwnerToken,
    pub(crate) ttl_ms: u64,
    /// The fence the holder was given (Redlock raises counters to it).
    pub(crate) fence: u64,
}

impl<'a> Renewal<'a> {
    /// The lease's key on the server.
    fn key(&self) -> std::borrow::Cow<'_, str> {
        if self.suffix.is_empty() {
            std::borrow::Cow::Borrowed(self.keys.lock())
        } else {
            std::borrow::Cow::Owned(format!("{}{}", self.keys.lock(), self.suffix))
        }
    }

    /// One entry per key the lease holds: its own first, then each of
    /// [`Self::also`], as leases of one resource each.
    fn per_key(&self) -> impl Iterator<Item = Renewal<'a>> + '_ {
        std::iter::once(self.keys)
            .chain(self.also)
            .map(|keys| Renewal {
                kind: self.kind,
                keys,
                also: &[],
                holders: self.holders,
                suffix: self.suffix,
                token: self.token,
                ttl_ms: self.ttl_ms,
                fence: self.fence,
            })
    }
}

/// The answer for a lease of several keys from the answers for each: gone
/// when any key is gone (the hold is lost as a whole), renewed when every
/// key was, otherwise unknown.
fn fold(answers: &[Renewed]) -> Renewed {
    if answers.contains(&Renewed::Gone) {
        Renewed::Gone
    } else if answers.iter().all(|answer| *answer == Renewed::Yes) {
        Renewed::Yes
    } else {
        Renewed::Unknown
    }
}

/// What a renewal found for one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Still ours, with a fresh lease from the moment the batch was sent.
    Yes,
    /// Definitely not ours any more: the holder must be told at once.
    Gone,
    /// Could not be confirmed either way (a node failed); retried while the
    /// lease is still valid.
    Unknown,
}

impl Renewed {
    /// Reads one entry of an extend script's answer: 1 (renewed) or 0 (not ours).
    pub(crate) fn from_value(value: &redis::Value) -> Result<Self, LockError> {
        match value {
            redis::Value::Int(1) => Ok(Self::Yes),
            redis::Value::Int(0) => Ok(Self::Gone),
            other => Err(LockError::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the extend script answered neither 1 nor 0",
                format!("{other:?}"),
            )))),
        }
    }
}

/// Renews a batch of leases; one answer per entry, in order. A lease of
/// several keys is renewed key by key in the same batch (on a cluster,
/// each key in its own slot's call of the same round) and answered as a
/// whole ([`fold`]).
pub(crate) async fn renew(
    backend: &Backend,
    batch: &[Renewal<'_>],
) -> Result<Vec<Renewed>, LockError> {
    if batch.iter().all(|renewal| renewal.also.is_empty()) {
        return renew_keys(backend, batch).await;
    }
    let keys: Vec<Renewal<'_>> = batch.iter().flat_map(|renewal| renewal.per_key()).collect();
    let answers = renew_keys(backend, &keys).await?;
    let mut answers = answers.into_iter();
    Ok(batch
        .iter()
        .map(|renewal| {
            let own: Vec<Renewed> = answers.by_ref().take(1 + renewal.also.len()).collect();
            fold(&own)
        })
        .collect())
}

/// Renews a batch of leases of one key each; one answer per entry, in order.
async fn renew_keys(backend: &Backend, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
    let node = match backend {
        Backend::Node(node) => node,
        Backend::Redlock(masters) => return renew_on_masters(masters, batch).await,
    };
    let entries: Vec<BatchEntry> = batch
        .iter()
        .map(|renewal| BatchEntry {
            key: renewal.key().into_owned(),
            args: vec![
                renewal.kind.letter().to_owned(),
                renewal.token.as_str().to_owned(),
                renewal.ttl_ms.to_string(),
            ],
        })
        .collect();
    let answers = node.run_batch(&scripts::EXTEND, &entries).await?;
    answers
        .iter()
        .map(|answer| match answer {
            Some(value) => Renewed::from_value(value),
            None => Ok(Renewed::Unknown),
        })
        .collect()
}

/// Renews a batch on every master at once, each on its watchdog
/// connection; one answer per lease: confirmed when as many masters
/// renewed it as its grant needed (a majority, or more for a semaphore:
/// [`quorum_among`]), *gone* when so many masters refused it that this
/// is no longer possible, otherwise (failed masters) unknown, and the watchdog retries
/// it until the lease's validity, counted from the round's send, runs
/// out. Each master's call is bounded by a tenth of the *shortest* lease
/// of the batch: the round answers once every lease is decided or that
/// bound ends, so a longer bound would hold back a short lease that a
/// majority renewed (while a long one waits for a slow master) past its
/// own validity. A long lease left undecided by the shorter bound is
/// renewed again soon, with most of its validity to spare.
async fn renew_on_masters(
    masters: &RedlockBackend,
    batch: &[Renewal<'_>],
) -> Result<Vec<Renewed>, LockError> {
    let Some(first) = batch.first() else {
        return Ok(Vec::new());
    };
    let shortest = batch.iter().map(|renewal| renewal.ttl_ms).min();
    let bound = masters.vote_bound(Duration::from_millis(shortest.unwrap_or(u64::MAX)));
    let total = masters.len();
    let needed: Vec<usize> = batch
        .iter()
        .map(|renewal| quorum_among(total, renewal.holders))
        .collect();
    // The first answer count at which some lease may be decided.
    let decisive = needed
        .iter()
        .map(|&needed| needed.min(total + 1 - needed))
        .min()
        .unwrap_or(total);
    let mut votes = RenewalVotes::new(total, needed);
    let (mut answered, mut first_error) = (0, None);
    let mut call = scripts::EXTEND_COUNTED.call();
    call.key(first.keys.counter());
    for renewal in batch {
        call.key(&renewal.key())
            .arg(renewal.kind.letter())
            .arg(renewal.token.as_str())
            .arg(renewal.ttl_ms)
            .arg(renewal.fence);
    }
    let call = Arc::new(call);
    let leases = batch.len();
    let mut round = masters
        .fan_out(0..total, bound, "extend", None, |_, master| {
            let call = call.clone();
            async move {
                let answer = master.run_renewal(&call).await?;
                crate::backend::batch_answers(answer, leases)?
                    .iter()
                    .map(|value| Renewed::from_value(value).map(|renewed| renewed == Renewed::Yes))
                    .collect::<Result<Vec<bool>, LockError>>()
            }
        })
        .decisive_from(decisive);
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

/// The renewal scripts, for loading on a fresh master.
pub(crate) fn scripts() -> [&'static crate::backend::script::LuaScript; 2] {
    [&*scripts::EXTEND, &*scripts::EXTEND_COUNTED]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_of_several_keys_is_gone_when_any_is() {
        use Renewed::{Gone, Unknown, Yes};
        assert_eq!(fold(&[Yes, Yes, Yes]), Yes);
        assert_eq!(fold(&[Yes, Unknown, Yes]), Unknown);
        assert_eq!(fold(&[Yes, Unknown, Gone]), Gone);
        assert_eq!(fold(&[Gone]), Gone);
    }

    #[test]
    fn reads_renewals() {
        assert_eq!(
            Renewed::from_value(&redis::Value::Int(1)).unwrap(),
            Renewed::Yes
        );
        assert_eq!(
            Renewed::from_value(&redis::Value::Int(0)).unwrap(),
            Renewed::Gone
        );
        assert!(Renewed::from_value(&redis::Value::Nil).is_err());
    }

    #[test]
    fn the_counted_renewal_seeds_a_counter_below_the_floor() {
        let floor = format!("if counter < {SEEDED} then");
        assert!(scripts::EXTEND_COUNTED.source().contains(&floor));
    }
}
