//! The fenced store on the Redis server: the authoritative log of every
//! fenced write, in server order, and whether it was taken.
//!
//! Each write runs [`STORE_SCRIPT`] atomically: it is refused when a larger
//! fence has already written, and logged either way, so the log shows what
//! the resource itself saw regardless of what the workers believe.

use std::fmt;

use super::event::{name, number};

/// The fenced write. `KEYS[1]` the highest fence written, `KEYS[2]` the log
/// (a list); `ARGV[1]` the fence, `ARGV[2]` the sid, `ARGV[3]` the write's
/// number. Returns 1 (accepted, logged `A <fence> <sid> <n>`) or 0 (refused,
/// logged `R <fence> <sid> <n>`).
///
/// Fences reach ~2e15: `tonumber` compares them exactly (below 2^53), but
/// Lua 5.1 would print such a number as `1.7e+15`, so only the argument
/// strings are ever written back.
pub const STORE_SCRIPT: &str = r#"
local highest = tonumber(redis.call('GET', KEYS[1]) or '0')
local fence = tonumber(ARGV[1])
local entry = ' ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3]
if fence < highest then
    redis.call('RPUSH', KEYS[2], 'R' .. entry)
    return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], 'A' .. entry)
return 1
"#;

/// The store's keys for one resource: (highest fence, log). They share a
/// hash tag, so the script runs on one cluster node.
pub fn store_keys(resource: &str) -> (String, String) {
    (
        format!("store:{{{resource}}}:highest"),
        format!("store:{{{resource}}}:log"),
    )
}

/// One entry of the store's log, as the script writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreEntry {
    /// Whether the store took the write (`A`) or refused it (`R`).
    pub accepted: bool,
    /// The writer's fence.
    pub fence: u64,
    /// The writing section.
    pub sid: String,
    /// The write's number within that section.
    pub n: u32,
}

impl StoreEntry {
    /// Parses `A <fence> <sid> <n>` / `R <fence> <sid> <n>`; None otherwise.
    pub fn parse(entry: &str) -> Option<Self> {
        let fields: Vec<&str> = entry.split(' ').collect();
        let [verdict, fence, sid, n] = fields.as_slice() else {
            return None;
        };
        let accepted = match *verdict {
            "A" => true,
            "R" => false,
            _ => return None,
        };
        Some(Self {
            accepted,
            fence: number(fence)?,
            sid: name(sid)?,
            n: number(n)?,
        })
    }
}

impl fmt::Display for StoreEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.accepted { "A" } else { "R" };
        write!(f, "{verdict} {} {} {}", self.fence, self.sid, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_entries_parse() {
        assert_eq!(
            StoreEntry::parse("A 17 w1.4 2"),
            Some(StoreEntry {
                accepted: true,
                fence: 17,
                sid: "w1.4".into(),
                n: 2,
            })
        );
        assert_eq!(
            StoreEntry::parse("R 1752000000123456 w2.9 1"),
            Some(StoreEntry {
                accepted: false,
                fence: 1_752_000_000_123_456,
                sid: "w2.9".into(),
                n: 1,
            })
        );
        for entry in [
            "",
            "A 17 w1.4",
            "X 17 w1.4 2",
            "A 1.7e+15 w1.4 2",
            "A 17 w1.4 2 3",
        ] {
            assert_eq!(StoreEntry::parse(entry), None, "{entry:?}");
        }
        let entry = StoreEntry::parse("R 9 w3.1 4").unwrap();
        assert_eq!(entry.to_string(), "R 9 w3.1 4");
    }

    #[test]
    fn store_keys_share_a_hash_tag() {
        assert_eq!(
            store_keys("r0"),
            ("store:{r0}:highest".into(), "store:{r0}:log".into())
        );
    }

    #[test]
    fn the_script_never_formats_a_number() {
        // Only the argument strings reach the log and the highest key.
        assert!(!STORE_SCRIPT.contains("tostring"));
        assert!(STORE_SCRIPT.contains("'SET', KEYS[1], ARGV[1]"));
        assert!(!STORE_SCRIPT.contains(".. fence"));
        assert!(!STORE_SCRIPT.contains(".. highest"));
    }
}
