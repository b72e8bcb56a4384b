//! The watchdog's schedule: which lease to renew when, and when each must
//! be reported lost. Pure bookkeeping over instants it is given, so it can
//! be tested with made-up times; the task ([`super`]) does the I/O.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use foldhash::HashMap;

use crate::engine::lease::Lease;
use crate::engine::lost::Cause;
use crate::engine::renewal::Renewed;
use crate::engine::wait::Turn;
use crate::error::LockError;
use crate::metrics::Labels;

/// Most leases renewed by one script call; keeps one call short on the server.
pub(super) const MAX_BATCH: usize = 512;

/// One watched lease.
struct Watched {
    lease: Arc<Lease>,
    renews: bool,
    renew_every: Duration,
    /// When the next renewal is due; None for a fixed lease or while a
    /// renewal is in flight.
    due: Option<Instant>,
    /// A renewal was asked for while one was in flight (the locks moved to
    /// another server): renew again as soon as the answer is in.
    again: bool,
    /// When the holder must be told the lease is lost.
    valid_until: Instant,
    /// When a renewal not confirmed since was first sent (retries keep
    /// it); None while none is out.
    asked_at: Option<Instant>,
    /// When it reaches its hold cap, if it has one.
    cap_at: Option<Instant>,
    /// The holder's turn in its locker's line for the key, kept while the
    /// lease is watched: given back to the holder's release, or given up
    /// the moment the lease is lost, so that the rest of the line goes on
    /// trying while the holder (lost, but maybe still at work) keeps its
    /// guard.
    turn: Option<Turn>,
}

impl Watched {
    /// Whether the holder may be told of a loss before the lease's end,
    /// when telling many holders ending together takes that long: a fixed
    /// lease (nothing can extend it), or one whose renewal went
    /// unconfirmed for a quarter of its interval (one that is answered
    /// comes back long before; one out that long is stuck on a silent
    /// server, or failing). Never a lease a renewal may still save.
    fn may_tell_early(&self, now: Instant) -> bool {
        !self.renews || self.doubtful_from().is_some_and(|from| from <= now)
    }

    /// From when the lease's renewal counts as stuck (see
    /// [`Self::may_tell_early`]).
    fn doubtful_from(&self) -> Option<Instant> {
        self.asked_at
            .map(|asked| asked + self.renew_every / 4)
            .filter(|_| self.renews)
    }
}

/// Every watched lease, plus two queues ordered by time.
#[derive(Default)]
pub(super) struct Schedule {
    watched: HashMap<u64, Watched>,
    renewals: BTreeSet<(Instant, u64)>,
    expiries: BTreeSet<(Instant, u64)>,
    /// When leases reach their hold cap (`max_hold`).
    caps: BTreeSet<(Instant, u64)>,
    /// When the task plans to wake next (None: not until told).
    pub(super) armed_until: Option<Instant>,
    /// When the locks last moved to another server (see [`Self::all_due`]).
    moved_at: Option<Instant>,
    /// When the last lease was added (its request's send).
    pub(super) last_watched: Option<Instant>,
    /// How long telling one holder of its loss takes, about (zero where
    /// time does not pass meanwhile): holders due together are told one
    /// after another, so the last of thousands would be told well after
    /// its lease ran out; they are told that much earlier instead (see
    /// [`Self::expire`]). Set by the task, which measures it.
    pub(super) telling_each: Duration,
    /// The last `now` the schedule was asked to expire leases at.
    seen_now: Option<Instant>,
}

/// What came back from one batch command.
pub(super) struct BatchOutcome {
    pub(super) ids: Vec<u64>,
    /// Each lease's metric labels, in the order of `ids` (also of leases
    /// released while their renewal was in flight).
    pub(super) labels: Vec<Labels>,
    pub(super) sent_at: Instant,
    pub(super) result: Result<Vec<Renewed>, LockError>,
}

/// What applying a batch's answer found.
#[derive(Default)]
pub(super) struct Applied {
    /// The metric labels of the leases renewed.
    pub(super) renewed: Vec<Labels>,
    /// The leases the server refused, with their holders' turns (to be
    /// given up once the loss is reported).
    pub(super) lost: Vec<(Arc<Lease>, Option<Turn>)>,
    /// The metric labels of the leases that could not be confirmed, and
    /// will be retried.
    pub(super) unconfirmed: Vec<Labels>,
    /// The whole batch failed with this.
    pub(super) failed: Option<LockError>,
}

impl Schedule {
    /// Adds a lease whose acquire request was sent at `sent_at`, with its
    /// holder's `turn`; returns the first moment the task must act for it.
    pub(super) fn watch(
        &mut self,
        lease: Arc<Lease>,
        renews: bool,
        sent_at: Instant,
        turn: Option<Turn>,
    ) -> Instant {
        let id = lease.id;
        self.last_watched = self.last_watched.max(Some(sent_at));
        let renew_every = crate::engine::validity::renewal_interval(lease.ttl);
        let first_renewal_in = lease.first_renewal_in;
        let valid_until = lease.valid_until();
        // Counted from the send, like the lease itself: after a slow reply
        // the first renewal is simply due sooner (or at once).
        let mut due = renews.then(|| sent_at + first_renewal_in);
        // Confirmed before the last move (a hold passed in process, or a
        // grant in flight across it): confirm it where the locks are now.
        if self.moved_at.is_some_and(|moved| sent_at <= moved) {
            lease.mark_moved();
            due = due.map(|_| self.moved_at.unwrap_or(sent_at));
        }
        if let Some(due) = due {
            self.renewals.insert((due, id));
        }
        self.expiries.insert((valid_until, id));
        // The cap counts from the holder's own start: a lock passed in
        // process is watched from its hold's last renewal, but capped from
        // when the taker got it.
        // A cap too far to be written as an instant is never reached
        // (requests cap it at a year; this keeps the watchdog from
        // panicking whatever it is given).
        let cap_at = lease
            .max_hold
            .and_then(|cap| sent_at.max(lease.granted_at()).checked_add(cap));
        if let Some(cap_at) = cap_at {
            self.caps.insert((cap_at, id));
        }
        self.watched.insert(
            id,
            Watched {
                lease,
                renews,
                renew_every,
                due,
                again: false,
                valid_until,
                asked_at: None,
                cap_at,
                turn,
            },
        );
        [due, cap_at]
            .into_iter()
            .flatten()
            .fold(valid_until, Instant::min)
    }

    /// Stops watching a lease (released, lost, or its guard dropped);
    /// answers its holder's turn, if it had one.
    pub(super) fn forget(&mut self, id: u64) -> Option<Turn> {
        let watched = self.watched.remove(&id)?;
        if let Some(due) = watched.due {
            self.renewals.remove(&(due, id));
        }
        self.expiries.remove(&(watched.valid_until, id));
        if let Some(cap_at) = watched.cap_at {
            self.caps.remove(&(cap_at, id));
        }
        watched.turn
    }

    /// Stops watching every lease: answers them (to be reported lost) and
    /// their holders' turns.
    pub(super) fn forget_all(&mut self) -> (Vec<Arc<Lease>>, Vec<Turn>) {
        self.renewals.clear();
        self.expiries.clear();
        self.caps.clear();
        self.watched
            .drain()
            .map(|(_, watched)| (watched.lease, watched.turn))
            .fold(
                (Vec::new(), Vec::new()),
                |(mut leases, mut turns), (lease, turn)| {
                    leases.push(lease);
                    turns.extend(turn);
                    (leases, turns)
                },
            )
    }

    /// How many leases are watched.
    pub(super) fn len(&self) -> usize {
        self.watched.len()
    }

    /// The locks moved to another server at `now`: makes every renewing
    /// lease due then; one with a renewal in flight is renewed again as
    /// soon as that answer is in (its answer may come from the server the
    /// locks just left). Until a renewal sent after the move confirms it,
    /// no lease is passed in process.
    pub(super) fn all_due(&mut self, now: Instant) {
        self.moved_at = Some(now);
        let Self {
            watched, renewals, ..
        } = self;
        for watched in watched.values() {
            watched.lease.mark_moved();
        }
        for (&id, watched) in watched.iter_mut().filter(|(_, w)| w.renews) {
            match watched.due.replace(now) {
                Some(due) => {
                    renewals.remove(&(due, id));
                    renewals.insert((now, id));
                }
                None => {
                    watched.due = None;
                    watched.again = true;
                }
            }
        }
    }

    /// The reaction margin widened (a stall was seen): every lease is
    /// reported lost at its end with the margin as it is now, sooner than
    /// planned when it was last confirmed (see [`Lease::valid_until`]).
    pub(super) fn narrow(&mut self) {
        let Self {
            watched, expiries, ..
        } = self;
        for (&id, watched) in watched.iter_mut() {
            let until = watched.lease.valid_until();
            if until < watched.valid_until {
                expiries.remove(&(watched.valid_until, id));
                expiries.insert((until, id));
                watched.valid_until = until;
            }
        }
    }

    /// The earliest moment something must happen.
    pub(super) fn next_event(&self) -> Option<Instant> {
        [&self.renewals, &self.caps]
            .into_iter()
            .filter_map(|queue| queue.first().map(|&(at, _)| at))
            .chain(self.first_telling())
            .min()
    }

    /// The leases to tell now, in the order of their ends: those whose end
    /// has come, and those that must be started now to be told by theirs.
    /// Holders told in one pass are told one after another, the k-th about
    /// `k * telling_each` after `now`; so among the leases that may be told
    /// early (see [`Watched::may_tell_early`]), the longest run in the
    /// order of their ends holding one whose k-th place comes after its
    /// end is told now.
    fn expiries_to_tell(&self, now: Instant) -> Vec<u64> {
        let each = self.telling_each;
        let window_end = now.checked_add(self.telling_all());
        let mut candidates = Vec::new();
        let mut to_tell = 0;
        for &(at, id) in &self.expiries {
            if window_end.is_some_and(|end| at > end) {
                break;
            }
            let Some(watched) = self.watched.get(&id) else {
                continue;
            };
            if at > now && !watched.may_tell_early(now) {
                continue;
            }
            candidates.push(id);
            let place = u32::try_from(candidates.len()).unwrap_or(u32::MAX);
            if now
                .checked_add(each.saturating_mul(place))
                .is_none_or(|told| at <= told)
            {
                to_tell = candidates.len();
            }
        }
        candidates.truncate(to_tell);
        candidates
    }

    /// When to look at the expiry queue next: the first lease's end, or
    /// sooner, when telling the leases that may be told early (see
    /// [`Self::expiries_to_tell`]) must start before it, or one more may
    /// be told early from then on.
    fn first_telling(&self) -> Option<Instant> {
        let &(first, _) = self.expiries.first()?;
        let all = self.telling_all();
        if all.is_zero() {
            return Some(first);
        }
        // Never later than the first end less the time to tell everyone:
        // while that is still ahead, waking then is soon enough to look
        // closer (most of the time renewals move every end on before).
        let coarse = first.checked_sub(all).unwrap_or(first);
        let now = match self.seen_now {
            Some(now) if coarse <= now => now,
            _ => return Some(coarse),
        };
        let window_end = first.checked_add(all).unwrap_or(first);
        let mut wake = first;
        let mut place = 0u32;
        for &(at, id) in &self.expiries {
            if at > window_end {
                break;
            }
            let Some(watched) = self.watched.get(&id) else {
                continue;
            };
            if at <= now || watched.may_tell_early(now) {
                place = place.saturating_add(1);
                let start = at
                    .checked_sub(self.telling_each.saturating_mul(place))
                    .unwrap_or(at);
                wake = wake.min(start);
            } else if let Some(from) = watched.doubtful_from() {
                wake = wake.min(from);
            }
        }
        Some(wake)
    }

    /// How long telling every watched lease would take.
    fn telling_all(&self) -> Duration {
        let count = u32::try_from(self.expiries.len()).unwrap_or(u32::MAX);
        self.telling_each.saturating_mul(count)
    }

    /// Takes every lease whose validity has run out by `now`, or that must
    /// be told now to be told before it runs out (see
    /// [`Self::telling_each`]); they are no longer watched, and must be
    /// reported lost for the cause given, and then their holders' turns
    /// given up.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<(Arc<Lease>, Cause, Option<Turn>)> {
        self.seen_now = Some(now);
        let mut expired = Vec::new();
        // A lease at its hold cap is given up while still valid: told now,
        // never renewed again.
        while let Some(&(at, id)) = self.caps.first() {
            if at > now {
                break;
            }
            match self.watched.get(&id) {
                Some(watched) => {
                    let lease = watched.lease.clone();
                    expired.push((lease, Cause::HoldCap, self.forget(id)));
                }
                None => {
                    self.caps.pop_first();
                }
            }
        }
        // Entries left by leases no longer watched, whose time has come.
        while let Some(&(at, id)) = self.expiries.first() {
            if at > now || self.watched.contains_key(&id) {
                break;
            }
            self.expiries.pop_first();
        }
        for id in self.expiries_to_tell(now) {
            if let Some(watched) = self.watched.get(&id) {
                let cause = if watched.renews {
                    Cause::Unconfirmed
                } else {
                    Cause::LeaseEnded
                };
                let lease = watched.lease.clone();
                expired.push((lease, cause, self.forget(id)));
            }
        }
        expired
    }

    /// Takes every lease due at `now` or within half its renewal interval,
    /// grouped into batches. Renewing early is harmless, and half is the
    /// window at which groups merge: the leases renewed in one round are
    /// due again within half an interval of the next round, so after a
    /// round or two every lease of a ttl is renewed in the same round.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<Vec<Arc<Lease>>> {
        // A round starts only when a lease is actually due; the early
        // window is for joining that round, not for waking on its own
        // (else every batch answer would start a small round of its own).
        if self.renewals.first().is_none_or(|&(at, _)| at > now) {
            return Vec::new();
        }
        let mut due = Vec::new();
        while let Some(&(at, id)) = self.renewals.first() {
            let Some(watched) = self.watched.get_mut(&id) else {
                self.renewals.pop_first();
                continue;
            };
            if at > now + watched.renew_every / 2 {
                break;
            }
            self.renewals.pop_first();
            watched.due = None;
            watched.asked_at.get_or_insert(now);
            due.push(watched.lease.clone());
        }
        let mut batches = Vec::new();
        while !due.is_empty() {
            let rest = due.split_off(due.len().min(MAX_BATCH));
            batches.push(std::mem::replace(&mut due, rest));
        }
        batches
    }

    /// Applies the answer to one batch command, at `now`.
    pub(super) fn apply(&mut self, outcome: BatchOutcome, now: Instant) -> Applied {
        let BatchOutcome {
            ids,
            labels,
            sent_at,
            result,
        } = outcome;
        let mut applied = Applied::default();
        match result {
            Ok(answers) => {
                for ((id, labels), answer) in ids.into_iter().zip(labels).zip(answers) {
                    match answer {
                        Renewed::Yes => {
                            applied.renewed.push(labels);
                            self.renewed(id, sent_at, now);
                        }
                        Renewed::Gone => {
                            if let Some(watched) = self.watched.get(&id) {
                                let lease = watched.lease.clone();
                                applied.lost.push((lease, self.forget(id)));
                            }
                        }
                        Renewed::Unknown => {
                            applied.unconfirmed.push(labels);
                            self.retry(id, now);
                        }
                    }
                }
            }
            Err(err) => {
                applied.unconfirmed = labels;
                for id in ids {
                    self.retry(id, now);
                }
                applied.failed = Some(err);
            }
        }
        applied
    }

    fn renewed(&mut self, id: u64, sent_at: Instant, now: Instant) {
        let Some(watched) = self.watched.get_mut(&id) else {
            return; // released while the renewal was in flight
        };
        let valid_until = watched.lease.renewed(sent_at);
        watched.asked_at = None;
        if self.moved_at.is_none_or(|moved| sent_at > moved) {
            watched.lease.confirmed_after_move();
        }
        self.expiries.remove(&(watched.valid_until, id));
        watched.valid_until = valid_until;
        self.expiries.insert((valid_until, id));
        let due = if std::mem::take(&mut watched.again) {
            now
        } else {
            sent_at + watched.renew_every
        };
        watched.due = Some(due);
        self.renewals.insert((due, id));
    }

    fn retry(&mut self, id: u64, now: Instant) {
        let Some(watched) = self.watched.get_mut(&id) else {
            return;
        };
        // A quarter of the interval: several tries fit in what is left of
        // the lease's trust after a failed renewal, down to the shortest
        // lease (a 10 ms lease is trusted for under 5 ms more).
        let pause =
            (watched.renew_every / 4).clamp(Duration::from_millis(1), Duration::from_secs(1));
        let due = if std::mem::take(&mut watched.again) {
            now
        } else {
            now + pause
        };
        watched.due = Some(due);
        self.renewals.insert((due, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Route;
    use crate::engine::lease::FirstLease;
    use crate::keys::LockKeys;
    use crate::owner::OwnerToken;

    const SEC: Duration = Duration::from_secs(1);

    fn lease(id: u64, ttl: Duration, sent_at: Instant) -> Arc<Lease> {
        capped_lease(id, ttl, sent_at, None)
    }

    fn capped_lease(
        id: u64,
        ttl: Duration,
        sent_at: Instant,
        max_hold: Option<Duration>,
    ) -> Arc<Lease> {
        lease_first(id, ttl, sent_at, max_hold, FirstLease::Ttl)
    }

    fn lease_first(
        id: u64,
        ttl: Duration,
        sent_at: Instant,
        max_hold: Option<Duration>,
        first_lease: FirstLease,
    ) -> Arc<Lease> {
        Arc::new(Lease::new(crate::engine::lease::Grant {
            id,
            keys: LockKeys::new("lock:", &format!("k{id}")).unwrap(),
            also: Vec::new(),
            leased: crate::engine::lease::Leased::KEY,
            role: crate::engine::lease::Role::Hold,
            token: OwnerToken::random("test"),
            fence: id,
            ttl,
            route: Route::pooled(0),
            sent_at,
            granted_at: sent_at,
            fence_basis: crate::engine::fence::FenceBasis::issued_now(id),
            clock: crate::host::clock::Clock::Boot,
            max_hold,
            first_lease,
            labels: Labels {
                template: "k",
                primitive: "test",
            },
        }))
    }

    fn ids(batches: &[Vec<Arc<Lease>>]) -> Vec<u64> {
        batches.iter().flatten().map(|lease| lease.id).collect()
    }

    fn answer(ids: &[u64], sent_at: Instant, renewed: Renewed) -> BatchOutcome {
        BatchOutcome {
            ids: ids.to_vec(),
            labels: vec![
                Labels {
                    template: "k",
                    primitive: "test",
                };
                ids.len()
            ],
            sent_at,
            result: Ok(vec![renewed; ids.len()]),
        }
    }

    #[test]
    fn a_lease_at_its_hold_cap_is_given_up_and_never_renewed_again() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        let capped = capped_lease(1, SEC * 3, t0, Some(SEC * 5));
        assert_eq!(schedule.watch(capped, true, t0, None), t0 + SEC);
        // Renewed as usual before the cap...
        for second in 1..5 {
            let now = t0 + SEC * second;
            assert!(schedule.expire(now).is_empty());
            assert_eq!(ids(&schedule.take_due(now)), [1]);
            schedule.apply(answer(&[1], now, Renewed::Yes), now);
        }
        assert_eq!(schedule.next_event(), Some(t0 + SEC * 5));
        // ...and at the cap it is told, while the lease is still valid.
        let expired = schedule.expire(t0 + SEC * 5);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].1, Cause::HoldCap);
        assert_eq!(schedule.len(), 0);
        assert!(schedule.take_due(t0 + SEC * 6).is_empty());
        assert_eq!(schedule.next_event(), None);
    }

    #[test]
    fn a_lease_is_renewed_every_third_of_its_ttl_from_the_send() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        let first = schedule.watch(lease(1, 3 * SEC, t0), true, t0, None);
        assert_eq!(first, t0 + SEC);
        assert!(schedule.take_due(t0 + SEC / 2).is_empty());
        assert_eq!(ids(&schedule.take_due(t0 + SEC)), [1]);
        // In flight: not due again until answered.
        assert!(schedule.take_due(t0 + 2 * SEC).is_empty());
        let applied = schedule.apply(answer(&[1], t0 + SEC, Renewed::Yes), t0 + SEC);
        assert_eq!(applied.renewed.len(), 1);
        assert_eq!(schedule.next_event(), Some(t0 + 2 * SEC));
    }

    /// A hold handed over inside a release runs its waiter's place as its
    /// first lease: renewed when the place would have been (a third of
    /// it), and from then on every third of its own ttl. A place renewed
    /// to learn of a hand-over is due at once.
    #[test]
    fn a_shorter_first_lease_is_renewed_a_third_into_it_and_then_by_the_ttl() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        let handed = lease_first(1, 30 * SEC, t0, None, FirstLease::Shorter(3 * SEC));
        assert_eq!(
            handed.valid_until(),
            crate::engine::validity::validity_end(t0, 3 * SEC)
        );
        assert_eq!(schedule.watch(handed, true, t0, None), t0 + SEC);
        assert!(schedule.take_due(t0 + SEC / 2).is_empty());
        assert_eq!(ids(&schedule.take_due(t0 + SEC)), [1]);
        schedule.apply(answer(&[1], t0 + SEC, Renewed::Yes), t0 + SEC);
        assert_eq!(schedule.next_event(), Some(t0 + 11 * SEC));

        let now = lease_first(2, 3 * SEC, t0, None, FirstLease::RenewedAtOnce);
        assert_eq!(schedule.watch(now, true, t0, None), t0);
        assert_eq!(ids(&schedule.take_due(t0)), [2]);
    }

    /// Fixed leases (never renewed), all sent at `t0`, watched by a
    /// schedule that tells a holder in `each`.
    fn fixed_leases(count: u64, t0: Instant, each: Duration) -> (Schedule, Vec<Arc<Lease>>) {
        let mut schedule = Schedule {
            telling_each: each,
            ..Schedule::default()
        };
        let leases: Vec<_> = (0..count).map(|id| lease(id, 3 * SEC, t0)).collect();
        for lease in &leases {
            schedule.watch(lease.clone(), false, t0, None);
        }
        (schedule, leases)
    }

    #[test]
    fn thousands_ending_together_are_told_early_enough_for_the_last_to_be_in_time() {
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let t0 = Instant::now();
        let each = Duration::from_micros(10);
        let (mut schedule, leases) = fixed_leases(1000, t0, each);
        let end = leases[0].valid_until();
        assert!(schedule.expire(t0).is_empty());
        // Woken early enough to tell all thousand, one after another, by
        // their end.
        let start = schedule.next_event().expect("watched");
        assert!(
            start + each * 1000 <= end,
            "{:?} before the end",
            end - start
        );
        let told = schedule.expire(start);
        assert_eq!(told.len(), 1000);
        assert_eq!(schedule.next_event(), None);
    }

    #[test]
    fn leases_ending_further_apart_than_telling_takes_are_told_one_at_a_time_in_time() {
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let t0 = Instant::now();
        let each = Duration::from_micros(10);
        let mut schedule = Schedule {
            telling_each: each,
            ..Schedule::default()
        };
        // Sent 20 µs apart: they end 20 µs apart.
        let leases: Vec<_> = (0..100)
            .map(|id| {
                let sent = t0 + Duration::from_micros(20) * u32::try_from(id).unwrap();
                let lease = lease(id, 3 * SEC, sent);
                schedule.watch(lease.clone(), false, sent, None);
                lease
            })
            .collect();
        let mut now = t0;
        let mut told = 0;
        while let Some(next) = schedule.next_event() {
            assert!(next >= now, "the schedule went back in time");
            now = next;
            for (lease, _, _) in schedule.expire(now) {
                // Told in time, and not before telling the ones before it
                // needed: at most one holder's telling early.
                assert!(now <= lease.valid_until(), "lease {} told late", lease.id);
                assert!(
                    now + each * 2 >= lease.valid_until(),
                    "lease {} told {:?} early",
                    lease.id,
                    lease.valid_until() - now
                );
                told += 1;
            }
        }
        assert_eq!(told, leases.len());
    }

    /// Renews every due lease and answers at once, "renewed", from `t0`
    /// for three renewal intervals of `ttl`, as a healthy server does:
    /// the leases the schedule gave up meanwhile, with when.
    fn told_while_renewed(
        schedule: &mut Schedule,
        t0: Instant,
        ttl: Duration,
    ) -> Vec<(u64, Duration)> {
        let mut told = Vec::new();
        let mut now = t0;
        for _ in 0..10_000 {
            if now > t0 + ttl {
                break;
            }
            for (lease, _, _) in schedule.expire(now) {
                told.push((lease.id, now - lease.confirmed_at()));
            }
            for batch in schedule.take_due(now) {
                let ids: Vec<u64> = batch.iter().map(|lease| lease.id).collect();
                schedule.apply(answer(&ids, now, Renewed::Yes), now);
            }
            let Some(next) = schedule.next_event() else {
                break;
            };
            now = next.max(now);
        }
        told
    }

    /// Leases renewed in one round end together, however many there are
    /// (rounds merge: see `take_due`). While the server confirms every
    /// renewal at once, none of them is lost, and none may be told so:
    /// telling many early, so that the last is told in time if their
    /// renewals fail, must not tell them before a renewal could save them.
    #[test]
    fn leases_ending_together_are_not_told_lost_while_every_renewal_is_confirmed() {
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // The watchdog's first guess of the cost of telling one holder,
        // with 20,000 locks of 300 ms; and the most a pass slowed by a
        // stall makes it learn, with 1,000 locks of 1 s.
        for (count, ttl, each) in [
            (
                20_000,
                Duration::from_millis(300),
                Duration::from_micros(10),
            ),
            (1_000, SEC, Duration::from_millis(1)),
        ] {
            let t0 = Instant::now();
            let mut schedule = Schedule {
                telling_each: each,
                ..Schedule::default()
            };
            for id in 0..count {
                schedule.watch(lease(id, ttl, t0), true, t0, None);
            }
            let told = told_while_renewed(&mut schedule, t0, ttl);
            assert!(
                told.is_empty(),
                "{} of {count} leases of {ttl:?}, each renewed as soon as due, were told lost \
                 (the first {:?} after its last confirmation)",
                told.len(),
                told.first().map(|&(_, after)| after),
            );
        }
    }

    #[test]
    fn without_a_telling_cost_a_lease_is_told_at_its_end() {
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let t0 = Instant::now();
        let (mut schedule, leases) = fixed_leases(1000, t0, Duration::ZERO);
        let end = leases[0].valid_until();
        assert!(schedule.expire(t0).is_empty());
        assert_eq!(schedule.next_event(), Some(end));
        assert!(schedule.expire(end - Duration::from_nanos(1)).is_empty());
        assert_eq!(schedule.expire(end).len(), 1000);
    }

    #[test]
    fn leases_due_close_together_share_a_round() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        schedule.watch(lease(1, 3 * SEC, t0), true, t0, None);
        // Due 400 ms after the first: inside half an interval (500 ms).
        schedule.watch(lease(2, 3 * SEC, t0), true, t0 + SEC * 4 / 10, None);
        schedule.watch(lease(3, 3 * SEC, t0), true, t0 + SEC * 6 / 10, None);
        assert_eq!(ids(&schedule.take_due(t0 + SEC)), [1, 2]);
    }

    #[test]
    fn a_refused_renewal_is_lost_at_once_and_no_longer_watched() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        schedule.watch(lease(1, 3 * SEC, t0), true, t0, None);
        schedule.take_due(t0 + SEC);
        let applied = schedule.apply(answer(&[1], t0 + SEC, Renewed::Gone), t0 + SEC);
        assert_eq!(applied.lost.len(), 1);
        assert_eq!(schedule.len(), 0);
        assert_eq!(schedule.next_event(), None);
    }

    #[test]
    fn failing_renewals_are_retried_until_validity_runs_out() {
        // A lease's end follows the stall record: no other test moves it
        // between the reads compared here.
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let t0 = Instant::now();
        let ttl = 3 * SEC;
        let held = lease(1, ttl, t0);
        let valid_until = held.valid_until();
        let mut schedule = Schedule::default();
        schedule.watch(held, true, t0, None);
        let mut now = t0 + SEC;
        while now < valid_until {
            for batch in schedule.take_due(now) {
                let failed = BatchOutcome {
                    ids: batch.iter().map(|lease| lease.id).collect(),
                    labels: batch.iter().map(|lease| lease.labels).collect(),
                    sent_at: now,
                    result: Err(LockError::config("test: server down")),
                };
                let applied = schedule.apply(failed, now);
                assert_eq!(applied.unconfirmed.len(), 1);
                assert!(applied.lost.is_empty());
            }
            assert!(
                schedule.expire(now).is_empty(),
                "lost before validity ran out"
            );
            now = schedule.next_event().expect("still watched");
        }
        let expired = schedule.expire(valid_until);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].1, Cause::Unconfirmed);
    }

    #[test]
    fn a_failed_renewal_of_the_shortest_lease_is_retried_while_it_is_trusted() {
        // A lease's end follows the stall record: no other test moves it
        // between the reads compared here.
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let t0 = Instant::now();
        let held = lease(1, Duration::from_millis(10), t0);
        let valid_until = held.valid_until();
        let mut schedule = Schedule::default();
        schedule.watch(held, true, t0, None);
        let due = schedule.next_event().expect("watched");
        let batch = schedule.take_due(due).remove(0);
        let failed = BatchOutcome {
            ids: batch.iter().map(|lease| lease.id).collect(),
            labels: batch.iter().map(|lease| lease.labels).collect(),
            sent_at: due,
            result: Err(LockError::config("test: a dropped connection")),
        };
        assert_eq!(schedule.apply(failed, due).unconfirmed.len(), 1);
        let retry = schedule.next_event().expect("still watched");
        // Due while trusted on a timer of millisecond grain, whatever stall
        // the process recorded (it shortens both the trust and the
        // interval).
        assert!(
            retry + Duration::from_millis(1) < valid_until,
            "retry {:?} after the send, trusted until {:?}",
            retry - t0,
            valid_until - t0
        );
    }

    #[test]
    fn a_fixed_lease_is_never_renewed_and_ends_with_its_validity() {
        // A lease's end follows the stall record: no other test moves it
        // between the reads compared here.
        let _record = crate::engine::validity::STALL_RECORD_IN_USE
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let t0 = Instant::now();
        let fixed = lease(1, SEC, t0);
        let end = fixed.valid_until();
        let mut schedule = Schedule::default();
        assert_eq!(schedule.watch(fixed, false, t0, None), end);
        assert!(schedule.take_due(end).is_empty());
        assert_eq!(schedule.expire(end)[0].1, Cause::LeaseEnded);
    }

    #[test]
    fn after_a_move_every_lease_is_due_and_one_in_flight_is_renewed_again() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        schedule.watch(lease(1, 3 * SEC, t0), true, t0, None);
        schedule.watch(lease(2, 30 * SEC, t0), true, t0, None);
        schedule.watch(lease(3, 3 * SEC, t0), false, t0, None);
        let in_flight = schedule.take_due(t0 + SEC);
        assert_eq!(ids(&in_flight), [1]);
        let moved_at = t0 + SEC + SEC / 10;
        schedule.all_due(moved_at);
        // Lease 2 at once; the fixed lease 3 never.
        assert_eq!(ids(&schedule.take_due(moved_at)), [2]);
        // Lease 1's answer came from the old server: renew it again now.
        let answered = moved_at + SEC / 10;
        schedule.apply(answer(&[1], t0 + SEC, Renewed::Yes), answered);
        assert_eq!(ids(&schedule.take_due(answered)), [1]);
    }

    #[test]
    fn after_a_move_a_lease_is_unconfirmed_until_a_renewal_sent_after_it() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        let held = lease(1, 3 * SEC, t0);
        schedule.watch(held.clone(), true, t0, None);
        assert!(!held.unconfirmed_since_move());
        let in_flight = schedule.take_due(t0 + SEC);
        assert_eq!(ids(&in_flight), [1]);
        let moved_at = t0 + SEC + SEC / 10;
        schedule.all_due(moved_at);
        assert!(held.unconfirmed_since_move());
        // The answer to the renewal sent before the move proves nothing.
        let answered = moved_at + SEC / 10;
        schedule.apply(answer(&[1], t0 + SEC, Renewed::Yes), answered);
        assert!(held.unconfirmed_since_move());
        assert_eq!(ids(&schedule.take_due(answered)), [1]);
        schedule.apply(answer(&[1], answered, Renewed::Yes), answered);
        assert!(!held.unconfirmed_since_move());
        // A hold confirmed before the move and watched after it (passed
        // in process) is unconfirmed too, and renewed at once.
        let passed = lease(2, 3 * SEC, t0);
        assert_eq!(schedule.watch(passed.clone(), true, t0, None), moved_at);
        assert!(passed.unconfirmed_since_move());
        // One granted after the move is not.
        let fresh = lease(3, 3 * SEC, answered);
        schedule.watch(fresh.clone(), true, answered, None);
        assert!(!fresh.unconfirmed_since_move());
    }

    #[test]
    fn a_released_lease_is_forgotten_even_with_a_renewal_in_flight() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        schedule.watch(lease(1, 3 * SEC, t0), true, t0, None);
        schedule.take_due(t0 + SEC);
        schedule.forget(1);
        let applied = schedule.apply(answer(&[1], t0 + SEC, Renewed::Yes), t0 + SEC);
        assert_eq!(applied.renewed.len(), 1);
        assert_eq!(schedule.next_event(), None);
    }

    #[test]
    fn batches_hold_at_most_max_batch_leases() {
        let t0 = Instant::now();
        let mut schedule = Schedule::default();
        for id in 0..(MAX_BATCH as u64 + 10) {
            schedule.watch(lease(id, 3 * SEC, t0), true, t0, None);
        }
        let batches = schedule.take_due(t0 + SEC);
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].len(), MAX_BATCH);
        assert_eq!(batches[1].len(), 10);
    }
}
