//! The one global order a multi-key lock takes its keys in, and its groups.
//!
//! Every caller sorts its keys the same way: by the Redis Cluster hash
//! slot of the lock key, then by the lock key. A group is a run of keys of
//! one slot, taken by one script. On a Cluster, a caller that found group
//! `g` busy lets go of every group after `g` and waits for `g` alone, so
//! what it holds is always a prefix of that order; a caller waits only for
//! keys ordered after everything it holds, so no two callers can wait for
//! each other, whatever order they named their keys in. Elsewhere every
//! key is in one group (one server holds them all), and the order only
//! makes the calls the same for the same set of keys.
//!
//! The slot is computed here (CRC16/XMODEM of the hash tag, modulo
//! 16384, as Redis does): the client library's own `Slot` does not say
//! its number, and the order must be the same in every process.

use std::ops::Range;

use crate::keys::LockKeys;

/// The number of hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's
/// key hash.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
    }
    crc
}

/// The hash slot of `key`: of its hash tag (the text between its first
/// `{` and the first `}` after it, when not empty), else of all of it.
pub(crate) fn slot_of(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = bytes
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            let len = rest.iter().position(|&b| b == b'}')?;
            (len > 0).then(|| &rest[..len])
        })
        .unwrap_or(bytes);
    crc16(hashed) % SLOTS
}

/// `keys` without repeats, in the global order, and the runs of one slot
/// among them (`by_slot`; otherwise one run of all).
pub(crate) fn arrange(
    mut keys: Vec<LockKeys>,
    by_slot: bool,
) -> (Vec<LockKeys>, Vec<Range<usize>>) {
    let slot = |keys: &LockKeys| if by_slot { slot_of(keys.lock()) } else { 0 };
    keys.sort_by(|a, b| (slot(a), a.lock()).cmp(&(slot(b), b.lock())));
    keys.dedup_by(|a, b| a.lock() == b.lock());
    let mut groups: Vec<Range<usize>> = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        match groups.last_mut() {
            Some(group) if slot(&keys[group.start]) == slot(key) => group.end = index + 1,
            _ => groups.push(index..index + 1),
        }
    }
    (keys, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<LockKeys> {
        names
            .iter()
            .map(|name| LockKeys::new("lock:", name).unwrap())
            .collect()
    }

    fn names(keys: &[LockKeys]) -> Vec<&str> {
        keys.iter().map(LockKeys::name).collect()
    }

    #[test]
    fn slots_are_redis_cluster_slots() {
        // Redis's own examples (CLUSTER KEYSLOT).
        assert_eq!(slot_of("somekey"), 11058);
        assert_eq!(slot_of("foo"), 12182);
        assert_eq!(slot_of("{user1000}.following"), slot_of("user1000"));
        assert_eq!(slot_of("foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(slot_of("foo{{bar}}zap"), slot_of("{bar"));
    }

    #[cfg(feature = "cluster")]
    #[test]
    fn slots_agree_with_the_client_library() {
        use redis::cluster_routing::Slot;
        for n in 0..2000 {
            let key = format!("lock:{{acct:{n}}}");
            assert_eq!(Slot::new(slot_of(&key)), Some(Slot::for_key(&key)), "{key}");
        }
    }

    #[test]
    fn every_caller_gets_one_order_whatever_it_named() {
        let (a, _) = arrange(keys(&["b", "a", "c", "a"]), true);
        let (b, _) = arrange(keys(&["c", "a", "b"]), true);
        assert_eq!(names(&a), names(&b));
        assert_eq!(a.len(), 3);
        let slots: Vec<u16> = a.iter().map(|k| slot_of(k.lock())).collect();
        assert!(slots.windows(2).all(|w| w[0] <= w[1]), "{slots:?}");
    }

    #[test]
    fn one_group_unless_by_slot() {
        let (keys, groups) = arrange(keys(&["b", "a", "c"]), false);
        assert_eq!(names(&keys), ["a", "b", "c"]);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0], 0..3);
    }

    #[test]
    fn keys_of_one_slot_form_one_group() {
        // Two names whose lock keys share a slot, found by search.
        let first = LockKeys::new("lock:", "n0").unwrap();
        let slot = slot_of(first.lock());
        let twin = (1..200_000)
            .map(|n| format!("n{n}"))
            .find(|name| slot_of(LockKeys::new("lock:", name).unwrap().lock()) == slot)
            .unwrap();
        let (arranged, groups) = arrange(keys(&["n0", &twin, "other"]), true);
        assert_eq!(arranged.len(), 3);
        assert_eq!(groups.len(), 2);
        let shared = groups.iter().find(|g| g.len() == 2).unwrap();
        let mut in_it = names(&arranged[shared.clone()]);
        in_it.sort_unstable();
        let mut want = vec!["n0", twin.as_str()];
        want.sort_unstable();
        assert_eq!(in_it, want);
    }
}
