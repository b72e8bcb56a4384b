//! The read/write lock on every backend: each behaviour below is written
//! once, as a function of a [`Site`], and run on the in-memory store (on a
//! paused tokio clock), one server, a Cluster, Sentinel and Redlock.
//!
//! Bounds are what the library promises plus [`STALL_ROOM`] for a machine
//! that stalls; safety assertions are exact.

use std::time::Duration;

use std::sync::Arc;

use lock_runtime::{LockError, Locker, current, distributed_lock};
use lock_tests::conformance::{Kind, Site};
use lock_tests::fixtures::{STALL_PROOF_TTL, STALL_ROOM, eventually};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The lease of every hold here: long enough for a stalled machine.
const TTL: Duration = STALL_PROOF_TTL;

/// Where each key of a read/write lock lives, after the lock's own key.
const KEYS: [&str; 5] = [":rw:w", ":rw:r", ":rw:i", ":rw:q", ":rw:t"];

/// The channel that wakes waiting readers, after the lock's own key.
const READERS_CHANNEL: &str = ":rw:r:released";

/// The channel that wakes waiting writers, after the lock's own key.
const WRITERS_CHANNEL: &str = ":rw:w:released";

/// The site for test `name` on `kind`; a Redis deployment is started off
/// the test's runtime threads (it blocks for seconds, once per binary).
fn site(kind: Kind, name: &str) -> Site {
    match kind {
        Kind::Memory => Site::new(kind, name),
        _ => tokio::task::block_in_place(|| Site::new(kind, name)),
    }
}

/// Polls `try_read` until a new reader is turned away (and releases each
/// reader it let in meanwhile); fails after `within`.
async fn until_readers_wait(locker: &Locker, name: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match locker.read_lock(name).ttl(TTL).try_acquire().await {
            Ok(None) => return,
            Ok(Some(read)) => {
                read.release().await.expect("release a probing read");
            }
            Err(err) => panic!("a probing read failed: {err}"),
        }
        assert!(
            Instant::now() < deadline,
            "readers still get in after {within:?}"
        );
        // Probes a moment apart, until the deadline: waiting on what the
        // server says, not on a guess of how long it takes.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

mod behaviours {
    use super::*;

    /// Readers hold it together; a writer holds it alone, with a fence
    /// above every earlier reader's; nothing is left once all let go.
    pub async fn readers_share_and_a_writer_is_alone(site: &Site) {
        let (a, b, c) = (
            site.locker().await,
            site.locker().await,
            site.locker().await,
        );
        let first = a.read_lock("cat").ttl(TTL).acquire().await.unwrap();
        let second = b.read_lock("cat").ttl(TTL).acquire().await.unwrap();
        assert!(first.is_held() && second.is_held(), "two readers at once");
        let refused = c.write_lock("cat").ttl(TTL).try_acquire().await.unwrap();
        assert!(refused.is_none(), "a writer got in beside readers");
        let top = first.fence().max(second.fence());
        assert!(first.release().await.unwrap());
        let refused = c.write_lock("cat").ttl(TTL).try_acquire().await.unwrap();
        assert!(refused.is_none(), "a writer got in beside a reader");
        assert!(second.release().await.unwrap());
        let write = c.write_lock("cat").ttl(TTL).try_acquire().await.unwrap();
        let write = write.expect("the writer gets in once the readers left");
        assert!(write.fence() > top, "a writer's fence tops every reader's");
        assert!(a.read_lock("cat").try_acquire().await.unwrap().is_none());
        assert!(b.write_lock("cat").try_acquire().await.unwrap().is_none());
        assert!(write.release().await.unwrap());
        let read = a.read_lock("cat").ttl(TTL).acquire().await.unwrap();
        assert!(
            read.fence() > top,
            "a read after a write is ordered after it"
        );
        assert!(read.release().await.unwrap());
        assert!(
            !site.keeps_any("cat", &KEYS),
            "something of the lock is left"
        );
    }

    /// A waiting writer turns new readers away, and gets in when the read
    /// running when it came ends; a writer that gives up lets readers in
    /// again at once.
    pub async fn a_waiting_writer_goes_before_new_readers(site: &Site) {
        let (a, b, c) = (
            site.locker().await,
            site.locker().await,
            site.locker().await,
        );
        let reading = a.read_lock("cfg").ttl(TTL).acquire().await.unwrap();
        let (tell, granted) = oneshot::channel();
        let writer = tokio::spawn(async move {
            let write = c.write_lock("cfg").ttl(TTL).wait(TTL * 20).acquire().await;
            let write = write.expect("the writer gets in");
            let _ = tell.send((write.fence(), Instant::now()));
            write.release().await.expect("release the write");
        });
        until_readers_wait(&b, "cfg", STALL_ROOM * 10).await;
        assert!(reading.is_held());
        let read_fence = reading.fence();
        let released = Instant::now();
        assert!(reading.release().await.unwrap());
        let (fence, at) = granted.await.expect("the writer reports");
        assert!(fence > read_fence);
        assert!(
            at.duration_since(released) < STALL_ROOM * 2,
            "the last reader out woke the writer by message"
        );
        writer.await.unwrap();
        // A writer that gives up takes its intent with it.
        let reading = a.read_lock("cfg").ttl(TTL).acquire().await.unwrap();
        let wait = Duration::from_millis(300);
        let gave_up = b.write_lock("cfg").ttl(TTL).wait(wait).acquire().await;
        assert!(
            matches!(gave_up, Err(LockError::Timeout { .. })),
            "{gave_up:?}"
        );
        let c = site.locker().await;
        let started = Instant::now();
        loop {
            if let Some(read) = c.read_lock("cfg").ttl(TTL).try_acquire().await.unwrap() {
                read.release().await.unwrap();
                break;
            }
            assert!(
                started.elapsed() < STALL_ROOM * 2,
                "a writer that gave up still turns readers away"
            );
            // The next probe a moment later, within the bound above.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        reading.release().await.unwrap();
        assert!(!site.keeps_any("cfg", &KEYS));
    }

    /// A writer's release wakes every waiting reader by one message: with
    /// the backoff longer than the test, only messages can wake them.
    pub async fn a_writers_release_wakes_every_waiting_reader(site: &Site) {
        const READERS: usize = 4;
        let quiet = site
            .config()
            .retry_backoff(Duration::from_millis(10), Duration::from_secs(600));
        let writer = site.locker().await;
        // Renewed while the test runs (a lease at most Redlock's restart
        // quarantine, 30 s).
        let write = writer
            .write_lock("menu")
            .ttl(Duration::from_secs(20))
            .acquire()
            .await
            .unwrap();
        let (mut readers, mut lockers) = (Vec::new(), Vec::new());
        for _ in 0..READERS {
            let locker = Locker::connect(quiet.clone()).await.unwrap();
            lockers.push(locker.clone());
            readers.push(tokio::spawn(async move {
                let read = locker
                    .read_lock("menu")
                    .ttl(TTL)
                    .wait(Duration::from_secs(600));
                let read = read.acquire().await.expect("a reader gets in");
                (read, Instant::now(), locker)
            }));
        }
        let listening = || site.listeners("menu", READERS_CHANNEL) >= READERS as i64;
        eventually("every reader listens", STALL_ROOM * 10, listening).await;
        // Asleep, past the try each makes once it listens (one that raced
        // the release would get in by that try, woken by nothing).
        let asleep = || lockers.iter().all(|locker| locker.stats().asleep == 1);
        eventually("every reader sleeps", STALL_ROOM * 10, asleep).await;
        let released = Instant::now();
        assert!(write.release().await.unwrap());
        let mut held = Vec::new();
        for reader in readers {
            held.push(reader.await.unwrap());
        }
        for (_, at, _) in &held {
            assert!(
                at.duration_since(released) < STALL_ROOM * 2,
                "a reader was not woken by the writer's release"
            );
        }
        let together = held.iter().filter(|(read, _, _)| read.is_held()).count();
        assert_eq!(together, READERS, "every reader holds it at once");
        for (read, _, locker) in held {
            assert!(read.release().await.unwrap());
            assert!(locker.stats().release_wakeups >= 1);
        }
        assert!(!site.keeps_any("menu", &KEYS));
    }

    /// Readers who waited behind a writer get in before the next writer,
    /// even though it waited too: a stream of writers cannot starve them.
    pub async fn waiting_readers_get_their_turn_between_writers(site: &Site) {
        let (a, b, c) = (
            site.locker().await,
            site.locker().await,
            site.locker().await,
        );
        let first = a.write_lock("feed").ttl(TTL).acquire().await.unwrap();
        let (tell_read, read_granted) = oneshot::channel();
        let (end_read, read_ends) = oneshot::channel::<()>();
        let reader = tokio::spawn(async move {
            let read = b.read_lock("feed").ttl(TTL).wait(TTL * 20).acquire().await;
            let read = read.expect("the reader gets in");
            let _ = tell_read.send(read.fence());
            let _ = read_ends.await;
            read.release().await.expect("release the read");
        });
        let listening = || site.listeners("feed", READERS_CHANNEL) >= 1;
        eventually("the reader waits", STALL_ROOM * 10, listening).await;
        let (tell_write, write_granted) = oneshot::channel();
        let writer = tokio::spawn(async move {
            let write = c.write_lock("feed").ttl(TTL).wait(TTL * 20).acquire().await;
            let write = write.expect("the second writer gets in");
            let _ = tell_write.send(write.fence());
            write.release().await.expect("release the write");
        });
        // On the in-memory store, waiters of every channel of the lock count.
        let both = if site.kind() == Kind::Memory { 2 } else { 1 };
        let waiting = || site.listeners("feed", WRITERS_CHANNEL) >= both;
        eventually("the second writer waits", STALL_ROOM * 10, waiting).await;
        assert!(first.release().await.unwrap());
        let read_fence = tokio::time::timeout(STALL_ROOM * 2, read_granted)
            .await
            .expect("the waiting reader got in before the waiting writer")
            .unwrap();
        let mut write_granted = write_granted;
        assert!(
            write_granted.try_recv().is_err(),
            "the second writer got in before the reader who waited"
        );
        end_read.send(()).unwrap();
        let write_fence = tokio::time::timeout(STALL_ROOM * 2, write_granted)
            .await
            .expect("the writer gets in once the reader left")
            .unwrap();
        assert!(
            write_fence > read_fence,
            "write {write_fence} after read {read_fence}"
        );
        reader.await.unwrap();
        writer.await.unwrap();
        assert!(!site.keeps_any("feed", &KEYS));
    }

    /// A reader whose lease is not renewed (its process stalled or died)
    /// stops counting at its own deadline, however long another reader
    /// renews its own: the waiting writer then waits only for the live one.
    pub async fn a_reader_left_unrenewed_frees_its_share(site: &Site) {
        let (a, b, c) = (
            site.locker().await,
            site.locker().await,
            site.locker().await,
        );
        let dead = a.read_lock("tbl").ttl(TTL).watchdog(false);
        let dead = dead.acquire().await.unwrap();
        let dead_view = dead.handle();
        // Never released: as if its process died.
        std::mem::forget(dead);
        let live = b.read_lock("tbl").ttl(TTL).acquire().await.unwrap();
        let (tell, granted) = oneshot::channel();
        let writer = tokio::spawn(async move {
            let write = c.write_lock("tbl").ttl(TTL).wait(TTL * 20).acquire().await;
            let write = write.expect("the writer gets in");
            let _ = tell.send(Instant::now());
            write.release().await.expect("release the write");
        });
        eventually("the dead read's lease ends", TTL * 4, || {
            !dead_view.is_held()
        })
        .await;
        // Past the dead read's lease on the server too (validity ends
        // before it), with the live read renewed meanwhile.
        tokio::time::sleep(TTL / 2).await;
        assert!(live.is_held(), "the live read is renewed");
        let released = Instant::now();
        assert!(live.release().await.unwrap());
        let at = granted.await.expect("the writer reports");
        assert!(
            at.duration_since(released) < STALL_ROOM * 2,
            "the dead read still counted after its lease"
        );
        writer.await.unwrap();
        assert!(!site.keeps_any("tbl", &KEYS));
    }

    /// A write turns into a read in one step: its fence rises, readers come
    /// in beside it, writers stay out.
    pub async fn a_downgrade_lets_readers_in_and_keeps_writers_out(site: &Site) {
        let (a, b, c) = (
            site.locker().await,
            site.locker().await,
            site.locker().await,
        );
        let write = a.write_lock("doc").ttl(TTL).acquire().await.unwrap();
        let write_fence = write.fence();
        let reader = tokio::spawn(async move {
            let read = b.read_lock("doc").ttl(TTL).wait(TTL * 20).acquire().await;
            read.expect("a reader gets in after the downgrade")
        });
        let read = write.downgrade().await.unwrap();
        assert!(read.is_held());
        assert!(
            read.fence() > write_fence,
            "the read is ordered after the write"
        );
        let other = reader.await.unwrap();
        assert!(other.is_held() && read.is_held(), "readers share it now");
        assert!(c.write_lock("doc").try_acquire().await.unwrap().is_none());
        assert!(read.release().await.unwrap());
        assert!(other.release().await.unwrap());
        assert!(!site.keeps_any("doc", &KEYS));
    }

    /// A task holding a read that asks for the write is refused at once;
    /// a task holding the write that asks for a read runs under it.
    pub async fn an_upgrade_is_refused_and_a_read_runs_under_its_write(site: &Site) {
        let a = site.locker().await;
        let read = a.read_lock("acct").ttl(TTL).acquire().await.unwrap();
        let started = Instant::now();
        let upgrade = a.write_lock("acct").ttl(TTL).wait(TTL * 20).acquire().await;
        assert!(
            matches!(upgrade, Err(LockError::UpgradeRefused { ref key }) if key == "acct"),
            "{upgrade:?}"
        );
        assert!(started.elapsed() < STALL_ROOM, "refused at once");
        assert!(read.release().await.unwrap());
        let write = a.write_lock("acct").ttl(TTL).acquire().await.unwrap();
        let started = Instant::now();
        let nested = a.read_lock("acct").wait(TTL * 20).acquire().await.unwrap();
        assert!(
            started.elapsed() < STALL_ROOM,
            "a read under its write waits for nothing"
        );
        assert_eq!(nested.fence(), write.fence());
        assert!(nested.release().await.unwrap());
        assert!(
            write.is_held(),
            "releasing the nested read leaves the write"
        );
        assert!(write.release().await.unwrap());
        assert!(!site.keeps_any("acct", &KEYS));
    }

    /// The attribute takes either side: readers inside at once, a read
    /// nested in a write runs under it, a write nested in a read is refused
    /// at once, and the exclusive lock of the same name is another lock.
    pub async fn the_attribute_takes_either_side(site: &Site) {
        let (a, b) = (site.locker().await, site.locker().await);
        let together = Arc::new(tokio::sync::Barrier::new(2));
        let (first, second) = tokio::join!(
            read_page(&a, 1, together.clone()),
            read_page(&b, 1, together)
        );
        let top = first.unwrap().max(second.unwrap());
        let (write, nested) = write_page(&a, 1).await.unwrap();
        assert!(write > top, "the write is ordered after the reads");
        assert_eq!(nested, write, "the nested read ran under the write");
        let started = Instant::now();
        let upgrade = upgrade_page(&a, 1).await;
        assert!(
            matches!(upgrade, Err(LockError::UpgradeRefused { ref key }) if key == "page:1"),
            "{upgrade:?}"
        );
        assert!(started.elapsed() < STALL_ROOM, "refused at once");
        let (read, exclusive) = exclusive_inside_read(&a, 1).await.unwrap();
        assert!(read > 0 && exclusive > 0, "both locks were taken");
        assert!(!site.keeps_any("page:1", &KEYS));
        assert!(!site.exists("page:1"));
    }
}

/// A read through the attribute: waits at `together` (every reader inside
/// at once), then answers its fence.
#[distributed_lock(key = "page:<id>", ttl = "1500ms", mode = "read", locker = locker)]
async fn read_page(
    locker: &Locker,
    id: u64,
    together: Arc<tokio::sync::Barrier>,
) -> Result<u64, LockError> {
    let met = tokio::time::timeout(STALL_ROOM * 10, together.wait()).await;
    met.map_err(|_| LockError::Config("the readers never met inside".into()))?;
    Ok(current().expect("inside a held read").fence())
}

/// A write through the attribute, with a read nested in it: answers the
/// write's fence and the nested read's.
#[distributed_lock(key = "page:<id>", ttl = "1500ms", mode = "write", locker = locker)]
async fn write_page(locker: &Locker, id: u64) -> Result<(u64, u64), LockError> {
    let fence = current().expect("inside the write").fence();
    let alone = Arc::new(tokio::sync::Barrier::new(1));
    let nested = read_page(locker, id, alone).await?;
    Ok((fence, nested))
}

/// A read that tries to write the same page inside: an upgrade.
#[distributed_lock(key = "page:<id>", ttl = "1500ms", mode = "read", locker = locker)]
async fn upgrade_page(locker: &Locker, id: u64) -> Result<(), LockError> {
    write_page(locker, id).await.map(|_| ())
}

/// The exclusive lock of the same name, inside a read: another lock.
#[distributed_lock(key = "page:<id>", ttl = "1500ms", locker = locker)]
async fn exclusive_page(locker: &Locker, id: u64) -> Result<u64, LockError> {
    Ok(current().expect("inside the exclusive lock").fence())
}

#[distributed_lock(key = "page:<id>", ttl = "1500ms", mode = "read", locker = locker)]
async fn exclusive_inside_read(locker: &Locker, id: u64) -> Result<(u64, u64), LockError> {
    let read = current().expect("inside the read").fence();
    Ok((read, exclusive_page(locker, id).await?))
}

macro_rules! on_backend {
    ($backend:ident, $kind:expr, #[$runtime:meta], [$($behaviour:ident),* $(,)?]) => {
        mod $backend {
            use super::*;

            $(
                #[$runtime]
                async fn $behaviour() {
                    let site = site($kind, concat!("rw_", stringify!($behaviour)));
                    behaviours::$behaviour(&site).await;
                }
            )*
        }
    };
}

macro_rules! every_backend {
    ($backend:ident, $kind:expr, #[$runtime:meta]) => {
        on_backend!($backend, $kind, #[$runtime], [
            readers_share_and_a_writer_is_alone,
            a_waiting_writer_goes_before_new_readers,
            a_writers_release_wakes_every_waiting_reader,
            a_reader_left_unrenewed_frees_its_share,
            a_downgrade_lets_readers_in_and_keeps_writers_out,
            an_upgrade_is_refused_and_a_read_runs_under_its_write,
            the_attribute_takes_either_side,
            waiting_readers_get_their_turn_between_writers,
        ]);
    };
}

every_backend!(memory, Kind::Memory, #[tokio::test(start_paused = true)]);
every_backend!(single, Kind::Single, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
every_backend!(cluster, Kind::Cluster, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
every_backend!(sentinel, Kind::Sentinel, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
every_backend!(redlock, Kind::Redlock, #[tokio::test(flavor = "multi_thread", worker_threads = 2)]);
