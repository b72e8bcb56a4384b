//! The process-wide [`Locker`], configured once at start-up.

use once_cell::sync::OnceCell;

use crate::config::LockConfig;
use crate::error::LockError;
use crate::locker::Locker;

static GLOBAL: OnceCell<Locker> = OnceCell::new();

/// Connects the process-wide locker; call once at start-up, from any tokio
/// runtime. Its background work (watchdog, connections, release listener)
/// runs on the library's own thread, so the locker keeps working for every
/// runtime of the process, including `#[tokio::test]` runtimes that come
/// and go.
///
/// Errors: [`LockError::AlreadyInitialized`] on a second call (the first
/// configuration stays), and whatever [`Locker::connect`] reports.
///
/// ```no_run
/// use lock_runtime::LockConfig;
///
/// # async fn start() -> Result<(), lock_runtime::LockError> {
/// lock_runtime::init(LockConfig::from_env()?).await?;
/// let guard = lock_runtime::global()?.lock("report:daily").acquire().await?;
/// # Ok(()) }
/// ```
pub async fn init(config: LockConfig) -> Result<(), LockError> {
    if GLOBAL.get().is_some() {
        return Err(LockError::AlreadyInitialized);
    }
    let locker = Locker::connect(config).await?;
    init_with(locker)
}

/// Installs an already built [`Locker`] as the process-wide one.
pub fn init_with(locker: Locker) -> Result<(), LockError> {
    GLOBAL
        .set(locker)
        .map_err(|_| LockError::AlreadyInitialized)
}

/// The process-wide locker, or [`LockError::NotInitialized`] before [`init`].
pub fn global() -> Result<&'static Locker, LockError> {
    GLOBAL.get().ok_or(LockError::NotInitialized)
}
