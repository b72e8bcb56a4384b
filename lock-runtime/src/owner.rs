//! Owner tokens: a holder label and 128 random bits that prove who holds a
//! lock.
//!
//! A token is `<holder label>/<32 hex digits>`: the label (by default the
//! host name and process id, see [`crate::LockConfig::holder_label`]) says
//! who holds a lock to whoever inspects it, at no cost (the token is sent
//! anyway), and the random part is what only the holder knows. A lock key
//! stores the token (see the exclusive lock's scripts); [`stored_value`]
//! reads the public parts back and drops the secret one.

use std::fmt;

use crate::host::forks;

/// The value stored in a lock key. Only the holder knows it, so only the
/// holder can renew or release the lock. Deliberately not `Debug`-printable:
/// a token in a log would let anyone reading the log release the lock.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct OwnerToken(String);

impl OwnerToken {
    /// A fresh token for a holder labelled `label`, from the operating
    /// system's random source.
    pub(crate) fn random(label: &str) -> Self {
        Self::from_bytes(label, RANDOM.with(|random| random.borrow_mut().take()))
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

    /// Moves the token out, leaving an empty one that matches no lock:
    /// for an acquisition handing its token to the lease it granted.
    pub(crate) fn take(&mut self) -> Self {
        Self(std::mem::take(&mut self.0))
    }

    /// The token as sent to Redis.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Who a locker's lines are, to the lock scripts: 128 random bits,
/// written as 32 hex digits. A line that lets a lock go for the callers
/// outside it leaves this on the key for a short grace (see the exclusive
/// lock's `YIELD`): its own tasks keep off, anyone else may take it. It
/// proves nothing and is no secret; it only tells one locker from another
/// where holder labels may be shared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct LineId(u128);

impl LineId {
    /// A fresh id.
    pub(crate) fn random() -> Self {
        Self(u128::from_le_bytes(
            RANDOM.with(|random| random.borrow_mut().take()),
        ))
    }

    /// Reads the 32 hex digits its `Display` writes.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        (text.len() == 32)
            .then(|| u128::from_str_radix(text, 16).ok())
            .flatten()
            .map(Self)
    }
}

impl fmt::Display for LineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl LineId {
    /// The 32 hex digits it displays as, written without `fmt` (every
    /// contended try sends them).
    pub(crate) fn hex_digits(self) -> [u8; 32] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [0; 32];
        for (at, digit) in digits.iter_mut().enumerate() {
            let shift = 4 * (31 - at);
            *digit = HEX[((self.0 >> shift) & 0xf) as usize];
        }
        digits
    }
}

thread_local! {
    static RANDOM: std::cell::RefCell<RandomBytes> = std::cell::RefCell::new(RandomBytes::default());
}

/// Bytes from the operating system's random source, fetched a few hundred
/// at a time: one `getrandom` call serves [`RandomBytes::TOKENS`] tokens
/// instead of one (a system call per acquisition showed in profiles).
/// Per thread, and refilled in a forked child: a child must never hand
/// out the secrets its parent will (see `crate::host::forks`).
struct RandomBytes {
    bytes: [u8; 16 * Self::TOKENS],
    used: usize,
    /// The [`forks::lineage`] of the process that fetched `bytes`.
    lineage: u64,
}

impl Default for RandomBytes {
    fn default() -> Self {
        Self {
            bytes: [0; 16 * Self::TOKENS],
            used: 16 * Self::TOKENS,
            lineage: 0,
        }
    }
}

impl RandomBytes {
    const TOKENS: usize = 32;

    /// The next 16 unused bytes (never the same twice).
    fn take(&mut self) -> [u8; 16] {
        let lineage = forks::lineage();
        if self.used == self.bytes.len() || self.lineage != lineage {
            if getrandom::fill(&mut self.bytes).is_err() {
                return fallback_bytes();
            }
            (self.used, self.lineage) = (0, lineage);
        }
        let mut taken = [0u8; 16];
        taken.copy_from_slice(&self.bytes[self.used..self.used + 16]);
        self.bytes[self.used..self.used + 16].fill(0);
        self.used += 16;
        taken
    }
}

/// The public parts of a lock key's value (see [`stored_value`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StoredValue<'a> {
    /// The holder's label.
    pub(crate) holder: &'a str,
    /// Marked by someone else who found it busy.
    pub(crate) contended: bool,
}

/// The mark a caller that found a lock busy appends to its value: someone
/// else wants it, so its release is announced and its holder's locker
/// lets it go after its share (see the exclusive lock's scripts).
pub(crate) const WAITED: &str = "~";

/// The mark after a line's id on a lock that line let go of for the
/// callers outside its locker (see the exclusive lock's `YIELD`): free to
/// them, busy to the line, for a short grace. Never a token's last
/// character, as no token ends with it.
pub(crate) const KEPT: &str = "^";

/// Reads a lock key's value, `<label>/<secret>`, followed by the waiters'
/// mark once a waiter found it busy: its public parts, never the secret.
/// None for a value no locker wrote.
pub(crate) fn stored_value(value: &str) -> Option<StoredValue<'_>> {
    let contended = value.ends_with(WAITED);
    let (holder, secret) = owner_of(value).rsplit_once('/')?;
    let secret_like = secret.len() == 32 && secret.bytes().all(|b| b.is_ascii_hexdigit());
    secret_like.then_some(StoredValue { holder, contended })
}

/// The owner token in a lock key's value: without the waiters' mark, and
/// without the `:<fence>` that earlier builds stored on Redlock (so that
/// `inspect` reads the locks of a process not yet upgraded).
pub(crate) fn owner_of(value: &str) -> &str {
    let value = value.strip_suffix(WAITED).unwrap_or(value);
    match value.rsplit_once(':') {
        Some((token, fence))
            if !fence.is_empty()
                && fence.bytes().all(|b| b.is_ascii_digit())
                && token
                    .rsplit_once('/')
                    .is_some_and(|(_, secret)| secret.len() == 32) =>
        {
            token
        }
        _ => value,
    }
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
    fn a_line_is_written_as_it_displays() {
        for line in [
            LineId(0),
            LineId(0xabc),
            LineId(u128::MAX),
            LineId::random(),
        ] {
            let text = String::from_utf8(line.hex_digits().to_vec()).unwrap();
            assert_eq!(text, line.to_string());
            assert_eq!(LineId::parse(&text), Some(line));
        }
    }

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
    fn a_thread_hands_out_distinct_secrets_across_refills() {
        let mut random = RandomBytes::default();
        let secrets: std::collections::HashSet<[u8; 16]> = (0..RandomBytes::TOKENS * 3)
            .map(|_| random.take())
            .collect();
        assert_eq!(secrets.len(), RandomBytes::TOKENS * 3);
    }

    /// A child forked while its parent's thread has secrets left never
    /// hands out the ones the parent will.
    #[cfg(unix)]
    #[test]
    fn a_forked_child_fetches_secrets_of_its_own() {
        fn next_secret() -> [u8; 16] {
            RANDOM.with(|random| random.borrow_mut().take())
        }
        next_secret();
        let child = crate::host::forks::in_forked_child(next_secret);
        assert_ne!(child, next_secret());
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
    fn a_stored_value_gives_its_public_parts_but_never_the_secret() {
        let token = OwnerToken::random("a/b:c");
        let plain = stored_value(token.as_str()).unwrap();
        assert_eq!((plain.holder, plain.contended), ("a/b:c", false));
        let marked = format!("{}~", token.as_str());
        let marked = stored_value(&marked).unwrap();
        assert_eq!((marked.holder, marked.contended), ("a/b:c", true));
        let numbered = OwnerToken::random("web:4711");
        assert_eq!(stored_value(numbered.as_str()).unwrap().holder, "web:4711");
        assert_eq!(stored_value("someone-else's"), None);
        assert_eq!(stored_value("x/short"), None);
        // An earlier release's Redlock value, `<token>:<fence>`.
        let fenced = format!("{}:1732412345678901~", token.as_str());
        assert_eq!(owner_of(&fenced), token.as_str());
        let fenced = stored_value(&fenced).unwrap();
        assert_eq!((fenced.holder, fenced.contended), ("a/b:c", true));
        assert_eq!(owner_of(numbered.as_str()), numbered.as_str());
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
