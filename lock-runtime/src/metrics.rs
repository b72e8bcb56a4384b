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
//! | `lock_handovers_total` | counter | `template`, `primitive` | locks passed straight to the next task of the locker in line (see [`crate::primitive::exclusive::handover`]) |
//! | `lock_release_errors_total` | counter | `template`, `primitive` | releases that failed: the lock stays until its lease ends |
//!
//! Labels are bounded: `template` is the attribute's key template
//! (`stock:<sku>`) or what [`LockRequest::template`](crate::LockRequest::template)
//! set (`-` otherwise), never a rendered key; `primitive` is `exclusive`.

use std::time::Duration;

/// The primitive of every lock so far.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) const PRIMITIVE: &str = "exclusive";

/// The template of a lock taken without one.
pub(crate) const NO_TEMPLATE: &str = "-";

/// An acquisition ended with `outcome` after `waited`.
pub(crate) fn acquisition(template: &'static str, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    {
        let labels = [
            ("template", template),
            ("primitive", PRIMITIVE),
            ("outcome", outcome),
        ];
        ::metrics::counter!("lock_acquisitions_total", &labels).increment(1);
        ::metrics::histogram!("lock_acquire_wait_seconds", &labels).record(waited.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (template, outcome, waited);
}

/// A lock of `template` was granted.
pub(crate) fn granted(template: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!("lock_held", "template" => template, "primitive" => PRIMITIVE).increment(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = template;
}

/// A lock of `template`, held for what `held` answers, was released or
/// lost (`held` reads a clock: only called where metrics are compiled in).
pub(crate) fn ended(template: &'static str, held: impl FnOnce() -> Duration) {
    #[cfg(feature = "metrics")]
    {
        let labels = [("template", template), ("primitive", PRIMITIVE)];
        ::metrics::gauge!("lock_held", &labels).decrement(1.0);
        ::metrics::histogram!("lock_hold_seconds", &labels).record(held().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (template, held);
}

/// One lease's renewal ended with `outcome`.
pub(crate) fn renewal(template: &'static str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_renewals_total",
        "template" => template, "primitive" => PRIMITIVE, "outcome" => outcome
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (template, outcome);
}

/// A lock of `template` was lost for `cause`.
pub(crate) fn loss(template: &'static str, cause: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_losses_total",
        "template" => template, "primitive" => PRIMITIVE, "cause" => cause
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (template, cause);
}

/// A lock of `template` was passed to the next task in its locker's line.
pub(crate) fn handed_over(template: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_handovers_total",
        "template" => template, "primitive" => PRIMITIVE
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = template;
}

/// A release of a lock of `template` failed.
pub(crate) fn release_failed(template: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "lock_release_errors_total",
        "template" => template, "primitive" => PRIMITIVE
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = template;
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
