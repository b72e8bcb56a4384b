//! [`Contender`]: one lock implementation under test, as the scenarios see it.

use std::future::Future;
use std::time::Duration;

/// Any failure of a benchmark step; it ends the benchmark with its message.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// The result of a benchmark step.
pub type BenchResult<T> = Result<T, BenchError>;

/// A lock taken by [`Contender::acquire`].
#[derive(Debug)]
pub struct Acquired<G> {
    /// The held lock.
    pub guard: G,
    /// Tries that found the lock busy before it was granted, when the
    /// implementation lets us count them.
    pub busy_tries: Option<u64>,
}

/// A lock implementation driven by the scenarios: the project, raw
/// redis-rs commands, or rslock. Cheap to clone; clones share connections.
pub trait Contender: Clone + Send + Sync + 'static {
    /// A held lock, released with [`Contender::unlock`].
    type Guard: Send + 'static;
    /// A held lock kept alive by the implementation's renewal mechanism,
    /// released with [`Contender::release_held`].
    type Held: Send + 'static;

    /// Takes a lock that is expected to be free (one uncontended acquire).
    fn lock(
        &self,
        key: String,
        ttl: Duration,
    ) -> impl Future<Output = BenchResult<Self::Guard>> + Send;

    /// Takes a lock, waiting up to `wait` while someone else holds it, the
    /// way the implementation waits (release message, polling, retry sleeps).
    fn acquire(
        &self,
        key: String,
        ttl: Duration,
        wait: Duration,
    ) -> impl Future<Output = BenchResult<Acquired<Self::Guard>>> + Send;

    /// Releases a lock; `true` when it was still ours and got deleted
    /// (implementations that cannot tell answer `true`).
    fn unlock(&self, guard: Self::Guard) -> impl Future<Output = BenchResult<bool>> + Send;

    /// Takes a free lock and keeps renewing it (every ttl/3) until released.
    fn hold(
        &self,
        key: String,
        ttl: Duration,
    ) -> impl Future<Output = BenchResult<Self::Held>> + Send;

    /// Stops renewing and releases; `true` when the lock was never seen
    /// lost and was still ours at the end.
    fn release_held(&self, held: Self::Held) -> impl Future<Output = BenchResult<bool>> + Send;

    /// Renewal commands sent to Redis so far.
    fn renewal_commands(&self) -> u64;

    /// Renewal rounds so far, for an implementation that sends the
    /// commands of one round together (one round trip per connection);
    /// `None` for one that renews each lock on its own.
    fn renewal_rounds(&self) -> Option<u64> {
        None
    }
}
