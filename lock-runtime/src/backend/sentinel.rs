//! One master found, and followed across failovers, through Sentinel.
