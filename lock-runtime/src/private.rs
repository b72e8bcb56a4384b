//! What `#[distributed_lock]` expands to: the generated code's one door
//! into this crate. Not a public API: it may change in any release.

pub use crate::attribute::{Mode, OnReleaseError, Options, Permits, run_locked, run_locked_all};
pub use crate::engine::lost::OnLost;

use crate::error::LockError;
use crate::locker::Locker;
use crate::locker::source::LockerSource;

/// The global locker, for an attribute without `locker = ..`.
pub fn global_locker() -> Result<Locker, LockError> {
    crate::locker::global::global().cloned()
}

/// The locker named by `locker = ..`.
pub fn locker_from<S: LockerSource + ?Sized>(source: &S) -> Result<Locker, LockError> {
    source.locker().cloned()
}

/// A `Result`: what an annotated function must return, so that a lock
/// failure has somewhere to go.
#[diagnostic::on_unimplemented(
    message = "`#[distributed_lock]` functions must return a `Result`, not `{Self}`",
    label = "not a `Result`",
    note = "so that a lock failure has somewhere to go: return `Result<T, E>` with `E: From<lock_runtime::LockError>`"
)]
pub trait ReturnsResult {
    /// `E` of `Result<T, E>`.
    type Error;

    /// `Err(error)`.
    fn from_error(error: Self::Error) -> Self;
}

impl<T, E> ReturnsResult for Result<T, E> {
    type Error = E;

    fn from_error(error: E) -> Self {
        Err(error)
    }
}

/// Never called: the generated code names it in a `return` that is never
/// taken, so that an annotated body's output is the declared return type
/// before the body's own `return`s are checked against it (a mismatch is
/// then reported at the user's `return`, not at the attribute).
pub fn declared_output<T>() -> T {
    unreachable!("the generated code never calls it")
}
