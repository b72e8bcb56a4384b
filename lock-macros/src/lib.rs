//! The `#[distributed_lock]` attribute. Use it through `lock_runtime`, which
//! re-exports it.
