//! Owner tokens: 128 random bits that prove who holds a lock.

use std::fmt;

/// The value stored in a lock key. Only the holder knows it, so only the
/// holder can renew or release the lock. Deliberately not `Debug`-printable:
/// a token in a log would let anyone reading the log release the lock.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct OwnerToken([u8; 32]);

impl OwnerToken {
    /// A fresh token from the operating system's random source.
    pub(crate) fn random() -> Self {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            bytes = fallback_bytes();
        }
        Self::from_bytes(bytes)
    }

    fn from_bytes(bytes: [u8; 16]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; 32];
        for (i, byte) in bytes.iter().enumerate() {
            hex[2 * i] = HEX[usize::from(byte >> 4)];
            hex[2 * i + 1] = HEX[usize::from(byte & 0x0f)];
        }
        Self(hex)
    }

    /// The token as sent to Redis: 32 lowercase hex digits.
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever written into the array.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// Unique bits for the (practically unheard-of) case of a failing OS random
/// source: std's randomly keyed SipHash over a process-wide counter, the pid
/// and the clock. Uniqueness is what lock safety rests on, and this keeps it.
fn fallback_bytes() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut halves = [0u64; 2];
    for half in &mut halves {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(count);
        hasher.write_u32(std::process::id());
        hasher.write_u128(nanos);
        *half = hasher.finish();
    }
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&halves[0].to_le_bytes());
    bytes[8..].copy_from_slice(&halves[1].to_le_bytes());
    bytes
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_hex_and_distinct() {
        let a = OwnerToken::random();
        let b = OwnerToken::random();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "OwnerToken(<redacted>)");
    }

    #[test]
    fn fallback_bits_are_distinct() {
        assert_ne!(fallback_bytes(), fallback_bytes());
    }

    #[test]
    fn hex_encoding_is_exact() {
        let token = OwnerToken::from_bytes([0xab; 16]);
        assert_eq!(token.as_str(), "ab".repeat(16));
    }
}
