//! The multi-key lock on Redlock: held when a majority (N/2 + 1) of
//! independent masters holds every key, the exclusive lock's rule (see
//! [`crate::primitive::exclusive::quorum`], whose vote counting this
//! shares).
//!
//! Every master is asked at once to take all the keys in one script
//! (`acquire_counted.lua`): all or none there, counted on its fence
//! counter (one per master for every lock of the locker, so that the
//! exclusive lock's grants and these rise together). A majority granted
//! (a master in its restart quarantine counts only when every master
//! granted): the fence is the highest counter of the majority, every key's;
//! when fewer of the majority's counters stand at it than a majority, a
//! second round confirms every key on the masters behind and raises their
//! counters. A round that ends without the hold deletes our keys on every
//! master that may hold any (compare and delete), and waits for that, so a
//! failed round leaves nothing behind. A release runs on every master and
//! returns once a majority answered. The round is the exclusive lock's
//! ([`crate::primitive::exclusive::counted`]); this is what differs.

use std::time::Duration;

use super::{Multi, scripts};
use crate::backend::redlock::{RedlockBackend, Round};
use crate::backend::script::ScriptCall;
use crate::engine;
use crate::engine::primitive::{AcquireReply, Try};
use crate::engine::wait::Seen;
use crate::owner::OwnerToken;
use crate::primitive::exclusive::counted::Counted;
use crate::primitive::exclusive::votes::Vote;
use crate::primitive::shared::ms;

/// The multi-key lock's side of the counted round
/// ([`crate::primitive::exclusive::counted`]): every key in one script.
impl Counted for Multi {
    fn name(&self) -> &str {
        self.keys[0].name()
    }

    fn send(&self, masters: &RedlockBackend, attempt: &Try<'_>) -> Round<Vec<i64>> {
        let first = &self.keys[0];
        let bound = masters.vote_bound(attempt.ttl);
        let mut call = scripts::ACQUIRE_COUNTED.call();
        for keys in self.keys.iter() {
            call.key(keys.lock());
        }
        call.key(first.counter())
            .key(first.up_mark())
            .arg(attempt.token.as_str())
            .arg(ms(attempt.ttl))
            .arg(masters.quarantine().as_millis());
        engine::quorum::run_everywhere(
            masters,
            0..masters.len(),
            attempt.route,
            call,
            bound,
            Some(attempt.flight),
        )
    }

    /// `{1, fence, 0}` or `{0, pttl, now, key}`.
    fn read(&self, answer: &[i64]) -> (Vote, Seen) {
        match *answer {
            [1, fence, ..] => (Vote::Granted(u64::try_from(fence).unwrap_or(0)), Seen::Free),
            [0, pttl, now, ..] => {
                let pttl = u64::try_from(pttl).ok().map(Duration::from_millis);
                let seen = u64::try_from(now).map_or(Seen::Unknown, Seen::BusyAt);
                (Vote::Busy(pttl), seen)
            }
            _ => (Vote::Failed { down: false }, Seen::Unknown),
        }
    }

    /// Confirms every key (see `raise_counter.lua`).
    fn raise_call(&self, token: &OwnerToken, fence: u64) -> ScriptCall {
        let mut call = scripts::RAISE_COUNTER.call();
        for keys in self.keys.iter() {
            call.key(keys.lock());
        }
        call.key(self.keys[0].counter())
            .arg(token.as_str())
            .arg(fence);
        call
    }

    fn release_call(&self, token: &OwnerToken) -> ScriptCall {
        let mut call = scripts::RELEASE.call();
        for keys in self.keys.iter() {
            call.key(keys.lock());
        }
        call.arg(token.as_str()).arg("PUBLISH");
        for keys in self.keys.iter() {
            call.arg(keys.channel());
        }
        call
    }

    /// Every key gets the fence.
    fn granted(&self, fence: u64) -> AcquireReply {
        Multi::granted(self, vec![fence; self.keys.len()])
    }

    /// Keeps the busy key (1-based in the answer; the first key when none
    /// fits), whose release the wait listens for.
    fn busy(&self, key: Option<i64>) {
        let index = key
            .and_then(|key| usize::try_from(key - 1).ok())
            .filter(|index| *index < self.keys.len())
            .unwrap_or(0);
        self.state
            .busy
            .store(index, std::sync::atomic::Ordering::SeqCst);
    }
}
