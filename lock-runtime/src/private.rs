//! What `#[distributed_lock]` expands to: the generated code's one door
//! into this crate. Not a public API: it may change in any release.

pub use crate::attribute::{Options, run_locked};
pub use crate::lost::OnLost;

use crate::error::LockError;
use crate::locker::Locker;
use crate::locker_source::LockerSource;

/// The global locker, for an attribute without `locker = ..`.
pub fn global_locker() -> Result<Locker, LockError> {
    crate::global().cloned()
}

/// The locker named by `locker = ..`.
pub fn locker_from<S: LockerSource + ?Sized>(source: &S) -> Result<Locker, LockError> {
    source.locker().cloned()
}

/// Converts a lock failure into the function's error type. A generic
/// function rather than an inline `From::from`, so that functions returning
/// `Result<_, LockError>` do not trip `clippy::useless_conversion`.
pub fn lock_error_into<E: From<LockError>>(error: LockError) -> E {
    E::from(error)
}

/// Never called: the generated code names it in a `return` that is never
/// taken, so that an annotated body's output is the declared return type
/// before the body's own `return`s are checked against it (a mismatch is
/// then reported at the user's `return`, not at the attribute).
pub fn declared_output<T>() -> T {
    unreachable!("the generated code never calls it")
}
