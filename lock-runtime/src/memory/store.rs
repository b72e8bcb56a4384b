//! [`MemoryStore`]: an in-process stand-in for a Redis server, shared by
//! every locker configured with it, and the hooks tests use on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use super::Twin;
use super::keyspace::{ClockId, Keyspace};
use crate::config::{LockConfig, StoreName, Topology};
use crate::memory::words::Words;

/// Now, on the tokio clock of the runtime that calls, and which clock
/// that is.
fn now() -> (std::time::Instant, ClockId) {
    let clock = tokio::runtime::Handle::try_current().ok().map(|on| on.id());
    (tokio::time::Instant::now().into_std(), clock)
}

/// Where in-memory locks live: what a Redis server is to lockers on Redis.
/// Lockers built from configurations that name the same store contend
/// with each other, like processes on one server; distinct stores never
/// meet.
///
/// [`LockConfig::in_memory`](crate::LockConfig::in_memory) makes a new
/// store, and its clones share it; `memory://` names the process-wide
/// store ([`MemoryStore::shared`]), and `memory://<name>` a named one.
///
/// Its methods are for tests and for looking inside: which locks are held,
/// and ending a lease now, to see what a holder does when it loses its
/// lock.
///
/// ```
/// use lock_runtime::{LockConfig, Locker, memory::MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_runtime::LockError> {
/// let store = MemoryStore::new();
/// let locker = Locker::connect(LockConfig::in_memory_store(&store)).await?;
/// let guard = locker.lock("stock:42").acquire().await?;
/// assert_eq!(store.holders()[0].name, "stock:42");
/// assert_eq!(store.expire("stock:42"), 1); // the watchdog reports it lost
/// # drop(guard);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    name: Option<String>,
    /// Its number in the process, for a store of its own (see
    /// [`StoreName::Own`]).
    own: Option<u64>,
    keyspace: Mutex<Keyspace>,
    /// Each locker's release listener: called with a channel published
    /// on; answers false once its locker is gone.
    listeners: Mutex<Vec<Box<dyn Listener>>>,
}

/// A locker's release listener, as the store sees it.
pub(crate) trait Listener: Send + Sync {
    /// A release was published on `channel` with `message`; false once
    /// the locker is gone.
    fn released(&self, channel: &str, message: &str) -> bool;
    /// How many of the locker's acquisitions wait for a release of lock
    /// `name` (on its channel under any prefix).
    fn waiting(&self, name: &str) -> usize;
}

/// A lock held in a [`MemoryStore`], as [`MemoryStore::holders`] sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldLock {
    /// The lock's name, as requested (`stock:42`).
    pub name: String,
    /// The key it is stored under, with the locker's prefix.
    pub key: String,
    /// Its holder's [`holder_label`](crate::LockConfig::holder_label).
    /// (Not its fence: as on a Redis node, the fence is the clock at the
    /// grant, known to the holder only.)
    pub holder: String,
    /// Whether someone else (a waiter, or a caller that tried once) found
    /// it busy while this holder held it.
    pub contended: bool,
    /// How long its lease still runs, on the clock of the runtime asking.
    pub remaining: Duration,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner.name {
            Some(name) => write!(f, "MemoryStore({name:?})"),
            None => f.write_str("MemoryStore"),
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// The stores of their own that configurations may name, by number; an
/// entry whose store is gone is swept when another is added.
static OWN: Mutex<Vec<(u64, Weak<Inner>)>> = Mutex::new(Vec::new());

/// A number no store of its own has had in this process.
fn next_own() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn own_stores() -> MutexGuard<'static, Vec<(u64, Weak<Inner>)>> {
    // Plain entries: consistent even if a holder panicked mid-update.
    OWN.lock().unwrap_or_else(|e| e.into_inner())
}

impl MemoryStore {
    /// A new, empty store of its own.
    pub fn new() -> Self {
        let mut own = own_stores();
        Self::own(next_own(), &mut own)
    }

    /// A new, empty store of its own numbered `number`, entered in `own`.
    fn own(number: u64, own: &mut Vec<(u64, Weak<Inner>)>) -> Self {
        let store = Self {
            inner: Arc::new(Inner {
                own: Some(number),
                ..Inner::default()
            }),
        };
        own.retain(|(_, inner)| inner.strong_count() > 0);
        own.push((number, Arc::downgrade(&store.inner)));
        store
    }

    /// The live store `name` names: a process-wide one, or the store of
    /// its own while anyone holds it (made anew, empty, when nobody does:
    /// no locker was left to see the difference).
    pub(crate) fn of(name: &StoreName) -> Self {
        let number = match name {
            StoreName::Named(name) => return Self::named(name),
            StoreName::Own(number) => *number,
        };
        let mut own = own_stores();
        let live = own
            .iter()
            .find(|(n, _)| *n == number)
            .and_then(|(_, inner)| inner.upgrade());
        match live {
            Some(inner) => Self { inner },
            None => Self::own(number, &mut own),
        }
    }

    /// How a configuration names this store.
    fn name(&self) -> StoreName {
        match (&self.inner.name, self.inner.own) {
            (Some(name), _) => StoreName::Named(name.clone()),
            (None, Some(number)) => StoreName::Own(number),
            // Every store is named or numbered when it is made.
            (None, None) => StoreName::Named(String::new()),
        }
    }

    /// The process-wide store: `memory://`.
    pub fn shared() -> Self {
        Self::named("")
    }

    /// The process-wide store called `name`: `memory://<name>`.
    pub fn named(name: &str) -> Self {
        static STORES: OnceLock<Mutex<HashMap<String, MemoryStore>>> = OnceLock::new();
        let mut stores = STORES
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        stores
            .entry(name.to_owned())
            .or_insert_with(|| Self {
                inner: Arc::new(Inner {
                    name: Some(name.to_owned()),
                    ..Inner::default()
                }),
            })
            .clone()
    }

    /// Every lock held now, in no particular order (never its owner's
    /// token).
    pub fn holders(&self) -> Vec<HeldLock> {
        let mut keyspace = self.keyspace();
        let (at, clock) = now();
        keyspace.begin(at, clock);
        let live = keyspace.live();
        drop(keyspace);
        live.into_iter()
            .filter_map(|(key, value, remaining)| {
                let name = crate::keys::hash_tag::name_of(&key)?;
                let stored = crate::owner::stored_value(&value)?;
                Some(HeldLock {
                    name,
                    holder: stored.holder.to_owned(),
                    contended: stored.contended,
                    remaining: remaining?,
                    key,
                })
            })
            .collect()
    }

    /// Every key the store keeps for the resource `name` (under any
    /// prefix), of every primitive: a plain lock's key, a fair lock's and
    /// its line of waiters. Empty once everyone let go: what a test checks
    /// to know that nothing was left behind.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_runtime::LockError> {
    /// use lock_runtime::{LockConfig, Locker, memory::MemoryStore};
    ///
    /// let store = MemoryStore::new();
    /// let locker = Locker::connect(LockConfig::in_memory_store(&store)).await?;
    /// let guard = locker.fair_lock("printer").acquire().await?;
    /// assert_eq!(store.keys_of("printer"), ["lock:{printer}:fair"]);
    /// guard.release().await?;
    /// assert!(store.keys_of("printer").is_empty());
    /// # Ok(()) }
    /// ```
    pub fn keys_of(&self, name: &str) -> Vec<String> {
        let mut keyspace = self.keyspace();
        let (at, clock) = now();
        keyspace.begin(at, clock);
        let mut keys: Vec<String> = keyspace
            .live_keys()
            .into_iter()
            .filter(|key| crate::keys::hash_tag::resource_of(key).as_deref() == Some(name))
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Ends the lease of every lock named `name` (under any prefix) now,
    /// as if its time had run out on a server, with every other key of
    /// that resource (a fair lock's line: its waiters then take a new
    /// place at their next renewal); returns how many keys there were.
    /// Its holder is told at the watchdog's next renewal (within a third of
    /// its ttl), or at the end of its validity for a fixed lease, exactly
    /// as on Redis; waiters, as on Redis, are not messaged and retry when
    /// the lease they were told of would have ended.
    pub fn expire(&self, name: &str) -> usize {
        let mut keyspace = self.keyspace();
        let (at, clock) = now();
        keyspace.begin(at, clock);
        let keys: Vec<String> = keyspace
            .live_keys()
            .into_iter()
            .filter(|key| crate::keys::hash_tag::resource_of(key).as_deref() == Some(name))
            .collect();
        keys.iter().filter(|key| keyspace.del(key)).count()
    }

    /// How many lockers on this store have acquisitions waiting for lock
    /// `name` (under any prefix) to be released: for a test that must know
    /// a rival is queued before it lets go. (A locker's own waiters for one
    /// lock queue among themselves and listen once.)
    ///
    /// Counted from the waiters themselves, whether or not the lock is
    /// held right now: a waiter still waits between a release (or an
    /// [`expire`](Self::expire)) and its next try.
    pub fn waiting(&self, name: &str) -> usize {
        self.listeners().iter().map(|l| l.waiting(name)).sum()
    }

    /// Runs `script` (a lock script's twin) on the store at the caller's time, then delivers what
    /// it published to every listening locker.
    pub(crate) fn execute(
        &self,
        script: Twin,
        keys: &Words,
        args: &Words,
    ) -> Result<redis::Value, String> {
        let mut keyspace = self.keyspace();
        let (at, clock) = now();
        keyspace.begin(at, clock);
        let answer = script(&mut keyspace, keys, args);
        let published = keyspace.finish();
        drop(keyspace);
        if !published.is_empty() {
            let mut listeners = self.listeners();
            for (channel, message) in &published {
                listeners.retain(|listener| listener.released(channel, message));
            }
        }
        answer
    }

    /// Adds a locker's release listener.
    pub(crate) fn listen(&self, listener: Box<dyn Listener>) {
        self.listeners().push(listener);
    }

    fn keyspace(&self) -> MutexGuard<'_, Keyspace> {
        // The keyspace stays consistent even if a call panicked mid-way.
        self.inner
            .keyspace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn listeners(&self) -> MutexGuard<'_, Vec<Box<dyn Listener>>> {
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// How a configuration names an in-memory store (the store knows how to be
/// named; a configuration holds the name, not the store).
impl LockConfig {
    /// The in-memory store ([`crate::memory`]): locks within this process,
    /// with no Redis. Each call makes a new, empty store; lockers built from
    /// this configuration (or its clones) share it, and no other locker
    /// sees it. `LockConfig::from_url("memory://")` (or `REDIS_URL=memory://`
    /// with [`LockConfig::from_env`]) names the process-wide store instead.
    ///
    /// Its leases, waits and renewals run on the tokio clock of the runtime
    /// that calls, so a test with `tokio::time::pause()` runs a 30 s lease
    /// in microseconds. That runtime needs its timers (`enable_time`; on in
    /// `#[tokio::main]` and `#[tokio::test]`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_runtime::LockError> {
    /// let config = lock_runtime::LockConfig::in_memory();
    /// let locker = lock_runtime::Locker::connect(config).await?;
    /// let guard = locker.lock("stock:42").acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn in_memory() -> Self {
        // The store itself is made when the first locker connects.
        Self::for_topology(Topology::Memory(StoreName::Own(next_own())))
    }

    /// The in-memory store `store` (see [`LockConfig::in_memory`]), for a
    /// test that also looks into it ([`MemoryStore::holders`],
    /// [`MemoryStore::expire`]).
    pub fn in_memory_store(store: &MemoryStore) -> Self {
        Self::for_topology(Topology::Memory(store.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_of(config: &LockConfig) -> MemoryStore {
        match &config.topology {
            Topology::Memory(name) => MemoryStore::of(name),
            _ => panic!("not in memory"),
        }
    }

    #[test]
    fn a_configuration_names_its_store_and_its_clones_share_it() {
        let store = MemoryStore::new();
        let config = LockConfig::in_memory_store(&store);
        assert!(Arc::ptr_eq(&store_of(&config).inner, &store.inner));
        assert!(Arc::ptr_eq(&store_of(&config.clone()).inner, &store.inner));
        // A store made for a configuration: the same while anyone holds it.
        let fresh = LockConfig::in_memory();
        let first = store_of(&fresh);
        assert!(Arc::ptr_eq(&store_of(&fresh.clone()).inner, &first.inner));
        assert!(!Arc::ptr_eq(&first.inner, &store.inner));
        let other = store_of(&LockConfig::in_memory());
        assert!(!Arc::ptr_eq(&other.inner, &first.inner));
        let named = LockConfig::in_memory_store(&MemoryStore::named("orders-test"));
        assert!(Arc::ptr_eq(
            &store_of(&named).inner,
            &MemoryStore::named("orders-test").inner
        ));
    }

    #[test]
    fn named_stores_are_shared_by_name() {
        let a = MemoryStore::named("orders-test");
        let b = MemoryStore::named("orders-test");
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
        assert!(!Arc::ptr_eq(&a.inner, &MemoryStore::new().inner));
        assert!(!Arc::ptr_eq(&a.inner, &MemoryStore::shared().inner));
        assert_eq!(format!("{a:?}"), "MemoryStore(\"orders-test\")");
    }
}
