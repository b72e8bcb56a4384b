//! The read/write lock's Lua scripts, with their in-memory twins
//! ([`super::twins`]).
//!
//! # Keys
//! Under the resource's hash tag (one Cluster slot per lock name), apart
//! from every other kind of lock of the same name:
//!
//! - `<p>{name}:rw:w`: the writer, holding its owner token; its expiry is
//!   the writer's lease.
//! - `<p>{name}:rw:r`: the readers, one sorted-set member per reader (its
//!   owner token) scored by its own deadline (ms on the server's clock).
//!   Each reader's lease is its own: the watchdog renews each member
//!   apart, so a reader that died stops counting at its own deadline
//!   however many live readers renew theirs. The set's expiry is its
//!   latest deadline.
//! - `<p>{name}:rw:i`: the intents of waiting writers, one member per
//!   writer scored by the deadline of a short lease its attempt renews
//!   while it waits. A live intent turns new readers away (writer
//!   preference); a writer that dies or gives up stops blocking them
//!   within that lease, or at once when it can say so.
//! - `<p>{name}:rw:q`: the places of waiting readers, one member per
//!   reader scored by the deadline of a short lease its attempt renews
//!   while it waits.
//! - `<p>{name}:rw:t`: the readers' turn, opened by a writer's release
//!   while readers and writers both wait: no writer is granted while it
//!   lasts, and it ends once every waiting reader got in (or left, or its
//!   short lease ran out). Writers go first, but a stream of them cannot
//!   starve the readers.
//! - `<p>{name}:rw:r:released` and `<p>{name}:rw:w:released`: the channels
//!   where releases wake waiting readers (all of them at once) and waiting
//!   writers.
//!
//! Members whose deadline passed leave a set when a script meets them, and
//! each key expires with the last lease it holds: once the last holder
//! released or expired, nothing is left.
//!
//! # Fences
//! Every grant's fence is the server's clock in µs, read in the script
//! that grants it. A writer is granted only after every earlier reader and
//! writer left, by a later script, so its fence is above all of theirs. A
//! reader's fence is above every write that ended before it was granted
//! and below every write granted after it released; readers that overlap
//! are not ordered among themselves. A downgrade answers at least the
//! write's fence plus one.

use std::sync::LazyLock;

use super::twins;
use crate::backend::script::LuaScript;

/// Takes a read (see `read.lua`): `{1, fence}` or `{0, pttl}`.
pub(crate) static READ: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("read.lua"), twins::read));

/// Takes the write, or keeps a waiting writer's intent (see `write.lua`):
/// `{1, fence}` or `{0, pttl, intent kept}`.
pub(crate) static WRITE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("write.lua"), twins::write));

/// Lets go of a write, a read or an intent, and wakes who can proceed
/// (see `release.lua`): 1 when it held the write or a live read.
pub(crate) static RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("release.lua"), twins::release));

/// Turns a write into a read in one step (see `downgrade.lua`):
/// `{1, fence}`, or `{0}` when the write was no longer the token's.
pub(crate) static DOWNGRADE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("downgrade.lua"), twins::downgrade));

/// Redlock's [`READ`] on one master: the same script with the engine's
/// restart quarantine prepended (`quarantine.lua`), the master's up mark
/// as `KEYS[6]` and the quarantine as `ARGV[5]`; a grant answers
/// `{1, fence, quarantine left}`. Redlock runs on servers only: no twin.
pub(crate) static READ_COUNTED: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        include_str!("../../../engine/quarantine.lua"),
        include_str!("read.lua")
    ))
});

/// Redlock's [`WRITE`] on one master, as [`READ_COUNTED`] is [`READ`]'s.
pub(crate) static WRITE_COUNTED: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        include_str!("../../../engine/quarantine.lua"),
        include_str!("write.lua")
    ))
});
