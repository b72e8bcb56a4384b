//! An HTTP order service whose handler is a `#[distributed_lock]` function.
//!
//! | route | answer |
//! |---|---|
//! | `POST /orders/{sku}` | `201` and a receipt; `409` + `Retry-After` when the SKU stayed locked for the whole wait; `422` sold out; `404` unknown SKU |
//! | `GET /stock/{sku}` | `200` and the units left |
//! | `GET /locks/{sku}` | `200` and who holds the SKU's lock (`Locker::inspect`) |
//! | `GET /metrics` | the lock metrics, as Prometheus text |
//!
//! The stock count lives in Redis, so any number of instances of this
//! service can sell the same SKU; the lock `stock:<sku>` makes their
//! read-check-write sequences take turns, so none of them sells a unit
//! twice. (On the in-memory store, locks and stock live in the one
//! process, and its requests take turns all the same.)

mod error;
pub mod load;
pub mod observe;
mod orders;
pub mod raw_http;

use std::net::SocketAddr;

use axum::Router;
use axum::routing::{get, post};
use lock_runtime::{LockConfig, Locker};

use crate::{Backing, Data};

pub use error::ShopError;

/// The service's shared state: where the locks are and where the stock is.
/// Cheap to clone (both halves are shared handles), as axum state must be.
#[derive(Clone)]
pub struct Shop {
    locker: Locker,
    data: Data,
}

impl Shop {
    /// Connects a locker and a data connection to the Redis at `url`.
    pub async fn connect(url: &str) -> Result<Self, ShopError> {
        Self::open(LockConfig::from_url(url)?, Data::connect(url).await?).await
    }

    /// A shop on a demo's backing: Redis, or the in-memory store.
    pub async fn on(backing: &Backing) -> Result<Self, ShopError> {
        let data = backing.data().await?;
        Self::open(backing.lock_config()?, data).await
    }

    async fn open(config: LockConfig, data: Data) -> Result<Self, ShopError> {
        // The recorder is in place before the first lock is taken.
        observe::exporter();
        let locker = Locker::connect(config).await?;
        Ok(Self { locker, data })
    }

    /// The locker the order handler takes its locks from.
    pub fn locker(&self) -> &Locker {
        &self.locker
    }

    /// Sets the stock of `sku` to `units`.
    pub async fn restock(&self, sku: &str, units: u64) -> Result<(), ShopError> {
        Ok(self.data.set(&stock_key(sku), units).await?)
    }

    /// Units of `sku` left, or `None` for a SKU that was never stocked.
    pub async fn stock(&self, sku: &str) -> Result<Option<u64>, ShopError> {
        Ok(self.data.get(&stock_key(sku)).await?)
    }

    /// Deletes the stock count of `sku`: the end of a demo run whose SKU
    /// is never used again. (Its lock leaves nothing behind once released.)
    pub async fn forget(&self, sku: &str) -> Result<(), ShopError> {
        Ok(self.data.del(&[&stock_key(sku)]).await?)
    }

    /// The service's routes, with this shop as their state.
    pub fn router(self) -> Router {
        Router::new()
            .route("/orders/{sku}", post(orders::place_order))
            .route("/stock/{sku}", get(orders::show_stock))
            .route("/locks/{sku}", get(observe::show_lock))
            .route("/metrics", get(observe::metrics))
            .with_state(self)
    }

    /// Serves the routes on `listener` until `shutdown` completes.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }
}

/// Binds a loopback listener: `port` 0 picks a free port.
pub async fn bind_loopback(port: u16) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// The Redis key of a SKU's stock count. Not under the lock's own
/// `lock:` prefix: the data and its lock are separate keys.
pub fn stock_key(sku: &str) -> String {
    format!("shop:stock:{sku}")
}
