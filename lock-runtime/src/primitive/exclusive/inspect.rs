//! [`LockInfo`]: what an operator can learn about a lock from the servers
//! ([`Locker::inspect`](crate::Locker::inspect)).

use std::time::Duration;

/// One lock as the server sees it (Redlock: as a majority of masters see
/// it): who holds it, for how long yet, and whether anyone waits for it.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let info = locker.inspect("stock:42").await?;
/// if info.held {
///     println!("held by {:?}, {:?} left", info.holder, info.remaining);
///     if info.contended {
///         println!("and others are waiting for it");
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's name, as asked for.
    pub key: String,
    /// Whether anyone holds it.
    pub held: bool,
    /// Who holds it: its locker's
    /// [`holder_label`](crate::LockConfig::holder_label) (never the secret
    /// part of its owner token). None when free, or when the key holds a
    /// value no locker wrote.
    pub holder: Option<String>,
    /// Whether someone else found the lock busy while its holder held it
    /// (a waiter, who will be told of its release, or a caller that tried
    /// once): the holder's locker lets it go after its share.
    pub contended: bool,
    /// How long the holder's lease still runs on the server, unless it is
    /// renewed or released first. None when free or without an expiry.
    pub remaining: Option<Duration>,
}

impl LockInfo {
    /// A free lock.
    pub(crate) fn free(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            held: false,
            holder: None,
            contended: false,
            remaining: None,
        }
    }

    /// A lock whose key holds `value`, with `pttl` ms left (negative: no
    /// expiry).
    pub(crate) fn held(key: &str, value: &str, pttl: i64) -> Self {
        let public = crate::owner::stored_value(value);
        Self {
            key: key.to_owned(),
            held: true,
            holder: public.map(|stored| stored.holder.to_owned()),
            contended: public.is_some_and(|stored| stored.contended),
            remaining: u64::try_from(pttl).ok().map(Duration::from_millis),
        }
    }
}
