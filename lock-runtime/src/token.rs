//! Owner tokens: a holder label and 128 random bits that prove who holds a
//! lock.
//!
//! A token is `<holder label>/<32 hex digits>`: the label (by default the
//! host name and process id, see [`crate::LockConfig::holder_label`]) says
//! who holds a lock to whoever inspects it, at no cost (the token is sent
//! anyway), and the random part is what only the holder knows. A lock key
//! stores `<token>:<fence>`; [`holder_and_fence`] reads the public parts
//! back and drops the secret one.

use std::fmt;

/// The value stored in a lock key. Only the holder knows it, so only the
/// holder can renew or release the lock. Deliberately not `Debug`-printable:
/// a token in a log would let anyone reading the log release the lock.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct OwnerToken(String);

impl OwnerToken {
    /// A fresh token for a holder labelled `label`, from the operating
    /// system's random source.
    pub(crate) fn random(label: &str) -> Self {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            bytes = fallback_bytes();
        }
        Self::from_bytes(label, bytes)
    }

    fn from_bytes(label: &str, bytes: [u8; 16]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut token = String::with_capacity(label.len() + 33);
        token.push_str(label);
        token.push('/');
        for byte in bytes {
            token.push(char::from(HEX[usize::from(byte >> 4)]));
            token.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        Self(token)
    }

    /// The token as sent to Redis.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The holder label and the fence in a lock key's value
/// `<label>/<secret>:<fence>`, without the secret; None for a value no
/// locker wrote.
pub(crate) fn holder_and_fence(value: &str) -> Option<(&str, u64)> {
    let (token, fence) = value.rsplit_once(':')?;
    let fence = fence.parse().ok()?;
    let (label, secret) = token.rsplit_once('/')?;
    (secret.len() == 32 && secret.bytes().all(|b| b.is_ascii_hexdigit())).then_some((label, fence))
}

/// The label of this process when the configuration sets none: its host
/// name and process id, `web-3:4711`.
pub(crate) fn default_label() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host}:{}", std::process::id())
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
    fn tokens_carry_the_label_and_distinct_secrets() {
        let a = OwnerToken::random("web-3:4711");
        let b = OwnerToken::random("web-3:4711");
        let (label, secret) = a.as_str().rsplit_once('/').unwrap();
        assert_eq!(label, "web-3:4711");
        assert_eq!(secret.len(), 32);
        assert!(secret.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "OwnerToken(<redacted>)");
    }

    #[test]
    fn fallback_bits_are_distinct() {
        assert_ne!(fallback_bytes(), fallback_bytes());
    }

    #[test]
    fn hex_encoding_is_exact() {
        let token = OwnerToken::from_bytes("h", [0xab; 16]);
        assert_eq!(token.as_str(), format!("h/{}", "ab".repeat(16)));
    }

    #[test]
    fn a_stored_value_gives_its_holder_and_fence_but_never_the_secret() {
        let token = OwnerToken::random("a/b:c");
        let value = format!("{}:1732412345678901", token.as_str());
        assert_eq!(
            holder_and_fence(&value),
            Some(("a/b:c", 1_732_412_345_678_901))
        );
        assert_eq!(holder_and_fence("someone-else's"), None);
        assert_eq!(holder_and_fence("x/short:12"), None);
    }

    #[test]
    fn the_default_label_names_the_host_and_the_process() {
        let label = default_label();
        assert!(
            label.ends_with(&format!(":{}", std::process::id())),
            "{label}"
        );
        assert!(label.len() > 2 + std::process::id().to_string().len());
    }
}
