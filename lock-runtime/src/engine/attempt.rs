//! Taking a lock: try, wait for a release, try again, within the caller's
//! `wait`, and never leave a lock held by nobody.
//!
//! # Waiting
//! On a busy lock the attempt subscribes to the lock's release channel,
//! tries once more (a release between the try and the subscription would
//! otherwise go unheard), then sleeps until a release message, the end of
//! the owner's lease (the PTTL the script returned), or a capped jittered
//! backoff, whichever comes first.
//!
//! # Bounded
//! The whole acquisition returns within its wait plus two bounded round
//! trips (each `connect_timeout + response_timeout`), plus the replica
//! timeout when it waits for replicas, whatever the servers do: the try in
//! flight when the wait runs out, and one retry of a call whose connection
//! dropped or was refused (a server that just came back). Topologies that
//! need more (a Sentinel lookup, Redlock's rounds) are cut at that bound.
//!
//! # Never held by nobody
//! From the moment a try may have reached the server until an answer
//! proves otherwise, the attempt is *armed*: dropped in that state
//! (cancelled by its caller, cut at its bound, or failed) it releases the
//! lock it may have taken. The release goes the same way as the try (same
//! connection, so it cannot overtake it) and, on Redlock, only after every
//! call the try left running on a slow master has ended. A grant that came
//! back after its validity ran out is given back before the next try.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::backend::Route;
use crate::backend::flights::{InFlight, Landing, grounded, in_flight};
use crate::config::ReplicaAck;
use crate::engine::core::Core;
use crate::engine::fence::FenceBasis;
use crate::engine::handover::Handover;
use crate::engine::lease::{FirstLease, Grant, Lease, LeaseState, Role};
use crate::engine::lost;
use crate::engine::primitive::{AcquireReply, Primitive, Try};
use crate::engine::release::Hold;
use crate::engine::retry;
use crate::engine::stats::Counters;
use crate::engine::validity;
use crate::engine::wait::{
    Backoff, Behind, Granted, Grantee, Line, Listening, Sightings, Subscription, Turn,
};
use crate::engine::watchdog::Watched;
use crate::error::LockError;
use crate::host::LetGo;
use crate::host::clock::Clock;
use crate::metrics;
use crate::owner::OwnerToken;

/// What the request decided, beyond its primitive.
pub(crate) struct Plan {
    /// The lease, in whole milliseconds.
    pub(crate) ttl: Duration,
    pub(crate) wait: Duration,
    pub(crate) renews: bool,
    pub(crate) replicas: Option<ReplicaAck>,
    /// Longest the watchdog may keep the lock (`max_hold`).
    pub(crate) max_hold: Option<Duration>,
    /// The lock's bounded name, for metrics and traces.
    pub(crate) template: &'static str,
}

/// One acquisition of primitive `P` in progress.
pub(crate) struct Attempt<P: Primitive> {
    core: Arc<Core>,
    plan: Plan,
    primitive: P,
    token: OwnerToken,
    route: Route,
    flight: InFlight,
    /// Taken by the lease, or by the clean-up.
    landing: Option<Landing>,
    /// This task's turn in its locker's line for the key, once it had to
    /// wait: kept with the lease's watch until the lock is given back or
    /// lost.
    turn: Option<Turn>,
    armed: bool,
    /// Found the lock busy (or queued behind this locker's other tasks)
    /// at least once: counted as contended however the attempt ends.
    contended: bool,
    /// Gave back a pass it could not use, and has not found the lock busy
    /// since: a grant now continues the line's run of holds (see
    /// [`Turn::granted`]).
    gave_back_pass: bool,
    /// The answer of a Redlock round that found a majority down, while
    /// the retry at once runs: what the acquisition answers if its bound
    /// cuts that retry (a frozen master makes each of its calls last).
    down_majority: Option<LockError>,
    /// When the acquisition began, on the locker's clock.
    started: Instant,
    backoff: Backoff,
    /// After holding back for a waiter outside: whether its release was
    /// heard meanwhile (it took the lock and let go already).
    held_back: Option<bool>,
    /// The wait for a release the attempt moves to the library's runtime
    /// with (see [`Attempt::run`]).
    parked: Option<Parked>,
    /// When the attempt tries again if no release message wakes it first:
    /// kept across wake-ups by messages whose try still found the lock
    /// busy, so that it also tries at moments of its own (a message may
    /// always come too late for it to win, see [`crate::engine::handover`]).
    timer_due: Option<Instant>,
    /// Once moved: set when the caller lets go of the acquisition.
    let_go: Option<LetGo>,
    /// What a waiter that takes no turn in its locker's line listens with
    /// (see [`Primitive::takes_turn`]); one that does listens with its
    /// line's. Boxed, and made at its first use: most attempts take a
    /// turn or try once, and an attempt's future is moved whole.
    own_listening: Option<Box<Listening>>,
    /// The place its token keeps while it waits, watched by the watchdog
    /// (see [`Primitive::place`]): given up when the attempt ends without
    /// the hold.
    place: Option<(Arc<Lease>, Watched)>,
    /// When its last try was sent: where a hold handed over by a release
    /// counts from, unless its place was confirmed since.
    last_sent: Option<Instant>,
    /// Once it took a hold passed in process: the tokens of the waiters
    /// whose places are still in the server's line although they took the
    /// hold (its own included), which leave the line with its release
    /// there, the clean-up's too (see [`Line::served`]).
    served: Vec<OwnerToken>,
}

/// What an attempt found busy waits for before its next try.
struct Parked {
    /// The longest it sleeps if no release message comes.
    pause: Duration,
    /// What the busy try saw (on Redlock, which masters' releases are news).
    sightings: Option<Sightings>,
}

/// Where an attempt stands when it stops to be moved or ends.
enum Step<P: Primitive> {
    /// Passed by this locker's last holder (taken by the caller's task).
    Granted(Hold<P>),
    /// Granted by the server, still armed: the caller's task takes it
    /// ([`Attempt::grant`]), so that the hold begins where the caller is
    /// (its metrics recorder and tracing subscriber may be its thread's
    /// own), and a grant the caller let go of meanwhile is only given back
    /// by the drop, never counted.
    Won(Won),
    /// Busy: about to wait for a release, which it waits for on the
    /// library's runtime (see [`Attempt::run`]).
    Move,
}

impl<P: Primitive> Attempt<P> {
    /// The attempt of a request made at `started` (on the locker's clock).
    pub(crate) fn new(core: &Arc<Core>, plan: Plan, primitive: P, started: Instant) -> Self {
        // Only Redlock leaves calls running after it answers.
        let (flight, landing) = match core.backend {
            Backend::Redlock(ref masters) => {
                let (flight, landing) = in_flight(masters.len());
                (flight, Some(landing))
            }
            Backend::Node(_) => (grounded(), None),
        };
        let config = &core.config;
        Self {
            route: Route {
                conn: core.backend.pick(),
                blocking: plan.replicas.is_some(),
            },
            plan,
            primitive,
            token: OwnerToken::random(&core.holder),
            flight,
            landing,
            turn: None,
            armed: false,
            contended: false,
            gave_back_pass: false,
            down_majority: None,
            started,
            backoff: Backoff::new(config.backoff_min, config.backoff_max),
            held_back: None,
            parked: None,
            timer_due: None,
            let_go: None,
            own_listening: None,
            place: None,
            last_sent: None,
            served: Vec::new(),
            core: core.clone(),
        }
    }

    /// Runs the attempt to its end, within its bound (see the module docs).
    ///
    /// The caller's task polls it (no hand-off on the way to a free lock,
    /// or to one passed by this locker's last holder), until a try finds
    /// the lock busy. On a locker hosted by the library's runtime, the wait
    /// for the release and the tries after it then move to that runtime,
    /// whose thread hears the release message: the next try is sent from
    /// the thread that heard it, and the caller's thread is woken once,
    /// with the answer, instead of three times (by the message, to send
    /// the try, and with its answer). On a machine whose idle threads are
    /// slow to wake, that is most of a hand-over between processes. The
    /// caller's task takes a grant itself (see [`Step::Won`]).
    ///
    /// A waiter whose lock is handed to it ([`Primitive::HANDS_OVER`])
    /// stays with the caller's task: it does not try after a message (the
    /// message or a holder of this locker makes the lock its own), so
    /// moving would only put the library's thread between the hand-over
    /// and the caller, one more thread to wake, and a hand-over in process
    /// would cross to that thread and back.
    ///
    /// `span` is the acquisition's: the moved part runs in it too, and is
    /// traced to the caller's subscriber (a thread's own, as a test sets,
    /// is not the library thread's), like the part the caller polls.
    pub(crate) async fn run(mut self, span: tracing::Span) -> Result<Hold<P>, LockError> {
        let replicas = self.plan.replicas.map_or(Duration::ZERO, |ack| ack.timeout);
        let bound = self
            .plan
            .wait
            .saturating_add(replicas)
            .saturating_add(self.core.config.two_calls_bound());
        // One deadline for both parts, on the host's clock.
        let deadline = tokio::time::Instant::now().checked_add(bound);
        let moves = self.core.host.waits_elsewhere() && !P::HANDS_OVER;
        let step = within(deadline, self.attempt(moves)).await;
        let (mut attempt, step) = match step {
            Some(Ok(Step::Move)) => {
                let host = self.core.host.clone();
                let let_go = LetGo::default();
                self.let_go = Some(let_go.clone());
                // Comes back with the attempt, so that a grant is taken
                // here; if the caller let go first, its drop gives it back.
                let waiting = async move {
                    let step = within(deadline, self.contend(false)).await;
                    Ok((self, step))
                };
                let waiting = tracing::Instrument::instrument(waiting, span);
                let waiting = tracing::instrument::WithSubscriber::with_current_subscriber(waiting);
                host.hand_off(waiting, let_go)?.await?
            }
            step => (self, step),
        };
        attempt.finish(step, bound)
    }

    /// What the acquisition answers for `step` (None: cut at its `bound`).
    fn finish(
        &mut self,
        step: Option<Result<Step<P>, LockError>>,
        bound: Duration,
    ) -> Result<Hold<P>, LockError> {
        let result = match step {
            Some(Ok(Step::Granted(guard))) => Ok(guard),
            Some(Ok(Step::Won(won))) => {
                let (started, contended) = (self.started, self.contended);
                Ok(self.grant(won, started, contended, false))
            }
            // Only an attempt that may move stops to be moved.
            Some(Ok(Step::Move)) => Err(LockError::redis_timeout("acquire", bound)),
            Some(Err(err)) => Err(err),
            // Still armed if a try was in flight: the drop cleans up.
            None => Err(self
                .down_majority
                .take()
                .unwrap_or_else(|| LockError::redis_timeout("acquire", bound))),
        };
        // A grant counted itself; a wait that ran out on a busy lock too.
        if self.contended && matches!(result, Err(LockError::Timeout { .. })) {
            Counters::bump(&self.core.counters.contended);
        }
        result
    }

    /// Takes the turn, then contends; `may_move`: stops with
    /// [`Step::Move`] when a try finds the lock busy.
    async fn attempt(&mut self, may_move: bool) -> Result<Step<P>, LockError> {
        let started = self.started;
        // An acquisition that may wait takes its turn among this locker's
        // tasks for the key first (see `Turns`); one that tries once does
        // not, nor one of a primitive many hold at once.
        if !self.plan.wait.is_zero() && self.primitive.takes_turn() {
            self.contended = self.take_turn(self.plan.wait, started).await?;
            if let Some(guard) = self.take_handover(started).await {
                return Ok(Step::Granted(guard));
            }
            if self.turn.as_mut().is_some_and(Turn::take_yield) {
                // The last holder let go for a waiter outside this locker,
                // whose release message is on its way: trying at once
                // would mostly win the race and take the lock from it.
                self.held_back = Some(self.hold_back(started).await);
            }
        }
        self.contend(may_move).await
    }

    /// Tries, and on a busy lock waits for its release and tries again,
    /// until granted or the wait runs out; `may_move`: stops with
    /// [`Step::Move`] instead of waiting.
    async fn contend(&mut self, may_move: bool) -> Result<Step<P>, LockError> {
        let clock = self.core.clock();
        let started = self.started;
        loop {
            if let Some(parked) = self.parked.take() {
                self.sleep(parked).await;
            }
            self.unless_let_go().await;
            match self.subscription().and_then(Subscription::take_grant) {
                Some(Granted::Released { fence, behind }) => {
                    // A release handed it the lock: armed until it is
                    // taken, so that a drop hands it on. With renewals, no
                    // try of its own: the watchdog sets its ttl at once. A
                    // fixed lease is set by its next try, which finds the
                    // lock its own, as is one that waits for replicas
                    // (after that try).
                    self.armed = true;
                    if self.plan.renews && self.plan.replicas.is_none() {
                        return Ok(Step::Won(self.handed(fence, behind)));
                    }
                }
                Some(Granted::Passed { handover, behind }) => {
                    if let Some(won) = self.take_passed(handover, behind).await {
                        return Ok(Step::Won(won));
                    }
                }
                None => {}
            }
            // A waiter of a lock its releases hand over joins the line
            // before its first try when this process listens on its channel
            // already: a hand-over right after the try is heard, and no
            // second try is needed once it is busy (see `listen`).
            if P::HANDS_OVER {
                self.join_listening();
            }
            // Wake-ups so far are for releases before this try.
            if let Some(subscription) = self.subscription() {
                subscription.mark_seen();
            }
            let (sent_at, reply) = self.send(!self.contended).await?;
            self.unless_let_go().await;
            if let Some(heard) = self.held_back.take()
                && let Some(turn) = self.turn.as_mut()
            {
                let taken = !matches!(reply, AcquireReply::Acquired { .. });
                turn.yield_answered(heard || taken);
            }
            // One reading of the clock serves the wait left and the check.
            let answered_at = clock.now();
            let left = self
                .plan
                .wait
                .saturating_sub(answered_at.saturating_duration_since(started));
            let (pttl, sightings) = match reply {
                AcquireReply::Acquired { fence } => {
                    if validity::validity_end(sent_at, self.plan.ttl) > answered_at {
                        return Ok(Step::Won(Won::from_server(fence, sent_at)));
                    }
                    // The answer came after the lease could have run out, so
                    // the lock may already be someone else's: give it back,
                    // and try again after a pause (a machine this slow would
                    // otherwise spin on the server).
                    tracing::debug!(
                        "acquire answered after its lease could have expired; retrying"
                    );
                    self.give_back().await;
                    self.pause_or_time_out(left, started).await?;
                    continue;
                }
                AcquireReply::Unknown => {
                    self.pause_or_time_out(left, started).await?;
                    continue;
                }
                AcquireReply::NoQuorum {
                    granted,
                    needed,
                    down,
                } => {
                    let failed = LockError::QuorumNotReached {
                        key: self.primitive.keys().name().to_owned(),
                        granted,
                        needed,
                    };
                    // Slow masters may answer in time on a later round; a
                    // majority that refuses connections (twice: see `send`)
                    // will not.
                    if down || left.is_zero() {
                        return Err(failed);
                    }
                    tokio::time::sleep(self.backoff.next_pause().min(left)).await;
                    continue;
                }
                AcquireReply::Busy {
                    pttl,
                    sightings,
                    place,
                } => {
                    if place {
                        self.keep_place(sent_at);
                    }
                    (pttl, sightings)
                }
            };
            self.contended = true;
            // Someone else took it meanwhile: the line's run ended.
            self.gave_back_pass = false;
            if left.is_zero() {
                return Err(self.timeout(started));
            }
            if self.listen(left).await {
                // Subscribed just now: a release between the try and the
                // subscription went unheard. Where releases hand the lock
                // over, one handed to this waiter took its place: the
                // place's renewal, due at once (in one batch with every
                // waiter that subscribed with it), finds out, and a place
                // found gone is a try (see `sleep`). Elsewhere, try again.
                let confirmed = self.listening().is_some_and(|l| l.confirmed);
                if !(P::HANDS_OVER && confirmed && self.renew_place_now()) {
                    continue;
                }
            }
            let listening = self.listening().is_some_and(|l| l.confirmed);
            // Listening for the release: wait for its message, the end of
            // the owner's lease (a lock that expires is not announced), or
            // the longest backoff step, whichever is first: a subscription
            // the server quietly refused (an ACL without SUBSCRIBE looks
            // confirmed to the client) still polls, slowly. Only the first
            // of this locker's waiters for the key is here (see `Turns`),
            // so this costs the server next to nothing. Not listening, or
            // no lease to wait for: the backoff from its shortest step.
            // A waiter keeping its place where releases hand the lock over
            // needs no slow poll: should the message never come, its
            // place's next renewal finds the place gone (see `sleep`).
            let handed_over = P::HANDS_OVER && self.place.is_some();
            let pause = match pttl {
                Some(pttl) if listening && handed_over => pttl + Duration::from_millis(1),
                Some(pttl) if listening => {
                    (pttl + Duration::from_millis(1)).min(self.core.config.backoff_max)
                }
                _ => self.backoff.next_pause(),
            }
            .min(left);
            let now = clock.now();
            let due = now + pause;
            let due = match self.timer_due {
                Some(earlier) if earlier > now => earlier.min(due),
                _ => due,
            };
            self.timer_due = Some(due);
            self.parked = Some(Parked {
                pause: due.saturating_duration_since(now),
                sightings,
            });
            if may_move {
                return Ok(Step::Move);
            }
        }
    }

    /// Never returns once the caller let go of a moved attempt: its task is
    /// stopped at this await, before it tries again (a grant it holds is
    /// given back by the drop, as the attempt is still armed).
    async fn unless_let_go(&self) {
        if self.let_go.as_ref().is_some_and(LetGo::is_set) {
            std::future::pending::<()>().await;
        }
    }

    /// Sleeps until a release message that is news to the try that found
    /// the lock busy (or that hands it the lock), `parked.pause`, or the
    /// loss of the place it keeps, whichever is first: a place that ended
    /// may mean the lock was handed to it and the message lost, which its
    /// next try finds.
    async fn sleep(&mut self, parked: Parked) {
        let Parked { pause, sightings } = parked;
        let counters = self.core.counters.clone();
        let asleep = counters.fall_asleep();
        let timer = tokio::time::sleep(pause);
        tokio::pin!(timer);
        let place_lost = self.place.as_ref().map(|(lease, _)| lost::signal(lease));
        let place_ttl = self
            .place
            .as_ref()
            .filter(|_| P::HANDS_OVER)
            .map(|(lease, _)| lease.ttl);
        let clock = self.core.clock();
        let place_lost = async move {
            match place_lost {
                Some(lost) => lost.await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(place_lost);
        match self.subscription() {
            // Woken by what the try already saw (on Redlock, another
            // master's message of the same release): sleep on.
            // A release that handed the lock to another waiter since the
            // try (a line whose releases hand it over) moves the timer:
            // the new owner holds it at least a place's lease, renews it
            // and hands it on in turn, so a try is due only when that
            // lease may have ended unreleased (an owner that died), not
            // when the lease the try saw ends.
            Some(subscription) => loop {
                tokio::select! {
                    () = subscription.released() => {
                        if subscription.granted() || subscription.take_news(sightings.as_ref()) {
                            Counters::bump(&counters.release_wakeups);
                            break;
                        }
                        if let Some(until) = handed_until(subscription, place_ttl, clock) {
                            timer.as_mut().reset(until);
                        }
                    }
                    () = &mut timer => {
                        if let Some(until) = handed_until(subscription, place_ttl, clock) {
                            timer.as_mut().reset(until);
                            continue;
                        }
                        Counters::bump(&counters.timer_wakeups);
                        self.timer_due = None;
                        break;
                    }
                    () = &mut place_lost => break,
                }
            },
            None => {
                timer.await;
                Counters::bump(&counters.timer_wakeups);
                self.timer_due = None;
            }
        }
        drop(asleep);
    }

    /// One try, and one more if the connection dropped or was refused under
    /// it, or a Redlock majority refused connections (a server that
    /// restarted: the first call after it comes back meets the old
    /// connection's failure, and the reconnect it starts serves the retry),
    /// or the locks moved to another server while it failed (a Sentinel
    /// failover the failure itself made the locker follow: even a timeout
    /// was the old master's, and the new one has not been asked).
    /// The acquire script is idempotent for our token, so a retry after a
    /// lost reply finds the lock ours instead of busy.
    async fn send(&mut self, plain_first: bool) -> Result<(Instant, AcquireReply), LockError> {
        let mut retried = false;
        loop {
            let generation = self.core.backend.generation();
            // Armed for every try, the retry after a majority refused
            // connections included.
            self.armed = true;
            let sent_at = self.core.clock().now();
            self.last_sent = Some(sent_at);
            Counters::bump(&self.core.counters.tries);
            let attempt = Try {
                route: self.route,
                token: &self.token,
                ttl: self.plan.ttl,
                replicas: self.plan.replicas,
                flight: &self.flight,
                plain_first,
                line: self.turn.is_some().then_some(self.core.line),
                waits: !self.plan.wait.is_zero(),
            };
            let answer = self
                .primitive
                .try_acquire(&self.core.backend, &attempt)
                .await;
            self.down_majority = None;
            match answer {
                Ok(AcquireReply::NoQuorum {
                    down: true,
                    granted,
                    needed,
                }) if !retried => {
                    tracing::debug!("a majority of masters refused connections; retrying once");
                    self.armed = false;
                    retried = true;
                    self.down_majority = Some(LockError::QuorumNotReached {
                        key: self.primitive.keys().name().to_owned(),
                        granted,
                        needed,
                    });
                }
                Ok(reply) => {
                    // A busy answer, or a Redlock round that cleaned up
                    // after itself, proves no try of ours holds the lock.
                    if matches!(
                        reply,
                        AcquireReply::Busy { .. } | AcquireReply::NoQuorum { .. }
                    ) {
                        self.armed = false;
                    }
                    return Ok((sent_at, reply));
                }
                Err(LockError::Redis(err)) if !retried && retry::worth_one_retry(&err) => {
                    tracing::debug!(error = %err, "acquire met a dropped or refused connection; retrying once");
                    retried = true;
                }
                Err(LockError::Redis(err))
                    if !retried && self.core.backend.generation() != generation =>
                {
                    tracing::debug!(error = %err, "acquire failed on a master the locker has since left; retrying on the new one");
                    retried = true;
                }
                Err(err) => {
                    // Released again before this error was returned.
                    if matches!(err, LockError::NotReplicated { .. }) {
                        self.armed = false;
                    }
                    return Err(err);
                }
            }
        }
    }

    /// Waits, within `wait`, for this task's turn in its locker's line for
    /// the key (see [`crate::engine::wait::Turns`]); true when it had to wait
    /// behind others.
    async fn take_turn(&mut self, wait: Duration, started: Instant) -> Result<bool, LockError> {
        let key = self.primitive.line();
        let Some(turn) = self.core.turns.wait_turn(key, wait).await else {
            // Behind this locker's other tasks for the whole wait.
            self.contended = true;
            return Err(self.timeout(started));
        };
        let queued = turn.was_queued();
        self.turn = Some(turn);
        Ok(queued)
    }

    /// Takes the lock the last holder passed to this turn (see
    /// [`crate::engine::handover`]) when it was passed as this attempt would have
    /// taken it (same lease, no replicas to wait for) and is still valid;
    /// gives any other back first.
    async fn take_handover(&mut self, started: Instant) -> Option<Hold<P>> {
        let handover = self.turn.as_mut()?.take_handover()?;
        // A hold continued in process keeps its lease only while renewed.
        let fits = handover.ttl == self.plan.ttl
            && self.plan.replicas.is_none()
            && (self.plan.renews || !handover.in_process);
        let now = self.core.clock().now();
        if !fits || validity::validity_end(handover.sent_at, handover.ttl) <= now {
            self.gave_back_pass = true;
            handover.give_back().await;
            return None;
        }
        self.token = handover.token.clone();
        self.route = handover.route;
        let won = Won {
            fence: handover.fence,
            sent_at: handover.sent_at,
            granted_at: if handover.in_process {
                now
            } else {
                handover.sent_at
            },
            fence_basis: handover.fence_basis,
            first_lease: handover.first_lease,
            line: None,
        };
        // Counted by the taker: a pass nobody takes is given back, a
        // release and no hand-over.
        Counters::bump(&self.core.counters.handovers);
        if handover.in_process {
            Counters::bump(&self.core.counters.handovers_in_process);
        }
        metrics::handed_over(self.labels());
        handover.taken();
        Some(self.grant(won, started, true, true))
    }

    /// Holds back (within the wait) while the lock the last holder let go
    /// of is kept for the callers outside this locker (see
    /// [`crate::engine::handover`]): until its grace ends, or one of them released
    /// it (true: it took the lock and let go already). The release that
    /// let it go is never news to this locker's listener; any message
    /// heard since the line's last try is one of theirs.
    async fn hold_back(&mut self, started: Instant) -> bool {
        let grace = self.turn.as_ref().map_or(Duration::ZERO, Turn::yield_grace);
        let left = self.plan.wait.saturating_sub(self.since(started));
        let timer = tokio::time::sleep(grace.min(left));
        tokio::pin!(timer);
        let Some(subscription) = self.subscription() else {
            timer.await;
            return false;
        };
        loop {
            tokio::select! {
                () = subscription.released() => {
                    if subscription.take_news(None) {
                        return true;
                    }
                }
                () = &mut timer => return subscription.take_news(None),
            }
        }
    }

    /// Has the line subscribed to the release channel of what the last
    /// try found busy ([`Primitive::busy_channel`]) unless it already is
    /// (within `left`); true when it subscribed just now. A subscription
    /// to another channel (a hold of several resources, blocked now by
    /// another one) is left for this one.
    async fn listen(&mut self, left: Duration) -> bool {
        let patience = left.min(self.core.config.response_timeout);
        let releases = self.core.releases.clone();
        let channel = self.primitive.busy_channel().to_owned();
        let grantee = P::HANDS_OVER.then(|| Grantee::of(self.token.as_str()));
        let wants = self.primitive.wants();
        let told_by = self.primitive.told_by(&self.core.backend);
        let Some(listening) = self.listening() else {
            return false;
        };
        match &listening.subscription {
            Some(subscription) if subscription.channel() == channel => return false,
            Some(_) => listening.subscription = None,
            None => {}
        }
        if let Ok((subscription, confirmed)) =
            tokio::time::timeout(patience, releases.subscribe(&channel, grantee)).await
        {
            subscription.wants(wants);
            subscription.told_by(told_by);
            listening.subscription = Some(subscription);
            listening.confirmed = confirmed;
        }
        true
    }

    /// Joins the line of waiters on the channel, if it has none yet and
    /// this process listens there already (see
    /// [`crate::engine::wait::ReleaseListener::join_listening`]).
    fn join_listening(&mut self) {
        let releases = self.core.releases.clone();
        let channel = self.primitive.channel().to_owned();
        let grantee = Grantee::of(self.token.as_str());
        let wants = self.primitive.wants();
        let told_by = self.primitive.told_by(&self.core.backend);
        let Some(listening) = self.listening() else {
            return;
        };
        if listening.subscription.is_some() {
            return;
        }
        if let Some(subscription) = releases.join_listening(&channel, Some(grantee)) {
            subscription.wants(wants);
            subscription.told_by(told_by);
            listening.subscription = Some(subscription);
            listening.confirmed = true;
        }
    }

    /// What this attempt listens for releases with: its line's, while it
    /// has the turn; its own, when it takes none and may wait.
    fn listening(&mut self) -> Option<&mut Listening> {
        match self.turn.as_mut() {
            Some(turn) => Some(turn.listening()),
            None if !self.plan.wait.is_zero() => Some(self.own_listening.get_or_insert_default()),
            None => None,
        }
    }

    /// The subscription it listens with, once subscribed.
    fn subscription(&mut self) -> Option<&mut Subscription> {
        self.listening()?.subscription.as_mut()
    }

    /// What a lock handed over by a release with `fence` starts from:
    /// counted from this attempt's own last request (its last try, or the
    /// last confirmed renewal of its place), never from the message, and
    /// trusted at first for the place's lease, the one the release gave it
    /// on the server: renewed when the place would have been, and that
    /// renewal sets its ttl (see [`FirstLease::Shorter`]).
    fn handed(&self, fence: u64, behind: Behind) -> Won {
        let place = self.place.as_ref().map(|(lease, _)| lease.confirmed_at());
        let sent_at = match (self.last_sent, place) {
            (Some(tried), Some(confirmed)) => tried.max(confirmed),
            (tried, confirmed) => tried.or(confirmed).unwrap_or(self.started),
        };
        Won {
            fence,
            sent_at,
            granted_at: self.core.clock().now(),
            fence_basis: FenceBasis::issued_now(fence),
            first_lease: self
                .primitive
                .place()
                .map_or(FirstLease::Ttl, |place| FirstLease::Shorter(place.ttl)),
            line: Line {
                behind,
                served: Vec::new(),
            }
            .known(),
        }
    }

    /// Takes a lock a holder of this locker handed over in process, as
    /// the next in the server's line (see [`crate::engine::wait::Behind`]):
    /// the giver's hold, continued, with the giver's fence plus one. The
    /// place it kept stays in the server's line until the hold's next
    /// release there, which takes it out (see [`Line::served`]); it is
    /// not renewed any more. A pass it cannot
    /// use (another ttl, replica acknowledgements, a fixed lease, a place
    /// no longer held, or a lease that ran out) is given back on the
    /// server, whose release hands the lock to the first live waiter: this
    /// one, if its place still counts there.
    async fn take_passed(&mut self, mut handover: Box<Handover>, behind: Behind) -> Option<Won> {
        let place_held = self
            .place
            .as_ref()
            .is_some_and(|(place, _)| place.is_held());
        let fits = handover.ttl == self.plan.ttl
            && self.plan.replicas.is_none()
            && self.plan.renews
            && place_held;
        let now = self.core.clock().now();
        let lease = match handover.first_lease {
            FirstLease::Shorter(first) => first.min(handover.ttl),
            FirstLease::Ttl | FirstLease::RenewedAtOnce => handover.ttl,
        };
        if !fits || validity::validity_end(handover.sent_at, lease) <= now {
            handover.give_back().await;
            return None;
        }
        if let Some((place, watched)) = self.place.take() {
            place.mark_released();
            drop(watched);
        }
        let mut served = std::mem::take(&mut handover.served);
        served.push(std::mem::replace(&mut self.token, handover.token.clone()));
        self.served.clone_from(&served);
        self.route = handover.route;
        // Armed until taken: a drop releases the giver's token, which
        // hands the lock to the next live waiter on the server.
        self.armed = true;
        Counters::bump(&self.core.counters.handovers);
        Counters::bump(&self.core.counters.handovers_in_process);
        metrics::handed_over(self.labels());
        let won = Won {
            fence: handover.fence,
            sent_at: handover.sent_at,
            granted_at: now,
            fence_basis: handover.fence_basis,
            first_lease: handover.first_lease,
            line: Line { behind, served }.known(),
        };
        handover.taken();
        Some(won)
    }

    /// Keeps the place the try sent at `sent_at` left its token holding
    /// (see [`Primitive::place`]), unless one is kept already: a lease the
    /// watchdog renews while the attempt waits.
    fn keep_place(&mut self, sent_at: Instant) {
        let kept = self.place.as_ref();
        if kept.is_some_and(|(lease, _)| lease.state() == LeaseState::Held) {
            return;
        }
        self.watch_place(sent_at, false);
    }

    /// Renews the place this attempt keeps at once, as a lease confirmed
    /// when it last was; false when it keeps none.
    fn renew_place_now(&mut self) -> bool {
        let Some((lease, _)) = self.place.as_ref() else {
            return false;
        };
        if lease.state() != LeaseState::Held {
            return false;
        }
        let confirmed = lease.confirmed_at();
        // The old watch ends as the new one starts: one renewal schedule.
        self.watch_place(confirmed, true);
        true
    }

    /// Watches a place whose token's request was sent at `sent_at`,
    /// renewed `at_once` or after a renewal interval, in place of any
    /// place kept before.
    fn watch_place(&mut self, sent_at: Instant, at_once: bool) {
        let Some(place) = self.primitive.place() else {
            return;
        };
        let core = &self.core;
        let lease = Arc::new(Lease::new(Grant {
            id: core.next_lease_id(),
            keys: self.primitive.keys().clone(),
            also: Vec::new(),
            leased: place.leased,
            role: Role::Place,
            token: self.token.clone(),
            fence: 0,
            ttl: place.ttl,
            route: Route::pooled(self.route.conn),
            sent_at,
            granted_at: sent_at,
            fence_basis: FenceBasis::issued_now(0),
            clock: core.clock(),
            max_hold: None,
            labels: self.labels(),
            first_lease: if at_once {
                FirstLease::RenewedAtOnce
            } else {
                FirstLease::Ttl
            },
        }));
        let watched = core.watchdog.watch(lease.clone(), true, sent_at, None);
        self.place = Some((lease, watched));
    }

    /// Gives back a grant that came too late to use (on the try's route,
    /// so after it); the attempt stays armed if that fails. On Redlock it
    /// stays armed anyway: the try's calls may still be running on slow
    /// masters (a script's second step) and land after this release, so an
    /// attempt that ends now must clean up after them (see `Drop`).
    async fn give_back(&mut self) {
        // Not after the try's calls: they belong to this attempt, which
        // stays armed for them (see below).
        let released = self
            .primitive
            .release(&self.core.backend, self.route, &self.token, 0, None);
        if released.await.is_ok() && matches!(self.core.backend, Backend::Node(_)) {
            self.armed = false;
        }
    }

    /// Sleeps a backoff step, or fails with a timeout when no wait is left.
    async fn pause_or_time_out(
        &mut self,
        left: Duration,
        started: Instant,
    ) -> Result<(), LockError> {
        if left.is_zero() {
            return Err(self.timeout(started));
        }
        tokio::time::sleep(self.backoff.next_pause().min(left)).await;
        Ok(())
    }

    /// The metric labels of what this attempt takes.
    fn labels(&self) -> metrics::Labels {
        metrics::Labels {
            template: self.plan.template,
            primitive: P::NAME,
        }
    }

    /// Time since `instant`, on the locker's clock.
    fn since(&self, instant: Instant) -> Duration {
        self.core.clock().now().saturating_duration_since(instant)
    }

    fn timeout(&self, started: Instant) -> LockError {
        LockError::Timeout {
            key: self.primitive.keys().name().to_owned(),
            waited: self.since(started),
        }
    }

    /// The lock is ours, granted by the server or `passed` by the last
    /// holder in this locker's line.
    fn grant(&mut self, won: Won, started: Instant, contended: bool, passed: bool) -> Hold<P> {
        let Won {
            fence,
            sent_at,
            granted_at,
            fence_basis,
            first_lease,
            line,
        } = won;
        self.armed = false;
        // The grant took the place, if it kept one.
        self.place = None;
        let core = &self.core;
        let counters = &core.counters;
        Counters::bump(&counters.acquired);
        if contended {
            Counters::bump(&counters.contended);
        }
        let lease = Arc::new(Lease::new(Grant {
            id: core.next_lease_id(),
            keys: self.primitive.keys().clone(),
            also: self.primitive.also().to_vec(),
            leased: self.primitive.leased(),
            role: Role::Hold,
            // Not needed here any more: the attempt is disarmed.
            token: self.token.take(),
            fence,
            ttl: self.plan.ttl,
            route: Route::pooled(self.route.conn),
            sent_at,
            granted_at,
            fence_basis,
            clock: core.clock(),
            max_hold: self.plan.max_hold,
            labels: self.labels(),
            first_lease,
        }));
        if let Some(turn) = self.turn.as_mut() {
            turn.granted(passed || self.gave_back_pass);
        }
        let watched =
            core.watchdog
                .watch(lease.clone(), self.plan.renews, sent_at, self.turn.take());
        tracing::debug!(
            key = self.primitive.keys().name(),
            fence,
            waited_ms = u64::try_from(self.since(started).as_millis()).unwrap_or(u64::MAX),
            passed,
            "lock acquired"
        );
        Hold::new(
            lease,
            core.clone(),
            self.primitive.clone(),
            self.landing.take(),
            watched,
            self.plan.renews,
            line,
        )
    }
}

impl<P: Primitive> Attempt<P> {
    /// Gives up the place its token keeps, if any: not renewed any more,
    /// and left on the server at once, in the background (rather than at
    /// the end of its lease).
    fn leave_place(&mut self) {
        let Some((lease, watched)) = self.place.take() else {
            return;
        };
        lease.mark_released();
        drop(watched);
        let (backend, route, token) = (self.core.backend.clone(), self.route, self.token.clone());
        let primitive = self.primitive.clone();
        self.core.host.detach(self.core.config.two_calls_bound(), async move {
            if let Err(err) = primitive.leave_place(&backend, route, &token).await {
                tracing::debug!(error = %err, "leaving a waiting place failed; its lease will run out");
            }
        });
    }
}

impl<P: Primitive> Drop for Attempt<P> {
    fn drop(&mut self) {
        self.leave_place();
        if !self.armed {
            return;
        }
        // After every call this attempt left running has ended, on the
        // same route: the release cannot overtake the grant it undoes.
        let landing = self.landing.take();
        let backend = self.core.backend.clone();
        let (route, primitive, token) = (self.route, self.primitive.clone(), self.token.clone());
        let served = std::mem::take(&mut self.served);
        let name = primitive.keys().name().to_owned();
        let bound = self.core.config.two_calls_bound();
        self.core.host.detach(bound, async move {
            let released = if served.is_empty() {
                primitive.release(&backend, route, &token, 0, landing.as_ref()).await
            } else {
                primitive.release_served(&backend, route, &token, 0, &served).await
            };
            if let Err(err) = released {
                tracing::debug!(key = name, error = %err, "clean-up of an unfinished acquire failed; the lease will run out");
            }
        });
    }
}

/// When a waiter that heard a release hand the lock to another waiter
/// (see [`Subscription::handed_on`]) tries next, on tokio's timer: once
/// the new owner's first lease, a place's (`place_ttl`), may have ended
/// unreleased. None when it heard none, keeps no place, or that time has
/// come.
fn handed_until(
    subscription: &Subscription,
    place_ttl: Option<Duration>,
    clock: Clock,
) -> Option<tokio::time::Instant> {
    let (at, ttl) = subscription.handed_on().zip(place_ttl)?;
    let until = at + ttl + Duration::from_millis(1);
    let left = until.checked_duration_since(clock.now())?;
    Some(tokio::time::Instant::now() + left)
}

/// What a won lock starts from (see [`Grant`]).
struct Won {
    fence: u64,
    /// When the request its validity counts from was sent.
    sent_at: Instant,
    /// When this holder's hold began.
    granted_at: Instant,
    fence_basis: FenceBasis,
    /// Its first lease on the server (shorter than its ttl for a lock
    /// handed over by a release).
    first_lease: FirstLease,
    /// What it knows of the server's line, when a release handed it over
    /// (see [`Line`]); boxed, so that a grant moves small.
    line: Option<Box<Line>>,
}

impl Won {
    /// A grant the server just answered to a request sent at `sent_at`.
    fn from_server(fence: u64, sent_at: Instant) -> Self {
        Self {
            fence,
            sent_at,
            granted_at: sent_at,
            fence_basis: FenceBasis::issued_now(fence),
            first_lease: FirstLease::Ttl,
            line: None,
        }
    }
}

/// `future`, or None when `deadline` came first (no deadline: never).
///
/// A plain function, not an `async fn`: that would hold `future` twice (as
/// its argument and inside the timeout), and an attempt's future is large
/// enough for each copy to cost at every move.
fn within<F: std::future::Future>(
    deadline: Option<tokio::time::Instant>,
    future: F,
) -> impl std::future::Future<Output = Option<F::Output>> {
    use futures_util::FutureExt;
    use futures_util::future::Either;
    match deadline {
        Some(deadline) => Either::Left(tokio::time::timeout_at(deadline, future).map(Result::ok)),
        None => Either::Right(future.map(Some)),
    }
}
