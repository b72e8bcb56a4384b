//! Choosing the names of a multi-key hold by the Redis Cluster hash slot
//! of their lock keys: all in one slot, or each in a slot of its own,
//! spread over the nodes.
//!
//! The lock key of name `n` is `lock:{n}`, its hash tag the name itself
//! (escaped, but the names made here have nothing to escape), so two
//! names never share a slot by sharing a tag: a name's slot is
//! `CRC16(n) mod 16384`. CRC16/XMODEM (initial value 0, no final xor) is
//! linear over equal-length messages, and zero bytes in front change
//! nothing, so for a name `p` followed by a 4-byte suffix `s`:
//! `crc(p ++ s) = crc(p ++ 0000) xor crc(s)`. With a table of one suffix
//! per value of `crc(s) mod 16384`, the suffix that puts `p ++ s` in any
//! wanted slot is one look-up: no search per hold.

use std::sync::LazyLock;

use lock_servers::RedisCluster;

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// Length of the suffix that places a name in its slot.
const SUFFIX_LEN: usize = 4;

/// The characters suffixes are made of: none that the lock escapes
/// (`%`, `}`) or that would open a hash tag (`{`).
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz012345";

/// For every value `v` below [`SLOTS`], a suffix `s` with
/// `crc16(s) mod 16384 == v`.
static SUFFIXES: LazyLock<Vec<[u8; SUFFIX_LEN]>> = LazyLock::new(|| {
    let mut table: Vec<Option<[u8; SUFFIX_LEN]>> = vec![None; usize::from(SLOTS)];
    let mut missing = table.len();
    let base = ALPHABET.len();
    for n in 0..base.pow(SUFFIX_LEN as u32) {
        let mut suffix = [0u8; SUFFIX_LEN];
        let mut rest = n;
        for byte in &mut suffix {
            *byte = ALPHABET[rest % base];
            rest /= base;
        }
        let entry = &mut table[usize::from(slot_of_tag(&suffix))];
        if entry.is_none() {
            *entry = Some(suffix);
            missing -= 1;
            if missing == 0 {
                break;
            }
        }
    }
    table
        .into_iter()
        .map(|suffix| suffix.expect("4 characters of 32 reach every slot"))
        .collect()
});

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's
/// key hash.
pub fn crc16(bytes: &[u8]) -> u16 {
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

/// The slot of a key whose hash tag (or whole text, without one) is `tag`.
fn slot_of_tag(tag: &[u8]) -> u16 {
    crc16(tag) % SLOTS
}

/// The slot of the lock key of `name` (`lock:{name}`), for a name with
/// nothing to escape.
pub fn slot_of_name(name: &str) -> u16 {
    slot_of_tag(name.as_bytes())
}

/// How the names of one hold are spread over the slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Every lock key in one slot: one script each way.
    OneSlot,
    /// Every lock key in a slot of its own, the keys dealt over the nodes
    /// in turn: one script per slot each way, sent at once.
    AcrossSlots,
}

impl Spread {
    /// `one_slot` or `across_slots`, for row names.
    pub fn name(self) -> &'static str {
        match self {
            Self::OneSlot => "one_slot",
            Self::AcrossSlots => "across_slots",
        }
    }
}

/// Names for the holds of `keys` keys on one cluster, spread as asked.
#[derive(Clone, Debug)]
pub struct SlotKeys {
    keys: u32,
    spread: Spread,
    /// For every node, the slots it serves, ascending.
    slots_of_node: Vec<Vec<u16>>,
    /// For every slot, the node serving it.
    node_of_slot: Vec<usize>,
}

impl SlotKeys {
    /// Holds of `keys` keys spread as `spread` over a cluster whose slot
    /// map is `node_of_slot` (for every slot, the index of its node, as
    /// [`RedisCluster::node_of_every_slot`] gives it).
    pub fn new(keys: u32, spread: Spread, node_of_slot: Vec<usize>) -> Self {
        let nodes = node_of_slot.iter().max().map_or(0, |last| last + 1);
        let mut slots_of_node = vec![Vec::new(); nodes];
        for (slot, &node) in node_of_slot.iter().enumerate() {
            slots_of_node[node].push(u16::try_from(slot).expect("a slot fits u16"));
        }
        Self {
            keys,
            spread,
            slots_of_node,
            node_of_slot,
        }
    }

    /// Keys per hold.
    pub fn keys(&self) -> u32 {
        self.keys
    }

    /// How the keys are spread.
    pub fn spread(&self) -> Spread {
        self.spread
    }

    /// The names of the hold a scenario calls `key`: `key#<j>~<suffix>`
    /// for j below [`SlotKeys::keys`], the suffix placing each in its
    /// slot. One slot: the slot of `key` itself. Across slots: key j goes
    /// to node `j mod nodes`, to the slot of that node's at a place
    /// derived from `key`'s slot, plus `j / nodes`, so that distinct keys
    /// of a hold never share a slot (while a node serves more slots than
    /// a hold has keys) and holds of distinct keys use distinct slots.
    pub fn names(&self, key: &str) -> Vec<String> {
        let home_slot = slot_of_name(key);
        let home = usize::from(home_slot);
        let nodes = self.slots_of_node.len();
        (0..self.keys as usize)
            .map(|j| {
                let slot = match self.spread {
                    Spread::OneSlot => home_slot,
                    Spread::AcrossSlots => {
                        let served = &self.slots_of_node[j % nodes];
                        served[(home + j / nodes) % served.len()]
                    }
                };
                name_in_slot(&format!("{key}#{j}~"), slot)
            })
            .collect()
    }

    /// Distinct slots and nodes the hold of `names` touches.
    pub fn touched(&self, names: &[String]) -> (usize, usize) {
        let mut slots: Vec<u16> = names.iter().map(|name| slot_of_name(name)).collect();
        slots.sort_unstable();
        slots.dedup();
        let mut nodes: Vec<usize> = slots
            .iter()
            .map(|&slot| self.node_of_slot[usize::from(slot)])
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        (slots.len(), nodes.len())
    }

    /// Checks the names of a few holds against the live cluster's own
    /// `CLUSTER KEYSLOT` of their lock keys, and that each hold touches
    /// the slots its spread promises.
    ///
    /// # Errors
    ///
    /// When a slot computed here is not the server's, or a hold is not
    /// spread as asked.
    pub fn check(&self, cluster: &RedisCluster) -> Result<(), String> {
        for key in ["a:0:0", "a:0:1", "b:0:63:17", "check"] {
            let names = self.names(key);
            for name in &names {
                let lock_key = format!("lock:{{{name}}}");
                let (ours, server) = (slot_of_name(name), cluster.slot_of(&lock_key));
                if ours != server {
                    return Err(format!(
                        "slot of `{lock_key}`: computed {ours}, the server says {server}"
                    ));
                }
            }
            let (slots, _) = self.touched(&names);
            let wanted = match self.spread {
                Spread::OneSlot => 1,
                Spread::AcrossSlots => names.len(),
            };
            if slots != wanted {
                return Err(format!(
                    "`{key}`: {} keys {} touch {slots} slots",
                    self.keys,
                    self.spread.name()
                ));
            }
        }
        Ok(())
    }
}

/// `prefix` followed by the suffix that puts it in `slot`.
fn name_in_slot(prefix: &str, slot: u16) -> String {
    let mut padded = Vec::with_capacity(prefix.len() + SUFFIX_LEN);
    padded.extend_from_slice(prefix.as_bytes());
    padded.extend_from_slice(&[0; SUFFIX_LEN]);
    let needed = (crc16(&padded) ^ slot) % SLOTS;
    let suffix = SUFFIXES[usize::from(needed)];
    let mut name = String::with_capacity(padded.len());
    name.push_str(prefix);
    name.extend(suffix.iter().map(|&byte| char::from(byte)));
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_redis_own() {
        // The check value of CRC16/XMODEM, and Redis Cluster's own
        // example (its specification: "123456789" hashes to 0x31C3).
        assert_eq!(crc16(b"123456789"), 0x31c3);
        // `CLUSTER KEYSLOT foo` answers 12182.
        assert_eq!(slot_of_name("foo"), 12182);
    }

    #[test]
    fn a_suffix_places_a_name_in_any_slot() {
        for slot in [0, 1, 777, 12182, SLOTS - 1] {
            let name = name_in_slot("a:3:17#5~", slot);
            assert_eq!(slot_of_name(&name), slot, "{name}");
        }
    }

    #[test]
    fn holds_are_spread_as_asked() {
        // Three nodes with a third of the slots each.
        let node_of_slot: Vec<usize> = (0..usize::from(SLOTS))
            .map(|slot| slot * 3 / usize::from(SLOTS))
            .collect();
        let one = SlotKeys::new(8, Spread::OneSlot, node_of_slot.clone());
        let names = one.names("a:0:1");
        assert_eq!(names.len(), 8);
        assert_eq!(one.touched(&names), (1, 1));
        let across = SlotKeys::new(8, Spread::AcrossSlots, node_of_slot.clone());
        assert_eq!(across.touched(&across.names("a:0:1")), (8, 3));
        let two = SlotKeys::new(2, Spread::AcrossSlots, node_of_slot);
        assert_eq!(two.touched(&two.names("b:1:2:3")), (2, 2));
    }
}
