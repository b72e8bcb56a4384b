//! The order service against a real redis-server: answers for each case,
//! and a burst of concurrent orders that must not oversell.

use std::net::SocketAddr;
use std::time::Duration;

use lock_examples::shop::raw_http::{Reply, request};
use lock_examples::shop::{Shop, bind_loopback, load};
use lock_tests::RedisServer;
use tokio::sync::oneshot;

/// A running service; stops when dropped.
struct Service {
    shop: Shop,
    addr: SocketAddr,
    _stop: oneshot::Sender<()>,
}

async fn start(server: &RedisServer) -> Service {
    let shop = Shop::connect(&server.url())
        .await
        .expect("connect the shop");
    let (listener, addr) = bind_loopback(0).await.expect("bind");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(shop.clone().serve(listener, async {
        let _ = stopped.await;
    }));
    Service {
        shop,
        addr,
        _stop: stop,
    }
}

async fn post(service: &Service, path: &str) -> Reply {
    request(service.addr, "POST", path, Duration::from_secs(10))
        .await
        .expect("a reply")
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_orders_never_oversell() {
    let server = RedisServer::start();
    let service = start(&server).await;
    let report = load::run(&service.shop, service.addr, "burst", 50, 200)
        .await
        .expect("load run");
    println!("{report}");
    assert_eq!(report.failed, 0, "{report}");
    assert_eq!(report.oversold(), 0, "{report}");
    assert_eq!(report.sold + report.final_stock, 50, "{report}");
    assert!(report.is_correct(), "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_order_gets_a_receipt_then_sold_out() {
    let server = RedisServer::start();
    let service = start(&server).await;
    service.shop.restock("7", 1).await.unwrap();

    let first = post(&service, "/orders/7").await;
    assert_eq!(first.status, 201, "{first:?}");
    assert!(first.body.contains(r#""remaining":0"#), "{first:?}");
    assert!(first.body.contains(r#""fence":1"#), "{first:?}");

    let second = post(&service, "/orders/7").await;
    assert_eq!(second.status, 422, "{second:?}");
    assert!(second.body.contains(r#""error":"sold_out""#), "{second:?}");

    let unknown = post(&service, "/orders/nope").await;
    assert_eq!(unknown.status, 404, "{unknown:?}");

    let stock = request(service.addr, "GET", "/stock/7", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(stock.status, 200, "{stock:?}");
    assert!(stock.body.contains(r#""stock":0"#), "{stock:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sku_locked_past_the_wait_is_409_busy() {
    let server = RedisServer::start();
    let service = start(&server).await;
    service.shop.restock("9", 5).await.unwrap();
    // Someone else (another instance, say) holds the SKU's lock for longer
    // than the handler's 2 s wait.
    let guard = service
        .shop
        .locker()
        .lock("stock:9")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();

    let busy = post(&service, "/orders/9").await;
    assert_eq!(busy.status, 409, "{busy:?}");
    assert!(busy.body.contains(r#""error":"busy""#), "{busy:?}");
    assert!(busy.body.contains("try again"), "{busy:?}");
    assert_eq!(service.shop.stock("9").await.unwrap(), Some(5));

    guard.release().await.unwrap();
    let sold = post(&service, "/orders/9").await;
    assert_eq!(sold.status, 201, "{sold:?}");
}
