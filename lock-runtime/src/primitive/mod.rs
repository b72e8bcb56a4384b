//! The lock family: what each lock *is*, as scripts and the meaning of
//! their answers. A primitive never opens a connection or picks a node; it
//! hands script calls to a topology ([`crate::backend`]) and reads what
//! comes back, and where a topology answers once per master (Redlock), it
//! says how the answers add up to a decision. The engine
//! ([`crate::engine`]) drives every primitive the same way, through
//! [`Primitive`](crate::engine::primitive::Primitive).
//!
//! - [`exclusive`]: one owner per key, with a lease and a fence.
//! - [`fair`]: one owner at a time, granted in the order the server saw
//!   its waiters, handed to the next inside the release.
//! - [`multi`]: several keys of the exclusive lock's at once, all or
//!   none, in one global order.
//! - [`read_write`]: many readers, each with a lease of its own, or one
//!   writer; writers go first.
//! - [`semaphore`]: at most a limit of permits held at once, each
//!   acquisition a lease, each permit a slot.
//!
//! A new primitive is a folder here holding its whole vertical: its
//! request and guard, its Lua scripts (`.lua` files) with their in-memory
//! twins, readers for their answers, its key layout under the resource's
//! hash tag, and for Redlock its majority rule (or a stated refusal). Its
//! holders are leases the engine renews, of a kind the engine's renewal
//! knows (see [`crate::engine::renewal`]). No topology changes: every
//! topology already runs any script call.

pub(crate) mod exclusive;
pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod read_write;
pub(crate) mod semaphore;
pub(crate) mod shared;
