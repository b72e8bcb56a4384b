//! [`LockerSource`]: what `#[distributed_lock(locker = ..)]` accepts.

use std::sync::{Arc, OnceLock};

use crate::error::LockError;
use crate::locker::Locker;

/// Something that yields a [`Locker`]: a `Locker` itself (a field such as
/// `self.locker`, or a parameter), or a static cell filled at start-up.
///
/// ```no_run
/// use lock_runtime::{distributed_lock, LockError, Locker};
/// use std::sync::OnceLock;
///
/// static ORDERS: OnceLock<Locker> = OnceLock::new();
///
/// #[distributed_lock(key = "order:<id>", locker = ORDERS)]
/// async fn ship(id: u64) -> Result<(), LockError> {
///     Ok(())
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot provide a lock_runtime::Locker",
    label = "expected a `Locker`, or a `OnceLock<Locker>`/`OnceCell<Locker>` static",
    note = "`locker = ..` takes an expression yielding a `Locker`, e.g. `self.locker` or a static `OnceLock<Locker>`"
)]
pub trait LockerSource {
    /// The locker, or [`LockError::NotInitialized`] for an empty cell.
    fn locker(&self) -> Result<&Locker, LockError>;
}

impl LockerSource for Locker {
    fn locker(&self) -> Result<&Locker, LockError> {
        Ok(self)
    }
}

impl LockerSource for OnceLock<Locker> {
    fn locker(&self) -> Result<&Locker, LockError> {
        self.get().ok_or(LockError::NotInitialized)
    }
}

impl LockerSource for once_cell::sync::OnceCell<Locker> {
    fn locker(&self) -> Result<&Locker, LockError> {
        self.get().ok_or(LockError::NotInitialized)
    }
}

impl<T: LockerSource + ?Sized> LockerSource for &T {
    fn locker(&self) -> Result<&Locker, LockError> {
        (**self).locker()
    }
}

impl<T: LockerSource + ?Sized> LockerSource for Arc<T> {
    fn locker(&self) -> Result<&Locker, LockError> {
        (**self).locker()
    }
}
