//! The renewal scripts, with the in-memory twin of the one that runs on
//! a node.

use std::sync::LazyLock;

use super::twin;
use crate::backend::script::LuaScript;

/// Renews a batch of leases on one node (see `extend.lua`).
pub(super) static EXTEND: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("extend.lua"), twin::extend));

/// Redlock's renewal batch on one master, raising its fence counter (see
/// `extend_counted.lua`).
pub(super) static EXTEND_COUNTED: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("extend_counted.lua")));
