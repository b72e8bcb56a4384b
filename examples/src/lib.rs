//! Runnable examples of lock-runtime; see the `[[bin]]`s of this package.
