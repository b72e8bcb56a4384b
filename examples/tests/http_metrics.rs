//! The order service's `/metrics` and `/locks/{sku}` after a burst of
//! orders: the lock counters add up to the answers the clients got. (A
//! binary of its own: the metrics recorder is process-wide, and another
//! test's orders would count too.)

use std::net::SocketAddr;
use std::time::Duration;

use lock_examples::shop::raw_http::request;
use lock_examples::shop::{Shop, bind_loopback, load};
use lock_tests::RedisServer;
use tokio::sync::oneshot;

async fn get(addr: SocketAddr, path: &str) -> String {
    let reply = request(addr, "GET", path, Duration::from_secs(10))
        .await
        .expect("a reply");
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body
}

/// The value of the Prometheus sample `name{labels}` (labels as rendered,
/// in any order), or 0 when it was never recorded.
fn sample(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' '))
        .find(|(series, _)| {
            let Some(rest) = series.strip_prefix(name) else {
                return false;
            };
            let rest = rest.trim_start_matches('{').trim_end_matches('}');
            let mut have: Vec<&str> = rest.split(',').filter(|l| !l.is_empty()).collect();
            let mut want = labels.to_vec();
            have.sort_unstable();
            want.sort_unstable();
            have == want
        })
        .map_or(0.0, |(_, value)| value.parse().expect("a number"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lock_counters_add_up_to_the_answers_and_inspect_names_the_holder() {
    let server = RedisServer::start();
    let shop = Shop::connect(&server.url())
        .await
        .expect("connect the shop");
    let (listener, addr) = bind_loopback(0).await.expect("bind");
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(shop.clone().serve(listener, async {
        let _ = stopped.await;
    }));

    // One order that finds the SKU held past its 2 s wait: a timeout.
    shop.restock("metrics", 30).await.unwrap();
    let elsewhere = shop.locker().lock("stock:metrics").acquire().await.unwrap();
    let busy = request(addr, "POST", "/orders/metrics", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(busy.status, 409, "{busy:?}");
    elsewhere.release().await.unwrap();

    let report = load::run(&shop, addr, "metrics", 30, 120)
        .await
        .expect("load run");
    assert!(report.is_correct(), "{report}");
    let text = get(addr, "/metrics").await;
    let series = |suffix: &str, outcome: &str| {
        let name = format!("lock_{suffix}");
        let labels = [
            r#"template="stock:<sku>""#,
            r#"primitive="exclusive""#,
            outcome,
        ];
        let labels: Vec<&str> = labels.into_iter().filter(|l| !l.is_empty()).collect();
        sample(&text, &name, &labels)
    };
    let acquired = series("acquisitions_total", r#"outcome="acquired""#);
    let timeouts = series("acquisitions_total", r#"outcome="timeout""#);
    println!("{report}\nacquired={acquired} timeouts={timeouts}");
    // Every order took the lock and sold or found the SKU sold out, or
    // waited its 2 s out and was told "busy".
    assert_eq!(acquired, (report.sold + report.sold_out) as f64, "{text}");
    assert_eq!(timeouts, (report.busy + 1) as f64, "{text}");
    assert_eq!(series("acquisitions_total", r#"outcome="error""#), 0.0);
    assert_eq!(series("held", ""), 0.0, "every lock given back: {text}");
    // (The test's own lock has no template: it counts under `-`.)
    assert_eq!(series("hold_seconds_count", ""), acquired, "{text}");
    assert_eq!(
        series("acquire_wait_seconds_count", r#"outcome="acquired""#),
        acquired
    );
    assert!(text.contains("# HELP lock_acquisitions_total"), "{text}");
    assert!(
        !text.contains("stock:metrics"),
        "no rendered key is a label: {text}"
    );

    // Who holds the lock, while someone does.
    let free = get(addr, "/locks/metrics").await;
    assert!(free.contains(r#""held":false"#), "{free}");
    let guard = shop.locker().lock("stock:metrics").acquire().await.unwrap();
    let held = get(addr, "/locks/metrics").await;
    assert!(held.contains(r#""held":true"#), "{held}");
    // The default holder label: this host and this process.
    let process = format!(r#":{}","#, std::process::id());
    assert!(
        held.contains(r#""holder":""#) && held.contains(&process),
        "{held}"
    );
    assert!(held.contains(r#""contended":false"#), "{held}");
    guard.release().await.unwrap();
}
