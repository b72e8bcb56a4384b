//! Waiting for a busy lock without polling it.
//!
//! A waiter subscribes to the lock's release channel, tries again, and then
//! sleeps until whichever comes first: a release message, the end of the
//! owner's lease (the PTTL the acquire script returned), or a capped,
//! jittered backoff that only matters when a message was missed.
//!
//! - [`listener`]: the pub/sub connection of a locker (one per master on
//!   Redlock), (re)subscribed to exactly the channels someone waits on;
//!   [`inbox`]: what waiters ask it.
//! - [`sessions`]: the listener's life, one connection after another.
//! - `sharded`: its sessions on a Redis Cluster (sharded pub/sub).
//! - [`waiters`]: who waits on which channel, and whom a release wakes: the
//!   longest waiter only, so a release costs one retry, not one per waiter.
//! - [`sightings`]: on Redlock, which of a release's messages (one per
//!   master) are news to a waiter, after what its last try saw.
//! - [`turns`]: the tasks of one locker waiting for the same lock queue in
//!   the process; only the first in line contends on the server.
//! - [`grantee`]: who a release message names, by the digest of its token.
//! - [`behind`]: who the server's line had behind a waiter a release
//!   handed the lock to (the fair lock's hand-overs in process).
//! - [`backoff`]: the timer of last resort.

mod backoff;
mod behind;
mod grantee;
mod inbox;
mod listener;
mod sessions;
#[cfg(feature = "cluster")]
mod sharded;
mod sightings;
mod turns;
mod waiters;

pub(crate) use backoff::Backoff;
pub(crate) use behind::{Behind, Line};
pub(crate) use grantee::Grantee;
pub(crate) use inbox::Timeouts;
pub(crate) use listener::ReleaseListener;
pub(crate) use sightings::{Seen, Sightings};
pub(crate) use turns::{Listening, Turn, Turns};
pub(crate) use waiters::{Granted, Subscription};
