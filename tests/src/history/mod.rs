//! The chaos history checker, Jepsen-style: it judges a run from what
//! worker processes recorded, what faults the driver injected and what the
//! fenced store on the Redis server logged, trusting nothing the lock
//! library says about itself. Pure logic: the only input is text.
//!
//! - [`event`]: each worker records an [`Event`] per line (`invoke`,
//!   `begin`, `write`, `done`, `told`, `end`) for every section `sid`; a
//!   worker's file is a [`WorkerHistory`].
//! - [`faults`]: the driver records each [`Fault`] (worker freezes, kills,
//!   network cuts, dropped replies; server faults, informative).
//! - [`store`]: every fenced write runs [`STORE_SCRIPT`], which refuses a
//!   fence below the highest written and logs a [`StoreEntry`] either way.
//! - [`check`](mod@check): rebuilds each [`Section`] and applies the rules
//!   ([`order`]: the fair lock's).
//! - [`read_write`]: the read/write lock's own, smaller history and rules.
//!
//! Instants are ns of CLOCK_MONOTONIC ([`crate::monotonic_ns`]), comparable
//! across the processes of one machine. A section a killed worker never
//! ended ends at the kill, [`Outcome::Killed`].
//!
//! # The rules
//!
//! Each broken rule is one violation naming the key, the sids, the fences
//! and the instants involved.
//!
//! - **H1 integrity.** Every event after `invoke` belongs to a section its
//!   worker invoked (once per sid in the run, each of begin/done/told/end
//!   once). Per section: `invoke <= begin <= each write <= done <= end` and
//!   `told >= begin`; nothing of the body without a begin; writes numbered
//!   1, 2, and so on. A torn line is allowed only in a killed worker, at
//!   most one, as its last line. Anything else means a record was lost or
//!   torn.
//! - **H2 closure.** A section without `end` whose worker was not killed
//!   after its invoke means a record was lost.
//! - **H3 store/history agreement.** Every store log entry matches a
//!   recorded `write` (same sid and n) of a section of that key holding that
//!   fence; otherwise it is a phantom write.
//! - **S1 unique fences.** Per key, no two sections begin with one fence.
//! - **S2 exclusion.** Per key, when the held intervals of A and B overlap
//!   and A's fence is lower, A was told of its loss at or before B began. A
//!   section holds from its `begin` to its body's end, `done` (the call's
//!   own `end` comes after the release, when the next owner may have begun
//!   legitimately), or to its `end` when the body never returned
//!   (cancelled, killed). A holder frozen by the test cannot be told while
//!   stopped: if its worker was frozen while it held, before B began, it is
//!   enough that A was told, or ended, within `grace` (the lease ttl) of the
//!   thaw. A killed A ends at the kill, so B beginning before the kill of an
//!   untold A is a violation. A hold of several keys at once (the
//!   multi-key lock) is recorded as one section per key, each with that
//!   key's fence, so this rule judges each key whichever kind of call held
//!   it: no key is held by two owners at once.
//! - **S3 cancel promise.** A `cancel` section told while its call ran,
//!   before its body was done (or whose body never finished), ends lost (or
//!   killed); and it sends at most one write after the signal (the one
//!   already on its way). `continue` sections ignore the signal by design:
//!   the store rules judge their late writes.
//! - **S4 store log.** Per key, in log order, an entry is accepted iff its
//!   fence is at least the highest accepted before it.
//! - **S5 fence order.** Per key, a section invoked after another's held
//!   interval ended carries a larger fence (invoked, not begun: its grant
//!   came after it asked, and a freeze can separate a grant from `begin`).
//! - **S6 arrival order.** Per fair lock, of two sections granted it after
//!   waiting in its line, the one the server saw arrive first carries the
//!   lower fence: no grant overtook a waiter still in line. (A waiter whose
//!   place ran out, its process stalled past the place's lease, waits
//!   again with a new arrival, and is judged by that one.)
//!
//! The [`Verdict`] also counts what the run exercised (handoffs, loss
//! signals, refused stale writes, faults that hit a section), and
//! [`Verdict::shortfalls`] fails a run below its [`Minimums`]: no vacuous
//! pass.

pub mod check;
pub mod event;
pub mod faults;
pub mod order;
pub mod read_write;
pub mod store;

pub use check::{Minimums, Section, Verdict, check, reconstruct};
pub use event::{Event, Mode, Outcome, WorkerHistory};
pub use faults::{Fault, ServerFault};
pub use store::{STORE_SCRIPT, StoreEntry, store_keys};
