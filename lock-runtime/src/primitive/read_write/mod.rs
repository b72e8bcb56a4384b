//! The read/write lock: many readers at once, or one writer.
//!
//! - Every reader holds a lease of its own, a member of a sorted set
//!   scored by its deadline on the server's clock ([`scripts`]), which the
//!   watchdog renews in its batched rounds like any lease and reports lost
//!   like a lock. A reader that dies frees its share at its own deadline,
//!   whatever the other readers renew.
//! - Writer preference: a writer that waits keeps an *intent*, a short
//!   lease of its own ([`INTENT_LEASE`]) that its attempt renews while it
//!   waits and that turns new readers away. A writer behind a stream of
//!   readers gets in once the reads running when it came have ended; a
//!   writer that dies or gives up stops blocking readers within that
//!   lease (at once when it can say so).
//! - Readers are not starved either: a reader that waits keeps a place (a
//!   short lease, as an intent), and a writer's release while readers wait
//!   opens the readers' turn: every waiting reader gets in before the next
//!   writer (or until the turn's lease, [`INTENT_LEASE`], runs out).
//! - Wake-ups by message on two channels: a writer's release (or a writer
//!   giving up) wakes every waiting reader at once, and the last reader
//!   out wakes a waiting writer.
//! - Readers take no turn in their locker's line (they all try, and all
//!   may hold); writers queue in it as exclusive owners do. Nothing is
//!   passed in process: each hold is granted by the server.
//! - A write turns into a read in one step ([`ReadWrite::downgrade`]); a
//!   read never turns into a write (two readers upgrading would wait for
//!   each other forever).
//! - On Redlock, a read and a write each need a majority of masters
//!   ([`quorum`]): a reader's majority and a writer's share a master,
//!   whose script refuses the later one.

pub(crate) mod guard;
mod quorum;
pub(crate) mod request;
pub(crate) mod scripts;
mod tasks;
mod twins;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::flights::Landing;
use crate::backend::script::{LuaScript, ScriptCall};
use crate::backend::{Backend, Route, slot_in_flux};
use crate::engine::handover::GiveBack;
use crate::engine::lease::Leased;
use crate::engine::primitive::{AcquireReply, Place, Primitive, Try};
use crate::engine::renewal::LeaseKind;
use crate::error::LockError;
use crate::keys::LockKeys;
use crate::owner::OwnerToken;
use crate::primitive::shared::{GIVE_BACK_NOTHING, ms};

/// The longest a waiting writer's intent (or a waiting reader's place)
/// lasts between two renewals: a writer that dies while it waits turns
/// readers away at most this long. Also the longest a readers' turn keeps
/// writers out.
pub(crate) const INTENT_LEASE: Duration = Duration::from_secs(2);

/// What follows the resource's lock key in each of its keys.
const WRITER: &str = ":rw:w";
const READERS: &str = ":rw:r";
const INTENTS: &str = ":rw:i";
const WAITING: &str = ":rw:q";
const TURN: &str = ":rw:t";
const RELEASED: &str = ":released";

/// Which side of the lock a request takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Shared with other readers.
    Read,
    /// Alone.
    Write,
}

/// The read/write lock of one resource, for one request.
#[derive(Clone)]
pub(crate) struct ReadWrite {
    keys: LockKeys,
    mode: Mode,
    names: Arc<Names>,
    /// How long a waiting writer's intent lasts: [`INTENT_LEASE`], or the
    /// ttl if shorter.
    intent_lease: Duration,
}

/// Its keys and channels on the server (see [`scripts`]).
struct Names {
    writer: String,
    readers: String,
    intents: String,
    waiting: String,
    turn: String,
    read_channel: String,
    write_channel: String,
}

impl ReadWrite {
    /// The `mode` side of the read/write lock of `keys`, for leases of
    /// `ttl`.
    pub(crate) fn new(keys: LockKeys, ttl: Duration, mode: Mode) -> Self {
        let base = keys.lock();
        let names = Names {
            writer: format!("{base}{WRITER}"),
            readers: format!("{base}{READERS}"),
            intents: format!("{base}{INTENTS}"),
            waiting: format!("{base}{WAITING}"),
            turn: format!("{base}{TURN}"),
            read_channel: format!("{base}{READERS}{RELEASED}"),
            write_channel: format!("{base}{WRITER}{RELEASED}"),
        };
        Self {
            keys,
            mode,
            names: Arc::new(names),
            intent_lease: INTENT_LEASE.min(ttl),
        }
    }

    /// The same lock, taken on the other side `mode`.
    pub(crate) fn as_mode(&self, mode: Mode) -> Self {
        Self {
            mode,
            ..self.clone()
        }
    }

    fn call(&self, script: &'static LuaScript) -> ScriptCall {
        let mut call = script.call();
        call.key(&self.names.writer)
            .key(&self.names.readers)
            .key(&self.names.intents)
            .key(&self.names.waiting)
            .key(&self.names.turn);
        call
    }

    /// Turns the write `token` holds (with `fence`) into a read with a
    /// lease of `ttl`, in one step: the read's fence, or None when the
    /// write was no longer the token's.
    pub(crate) async fn downgrade(
        &self,
        backend: &Backend,
        route: Route,
        token: &OwnerToken,
        fence: u64,
        ttl: Duration,
    ) -> Result<Option<u64>, LockError> {
        let publish = match backend {
            Backend::Node(node) => node.publish_command(),
            Backend::Redlock(_) => "PUBLISH",
        };
        let mut call = self.call(&scripts::DOWNGRADE);
        call.arg(token.as_str())
            .arg(ms(ttl))
            .arg(fence)
            .arg(&self.names.read_channel)
            .arg(publish);
        let node = match backend {
            Backend::Node(node) => node,
            Backend::Redlock(masters) => {
                return quorum::downgrade(masters, route, self.keys.name(), call).await;
            }
        };
        let answer: Vec<i64> = node.run(route, &call).await?;
        Ok(match *answer {
            [1, fence, ..] => Some(u64::try_from(fence).unwrap_or(0)),
            _ => None,
        })
    }

    /// The release script's call: lets go of what `token` holds, as
    /// `what` says (`r` a read, `w` the write, `?` whatever it may hold: a
    /// try's clean-up, a waiting writer's intent), and wakes who can
    /// proceed, published with `publish`.
    fn release_call(&self, token: &OwnerToken, what: &str, publish: &str) -> ScriptCall {
        let mut call = self.call(&scripts::RELEASE);
        call.arg(token.as_str())
            .arg(what)
            .arg(&self.names.read_channel)
            .arg(&self.names.write_channel)
            .arg(publish)
            .arg(ms(self.intent_lease));
        call
    }

    /// Lets go of what `token` holds, as `what` says (see
    /// [`Self::release_call`]); on Redlock on every master, each after
    /// `landing` landed there.
    async fn let_go(
        &self,
        backend: &Backend,
        route: Route,
        token: &OwnerToken,
        what: &str,
        landing: Option<&Landing>,
    ) -> Result<bool, LockError> {
        match backend {
            Backend::Node(node) => {
                let call = self.release_call(token, what, node.publish_command());
                let released: i64 = node.run(route, &call).await?;
                Ok(released == 1)
            }
            Backend::Redlock(masters) => {
                let call = self.release_call(token, what, "PUBLISH");
                quorum::let_go(masters, route, call, landing).await
            }
        }
    }

    /// The call of one try at taking its side for `attempt`.
    fn try_call(&self, attempt: &Try<'_>) -> ScriptCall {
        match self.mode {
            Mode::Read => {
                let mut call = self.call(&scripts::READ);
                call.arg(attempt.token.as_str())
                    .arg(ms(attempt.ttl))
                    .arg(ms(self.intent_lease))
                    .arg(if attempt.waits { "1" } else { "0" });
                call
            }
            Mode::Write => {
                let mut call = self.call(&scripts::WRITE);
                call.arg(attempt.token.as_str())
                    .arg(ms(attempt.ttl))
                    .arg(ms(self.intent_lease))
                    .arg(if attempt.waits { "1" } else { "0" });
                call
            }
        }
    }
}

/// Reads a try's `{1, fence}`, `{0, pttl}` or `{0, pttl, intent kept}`.
fn read_acquire(answer: &[i64]) -> AcquireReply {
    match *answer {
        [1, fence, ..] => AcquireReply::Acquired {
            fence: u64::try_from(fence).unwrap_or(0),
        },
        [_, pttl, ..] => AcquireReply::Busy {
            pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
            sightings: None,
            place: answer.get(2) == Some(&1),
        },
        _ => AcquireReply::Busy {
            pttl: None,
            sightings: None,
            place: false,
        },
    }
}

impl Primitive for ReadWrite {
    const NAME: &'static str = "read_write";

    const GIVE_BACK: GiveBack = GIVE_BACK_NOTHING;

    const PASSES: bool = false;

    fn keys(&self) -> &LockKeys {
        &self.keys
    }

    fn leased(&self) -> Leased {
        match self.mode {
            Mode::Read => Leased::one_holder(LeaseKind::Member, READERS),
            Mode::Write => Leased::one_holder(LeaseKind::Key, WRITER),
        }
    }

    fn line(&self) -> &str {
        match self.mode {
            Mode::Read => &self.names.readers,
            Mode::Write => &self.names.writer,
        }
    }

    fn channel(&self) -> &str {
        match self.mode {
            Mode::Read => &self.names.read_channel,
            Mode::Write => &self.names.write_channel,
        }
    }

    fn takes_turn(&self) -> bool {
        self.mode == Mode::Write
    }

    fn told_by(&self, backend: &Backend) -> usize {
        match backend {
            Backend::Node(_) => 1,
            Backend::Redlock(masters) => quorum::told_by(masters),
        }
    }

    fn place(&self) -> Option<Place> {
        let suffix = match self.mode {
            Mode::Read => WAITING,
            Mode::Write => INTENTS,
        };
        Some(Place {
            leased: Leased::one_holder(LeaseKind::Member, suffix),
            ttl: self.intent_lease,
        })
    }

    async fn try_acquire<'a>(
        &'a self,
        backend: &'a Backend,
        attempt: &'a Try<'a>,
    ) -> Result<AcquireReply, LockError> {
        let node = match backend {
            Backend::Node(node) => node,
            Backend::Redlock(masters) => return quorum::acquire(self, masters, attempt).await,
        };
        let call = self.try_call(attempt);
        let Some(ack) = attempt.replicas else {
            return match node.run::<Vec<i64>>(attempt.route, &call).await {
                Ok(answer) => Ok(read_acquire(&answer)),
                Err(err) if slot_in_flux(&err) => Ok(AcquireReply::Unknown),
                Err(err) => Err(err),
            };
        };
        // A grant too few replicas confirmed is let go of again (on the
        // same connection, after the WAIT) before the error.
        let (answer, acked) = node
            .run_then_wait::<Vec<i64>>(attempt.route, &call, ack)
            .await?;
        let reply = read_acquire(&answer);
        if !matches!(reply, AcquireReply::Acquired { .. }) || acked >= ack.replicas {
            return Ok(reply);
        }
        let blocking = Route {
            blocking: true,
            ..attempt.route
        };
        self.let_go(backend, blocking, attempt.token, "?", None)
            .await?;
        Err(LockError::NotReplicated {
            key: self.keys.name().to_owned(),
            acked,
            wanted: ack.replicas,
            timeout: ack.timeout,
        })
    }

    fn release<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
        fence: u64,
        landing: Option<&'a Landing>,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        // A hold knows its fence and its side; the clean-up of a try
        // (fence 0) may hold a grant or an intent.
        let what = match self.mode {
            _ if fence == 0 => "?",
            Mode::Read => "r",
            Mode::Write => "w",
        };
        self.let_go(backend, route, token, what, landing)
    }

    fn leave_place<'a>(
        &'a self,
        backend: &'a Backend,
        route: Route,
        token: &'a OwnerToken,
    ) -> impl Future<Output = Result<bool, LockError>> + Send + 'a {
        self.let_go(backend, route, token, "?", None)
    }
}
