//! The `#[distributed_lock]` attribute. Depend on `lock_runtime`, which
//! re-exports it; this crate only generates code that calls into it.

mod args;
mod duration;
mod errors;
mod expand;
mod key_template;
mod shape;
mod valid;

use proc_macro::TokenStream;

/// Runs the body of an `async fn` only while holding a distributed lock.
///
/// ```no_run
/// use lock_runtime::{LockConfig, LockError, distributed_lock};
///
/// #[distributed_lock(key = "stock:<id>", ttl = "3s", wait = "2s")]
/// async fn deduct(id: u64, qty: u32) -> Result<u32, LockError> {
///     // At most one caller, across every process, runs this for a given id.
///     Ok(qty)
/// }
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), LockError> {
/// lock_runtime::init(LockConfig::from_url("redis://127.0.0.1/")?).await?;
/// deduct(42, 1).await?;
/// # Ok(())
/// # }
/// ```
///
/// Arguments: `key` (required; `<param>` or `<param.field>` placeholders,
/// `<<`/`>>` for literal angle brackets), `ttl` (lease, default from the
/// locker's config), `wait` (`"0s"` tries once; default: the config's
/// `default_wait` if set, else the lock's ttl),
/// `watchdog` (renew while the body runs, default `true`), `on_lost`
/// (`"cancel"`, the default, or `"continue"`), `reentrant` (a call nested in
/// one holding the same key runs under it, one at a time; default `true`),
/// `max_hold` (the longest the lock may be held, after which the body is
/// stopped with `LockError::HoldCapExceeded`, or told and left to run on
/// under `on_lost = "continue"`; default none),
/// `locker` (an expression giving
/// a `Locker` or a static cell holding one; default the global locker) and
/// `crate` (the runtime's path when renamed). See the `lock_runtime` docs.
///
/// A method of an impl under `#[async_trait]` works too: the lock is taken
/// inside the future that attribute boxes. With `#[tokio::test]` or
/// `#[tokio::main]`, put this attribute above it.
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(args.into(), item.into()).into()
}
