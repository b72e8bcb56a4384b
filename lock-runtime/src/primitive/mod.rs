//! Primitives: what a lock *is*, as scripts and the meaning of their
//! answers. A primitive never opens a connection or picks a node; it hands
//! script calls to a topology ([`crate::backend`]) and reads what comes
//! back. Where a topology answers once per master (Redlock), the primitive
//! also says how the answers add up to a decision.
//!
//! - [`exclusive`]: one owner per key, with a lease and a fence.
//!
//! A new primitive (read/write, semaphore, fair or multi-key lock) is a new
//! module here: its Lua scripts, readers for their answers, a renewal
//! script the watchdog can batch, and, for Redlock, its majority rule. No
//! topology changes: every topology already runs any script call.

pub(crate) mod exclusive;

use std::sync::LazyLock;

use crate::backend::script::LuaScript;

/// Every script the locks run (the primitives' and the engine's renewals),
/// for loading on a fresh Redlock master.
pub(crate) fn scripts() -> &'static [&'static LuaScript] {
    static ALL: LazyLock<Vec<&'static LuaScript>> = LazyLock::new(|| {
        let mut all = exclusive::scripts::all().to_vec();
        all.extend(crate::engine::renewal::scripts());
        all
    });
    &ALL
}
