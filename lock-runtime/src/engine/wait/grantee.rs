//! Who a release message names: a waiter, by the digest of its token.

/// A waiter as a release message names it: the SHA-1 of its owner token
/// (the token itself is secret).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Grantee([u8; 20]);

impl Grantee {
    /// The waiter whose token is `token`.
    pub(crate) fn of(token: &str) -> Self {
        Self(sha1_smol::Sha1::from(token).digest().bytes())
    }

    /// Reads the 40 hex digits a release script writes (`redis.sha1hex`).
    pub(super) fn parse(hex: &str) -> Option<Self> {
        if hex.len() != 40 {
            return None;
        }
        let mut bytes = [0u8; 20];
        for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks(2)) {
            *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
        }
        Some(Self(bytes))
    }
}
