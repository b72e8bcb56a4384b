//! [`LockInfo`]: what an operator can learn about a lock from the servers
//! ([`Locker::inspect`](crate::Locker::inspect)).

use std::time::Duration;

/// One lock as the server sees it (Redlock: as a majority of masters see
/// it): who holds it, with which fence, and for how long yet.
///
/// ```no_run
/// # async fn run(locker: lock_runtime::Locker) -> Result<(), lock_runtime::LockError> {
/// let info = locker.inspect("stock:42").await?;
/// if info.held {
///     println!("held by {:?}, fence {:?}, {:?} left", info.holder, info.fence, info.remaining);
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
    /// The holder's fencing token.
    pub fence: Option<u64>,
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
            fence: None,
            remaining: None,
        }
    }

    /// A lock whose key holds `value`, with `pttl` ms left (negative: no
    /// expiry).
    pub(crate) fn held(key: &str, value: &str, pttl: i64) -> Self {
        let public = crate::token::holder_and_fence(value);
        Self {
            key: key.to_owned(),
            held: true,
            holder: public.map(|(label, _)| label.to_owned()),
            fence: public.map(|(_, fence)| fence),
            remaining: u64::try_from(pttl).ok().map(Duration::from_millis),
        }
    }
}
