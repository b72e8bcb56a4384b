//! The `#[distributed_lock]` attribute. Depend on `lock_runtime`, which
//! re-exports it; this crate only generates code that calls into it.

mod args;
mod duration;
mod errors;
mod expand;
mod key_template;
mod mode;
mod shape;
mod valid;

use proc_macro::TokenStream;

/// Runs the body of an `async fn` only while holding a distributed lock.
///
/// ```no_run
/// use lock_runtime::{LockConfig, LockError, distributed_lock};
///
/// #[derive(Debug)]
/// enum AppError {
///     Busy,
///     Lock(LockError),
/// }
///
/// // Lock failures come out through this `From`.
/// impl From<LockError> for AppError {
///     fn from(error: LockError) -> Self {
///         match error {
///             LockError::Timeout { .. } => AppError::Busy,
///             other => AppError::Lock(other),
///         }
///     }
/// }
///
/// #[distributed_lock(key = "stock:<id>", ttl = "3s", wait = "2s")]
/// async fn deduct(id: u64, qty: u32) -> Result<u32, AppError> {
///     // At most one caller, across every process, runs this for a given id.
///     let lock = lock_runtime::current().expect("inside an annotated body");
///     let _fence = lock.fence(); // send it along with every write
///     Ok(qty)
/// }
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), AppError> {
/// lock_runtime::init(LockConfig::from_env()?).await?; // once, at start-up
/// deduct(42, 1).await?;
/// # Ok(())
/// # }
/// ```
///
/// Depend on `lock_runtime`, which re-exports this attribute as
/// `lock_runtime::distributed_lock`.
///
/// # The contract
///
/// - **Where it goes**: an `async fn`, free, an inherent or trait-impl
///   method (any receiver), generic, with lifetimes, `impl Trait` or
///   destructured parameters. A method of an impl under `#[async_trait]`
///   works too (that attribute expands first, and the lock is taken inside
///   the future it boxes; placeholders there name whole parameters or their
///   fields). With `#[tokio::test]` or `#[tokio::main]`, put this attribute
///   above it.
/// - **What it returns**: `Result<T, E>` (or an alias such as
///   `io::Result<T>`) with `E: From<lock_runtime::LockError>`. A lock
///   failure (busy for the whole wait, lost, no server) is returned as
///   `Err(E::from(error))` without running the body, or, for a loss, by
///   stopping it. An error type of another crate cannot get that `From`
///   in yours: wrap it (for axum's `(StatusCode, String)`, an error type of
///   your own implementing `From<LockError>` and `IntoResponse`). The future
///   is `Send` whenever the body's is.
/// - **The key** is rendered with `Display` before the body runs, without
///   moving any argument: `"stock:<sku>"` renders the parameter `sku`,
///   `"<order.id>"`, `"<self.shard>"` or `"<pair.0>"` a field of one;
///   `<<` and `>>` are a literal `<` and `>`.
/// - **Inside the body**, `lock_runtime::current()` returns the held lock:
///   its key, its fencing token (`fence()`, strictly increasing per key
///   across all owners) and its loss signal.
/// - **Nesting**: a call for a key that an enclosing call of the same task
///   already holds (through the same locker) does not wait for itself: it
///   runs under the enclosing lock, one nested call at a time. Sibling calls
///   nested in one holder's body (`tokio::join!`, `select!`) take turns,
///   each within its own `wait`; a call nested in a nested call takes its
///   turn from its own parent, so nesting never waits on an ancestor. The
///   enclosing lease governs: a nested call's `ttl`, `watchdog` and
///   `max_hold` do not apply; its `on_lost` does. A nested call moved out
///   of the body it is nested in is stopped with `LockError::Lost` when that
///   body ends, before the lock is let go. Other tasks wait as usual.
/// - **A semaphore**: with `limit = K` the call takes `permits` (one by
///   default) of the semaphore `key` rather than its lock, so that at most
///   `K` permits run at once across every process
///   (`#[distributed_lock(key = "render:<tenant>", limit = 4)]`). The
///   permits are a lease like a lock's, renewed and lost the same way.
///   Calls do not nest: one inside the body takes permits of its own,
///   and `reentrant` is an error there. `lock_runtime::current()` names
///   no semaphore.
/// - **Several keys**: with `keys = ["acct:<from>", "acct:<to>"]` in place
///   of `key`, the call holds every key at once (`Locker::lock_all`), each
///   as the exclusive lock of that name, all or none, and callers naming
///   them in any order never deadlock. The loss of any key is the loss of
///   the call's hold. Calls do not nest: a call nested in one of this
///   task's calls that holds one of its keys fails at once with
///   `LockError::HeldByThisTask`, and a `key` call nested inside its body
///   for one of its keys waits for it (until its `wait` runs out);
///   `lock_runtime::current()` names no multi-key hold.
/// - **Losing the lock**: the watchdog renews the lease every ttl/3 while
///   the body runs and learns of a loss before the key can expire on the
///   server; under `on_lost = "cancel"` the body is dropped at its next
///   `.await` and the call returns `Err(LockError::Lost)`.
/// - **Testing**: with the global locker initialised on the in-memory store
///   (`init(LockConfig::from_url("memory://")?)` in every test, accepting
///   `LockError::AlreadyInitialized`) the attribute runs with no server, on
///   a paused tokio clock; `MemoryStore::shared().expire(key)` forces a loss.
///   The recipe is the guide page `lock_runtime::guide::testing`.
///
/// # Arguments
///
/// | argument | default | |
/// |---|---|---|
/// | `key = "stock:<sku>"` | required (or `keys`) | the lock's name, rendered as above |
/// | `keys = ["acct:<from>", "acct:<to>"]` | none | in place of `key`: several locks held at once, all or none, each rendered as above (1 to 1024) |
/// | `ttl = "3s"` | the locker's `default_ttl` (30 s) | lease length: `"250ms"`, `"3s"`, `"1m30s"`; at least 10 ms |
/// | `wait = "2s"` | the locker's `default_wait` (else the ttl) | longest wait for a busy lock; `"0s"` tries once |
/// | `watchdog = true` | `true` | renew the lease while the body runs; `false` = a fixed lease, reported lost when it ends |
/// | `fair = true` | `false` | the fair lock (`Locker::fair_lock`): callers are granted it in the order the server first saw them wait, and a release hands it to the first live waiter; its own key (`<prefix>{<name>}:fair`), so a fair and a plain lock of one name do not exclude each other. Refused on Redlock (`LockError::Config`) |
/// | `on_lost = "cancel"` | `"cancel"` | on loss, drop the body at its next `.await` and return `Err(LockError::Lost)`; `"continue"` lets it finish and logs the loss |
/// | `on_release_error = "warn"` | `"warn"` | when the release after the body fails (the lock then stays until its lease ends): `"warn"` returns the body's output, logs the failure and counts it (`LockerStats::release_errors`, `lock_release_errors_total`), since what the body did took effect and a caller told otherwise might run it again; `"fail"` returns `Err(LockError::ReleaseFailed)` instead |
/// | `reentrant = true` | `true` | nesting as above; `false` makes a nested call fail at once with `LockError::HeldByThisTask` |
/// | `limit = 4` | none | the call takes a permit of the semaphore `key` instead of the lock: at most `limit` permits are held at once, across every process; every caller of one key names the same limit (1 to 1024) |
/// | `permits = 2` | `1` | with `limit`: how many permits the call takes, all or none (at most `limit`) |
/// | `max_hold = "5m"` | none | the longest the lock may be held: then it is no longer renewed, the body is stopped with `LockError::HoldCapExceeded` (told and left to run under `on_lost = "continue"`), and the lock is given back |
/// | `mode = "read"` | none: the exclusive lock | `"read"` or `"write"`: that side of the read/write lock of the key (`Locker::read_lock`, `Locker::write_lock`), another lock than the exclusive lock of the same name. Readers run beside each other, a writer alone, and a waiting writer goes first. Nested in a holder of the same key: a read runs under a read or a write, a write under a write; a write nested in a read fails at once with `LockError::UpgradeRefused` (a read is never upgraded). On Redlock, each side needs a majority of masters |
/// | `locker = expr` | the global locker (`lock_runtime::init`) | a `Locker` (`self.locker`, a parameter, `shop.locker` of an extractor's binding) or a static `OnceLock<Locker>` |
/// | `crate = "path"` | `lock_runtime` | where the runtime crate is, if renamed |
///
/// # Mistakes are compile errors
///
/// Each at its token, all of them in one build: an unknown or empty
/// placeholder (naming the parameters that exist), an unclosed `<`, a bad
/// duration, a zero ttl, an unknown or repeated argument, a missing `key`, a
/// value of the wrong type, an `on_lost` other than `"cancel"`/`"continue"`
/// (or an `on_release_error` other than `"warn"`/`"fail"`, a `mode` other
/// than `"read"`/`"write"`, or a `mode` beside `fair = true` or `limit`),
/// a `limit` or `permits` that is not 1 to 1024, `permits` above `limit`
/// or without it, `reentrant` beside `limit`, `key` beside `keys` (at
/// `keys`), an empty `keys` or one that is not an array of string
/// literals, `keys` beside `fair`, `mode`, `limit` or `reentrant`,
/// a non-async fn, a return type that is not a `Result` (at the return
/// type), an error type without `From<LockError>` (at the error type), the
/// attribute on something that is not a function. The original item is
/// still emitted beside the errors, so editors keep working. For example:
///
/// ```text
/// error: unknown placeholder `<idd>`: the parameters are `id`, `qty`
///  --> src/orders.rs:3:26
///   |
/// 3 | #[distributed_lock(key = "stock:<idd>")]
///   |                          ^^^^^^^^^^^^^
/// ```
///
/// Crates that `#![forbid(unreachable_code)]` can use it: the generated code
/// needs no `allow` of that lint.
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(args.into(), item.into()).into()
}
