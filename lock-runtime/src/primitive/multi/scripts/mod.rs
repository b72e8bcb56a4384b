//! The multi-key lock's Lua scripts, with their in-memory twins
//! ([`super::twins`]).
//!
//! # Keys
//! None of its own: a multi-key hold is the exclusive lock's key
//! (`<p>{name}`) for each of its keys, with the exclusive lock's value
//! (the owner token, `~` appended once someone found it busy) and expiry
//! (the lease). So the two exclude each other key by key, a release of
//! either wakes the waiters of the other, and the watchdog renews a
//! multi-key hold's keys as it renews any exclusive lock's.
//!
//! Each script touches the keys of one hash slot only (all of them on one
//! server and Sentinel; on a Cluster, the keys of one slot: see
//! [`super::order`]), so each is one atomic step. On Redlock the counted
//! scripts also touch the master's fence counter and up mark, the
//! exclusive lock's (see [`super::quorum`]); they have no in-memory twin,
//! the in-memory store being one node.
//!
//! # Fences
//! A grant's fence is the server's clock in µs, read in the script that
//! grants it, as for the exclusive lock: every key of one script gets
//! that fence, and it is later than every earlier grant's of each of
//! them.

use std::sync::LazyLock;

use super::twins;
use crate::backend::script::LuaScript;

/// Takes every key of one slot, or none (see `acquire.lua`). Returns
/// `{1, fence}` or `{0, pttl, index of the busy key (1-based)}`.
pub(crate) static ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("acquire.lua"), twins::acquire));

/// Lets go of every key of one slot the token holds, announcing each
/// marked one on its channel (see `release.lua`). Returns 1 when any key
/// was the token's.
pub(crate) static RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("release.lua"), twins::release));

/// Redlock: takes every key on one master, or none, counting the grant
/// on the master's fence counter (see `acquire_counted.lua`). Returns
/// `{1, fence, quarantine left}` or `{0, pttl, now, index of the busy
/// key (1-based)}`.
/// The quarantine's bookkeeping is the engine's (`quarantine.lua`,
/// prepended).
pub(crate) static ACQUIRE_COUNTED: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        include_str!("../../../engine/quarantine.lua"),
        include_str!("acquire_counted.lua")
    ))
});

/// Redlock: confirms every key on one master and raises its counter to
/// the fence handed out (see `raise_counter.lua`). Returns 1 or 0.
pub(crate) static RAISE_COUNTER: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("raise_counter.lua")));
