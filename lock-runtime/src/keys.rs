//! The Redis keys of one lock, laid out so that all of them share one
//! cluster hash slot: `<prefix>{<key>}`, `<prefix>{<key>}:fence` and
//! `<prefix>{<key>}:released`.

use std::sync::Arc;

use crate::LockError;

/// The names of everything one lock touches on the server.
#[derive(Clone, Debug)]
pub(crate) struct LockKeys {
    inner: Arc<Names>,
}

#[derive(Debug)]
struct Names {
    name: String,
    lock: String,
    fence: String,
    channel: String,
}

impl LockKeys {
    /// Fails on an empty key: `{}` is not a hash tag, so the three keys
    /// would land in different cluster slots.
    pub(crate) fn new(prefix: &str, name: &str) -> Result<Self, LockError> {
        if name.is_empty() {
            return Err(LockError::config(
                "the lock key is empty; name the resource it guards, e.g. `stock:42`",
            ));
        }
        let lock = format!("{prefix}{{{name}}}");
        Ok(Self {
            inner: Arc::new(Names {
                name: name.to_owned(),
                fence: format!("{lock}:fence"),
                channel: format!("{lock}:released"),
                lock,
            }),
        })
    }

    /// The key as the caller named it.
    pub(crate) fn name(&self) -> &str {
        &self.inner.name
    }

    /// The key that holds the owner token.
    pub(crate) fn lock(&self) -> &str {
        &self.inner.lock
    }

    /// The counter that hands out fencing tokens.
    pub(crate) fn fence(&self) -> &str {
        &self.inner.fence
    }

    /// The channel a release is published on.
    pub(crate) fn channel(&self) -> &str {
        &self.inner.channel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_share_one_hash_tag() {
        let keys = LockKeys::new("lock:", "stock:42").unwrap();
        assert_eq!(keys.lock(), "lock:{stock:42}");
        assert_eq!(keys.fence(), "lock:{stock:42}:fence");
        assert_eq!(keys.channel(), "lock:{stock:42}:released");
        assert_eq!(keys.name(), "stock:42");
    }

    #[test]
    fn empty_key_is_rejected() {
        assert!(matches!(
            LockKeys::new("lock:", ""),
            Err(LockError::Config(_))
        ));
    }
}
