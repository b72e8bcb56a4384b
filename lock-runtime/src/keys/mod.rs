//! The Redis names of one lock: the key `<prefix>{<name>}` and the release
//! channel `<prefix>{<name>}:released`, which share one cluster hash slot
//! through the `{...}` hash tag.
//!
//! Redis hashes the text between the first `{` and the first `}` after it.
//! A name containing `}` would end the tag early (`lock:{a}b}` hashes `a`,
//! and `lock:{}x}` hashes nothing, so its channel lands in another slot);
//! so the name is escaped inside the tag: `%` becomes `%25` and `}`
//! becomes `%7D`. The escape is injective (two names never share a key)
//! and leaves every name without `%` and `}` as it was ([`hash_tag`]).
//! The prefix may not contain `{`, which would move the tag (see
//! [`crate::config::rules`]).

pub(crate) mod hash_tag;

use std::sync::Arc;

use crate::error::LockError;

/// The names of everything one lock touches on the server.
#[derive(Clone, Debug)]
pub(crate) struct LockKeys {
    inner: Arc<Names>,
}

/// Every name in one buffer,
/// `<prefix>{<escaped>}:released<name><prefix>fence-counter<prefix>up-for`:
/// the lock key and its channel share their start, and one allocation
/// serves all of them (this runs on every acquisition).
#[derive(Debug)]
struct Names {
    text: String,
    lock_len: usize,
    channel_len: usize,
    name_end: usize,
    counter_end: usize,
}

/// What follows the lock key in its release channel's name.
const CHANNEL_SUFFIX: &str = ":released";
/// What follows the prefix in the name of Redlock's fence counter.
const COUNTER: &str = "fence-counter";
/// What follows the prefix in the name of Redlock's up mark.
const UP_MARK: &str = "up-for";

/// The lock name a release channel `<prefix>{<escaped name>}:released` is
/// for, of any primitive (`...}:rw:r:released`, `...}:sem:released`);
/// None for any other channel.
pub(crate) fn name_of_channel(channel: &str) -> Option<String> {
    hash_tag::resource_of(channel.strip_suffix(CHANNEL_SUFFIX)?)
}

impl LockKeys {
    /// The keys of lock `name` under `prefix` (already validated).
    pub(crate) fn new(prefix: &str, name: &str) -> Result<Self, LockError> {
        crate::config::rules::check_lock_name(name)?;
        let escaped = hash_tag::escape(name);
        let lock_len = prefix.len() + escaped.len() + 2;
        let channel_len = lock_len + CHANNEL_SUFFIX.len();
        let name_end = channel_len + name.len();
        let counter_end = name_end + prefix.len() + COUNTER.len();
        let mut text = String::with_capacity(counter_end + prefix.len() + UP_MARK.len());
        let parts = [prefix, "{", &escaped, "}", CHANNEL_SUFFIX, name];
        for part in parts.into_iter().chain([prefix, COUNTER, prefix, UP_MARK]) {
            text.push_str(part);
        }
        Ok(Self {
            inner: Arc::new(Names {
                text,
                lock_len,
                channel_len,
                name_end,
                counter_end,
            }),
        })
    }

    /// The key as the caller named it.
    pub(crate) fn name(&self) -> &str {
        &self.inner.text[self.inner.channel_len..self.inner.name_end]
    }

    /// The key that holds the owner token and the fence.
    pub(crate) fn lock(&self) -> &str {
        &self.inner.text[..self.inner.lock_len]
    }

    /// The channel a release is published on.
    pub(crate) fn channel(&self) -> &str {
        &self.inner.text[..self.inner.channel_len]
    }

    /// Redlock: each master's one fence counter for every lock under this
    /// prefix. It carries no hash tag (Redlock masters are not a cluster)
    /// and no lock key can have its name, since lock keys all have one.
    pub(crate) fn counter(&self) -> &str {
        &self.inner.text[self.inner.name_end..self.inner.counter_end]
    }

    /// Redlock: each master's mark that it has been up for the restart
    /// quarantine (its value, in ms). It vanishes with the master's data,
    /// so a master restarted empty checks its uptime again.
    pub(crate) fn up_mark(&self) -> &str {
        &self.inner.text[self.inner.counter_end..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text Redis hashes for `key`: its hash tag, or all of it.
    fn hashed(key: &str) -> &str {
        let Some(open) = key.find('{') else {
            return key;
        };
        match key[open + 1..].find('}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        }
    }

    #[test]
    fn the_lock_and_its_channel_share_one_hash_tag() {
        let keys = LockKeys::new("lock:", "stock:42").unwrap();
        assert_eq!(keys.lock(), "lock:{stock:42}");
        assert_eq!(keys.channel(), "lock:{stock:42}:released");
        assert_eq!(keys.name(), "stock:42");
        assert_eq!(keys.counter(), "lock:fence-counter");
        assert_eq!(keys.up_mark(), "lock:up-for");
    }

    #[test]
    fn names_with_braces_stay_in_one_slot_and_never_alias() {
        let names = [
            "}x",
            "a}b",
            "{",
            "}",
            "%7D",
            "%",
            "a%7Db",
            "a}}b",
            "{}",
            "x\ny z*?[",
        ];
        let mut locks = std::collections::HashSet::new();
        for name in names {
            let keys = LockKeys::new("lock:", name).unwrap();
            assert_eq!(hashed(keys.lock()), hashed(keys.channel()), "{name:?}");
            // The tag is exactly the escaped name, never empty.
            let tag = &keys.lock()["lock:{".len()..keys.lock().len() - 1];
            assert!(!tag.is_empty() && !tag.contains('}'), "{name:?} -> {tag:?}");
            assert!(
                locks.insert(keys.lock().to_owned()),
                "{name:?} aliases another name"
            );
        }
        assert_eq!(LockKeys::new("lock:", "}x").unwrap().lock(), "lock:{%7Dx}");
        assert_eq!(
            LockKeys::new("lock:", "%7D").unwrap().lock(),
            "lock:{%257D}"
        );
    }

    #[test]
    fn empty_name_is_rejected() {
        assert!(matches!(
            LockKeys::new("lock:", ""),
            Err(LockError::Config(_))
        ));
    }
}
