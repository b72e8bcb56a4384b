//! [`LockError`]: everything that can go wrong while taking, holding or
//! releasing a lock.

use std::time::Duration;

/// Why a lock operation failed.
///
/// The enum is `#[non_exhaustive]`: match the variants you handle and keep a
/// `_` arm, so that new failure modes (new backends bring new ones) are not a
/// breaking change.
///
/// ```
/// use lock_runtime::LockError;
/// use std::time::Duration;
///
/// let err = LockError::Timeout { key: "stock:42".into(), waited: Duration::from_secs(2) };
/// assert_eq!(err.to_string(), "timed out after 2s waiting for lock `stock:42`");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The process-wide locker was used before [`crate::init`] ran, or
    /// the cell an attribute's `locker = ..` names
    /// ([`LockerSource`](crate::LockerSource)) was never filled.
    #[error(
        "the locker is not initialized: call `lock_runtime::init(config).await` at start-up, or, for `#[distributed_lock(locker = CELL)]`, fill that cell first (`CELL.set(Locker::connect(config).await?)`)"
    )]
    NotInitialized,

    /// [`crate::init`] was called a second time; the first configuration stays in force.
    #[error(
        "the global locker is already initialized; `lock_runtime::init` may be called only once"
    )]
    AlreadyInitialized,

    /// Another owner held the lock for the whole of the caller's `wait`.
    #[error("timed out after {waited:?} waiting for lock `{key}`")]
    Timeout {
        /// The lock key as the caller named it (without the prefix).
        key: String,
        /// How long the caller waited before giving up.
        waited: Duration,
    },

    /// The lock was lost while its owner still relied on it: its renewal was
    /// refused (the key was deleted or taken over) or could not be confirmed
    /// before the lease ran out.
    #[error("lock `{key}` was lost before its owner released it")]
    Lost {
        /// The lock key as the caller named it (without the prefix).
        key: String,
    },

    /// The lock was held for its whole hold cap (`max_hold`): the watchdog
    /// stopped renewing it and its holder was told, as for a loss. A guard
    /// against a stuck task holding a lock forever.
    #[error("lock `{key}` was held for its whole hold cap of {cap:?} and given up")]
    HoldCapExceeded {
        /// The lock key as the caller named it (without the prefix).
        key: String,
        /// The cap it reached.
        cap: std::time::Duration,
    },

    /// The Redis server could not be reached or answered with an error.
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),

    /// Too few independent masters granted the lock (Redlock mode).
    #[error("lock `{key}` reached {granted} of the {needed} masters it needs")]
    QuorumNotReached {
        /// The lock key as the caller named it (without the prefix).
        key: String,
        /// How many masters granted the lock.
        granted: usize,
        /// How many masters a quorum needs.
        needed: usize,
    },

    /// The lock was granted but fewer replicas than asked for confirmed it
    /// within the timeout (see [`crate::LockConfig::wait_for_replicas`]); it
    /// was released again, so nothing is left held.
    #[error(
        "lock `{key}` reached {acked} of the {wanted} replicas it waits for within {timeout:?}; it was released"
    )]
    NotReplicated {
        /// The lock key as the caller named it (without the prefix).
        key: String,
        /// Replicas that acknowledged the lock's write in time.
        acked: u32,
        /// Replicas asked for.
        wanted: u32,
        /// How long the server waited for them.
        timeout: Duration,
    },

    /// A call nested in one that holds the same lock, in the same task, with
    /// `#[distributed_lock(reentrant = false)]`: waiting would wait for the
    /// enclosing call, forever.
    #[error(
        "lock `{key}` is already held by an enclosing call of this task, and this call does not allow reentry (`reentrant = false`)"
    )]
    HeldByThisTask {
        /// The lock key as the caller named it (without the prefix).
        key: String,
    },

    /// A write lock asked by a task that holds a read of the same lock
    /// through the same locker: a read is never upgraded. Two readers
    /// upgrading would each wait for the other's read to end, forever;
    /// release the read first, or take the write from the start.
    #[error(
        "lock `{key}`: this task holds it for reading, and a read is never upgraded to a write (two upgrading readers would wait for each other forever); release the read lock first, or take the write lock from the start"
    )]
    UpgradeRefused {
        /// The lock key as the caller named it (without the prefix).
        key: String,
    },

    /// The body of a `#[distributed_lock(on_release_error = "fail")]`
    /// function ran to its end, but releasing its lock then failed (the
    /// server did not answer in time, or refused): the lock stays held
    /// until its lease ends, and the body's output was dropped. Whatever
    /// the body did took effect; calling again runs it again.
    #[error(
        "the body under lock `{key}` ran, but releasing the lock failed ({source}); it stays held until its lease ends"
    )]
    ReleaseFailed {
        /// The lock key as the caller named it (without the prefix).
        key: String,
        /// Why the release failed.
        source: Box<LockError>,
    },

    /// A configuration value or lock request was invalid; the message says
    /// what to change.
    #[error("invalid lock configuration: {0}")]
    Config(String),
}

/// For functions returning `std::io::Result`: a lock failure becomes an
/// `io::Error` of the closest kind, with the `LockError` as its source.
///
/// ```
/// use lock_runtime::LockError;
/// use std::time::Duration;
///
/// let io: std::io::Error = LockError::Timeout { key: "k".into(), waited: Duration::ZERO }.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// ```
impl From<LockError> for std::io::Error {
    fn from(error: LockError) -> Self {
        use std::io::ErrorKind;
        let kind = match &error {
            LockError::Timeout { .. } => ErrorKind::TimedOut,
            LockError::Lost { .. } | LockError::HoldCapExceeded { .. } => ErrorKind::Interrupted,
            LockError::Config(_) => ErrorKind::InvalidInput,
            LockError::NotInitialized
            | LockError::AlreadyInitialized
            | LockError::HeldByThisTask { .. }
            | LockError::UpgradeRefused { .. } => ErrorKind::Other,
            LockError::Redis(redis) if redis.is_timeout() => ErrorKind::TimedOut,
            LockError::ReleaseFailed { .. } => ErrorKind::Other,
            LockError::Redis(_)
            | LockError::QuorumNotReached { .. }
            | LockError::NotReplicated { .. } => ErrorKind::NotConnected,
        };
        std::io::Error::new(kind, error)
    }
}

impl LockError {
    pub(crate) fn config(message: impl Into<String>) -> Self {
        LockError::Config(message.into())
    }

    /// A Redis call that did not finish within its time bound.
    pub(crate) fn redis_timeout(what: &str, after: Duration) -> Self {
        let io = std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{what} got no answer within {after:?}"),
        );
        LockError::Redis(redis::RedisError::from(io))
    }
}
