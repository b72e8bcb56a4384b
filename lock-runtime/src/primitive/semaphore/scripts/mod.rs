//! The semaphore's Lua scripts, with their in-memory twins
//! ([`super::twins`]).
//!
//! # Keys
//! Under the resource's hash tag, apart from every other kind of lock:
//!
//! - `<p>{name}:sem`: one sorted set holding everything the semaphore is.
//!   - A holder's *lease*: its owner token, scored by the lease's deadline
//!     (ms on the server's clock, above zero). The watchdog renews it as
//!     any sorted-set lease (see [`crate::engine::renewal`]), which keeps
//!     the set's expiry at its latest deadline too.
//!   - A holder's *claims*, one per permit: `<slot>#<token>`, scored
//!     `-(slot + 1)`. A slot is one of `0..limit`, the lowest free one at
//!     the grant; a claim whose lease is gone is free again, and leaves
//!     the set at the next script that reads it.
//!   - The *limit* its permits were granted under: `=<limit>`, scored 0.
//! - `<p>{name}:sem:released`: the channel where a release says how many
//!   permits are free after it.
//!
//! The permits held are the claims whose lease is alive, so no count can
//! drift from the leases. The set expires with its latest lease and a
//! release that leaves no lease deletes it: once the last permit went,
//! nothing is left.
//!
//! # Fences
//! A grant's fence is the server's clock in µs read in the script that
//! grants it (as for the exclusive lock): it rises from grant to grant of
//! one semaphore, so each slot's holders get rising fences too. On
//! Redlock it is the highest of the granting masters' clocks (see
//! [`super::quorum`]).

use std::sync::LazyLock;

use super::twins;
use crate::backend::script::LuaScript;

/// Takes permits, all or none (see `acquire.lua`). Returns
/// `{1, fence, slot...}`, `{0, pttl}` or `{-1, limit held under}`.
pub(crate) static ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("acquire.lua"), twins::acquire));

/// Redlock's [`ACQUIRE`] on one master: the same script, with the
/// engine's restart quarantine prepended (`quarantine.lua`), the master's
/// up mark as `KEYS[2]`, and the quarantine and the slots wanted as
/// `ARGV[5]` and `ARGV[6]`. Returns `{1, fence, quarantine left, slot...}`,
/// `{0, pttl}` or `{-1, limit held under}`. Redlock runs on servers only:
/// no twin.
pub(crate) static ACQUIRE_COUNTED: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        include_str!("../../../engine/quarantine.lua"),
        include_str!("acquire.lua")
    ))
});

/// Gives back a token's permits and publishes how many are free (see
/// `release.lua`). Returns 1 when the token held permits.
pub(crate) static RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("release.lua"), twins::release));
