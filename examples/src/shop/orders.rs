//! The order handlers. `place_order` is an ordinary axum handler with one
//! attribute on top; everything about the lock stays out of its body.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use lock_runtime::distributed_lock;
use serde_json::{Value, json};

use super::{Shop, ShopError, stock_key};

/// Time spent between checking the stock and writing it back (charging a
/// card, say): the window in which two unlocked orders would both see the
/// last unit.
const PAYMENT: Duration = Duration::from_millis(2);

/// `POST /orders/{sku}`: sells one unit.
///
/// - `ttl = "3s"`: if this instance dies mid-order, the SKU is free again
///   after 3 s; while it lives, the watchdog renews the lease.
/// - `wait = "2s"`: past that, a client would rather hear "busy, try again"
///   (409) than hang behind a long queue of orders.
/// - `locker = shop.locker`: the locker lives in the app state, taken
///   from the `State` extractor's binding.
#[distributed_lock(key = "stock:<sku>", ttl = "3s", wait = "2s", locker = shop.locker)]
pub(super) async fn place_order(
    State(shop): State<Shop>,
    Path(sku): Path<String>,
) -> Result<(StatusCode, Json<Value>), ShopError> {
    let key = stock_key(&sku);
    let left = shop.data.get(&key).await?;
    let left = left.ok_or_else(|| ShopError::UnknownSku { sku: sku.clone() })?;
    if left == 0 {
        return Err(ShopError::SoldOut { sku });
    }
    tokio::time::sleep(PAYMENT).await;
    shop.data.set(&key, left - 1).await?;
    // The fencing token: a store that remembers the highest one it has seen
    // can refuse a write from an owner that was paused past its lease.
    let fence = lock_runtime::current().map(|lock| lock.fence());
    let receipt = json!({ "sku": sku, "remaining": left - 1, "fence": fence });
    Ok((StatusCode::CREATED, Json(receipt)))
}

/// `GET /stock/{sku}`: units left. A plain read, no lock: it may be a
/// moment stale, which is fine for display.
pub(super) async fn show_stock(
    State(shop): State<Shop>,
    Path(sku): Path<String>,
) -> Result<Json<Value>, ShopError> {
    let left = shop
        .stock(&sku)
        .await?
        .ok_or_else(|| ShopError::UnknownSku { sku: sku.clone() })?;
    Ok(Json(json!({ "sku": sku, "stock": left })))
}
