//! `mode = ".."` and `fair = ..` at run time: which lock an annotated call
//! takes (the exclusive lock, the fair lock, or a side of the read/write
//! lock), the guard it holds while its body runs, and which enclosing
//! holds a nested call runs under.

use super::Options;
use crate::engine::handle::LockHandle;
use crate::error::LockError;
use crate::primitive::exclusive::guard::LockGuard;
use crate::primitive::fair::guard::FairGuard;
use crate::primitive::read_write::guard::{ReadGuard, WriteGuard};

/// The lock an annotated call takes (`mode = ".."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The exclusive lock: no `mode`.
    Exclusive,
    /// `mode = "read"`: a read of the read/write lock.
    Read,
    /// `mode = "write"`: the write of the read/write lock.
    Write,
}

/// A frame's kind (see [`crate::engine::reentrancy::Frame`]) for each mode.
const LOCK: &str = "lock";
const FAIR: &str = "fair";
const READ: &str = "read";
const WRITE: &str = "write";

impl Mode {
    /// The kind of the frame a holding call of this mode pushes.
    pub(super) fn kind(self) -> &'static str {
        match self {
            Mode::Exclusive => LOCK,
            Mode::Read => READ,
            Mode::Write => WRITE,
        }
    }

    /// The kinds of enclosing holds of the same key a call of this mode
    /// does not acquire under: it runs under them, or (a write under a
    /// read, see [`Self::refused_under`]) is refused.
    pub(super) fn nests_under(self) -> &'static [&'static str] {
        match self {
            Mode::Exclusive => &[LOCK],
            Mode::Read | Mode::Write => &[READ, WRITE],
        }
    }

    /// The error of a call of this mode nested in a hold of `kind`, when it
    /// may not run under it: a write under a read (an upgrade, which two
    /// tasks would wait on forever).
    pub(super) fn refused_under(self, kind: &str, key: &str) -> Option<LockError> {
        (self == Mode::Write && kind == READ).then(|| LockError::UpgradeRefused {
            key: key.to_owned(),
        })
    }
}

impl Options {
    /// The kind of the frame a holding call pushes.
    pub(super) fn kind(&self) -> &'static str {
        if self.fair { FAIR } else { self.mode.kind() }
    }

    /// The kinds of enclosing holds of the same key this call does not
    /// acquire under (see [`Mode::nests_under`]).
    pub(super) fn nests_under(&self) -> &'static [&'static str] {
        if self.fair {
            &[FAIR]
        } else {
            self.mode.nests_under()
        }
    }
}

/// The guard a holding call keeps while its body runs.
pub(super) enum BodyGuard {
    Lock(LockGuard),
    Fair(FairGuard),
    Read(ReadGuard),
    Write(WriteGuard),
}

impl BodyGuard {
    pub(super) fn handle(&self) -> LockHandle {
        match self {
            BodyGuard::Lock(guard) => guard.handle(),
            BodyGuard::Fair(guard) => guard.handle(),
            BodyGuard::Read(guard) => guard.handle(),
            BodyGuard::Write(guard) => guard.handle(),
        }
    }

    pub(super) async fn release(self) -> Result<bool, LockError> {
        match self {
            BodyGuard::Lock(guard) => guard.release().await,
            BodyGuard::Fair(guard) => guard.release().await,
            BodyGuard::Read(guard) => guard.release().await,
            BodyGuard::Write(guard) => guard.release().await,
        }
    }
}

/// Sets the attribute's options on a request of any kind.
macro_rules! with_options {
    ($request:expr, $options:expr) => {{
        let options: &Options = $options;
        let mut request = $request
            .watchdog(options.watchdog)
            .template(options.template);
        if let Some(ttl) = options.ttl {
            request = request.ttl(ttl);
        }
        if let Some(wait) = options.wait {
            request = request.wait(wait);
        }
        if let Some(cap) = options.max_hold {
            request = request.max_hold(cap);
        }
        request
    }};
}
pub(super) use with_options;

/// Takes the lock the options name for `key` (the macro refuses `fair`
/// with a `mode`), as a [`BodyGuard`], returning the error from the
/// enclosing `async fn`.
///
/// A macro, not an `async fn`: the request's future then lives in the
/// caller's own state, where an `async fn` would hold it in a layer of its
/// own, copied into the caller's state and polled through it.
macro_rules! acquire {
    ($locker:expr, $key:expr, $options:expr) => {{
        let options: &Options = $options;
        let (locker, key) = ($locker, $key);
        if options.fair {
            BodyGuard::Fair(
                with_options!(locker.fair_lock(key), options)
                    .acquire()
                    .await?,
            )
        } else {
            match options.mode {
                Mode::Exclusive => {
                    BodyGuard::Lock(with_options!(locker.lock(key), options).acquire().await?)
                }
                Mode::Read => BodyGuard::Read(
                    with_options!(locker.read_lock(key), options)
                        .acquire()
                        .await?,
                ),
                Mode::Write => BodyGuard::Write(
                    with_options!(locker.write_lock(key), options)
                        .acquire()
                        .await?,
                ),
            }
        }
    }};
}
pub(super) use acquire;
