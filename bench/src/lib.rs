//! Benchmarks of lock-runtime against raw redis-rs commands and rslock.
