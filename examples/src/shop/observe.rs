//! What an operator asks the order service: `GET /metrics` (Prometheus
//! text: the lock metrics listed in the README's "Operations") and
//! `GET /locks/{sku}` (who holds a SKU's lock right now).

use std::sync::OnceLock;

use axum::Json;
use axum::extract::{Path, State};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::{Value, json};

use super::{Shop, ShopError};

/// The process's Prometheus recorder, installed at the first call (a
/// process has one global recorder; the first service to start installs
/// it, later ones share it).
pub fn exporter() -> Option<&'static PrometheusHandle> {
    static EXPORTER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    EXPORTER
        .get_or_init(|| PrometheusBuilder::new().install_recorder().ok())
        .as_ref()
}

/// `GET /metrics`: every metric recorded so far.
pub(super) async fn metrics() -> String {
    exporter().map(PrometheusHandle::render).unwrap_or_default()
}

/// `GET /locks/{sku}`: the SKU's lock as Redis sees it.
pub(super) async fn show_lock(
    State(shop): State<Shop>,
    Path(sku): Path<String>,
) -> Result<Json<Value>, ShopError> {
    let info = shop.locker.inspect(format!("stock:{sku}")).await?;
    Ok(Json(json!({
        "key": info.key,
        "held": info.held,
        "holder": info.holder,
        "contended": info.contended,
        "remaining_ms": info.remaining.map(|left| left.as_millis() as u64),
    })))
}
