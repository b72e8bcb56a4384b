//! Metrics, through the [`metrics`](https://docs.rs/metrics) facade (the
//! `metrics` feature): the application installs whichever recorder and
//! exporter it likes; without one, or without the feature, every call here
//! compiles to nothing.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `lock_acquisitions_total` | counter | `template`, `primitive`, `outcome` | acquisitions by outcome: `acquired`, `busy` (a single try found it held), `timeout`, `error` |
//! | `lock_acquire_wait_seconds` | histogram | `template`, `primitive`, `outcome` | how long each acquisition took, whatever its outcome |
//! | `lock_hold_seconds` | histogram | `template`, `primitive` | from the grant to the release or the loss |
//! | `lock_held` | gauge | `template`, `primitive` | locks held by this process now |
//! | `lock_renewals_total` | counter | `template`, `primitive`, `outcome` | renewals: `renewed`, `refused` (gone), `unconfirmed` (retried) |
//! | `lock_losses_total` | counter | `template`, `primitive`, `cause` | losses: `refused`, `unconfirmed`, `lease_ended`, `lapsed`, `hold_cap`, `unwatched`, `gone_at_release` |
//! | `lock_handovers_total` | counter | `template`, `primitive` | locks passed straight to the next task of the locker in line (see [`crate::engine::handover`]) |
//! | `lock_release_errors_total` | counter | `template`, `primitive` | releases that failed: the lock stays until its lease ends |
//!
//! Labels are bounded: `template` is the attribute's key template
//! (`stock:<sku>`) or what [`LockRequest::template`](crate::LockRequest::template)
//! set (`-` otherwise), never a rendered key; `primitive` is the lock's
//! kind (`exclusive`).

use std::time::Duration;

/// The labels every metric of one lock carries: bounded, so that each
/// makes a handful of series, never one per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Labels {
    /// The attribute's key template (`stock:<sku>`), or what the request
    /// named ([`NO_TEMPLATE`] otherwise).
    pub(crate) template: &'static str,
    /// The primitive (`exclusive`, ...).
    pub(crate) primitive: &'static str,
}

/// The template of a lock taken without one.
pub(crate) const NO_TEMPLATE: &str = "-";

/// An acquisition ended with `outcome` after `waited`.
pub(crate) fn acquisition(labels: Labels, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    {
        let labels = [
            ("template", labels.template),
            ("primitive", labels.primitive),
            ("outcome", outcome),
        ];
        ::metrics::counter!("lock_acquisitions_total", &labels).increment(1);
        ::metrics::histogram!("lock_acquire_wait_seconds", &labels).record(waited.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (labels, outcome, waited);
}

/// A lock with `labels` was granted.
pub(crate) fn granted(labels: Labels) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!("lock_held", "template" => labels.template, "primitive" => labels.primitive)
        .increment(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = labels;
}

/// A lock with `labels`, held for what `held` answers, was released or
/// lost (`held` reads a clock: only called where metrics are compiled in).
pub(crate) fn ended(labels: Labels, held: impl FnOnce() -> Duration) {
    #[cfg(feature = "metrics")]
    {
        let labels = [
            ("template", labels.template),
            ("primitive", labels.primitive),
        ];
        ::metrics::gauge!("lock_held", &labels).decrement(1.0);
        ::metrics::histogram!("lock_hold_seconds", &labels).record(held().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (labels, held);
}

/// One lease's renewal ended with `outcome`.
pub(crate) fn renewal(labels: Labels, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_renewals_total",
        "template" => labels.template, "primitive" => labels.primitive, "outcome" => outcome
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (labels, outcome);
}

/// A lock with `labels` was lost for `cause`.
pub(crate) fn loss(labels: Labels, cause: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_losses_total",
        "template" => labels.template, "primitive" => labels.primitive, "cause" => cause
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (labels, cause);
}

/// A lock with `labels` was passed to the next task in its locker's line.
pub(crate) fn handed_over(labels: Labels) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_handovers_total",
        "template" => labels.template, "primitive" => labels.primitive
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = labels;
}

/// A release of a lock with `labels` failed.
pub(crate) fn release_failed(labels: Labels) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_release_errors_total",
        "template" => labels.template, "primitive" => labels.primitive
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = labels;
}

/// Describes every metric to the installed recorder (units and help
/// text); called when a locker connects.
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
        describe_counter!(
            "lock_acquisitions_total",
            "Lock acquisitions by outcome: acquired, busy, timeout, error"
        );
        describe_histogram!(
            "lock_acquire_wait_seconds",
            Unit::Seconds,
            "Time each acquisition took, by outcome"
        );
        describe_histogram!(
            "lock_hold_seconds",
            Unit::Seconds,
            "Time from a grant to its release or loss"
        );
        describe_gauge!("lock_held", "Locks held by this process now");
        describe_counter!(
            "lock_renewals_total",
            "Lease renewals by outcome: renewed, refused, unconfirmed"
        );
        describe_counter!(
            "lock_losses_total",
            "Locks lost by cause: refused, unconfirmed, lease_ended, lapsed, hold_cap, unwatched, gone_at_release"
        );
        describe_counter!(
            "lock_handovers_total",
            "Locks passed straight to the next task of the same locker waiting for them"
        );
        describe_counter!(
            "lock_release_errors_total",
            "Releases that failed; the lock stays until its lease ends"
        );
    }
}
