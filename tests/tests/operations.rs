//! What an operator sees: metrics (through a test recorder installed for
//! this whole binary) and traces (through a subscriber that writes down
//! every span and event). Inspect, force unlock and the hold cap on every
//! backend are in `conformance.rs`.
//!
//! The locks run on the in-memory store with a paused clock: these tests
//! are about what is recorded, and the same code records on every backend.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use lock_runtime::memory::MemoryStore;
use lock_runtime::{LockConfig, LockError, Locker, distributed_lock};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The binary's metrics recorder, installed once.
fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}

/// One metric's value, by name and labels (`k=v` pairs, sorted).
type Metrics = HashMap<(String, Vec<String>), DebugValue>;

/// Everything recorded since the last snapshot (counters and histograms
/// are drained by taking it).
fn take_metrics() -> Metrics {
    snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let mut labels: Vec<String> = key
                .key()
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            labels.sort();
            ((key.key().name().to_owned(), labels), value)
        })
        .collect()
}

fn labels(pairs: &[&str]) -> Vec<String> {
    let mut labels: Vec<String> = pairs.iter().map(|s| (*s).to_owned()).collect();
    labels.sort();
    labels
}

fn counter(metrics: &Metrics, name: &str, pairs: &[&str]) -> u64 {
    match metrics.get(&(name.to_owned(), labels(pairs))) {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        other => panic!("{name} {pairs:?} is not a counter: {other:?}"),
    }
}

fn samples(metrics: &Metrics, name: &str, pairs: &[&str]) -> Vec<f64> {
    match metrics.get(&(name.to_owned(), labels(pairs))) {
        Some(DebugValue::Histogram(values)) => values.iter().map(|v| v.into_inner()).collect(),
        None => Vec::new(),
        other => panic!("{name} {pairs:?} is not a histogram: {other:?}"),
    }
}

#[distributed_lock(key = "report:<name>", ttl = "3s", max_hold = "10s", locker = locker)]
async fn report(locker: &Locker, name: &str, work: Duration) -> Result<(), LockError> {
    tokio::time::sleep(work).await;
    Ok(())
}

/// One test for every metric: taking the snapshot drains them.
#[tokio::test(start_paused = true)]
async fn every_metric_counts_what_happened() {
    let store = MemoryStore::new();
    let config = LockConfig::in_memory_store(&store);
    let (a, b) = (
        Locker::connect(config.clone()).await.unwrap(),
        Locker::connect(config).await.unwrap(),
    );
    let _ = take_metrics();
    let t = "template=orders";
    let p = "primitive=exclusive";

    // acquired, busy, timeout, error.
    let guard = a
        .lock("o:1")
        .template("orders")
        .ttl(Duration::from_secs(3))
        .acquire()
        .await
        .unwrap();
    assert!(
        b.lock("o:1")
            .template("orders")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    let wait = Duration::from_millis(500);
    let timeout = b.lock("o:1").template("orders").wait(wait).acquire().await;
    assert!(matches!(timeout, Err(LockError::Timeout { .. })));
    let tiny = b
        .lock("o:2")
        .template("orders")
        .ttl(Duration::from_millis(2));
    assert!(matches!(tiny.acquire().await, Err(LockError::Config(_))));
    // Held over two leases: renewed; then taken away: refused, lost.
    tokio::time::sleep(Duration::from_secs(6)).await;
    store.expire("o:1");
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .unwrap();
    drop(guard);
    // An annotated call (its template is its key's), run into its cap.
    let capped = report(&a, "nightly", Duration::from_secs(60)).await;
    assert!(matches!(capped, Err(LockError::HoldCapExceeded { .. })));
    report(&a, "hourly", Duration::from_secs(1)).await.unwrap();
    // A lock passed to the next task of its locker in line.
    let sale = move |locker: &Locker| locker.lock("s:1").template("sale").wait(wait);
    let first = sale(&a).acquire().await.unwrap();
    let next = {
        let a = a.clone();
        tokio::spawn(async move { sale(&a).acquire().await.unwrap().release().await })
    };
    tokio::task::yield_now().await; // `next` is in line now
    assert!(first.release().await.unwrap());
    assert!(next.await.unwrap().unwrap());

    let m = take_metrics();
    let outcome = |o: &str| counter(&m, "lock_acquisitions_total", &[t, p, o]);
    assert_eq!(outcome("outcome=acquired"), 1, "{m:?}");
    assert_eq!(outcome("outcome=busy"), 1, "{m:?}");
    assert_eq!(outcome("outcome=timeout"), 1, "{m:?}");
    assert_eq!(outcome("outcome=error"), 1, "{m:?}");
    let waited = samples(&m, "lock_acquire_wait_seconds", &[t, p, "outcome=timeout"]);
    assert_eq!(waited.len(), 1);
    assert!(waited[0] >= wait.as_secs_f64(), "{waited:?}");
    let renewals = |o: &str| counter(&m, "lock_renewals_total", &[t, p, o]);
    assert!(renewals("outcome=renewed") >= 5, "{m:?}");
    assert_eq!(renewals("outcome=refused"), 1, "{m:?}");
    assert_eq!(
        counter(&m, "lock_losses_total", &[t, p, "cause=refused"]),
        1
    );
    let held = samples(&m, "lock_hold_seconds", &[t, p]);
    assert_eq!(held.len(), 1, "one hold, ended by its loss");
    assert!(held[0] >= 6.0, "{held:?}");

    let r = "template=report:<name>";
    assert_eq!(
        counter(&m, "lock_losses_total", &[r, p, "cause=hold_cap"]),
        1
    );
    let acquired = counter(&m, "lock_acquisitions_total", &[r, p, "outcome=acquired"]);
    assert_eq!(acquired, 2, "{m:?}");
    let held = samples(&m, "lock_hold_seconds", &[r, p]);
    assert_eq!(held.len(), 2, "{held:?}");
    let s = "template=sale";
    assert_eq!(counter(&m, "lock_handovers_total", &[s, p]), 1, "{m:?}");
    // Every hold ended: nothing held, per template.
    for template in [t, r, s] {
        match m.get(&("lock_held".to_owned(), labels(&[template, p]))) {
            Some(DebugValue::Gauge(n)) => assert_eq!(n.into_inner(), 0.0, "{template}"),
            other => panic!("lock_held {template}: {other:?}"),
        }
    }
    // No rendered key ever became a label.
    for (name, labels) in m.keys() {
        assert!(
            labels
                .iter()
                .all(|l| !l.contains("o:1") && !l.contains("nightly")),
            "{name} {labels:?}"
        );
    }
}

/// What the subscriber saw: spans by id, with their fields and parents,
/// and events with their fields and parent span.
#[derive(Default)]
struct Seen {
    spans: HashMap<u64, (String, String)>,
    events: Vec<(Option<u64>, String)>,
}

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

/// Writes down every span (with its fields, also those recorded later)
/// and every event (with its explicit or current parent).
struct WriteDown;

thread_local! {
    static CURRENT: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl WriteDown {
    fn with<T>(f: impl FnOnce(&mut Seen) -> T) -> T {
        // A failed assertion inside must not hide the others' records.
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        f(seen.get_or_insert_with(Seen::default))
    }
}

impl Subscriber for WriteDown {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("lock_runtime")
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
        let mut fields = String::new();
        span.record(&mut Fields(&mut fields));
        let name = span.metadata().name().to_owned();
        Self::with(|seen| seen.spans.insert(id, (name, fields)));
        Id::from_u64(id)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        Self::with(|seen| {
            if let Some((_, fields)) = seen.spans.get_mut(&id.into_u64()) {
                values.record(&mut Fields(fields));
            }
        });
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let parent = event
            .parent()
            .map(Id::into_u64)
            .or_else(|| CURRENT.with(|current| current.borrow().last().copied()));
        let mut fields = String::new();
        event.record(&mut Fields(&mut fields));
        Self::with(|seen| seen.events.push((parent, fields)));
    }
    fn enter(&self, id: &Id) {
        CURRENT.with(|current| current.borrow_mut().push(id.into_u64()));
    }
    fn exit(&self, _: &Id) {
        CURRENT.with(|current| current.borrow_mut().pop());
    }
}

#[distributed_lock(key = "invoice:<id>", ttl = "3s", locker = locker)]
async fn bill(locker: &Locker, id: u64, store: &MemoryStore) -> Result<(), LockError> {
    tracing::info!(target: "lock_runtime_test_body", "billing");
    store.expire(&format!("invoice:{id}"));
    tokio::time::sleep(Duration::from_secs(10)).await;
    Ok(())
}

#[test]
fn spans_name_the_template_the_key_the_fence_and_the_outcome() {
    tracing::subscriber::set_global_default(WriteDown).expect("the only subscriber");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let store = MemoryStore::new();
    let locker = runtime
        .block_on(Locker::connect(LockConfig::in_memory_store(&store)))
        .unwrap();
    let lost = runtime.block_on(bill(&locker, 7, &store));
    assert!(matches!(lost, Err(LockError::Lost { .. })));

    WriteDown::with(|seen| {
        // (The other test of this binary records its own spans meanwhile.)
        let acquire = seen
            .spans
            .values()
            .find(|(name, fields)| name == "lock.acquire" && fields.contains("key=invoice:7"))
            .expect("an acquisition span");
        for field in [
            "key=invoice:7",
            "template=\"invoice:<id>\"",
            "outcome=\"acquired\"",
            "fence=",
            "waited_ms=",
        ] {
            assert!(acquire.1.contains(field), "{field} in {acquire:?}");
        }
        let (hold_id, hold) = seen
            .spans
            .iter()
            .find(|(_, (name, fields))| name == "lock.hold" && fields.contains("invoice:7"))
            .expect("a hold span");
        for field in ["key=\"invoice:7\"", "template=\"invoice:<id>\"", "fence="] {
            assert!(hold.1.contains(field), "{field} in {hold:?}");
        }
        let lost = seen
            .events
            .iter()
            .find(|(_, fields)| fields.contains("lock lost") && fields.contains("invoice:7"))
            .expect("a loss event");
        assert_eq!(
            lost.0,
            Some(*hold_id),
            "the loss is told in the hold's span"
        );
        assert!(lost.1.contains("cause=\"refused\""), "{lost:?}");
        // Nothing anyone recorded carries a token's secret (32 hex digits).
        let everything: Vec<&String> = seen
            .spans
            .values()
            .map(|(_, fields)| fields)
            .chain(seen.events.iter().map(|(_, fields)| fields))
            .collect();
        for fields in everything {
            let hex_run = fields
                .as_bytes()
                .split(|b| !b.is_ascii_hexdigit())
                .map(<[u8]>::len)
                .max()
                .unwrap_or(0);
            assert!(hex_run < 32, "a token in {fields}");
        }
    });
}
