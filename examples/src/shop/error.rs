//! [`ShopError`]: everything an order can run into, and the HTTP answer
//! for each.

use std::fmt;
use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lock_runtime::LockError;
use serde_json::json;

/// Why an order was not placed.
///
/// `From<LockError>` is what lets the handler carry
/// `#[distributed_lock]`: the attribute hands lock failures to the
/// function's own error type, and this is where a busy lock becomes a
/// `409 Conflict` instead of a generic 500.
#[derive(Debug)]
pub enum ShopError {
    /// Another order held the SKU's lock for the whole wait: `409`, try again.
    Busy {
        /// The lock key, e.g. `stock:42`.
        key: String,
        /// How long this order waited for it.
        waited: Duration,
    },
    /// No units left: `422`.
    SoldOut {
        /// The SKU ordered.
        sku: String,
    },
    /// The SKU was never stocked: `404`.
    UnknownSku {
        /// The SKU ordered.
        sku: String,
    },
    /// The lock was lost while the order ran, so it was cancelled: `503`.
    Interrupted {
        /// The lock key, e.g. `stock:42`.
        key: String,
    },
    /// The lock service failed (Redis unreachable, bad configuration): `503`.
    Lock(LockError),
    /// The stock store failed: `503`.
    Store(redis::RedisError),
}

impl From<LockError> for ShopError {
    fn from(error: LockError) -> Self {
        match error {
            LockError::Timeout { key, waited } => ShopError::Busy { key, waited },
            LockError::Lost { key } => ShopError::Interrupted { key },
            other => ShopError::Lock(other),
        }
    }
}

impl From<redis::RedisError> for ShopError {
    fn from(error: redis::RedisError) -> Self {
        ShopError::Store(error)
    }
}

impl fmt::Display for ShopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShopError::Busy { key, waited } => write!(
                f,
                "`{key}` is being updated by another order (waited {} ms); try again",
                waited.as_millis()
            ),
            ShopError::SoldOut { sku } => write!(f, "SKU {sku} is sold out"),
            ShopError::UnknownSku { sku } => write!(f, "no such SKU: {sku}"),
            // The write may or may not have reached the store before the
            // cancellation: say so rather than promise either.
            ShopError::Interrupted { key } => write!(
                f,
                "the order lost its lock `{key}` part-way and was cancelled; check the stock before retrying"
            ),
            ShopError::Lock(error) => write!(f, "lock service unavailable: {error}"),
            ShopError::Store(error) => write!(f, "stock store unavailable: {error}"),
        }
    }
}

impl std::error::Error for ShopError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ShopError::Lock(error) => Some(error),
            ShopError::Store(error) => Some(error),
            _ => None,
        }
    }
}

impl ShopError {
    /// The HTTP status of this error, and the short code in its body.
    pub fn status(&self) -> (StatusCode, &'static str) {
        match self {
            ShopError::Busy { .. } => (StatusCode::CONFLICT, "busy"),
            ShopError::SoldOut { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "sold_out"),
            ShopError::UnknownSku { .. } => (StatusCode::NOT_FOUND, "unknown_sku"),
            ShopError::Interrupted { .. } => (StatusCode::SERVICE_UNAVAILABLE, "interrupted"),
            ShopError::Lock(_) | ShopError::Store(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
        }
    }
}

/// `{"error": "<code>", "message": "<Display>"}` with the status above; a
/// busy SKU also gets `Retry-After: 1`, since the holder is normally done
/// within milliseconds.
impl IntoResponse for ShopError {
    fn into_response(self) -> Response {
        let (status, code) = self.status();
        let body = Json(json!({ "error": code, "message": self.to_string() }));
        let mut response = (status, body).into_response();
        if matches!(self, ShopError::Busy { .. }) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_timeout_is_409_with_retry_after() {
        let timeout = LockError::Timeout {
            key: "stock:42".into(),
            waited: Duration::from_secs(2),
        };
        let response = ShopError::from(timeout).into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn a_lost_lock_is_503_interrupted() {
        let error = ShopError::from(LockError::Lost {
            key: "stock:42".into(),
        });
        assert!(matches!(error, ShopError::Interrupted { .. }));
        assert_eq!(
            error.status(),
            (StatusCode::SERVICE_UNAVAILABLE, "interrupted")
        );
    }
}
