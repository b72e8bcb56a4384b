//! No password and no owner token in anything the library prints: every
//! span and event it emits at every level (caught by a subscriber of this
//! binary's own, set globally, since the library logs from its own thread),
//! and the `Debug` and `Display` of its errors, through a whole lock life
//! and through failed connections.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use lock_runtime::Locker;
use lock_tests::RedisServer;
use lock_tests::fixtures::{STALL_PROOF_TTL, config, get, lock_key};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

const PASSWORD: &str = "pw-s3cr3t-7f2a";

/// Everything the library emitted, as text.
static SEEN: Mutex<String> = Mutex::new(String::new());

/// A subscriber that writes down every field of every span and event.
struct WriteDown;

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl Subscriber for WriteDown {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut seen = SEEN.lock().unwrap();
        let _ = write!(seen, "\nspan {}", span.metadata().name());
        span.record(&mut Fields(&mut seen));
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Fields(&mut SEEN.lock().unwrap()));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut seen = SEEN.lock().unwrap();
        let _ = write!(seen, "\nevent {}", event.metadata().target());
        event.record(&mut Fields(&mut seen));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_password_or_token_in_spans_events_or_errors() {
    tracing::subscriber::set_global_default(WriteDown).unwrap();
    let server = RedisServer::start();
    // A user of its own with the password; the default user stays open for
    // the test's own reads.
    let password = format!(">{PASSWORD}");
    server.cmd(&[
        "ACL", "SETUSER", "locker", "on", &password, "~*", "&*", "+@all",
    ]);
    let url = format!("redis://locker:{PASSWORD}@127.0.0.1:{}/", server.port());
    let holder = Locker::connect(config(&url)).await.unwrap();
    let waiter = Locker::connect(config(&url)).await.unwrap();
    let guard = holder
        .lock("secret:stock")
        .ttl(STALL_PROOF_TTL)
        .acquire()
        .await
        .unwrap();
    let held = get(&server, &lock_key("secret:stock")).unwrap();
    // `<holder label>/<secret>`: the secret is what must not leak (the
    // label is public: `inspect` shows it).
    let token = held.rsplit_once('/').unwrap().1.to_owned();
    assert_eq!(token.len(), 32, "{held}");
    let waiting = tokio::spawn(async move {
        let taken = waiter
            .lock("secret:stock")
            .wait(Duration::from_secs(30))
            .acquire()
            .await;
        taken.unwrap().release().await.unwrap()
    });
    tokio::time::sleep(STALL_PROOF_TTL * 2).await;
    let mut printed = format!("{guard:?} {holder:?}");
    // Deleted behind its back: the loss is logged.
    server.cmd(&["DEL", &lock_key("secret:stock")]);
    guard.lost().await;
    drop(guard);
    assert!(waiting.await.unwrap());
    // Failed connections: a wrong password, a closed port.
    let wrong = format!("redis://locker:{PASSWORD}x@127.0.0.1:{}/", server.port());
    let closed = format!(
        "redis://locker:{PASSWORD}@127.0.0.1:{}/",
        lock_tests::closed_port()
    );
    for url in [wrong, closed] {
        let err = Locker::connect(config(&url)).await.unwrap_err();
        let _ = write!(printed, " {err} {err:?}");
        let config = config(&url);
        let _ = write!(printed, " {config:?}");
    }
    let seen = SEEN.lock().unwrap().clone();
    assert!(seen.len() > 100, "the library emitted something: {seen}");
    for (what, text) in [("traces", &seen), ("errors and Debug", &printed)] {
        assert!(
            !text.contains(PASSWORD),
            "the password in the {what}: {text}"
        );
        assert!(
            !text.contains(&token),
            "the owner token in the {what}: {text}"
        );
    }
}

/// A password with an unencoded `?` (as password generators produce) is
/// not echoed, even in part, by the parse error its URL gets, in any URL
/// form: the credentials end at the last `@`, wherever the first `?` is.
#[test]
fn a_question_mark_in_a_password_does_not_leak_its_first_part() {
    use lock_runtime::LockConfig;
    for url in [
        "redis://orders:Zq7Secret?tail@127.0.0.1:6379/",
        "redis+cluster://orders:Zq7Secret?tail@127.0.0.1:7000,127.0.0.1:7001",
        "redis+sentinel://orders:Zq7Secret?tail@127.0.0.1:26379/mymaster",
        "redis+redlock://orders:Zq7Secret?tail@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
    ] {
        let err = LockConfig::from_url(url).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("Zq7Secret"), "{url}: {shown}");
    }
    let err = LockConfig::redlock([
        "redis://orders:Zq7Secret?tail@127.0.0.1:1",
        "redis://127.0.0.1:2",
        "redis://127.0.0.1:3",
    ])
    .unwrap_err();
    assert!(!format!("{err} {err:?}").contains("Zq7Secret"), "{err}");
}
