//! An application observes the library through its own tracing subscriber
//! and metrics recorder, which a test often sets for its thread only (not
//! for the process). A wait for a busy lock on Redis runs on the library's
//! thread (see `lock-runtime`'s `acquire.rs`); what it records must still
//! reach the caller's, as everything an acquisition that did not wait
//! records does.
//!
//! A binary of its own, whose tests run one at a time: tracing decides
//! once per call site, for every subscriber of the process at that moment,
//! whether anyone wants it, so a subscriber set on one thread while another
//! thread reaches a call site for the first time may be left out of it
//! (`operations.rs` sets a process-wide subscriber and recorder).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// On a server of its own: one locker holds lock `name`, another waits for
/// it (named by `template`) until released, and gives it back.
async fn one_wait_for_a_busy_lock(name: &str, template: &'static str) {
    let server = lock_tests::RedisServer::start();
    let holder = lock_tests::fixtures::locker(&server.url()).await;
    let waiter = lock_tests::fixtures::locker(&server.url()).await;
    let guard = holder.lock(name).acquire().await.unwrap();
    let waiting = waiter
        .lock(name)
        .template(template)
        .wait(Duration::from_secs(10))
        .acquire();
    let releasing = async {
        lock_tests::fixtures::eventually("the waiter asleep", Duration::from_secs(10), || {
            waiter.stats().asleep == 1
        })
        .await;
        assert!(guard.release().await.unwrap());
    };
    let (taken, ()) = tokio::join!(waiting, releasing);
    let taken = taken.expect("granted once released");
    assert!(taken.release().await.unwrap());
}

/// Held by each test for its whole run (see the module docs).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

/// What one caller's own subscriber (set for its thread only, as a test
/// capturing its traces does) saw: spans by id with their names and
/// fields, and events with their fields and contextual parent.
#[derive(Default)]
struct Caught {
    spans: HashMap<u64, (&'static Metadata<'static>, String)>,
    events: Vec<(Option<u64>, String)>,
}

/// A subscriber that tracks the entered spans on each thread, and tells
/// which is current (so that `Span::current()` finds it) if `tells`, like
/// the usual registry; a simpler one does not.
struct Catch {
    caught: std::sync::Arc<Mutex<Caught>>,
    /// The entered spans, per thread.
    entered: Mutex<HashMap<std::thread::ThreadId, Vec<u64>>>,
    tells: bool,
}

impl Catch {
    fn caught<T>(&self, f: impl FnOnce(&mut Caught) -> T) -> T {
        f(&mut self.caught.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn innermost(&self) -> Option<u64> {
        let entered = self.entered.lock().unwrap_or_else(|e| e.into_inner());
        entered
            .get(&std::thread::current().id())
            .and_then(|stack| stack.last().copied())
    }
}

impl Subscriber for Catch {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("lock_runtime")
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
        let mut fields = String::new();
        span.record(&mut Fields(&mut fields));
        self.caught(|caught| caught.spans.insert(id, (span.metadata(), fields)));
        Id::from_u64(id)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        self.caught(|caught| {
            if let Some((_, fields)) = caught.spans.get_mut(&id.into_u64()) {
                values.record(&mut Fields(fields));
            }
        });
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let parent = event
            .parent()
            .map(Id::into_u64)
            .or_else(|| self.innermost());
        let mut fields = String::new();
        event.record(&mut Fields(&mut fields));
        self.caught(|caught| caught.events.push((parent, fields)));
    }
    fn enter(&self, id: &Id) {
        let mut entered = self.entered.lock().unwrap_or_else(|e| e.into_inner());
        entered
            .entry(std::thread::current().id())
            .or_default()
            .push(id.into_u64());
    }
    fn exit(&self, _: &Id) {
        let mut entered = self.entered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stack) = entered.get_mut(&std::thread::current().id()) {
            stack.pop();
        }
    }
    fn current_span(&self) -> tracing_core::span::Current {
        match self.innermost().filter(|_| self.tells) {
            Some(id) => {
                let metadata = self.caught(|caught| caught.spans.get(&id).map(|(m, _)| *m));
                match metadata {
                    Some(metadata) => tracing_core::span::Current::new(Id::from_u64(id), metadata),
                    None => tracing_core::span::Current::none(),
                }
            }
            None => tracing_core::span::Current::none(),
        }
    }
}

#[tokio::test]
async fn a_wait_for_a_busy_lock_is_traced_to_the_callers_own_subscriber() {
    wait_traced_by_the_callers_own(true).await;
}

#[tokio::test]
async fn a_wait_for_a_busy_lock_is_traced_in_its_span_by_a_subscriber_that_tells_no_current_span() {
    wait_traced_by_the_callers_own(false).await;
}

/// An acquisition that waits for a busy lock on Redis is traced to the
/// subscriber of the task that called it, like one that did not wait:
/// its `lock acquired` event in its `lock.acquire` span, and the hold's
/// `lock.hold` span, in which an annotated body's events nest. `tells`:
/// whether that subscriber tells which span is current.
async fn wait_traced_by_the_callers_own(tells: bool) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let caught = std::sync::Arc::new(Mutex::new(Caught::default()));
    let _default = tracing::subscriber::set_default(Catch {
        caught: caught.clone(),
        entered: Mutex::new(HashMap::new()),
        tells,
    });
    one_wait_for_a_busy_lock("paid:7", "paid").await;

    let caught = caught.lock().unwrap();
    let (acquire, _) = caught
        .spans
        .iter()
        .find(|(_, (m, fields))| m.name() == "lock.acquire" && fields.contains("template=\"paid\""))
        .expect("the waiter's acquisition span");
    assert!(
        caught
            .events
            .iter()
            .any(|(parent, fields)| fields.contains("lock acquired") && *parent == Some(*acquire)),
        "the waiter's grant is told in its acquisition's span: {:?}",
        caught.events
    );
    assert!(
        caught
            .spans
            .values()
            .any(|(m, fields)| m.name() == "lock.hold" && fields.contains("template=\"paid\"")),
        "the waiter's hold has its span"
    );
}

/// An acquisition that waits for a busy lock on Redis is counted by the
/// recorder of the thread that called it, like one that did not wait: a
/// hold it granted and released leaves `lock_held` at zero.
#[tokio::test]
async fn a_wait_for_a_busy_lock_is_counted_by_the_callers_own_recorder() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    one_wait_for_a_busy_lock("paid:8", "paid-later").await;

    let held: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, _)| {
            key.key().name() == "lock_held" && key.key().labels().any(|l| l.value() == "paid-later")
        })
        .map(|(_, _, _, value)| value)
        .collect();
    assert!(
        matches!(held.as_slice(), [DebugValue::Gauge(n)] if n.into_inner() == 0.0),
        "one hold, granted and released: {held:?}"
    );
}
