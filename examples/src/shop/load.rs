//! The load driver: many concurrent orders for a little stock, then a check
//! that the books balance (every unit sold is gone from the stock, and no
//! more were sold than there were).

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::raw_http::request;
use super::{Shop, ShopError};

/// Longest a single request may take before it counts as failed.
const REQUEST_LIMIT: Duration = Duration::from_secs(10);

/// What one load run saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// Units in stock before the run.
    pub stock: u64,
    /// Orders sent, all at once.
    pub requests: u64,
    /// `201 Created`: units sold.
    pub sold: u64,
    /// `409 Conflict`: the SKU stayed locked for the handler's whole wait.
    pub busy: u64,
    /// `422`: nothing left.
    pub sold_out: u64,
    /// Any other status, or no reply at all.
    pub failed: u64,
    /// Units in stock after the run, read from Redis.
    pub final_stock: u64,
    /// Time from the first request sent to the last reply.
    pub elapsed: Duration,
    /// What the first failed request got, to say why.
    pub first_failure: Option<String>,
}

impl LoadReport {
    /// Units sold beyond the stock there was.
    pub fn oversold(&self) -> u64 {
        self.sold.saturating_sub(self.stock)
    }

    /// Whether the books balance: every sale took exactly one unit, and
    /// every request got one of the expected answers.
    pub fn is_correct(&self) -> bool {
        self.oversold() == 0
            && self.sold + self.final_stock == self.stock
            && self.sold + self.busy + self.sold_out == self.requests
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: [(&str, String); 8] = [
            ("stock before", self.stock.to_string()),
            ("requests", self.requests.to_string()),
            ("201 sold", self.sold.to_string()),
            ("409 busy", self.busy.to_string()),
            ("422 sold out", self.sold_out.to_string()),
            ("other/failed", self.failed.to_string()),
            ("stock after", self.final_stock.to_string()),
            ("elapsed", format!("{} ms", self.elapsed.as_millis())),
        ];
        for (name, value) in rows {
            writeln!(f, "{name:<14}{value:>10}")?;
        }
        if let Some(failure) = &self.first_failure {
            writeln!(f, "first failure: {failure}")?;
        }
        write!(
            f,
            "result: sold={} busy={} sold_out={} failed={} stock_after={} oversold={}",
            self.sold,
            self.busy,
            self.sold_out,
            self.failed,
            self.final_stock,
            self.oversold()
        )
    }
}

/// Stocks `stock` units of `sku`, sends `requests` concurrent
/// `POST /orders/{sku}` to the service at `addr` (which must sell from
/// `shop`'s Redis), and reads the stock back.
pub async fn run(
    shop: &Shop,
    addr: SocketAddr,
    sku: &str,
    stock: u64,
    requests: u64,
) -> Result<LoadReport, ShopError> {
    shop.restock(sku, stock).await?;
    let path = format!("/orders/{sku}");
    let started = Instant::now();
    let mut orders = JoinSet::new();
    for _ in 0..requests {
        let path = path.clone();
        orders.spawn(async move { request(addr, "POST", &path, REQUEST_LIMIT).await });
    }
    let mut report = LoadReport {
        stock,
        requests,
        sold: 0,
        busy: 0,
        sold_out: 0,
        failed: 0,
        final_stock: 0,
        elapsed: Duration::ZERO,
        first_failure: None,
    };
    while let Some(done) = orders.join_next().await {
        let reply = done
            .map_err(|e| e.to_string())
            .and_then(|reply| reply.map_err(|e| e.to_string()));
        match reply {
            Ok(reply) if reply.status == 201 => report.sold += 1,
            Ok(reply) if reply.status == 409 => report.busy += 1,
            Ok(reply) if reply.status == 422 => report.sold_out += 1,
            other => {
                report.failed += 1;
                report.first_failure.get_or_insert_with(|| match other {
                    Ok(reply) => format!("{} {}", reply.status, reply.body),
                    Err(error) => error,
                });
            }
        }
    }
    report.elapsed = started.elapsed();
    report.final_stock = shop.stock(sku).await?.unwrap_or(0);
    Ok(report)
}
