//! Which release messages are news to a Redlock waiter.
//!
//! A release deletes the lock on every master, and each master where a
//! waiter had marked it publishes a message of its own: one release
//! reaches a waiter once per master, at moments of their own. The waiter
//! wakes at the first and tries again; the others mostly tell it the same
//! release again, and each would cost another round on every master. Yet
//! a later message can be news: a master whose delete landed after the try
//! found the lock still there (a stall, or a restart quarantine, which
//! needs every master).
//!
//! Each master's own clock tells them apart, compared only with itself:
//! a release message carries the time of the delete, and a busy answer the
//! time the master gave it. A message is news when the master it came
//! from answered the last try busy no later than that delete (it was freed
//! since), or when the try learnt nothing from that master.
//!
//! A master that was free at the try has nothing to tell, even later: the
//! try marked the owner it found on every master where it found one, so
//! when that owner lets go, a master that answered busy tells. A later
//! owner's majority includes such a master too, unless it is made of
//! masters the try found free: then those were still in their restart
//! quarantine (or a majority would have granted), and the waiter's timer,
//! which the busy verdict ends no later than the quarantine, wakes it
//! instead. What this
//! rests on: the waiter's marks, its listeners subscribed, and clocks that
//! do not step back; where one fails, the owner's lease or the backoff
//! still ends the wait, as for a lost message.

use std::sync::Arc;

use super::behind::Behind;
use super::grantee::Grantee;
use crate::owner::LineId;

/// What one master showed an acquire round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Free (it granted, maybe only in quarantine): its messages, then and
    /// later, tell nothing new.
    Free,
    /// Held by another owner when it answered, at this time of its clock
    /// (µs).
    BusyAt(u64),
    /// No answer, or none that said when.
    Unknown,
}

/// What a Redlock round saw on each master, by master index.
#[derive(Clone, Debug)]
pub(crate) struct Sightings(Arc<[Seen]>);

/// One release message: the master it came from (0 where there is one
/// server) and the time of its delete on that master's clock, when it
/// said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Release {
    pub(crate) master: usize,
    pub(crate) deleted_at: Option<u64>,
    /// The line that let the lock go for the callers outside it (see the
    /// exclusive lock's `YIELD`), when it was one: no news to that line.
    pub(crate) yielded_by: Option<LineId>,
    /// How many of a process's waiters it may let proceed: one, as many
    /// as the permits free after it suffice for, or all of them (a
    /// writer's release, before every waiting reader).
    pub(crate) wakes: Wakes,
    /// Who let go, by the digest of its token, when the message says: on
    /// Redlock every master tells the same release, and a waiter wakes
    /// once, at the telling it waits for.
    pub(crate) by: Option<Grantee>,
}

/// How many waiters of a channel one release message wakes, in each
/// process that listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wakes {
    /// As many (one, for a lock one holder holds at a time).
    Some(usize),
    /// Every one.
    All,
    /// The longest waiters, in order, while the units they wait for fit
    /// in this many free ones (a semaphore's release, saying how many
    /// permits are free after it): a waiter for more than is left stops
    /// the wake-ups there, and sleeps on.
    Free(usize),
    /// Only the waiter the release handed the lock to, named by the
    /// digest of its token ([`Grantee`]), with the fence it was given and
    /// the waiters the release saw behind it ([`Behind`]).
    Grant {
        to: Grantee,
        fence: u64,
        behind: Behind,
    },
}

impl Release {
    /// A message from `master` whose payload is `payload`: the time of the
    /// delete in µs since the Unix epoch, as the release scripts publish
    /// it, then `:` and the line when a line yielded it, then `;` and how
    /// many waiters it wakes (a number, `all`, `f=` and the units free, or
    /// `g=` and a grant, with `;n=` and the waiters behind its taker when
    /// the release saw any; one when it does not say), then, where several
    /// masters tell one release, `;by=` and the digest of the releasing
    /// token. Anything else (an older release script's `1`) says no time.
    pub(crate) fn from_payload(master: usize, payload: &[u8]) -> Self {
        // 2001 in µs: below it, not a clock.
        const CLOCK_FLOOR: u64 = 1_000_000_000_000_000;
        let text = std::str::from_utf8(payload).unwrap_or("");
        let (text, tail) = match text.split_once(';') {
            Some((text, tail)) => (text, Some(tail)),
            None => (text, None),
        };
        let (tail, by) = match tail.and_then(|tail| tail.split_once(";by=")) {
            Some((wakes, by)) => (Some(wakes), Grantee::parse(by)),
            None => (tail, None),
        };
        let wakes = match tail {
            None => Wakes::Some(1),
            Some("all") => Wakes::All,
            Some(wakes) if wakes.starts_with("f=") => {
                match wakes.strip_prefix("f=").and_then(|free| free.parse().ok()) {
                    Some(free) => Wakes::Free(free),
                    // A count it cannot read: everyone, whose tries find out.
                    None => Wakes::All,
                }
            }
            Some(wakes) => match wakes.strip_prefix("g=").and_then(|g| g.split_once(':')) {
                Some((to, fence)) => {
                    let (fence, behind) = match fence.split_once(";n=") {
                        Some((fence, behind)) => (fence, Behind::parse(behind)),
                        None => (fence, Behind::default()),
                    };
                    match (Grantee::parse(to), fence.parse()) {
                        (Some(to), Ok(fence)) => Wakes::Grant { to, fence, behind },
                        // A grant it cannot read: a wake-up for everyone,
                        // whose tries find out.
                        _ => Wakes::All,
                    }
                }
                None => Wakes::Some(wakes.parse().unwrap_or(1)),
            },
        };
        let (at, line) = match text.split_once(':') {
            Some((at, line)) => (at, LineId::parse(line)),
            None => (text, None),
        };
        let deleted_at = at.parse().ok().filter(|&at| at >= CLOCK_FLOOR);
        Self {
            master,
            deleted_at,
            yielded_by: line,
            wakes,
            by,
        }
    }
}

impl Sightings {
    /// The sightings of one round, by master index.
    pub(crate) fn new(seen: Vec<Seen>) -> Self {
        Self(seen.into())
    }

    /// Whether `release` tells a waiter that saw this something new.
    pub(crate) fn is_news(&self, release: Release) -> bool {
        match (self.0.get(release.master), release.deleted_at) {
            (Some(Seen::Free), _) => false,
            // Equal clocks: the same µs, either order; better one try more.
            (Some(Seen::BusyAt(busy)), Some(deleted)) => deleted >= *busy,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(master: usize, deleted_at: Option<u64>) -> Release {
        Release {
            master,
            deleted_at,
            yielded_by: None,
            wakes: Wakes::Some(1),
            by: None,
        }
    }

    #[test]
    fn a_delete_after_the_busy_answer_is_news_and_one_before_is_not() {
        let seen = Sightings::new(vec![Seen::BusyAt(100), Seen::Free, Seen::Unknown]);
        assert!(seen.is_news(release(0, Some(101))));
        assert!(seen.is_news(release(0, Some(100))));
        assert!(!seen.is_news(release(0, Some(99))));
    }

    #[test]
    fn a_free_master_tells_nothing_and_an_unknown_one_everything() {
        let seen = Sightings::new(vec![Seen::BusyAt(100), Seen::Free, Seen::Unknown]);
        assert!(!seen.is_news(release(1, Some(500))));
        assert!(!seen.is_news(release(1, None)));
        assert!(seen.is_news(release(2, Some(1))));
        assert!(seen.is_news(release(2, None)));
    }

    #[test]
    fn a_message_without_a_time_or_from_elsewhere_is_news() {
        let seen = Sightings::new(vec![Seen::BusyAt(100)]);
        assert!(seen.is_news(release(0, None)));
        assert!(seen.is_news(release(7, Some(1))));
    }

    #[test]
    fn payloads_are_read_as_times_or_nothing() {
        assert_eq!(
            Release::from_payload(2, b"1732500000123456"),
            release(2, Some(1_732_500_000_123_456))
        );
        assert_eq!(Release::from_payload(0, b"1"), release(0, None));
        assert_eq!(Release::from_payload(0, b"x"), release(0, None));
        assert_eq!(Release::from_payload(0, b""), release(0, None));
    }

    #[test]
    fn a_yield_names_its_line() {
        let line = LineId::random();
        let payload = format!("1732500000123456:{line}");
        let yielded = Release::from_payload(0, payload.as_bytes());
        assert_eq!(yielded.deleted_at, Some(1_732_500_000_123_456));
        assert_eq!(yielded.yielded_by, Some(line));
        let odd = Release::from_payload(0, b"1732500000123456:nonsense");
        assert_eq!(odd, release(0, Some(1_732_500_000_123_456)));
    }

    #[test]
    fn a_release_says_how_many_waiters_it_wakes() {
        let all = Release::from_payload(0, b"1732500000123456;all");
        assert_eq!(all.wakes, Wakes::All);
        assert_eq!(all.deleted_at, Some(1_732_500_000_123_456));
        let three = Release::from_payload(1, b"1732500000123456;3");
        assert_eq!(three.wakes, Wakes::Some(3));
        assert_eq!(Release::from_payload(0, b"1").wakes, Wakes::Some(1));
        let token = "web-1/0123456789abcdef0123456789abcdef";
        let digest = sha1_smol::Sha1::from(token).digest().to_string();
        let payload = format!("1732500000123456;g={digest}:1732500000123999");
        let granted = Release::from_payload(0, payload.as_bytes());
        assert_eq!(
            granted.wakes,
            Wakes::Grant {
                to: Grantee::of(token),
                fence: 1_732_500_000_123_999,
                behind: Behind::default(),
            }
        );
        let next = sha1_smol::Sha1::from("web-2/next").digest().to_string();
        let payload = format!("1732500000123456;g={digest}:1732500000123999;n={next},{digest}");
        let Wakes::Grant { to, fence, behind } = Release::from_payload(0, payload.as_bytes()).wakes
        else {
            panic!("a grant with the line behind it was not read as a grant");
        };
        assert_eq!((to, fence), (Grantee::of(token), 1_732_500_000_123_999));
        assert_eq!(behind.first(), Some(Grantee::of("web-2/next")));
        assert_eq!(behind.rest().first(), Some(Grantee::of(token)));
        let free = Release::from_payload(0, b"1732500000123456;f=2");
        assert_eq!(free.wakes, Wakes::Free(2));
        assert_eq!(free.deleted_at, Some(1_732_500_000_123_456));
        assert_eq!(Release::from_payload(0, b"1;f=x").wakes, Wakes::All);
        let unreadable = Release::from_payload(0, b"1732500000123456;g=nothex:12");
        assert_eq!(unreadable.wakes, Wakes::All);
        let told = format!("1732500000123456;f=2;by={digest}");
        let told = Release::from_payload(2, told.as_bytes());
        assert_eq!(told.wakes, Wakes::Free(2));
        assert_eq!(told.by, Some(Grantee::of(token)));
        assert_eq!(free.by, None);
    }
}
