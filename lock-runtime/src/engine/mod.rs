//! The engine every primitive shares: the attempt (try, wait for a
//! release, try again, within one bound), leases and how long they can be
//! trusted, the watchdog that renews them, telling a holder it lost,
//! releasing now or on drop, the in-process line of a locker's tasks,
//! and the counters. It knows no one primitive: a primitive
//! ([`crate::primitive`]) says what its scripts are and what their answers
//! mean.

pub(crate) mod attempt;
pub(crate) mod convert;
pub(crate) mod core;
pub(crate) mod fence;
pub(crate) mod handle;
pub(crate) mod handover;
pub(crate) mod lease;
pub(crate) mod lease_state;
pub(crate) mod lost;
pub(crate) mod primitive;
pub(crate) mod quorum;
pub(crate) mod reentrancy;
pub(crate) mod release;
pub(crate) mod renewal;
pub(crate) mod request;
pub(crate) mod retry;
pub(crate) mod stats;
pub(crate) mod traced;
pub(crate) mod validity;
pub(crate) mod wait;
pub(crate) mod watchdog;
