//! [`Tally`]: what a worker process's buyers did, and the line it reports
//! it on to the parent.

use std::ops::AddAssign;

/// What some buyers did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Buyers who got a unit.
    pub sold: u64,
    /// Buyers who found the stock empty.
    pub sold_out: u64,
    /// Buyers who gave up: the lock stayed taken for their whole wait.
    pub busy: u64,
    /// Purchases cancelled because their lock was lost mid-way.
    pub lost: u64,
    /// Lock acquisitions that found the lock taken at first
    /// (`LockerStats::contended`).
    pub waits: u64,
}

/// How a worker's report line starts.
const PREFIX: &str = "report";

impl Tally {
    /// The machine-readable line a worker prints when done, e.g.
    /// `report sold=3 sold_out=1 busy=0 lost=0 waits=4`.
    pub fn to_line(self) -> String {
        format!(
            "{PREFIX} sold={} sold_out={} busy={} lost={} waits={}",
            self.sold, self.sold_out, self.busy, self.lost, self.waits
        )
    }

    /// Reads a line written by [`Tally::to_line`]; `None` for any other line.
    pub fn from_line(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        if fields.next() != Some(PREFIX) {
            return None;
        }
        let mut tally = Tally::default();
        for field in fields {
            let (name, value) = field.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            match name {
                "sold" => tally.sold = value,
                "sold_out" => tally.sold_out = value,
                "busy" => tally.busy = value,
                "lost" => tally.lost = value,
                "waits" => tally.waits = value,
                _ => return None,
            }
        }
        Some(tally)
    }
}

impl AddAssign for Tally {
    fn add_assign(&mut self, other: Self) {
        self.sold += other.sold;
        self.sold_out += other.sold_out;
        self.busy += other.busy;
        self.lost += other.lost;
        self.waits += other.waits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trips() {
        let tally = Tally {
            sold: 3,
            sold_out: 1,
            busy: 2,
            lost: 0,
            waits: 9,
        };
        assert_eq!(Tally::from_line(&tally.to_line()), Some(tally));
        assert_eq!(Tally::from_line("ready"), None);
        assert_eq!(Tally::from_line("report sold=x"), None);
    }
}
