//! The fair lock's Lua scripts, with their in-memory twins
//! ([`super::twins`]).
//!
//! # Keys
//! Under the resource's hash tag, apart from every other kind of lock:
//!
//! - `<p>{name}:fair`: the lock, holding its owner's token; its expiry is
//!   the owner's lease.
//! - `<p>{name}:fair:q`: the line, one sorted set holding two members per
//!   waiter. Its *place*, the token scored by the place's deadline (ms on
//!   the server's clock, above zero): a lease the waiter keeps alive
//!   while it waits, which the watchdog renews as any sorted-set lease
//!   (see [`crate::engine::renewal`]), so the set's expiry, its latest
//!   deadline, is kept by those renewals too. Its *arrival*, the token
//!   followed by `<`, scored by when the server first saw it (µs) minus
//!   10^16 (below zero, so that the set's latest score is always a
//!   deadline): the order of grants is the order of arrivals. An arrival
//!   whose place ran out leaves the line when it comes first, never
//!   blocking the ones behind it.
//! - `<p>{name}:fair:released`: the channel where a release names the
//!   waiter it handed the lock to.
//!
//! Each key expires with the last lease it holds: once everyone left,
//! nothing is left.
//!
//! # Fences
//! A grant's fence is the server's clock in µs read in the script that
//! grants it, as for the exclusive lock; a release that hands the lock on
//! answers at least the giver's fence plus one.

use std::sync::LazyLock;

use super::twins;
use crate::backend::script::LuaScript;

/// Takes the lock when it is free and the caller is first in line, or
/// keeps the caller's place (see `acquire.lua`). Returns `{1, fence}`
/// when granted, else `{0, pttl, placed}`.
pub(crate) static ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("acquire.lua"), twins::acquire));

/// Lets go of the lock (handing it to the first live waiter) or of a
/// place in line (see `release.lua`). Returns 1 when the lock was the
/// caller's.
pub(crate) static RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("release.lua"), twins::release));

/// A broken release, for the `sabotage` feature only: hands the lock to
/// the newest live waiter (the line read from its end).
#[cfg(feature = "sabotage")]
pub(crate) static LIFO_RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    let (first, last) = (
        "'ZRANGEBYSCORE', KEYS[2], '-inf', '(0'",
        "'ZREVRANGEBYSCORE', KEYS[2], '(0', '-inf'",
    );
    let source = include_str!("release.lua");
    assert!(
        source.contains(first),
        "release.lua reads its line differently"
    );
    let source: &'static str = Box::leak(source.replacen(first, last, 1).into_boxed_str());
    LuaScript::with_twin(source, twins::lifo_release)
});
