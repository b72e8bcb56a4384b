//! Splitting a renewal batch by hash slot.
//!
//! One script call may only touch keys of one slot, so the watchdog's batch
//! becomes one call per slot. Grouping per slot rather than per node needs
//! no view of the slot map (which may be stale while slots move) and keeps
//! each call valid wherever its slot is served.

use std::collections::HashMap;

use redis::cluster_routing::Slot;

/// The positions in `keys` of each slot's entries, in order; slots in order
/// of first appearance.
pub(crate) fn group_by_slot<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut by_slot: HashMap<Slot, usize> = HashMap::new();
    for (index, key) in keys.into_iter().enumerate() {
        let group = *by_slot.entry(Slot::for_key(key)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[group].push(index);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_one_hash_tag_share_a_group() {
        let groups = group_by_slot([
            "lock:{a}",
            "lock:{b}",
            "other:{a}",
            "lock:{c}",
            "lock:{b}:x",
        ]);
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[0], vec![0, 2]);
        assert_eq!(groups[1], vec![1, 4]);
        assert_eq!(groups[2], vec![3]);
    }

    #[test]
    fn an_empty_batch_has_no_groups() {
        assert!(group_by_slot(std::iter::empty()).is_empty());
    }
}
