//! The exclusive lock's Lua scripts, in one place. Each runs atomically on
//! the server; every check-then-act on a lock key (is it mine? then delete
//! it) is one script, or a lease that expires between the check and the act
//! would let us delete another owner's lock.
//!
//! # The lock key
//! One key per lock, `<prefix>{<name>}`, whose value is the owner token
//! (`<holder label>/<secret>`, see [`crate::owner`]) and whose expiry is
//! the lease. A caller that found the lock busy (a waiter, or a caller
//! that tries once) appends [`WAITED`](crate::owner::WAITED) to the value,
//! and only a release of a marked value publishes a release message: an
//! uncontended lock costs the server no `PUBLISH`, and every waiter that
//! sleeps on the channel marked the owner it waits for (a new owner's
//! value starts unmarked, and the waiter's next busy try marks it). The
//! mark also tells the owner's locker that someone outside it wants the
//! lock, so that its line of tasks lets it go after its share (see
//! [`crate::engine::handover`]).
//! Nothing else is stored: once a lock is released, or its lease has
//! passed, nothing of it is left on the server, however many distinct
//! locks a service takes. One key also means every script touches one key
//! only, so on a cluster a call is never refused with `TRYAGAIN` while its
//! slot migrates.
//!
//! # Fences from the server's clock
//! The fence of a grant is the server's clock while the grant holds, in
//! microseconds since the Unix epoch (`TIME`, read in the same script as
//! the `SET NX`, or just after it, see [`super::plain`]). Two grants of
//! one key are always at least a release or an expiry apart, which takes
//! the server longer than a microsecond, so each later grant reads a later
//! clock. A [`PASS`] from one owner straight to the next has no release in
//! between, but it comes a client round trip after the giver's grant, so
//! it reads a later clock too; it also answers at least the giver's fence
//! plus one, so even a clock that stepped back cannot repeat a fence from
//! owner to owner. A pass in process (no script, see [`crate::engine::handover`])
//! answers the giver's fence plus one only while that stays at most the
//! clock, so the next grant by the server still reads a higher one. Fences
//! rise per key with no counter to keep, lose, evict or restart, as long
//! as the server's clock does not step back by more than the time between
//! two grants of the key (less the few µs a run of at most 8 passes in
//! process adds). The
//! value is about 1.8e15: exact in Lua's doubles (below 2^53) and in a
//! `u64`. It is built from the decimal digits `TIME` gave (never through
//! Lua's `tostring`, which would print `1.8e+15`).
//!
//! A retry with the same token (after a lost reply) that finds the lock
//! still ours is answered with the clock *now*: later than the grant the
//! lost reply carried, and earlier than any later owner's grant, which
//! must wait for this owner's lease to end. So the fence is not stored:
//! the holder knows it ([`crate::LockGuard::fence`]), and the plain
//! commands of [`super::plain`] can take a lock without a script.
//!
//! # Redlock
//! Masters have clocks of their own, so a fence taken from one master's
//! clock says nothing about another's. Redlock keeps one counter per
//! master instead (the `*_COUNTED` scripts), shared by every lock of the
//! locker, seeded from that master's clock when it is missing (a new or
//! emptied master) and raised to each fence handed out (see
//! [`super::quorum`]). Its lock values are the token alone, as on one
//! node: a free lock is taken with plain commands there too (`SET NX`,
//! `INCR` of the counter, `GET` of the up mark), and a retry that finds
//! the lock ours answers a fresh increment, for the reason the clock now
//! serves one node.
//!
//! # Twins
//! Each script that runs on one node has an in-memory twin in
//! [`super::twins`], for lockers on the in-memory store: the same steps
//! with the same answers. Redlock's scripts have none (the in-memory store
//! is one node).

use std::sync::LazyLock;

use super::twins;
use crate::backend::script::LuaScript;

pub(crate) use crate::engine::renewal::SEEDED;

/// Takes the lock, or reports how long the current owner still holds it
/// (and marks it: someone else wants it, a waiter or a caller that tries
/// once; the owner's locker then lets it go after its share, see
/// [`crate::engine::handover`]).
///
/// `KEYS[1]` lock; `ARGV[1]` owner token, `ARGV[2]` ttl in ms, `ARGV[3]`
/// the caller's line (its locker's id when it takes turns with that
/// locker's other tasks, else empty).
/// Returns `{1, fence}` when the caller owns the lock, `{0, pttl}` otherwise.
/// A retry with the same token after a lost reply finds the lock already
/// ours and only refreshes its lease, so it succeeds instead of reporting
/// busy (with the clock now as its fence: see the module docs).
///
/// A lock another line let go of for the callers outside it (see
/// [`YIELD`]) is free to anyone but that line: the taker's value is
/// marked, so that its release tells the line, which waits.
pub(crate) static ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("acquire.lua"), twins::acquire));

/// Lets go of a held lock for the callers outside the holder's locker
/// (see [`crate::engine::handover`]): the key keeps, for a short grace, a mark
/// that only the holder's line treats as busy, and the release is
/// announced. Anyone else takes it as a free lock ([`ACQUIRE`]); if
/// nobody does, it ends with the grace and nothing is left.
///
/// `KEYS[1]` lock; `ARGV[1]` owner token, `ARGV[2]` the holder's line
/// (its locker's id), `ARGV[3]` the grace in ms, `ARGV[4]` release
/// channel, `ARGV[5]` the publish command (as [`RELEASE`]). The message is
/// the server's clock in µs, then `:` and the line, so that the line's
/// own listener knows it for its own. Returns 1 when the lock was ours
/// (now let go of), 0 when it was gone or someone else's.
pub(crate) static YIELD: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("yield.lua"), twins::yield_to_others));

/// Deletes the lock only if the caller still owns it, and tells waiters
/// when one marked it.
///
/// `KEYS[1]` lock; `ARGV[1]` owner token, `ARGV[2]` release channel,
/// `ARGV[3]` the publish command (`PUBLISH`, or `SPUBLISH` on a cluster,
/// which reaches only the shard that owns the channel). The channel is an
/// argument, not a key: a declared key that does not exist on a migrating
/// slot's source node makes Redis answer `TRYAGAIN`, and a channel never
/// exists as a key. A server without `SPUBLISH` (before Redis 7) gets a
/// plain `PUBLISH`. The value is ours when it is the token, marked or not.
/// The message is the server's clock at the delete, in µs: a Redlock
/// waiter compares it with when that master last answered it busy (see
/// `crate::engine::wait::Sightings`). Returns 1 when deleted, 0 when the lock was
/// gone or someone else's.
pub(crate) static RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("release.lua"), twins::release));

/// Hands a held lock straight to a new owner token: the next task of the
/// holder's locker waiting for the same key (see [`crate::engine::handover`]). The
/// key never becomes free, so nobody else can take it in between, and the
/// new owner's fence is the clock now, as for any grant.
///
/// `KEYS[1]` lock; `ARGV[1]` the giver's token, `ARGV[2]` the taker's,
/// `ARGV[3]` the taker's ttl in ms, `ARGV[4]` the giver's fence.
/// Returns `{0, 0}` when the lock is no longer the giver's (nothing
/// changed), else `{1, fence}`, or `{2, fence}` when a waiter had marked it
/// (the mark stays, so the taker's release announces itself). The fence is
/// above the giver's even if both grants read the same microsecond.
pub(crate) static PASS: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("pass.lua"), twins::pass));

/// A broken release, for the `sabotage` feature only: deletes the key
/// whoever holds it.
#[cfg(feature = "sabotage")]
pub(crate) static BLIND_RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("blind_release.lua"), twins::blind_release));

/// A broken pass, for the `sabotage` feature only: hands the lock to the
/// taker whoever holds it (the same defect as [`BLIND_RELEASE`], on the
/// path a hand-over takes).
#[cfg(feature = "sabotage")]
pub(crate) static BLIND_PASS: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("blind_pass.lua"), twins::blind_pass));

/// What an operator sees of a lock: its value and remaining lease.
///
/// `KEYS[1]` lock. Returns `{value, pttl}`, `{'', -2}` when it is free.
/// The value carries the owner's token; the caller keeps only its public
/// parts (see [`crate::owner::stored_value`]).
pub(crate) static INSPECT: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("inspect.lua"), twins::inspect));

/// Deletes the lock whoever holds it, and tells waiters: for operators
/// (`Locker::force_unlock`). The holder learns of it at its next renewal.
///
/// `KEYS[1]` lock; `ARGV[1]` release channel, `ARGV[2]` the publish
/// command (as [`RELEASE`], with the same message). Returns 1 when
/// something was deleted.
pub(crate) static FORCE_RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::with_twin(include_str!("force_release.lua"), twins::force_release));

/// Redlock's acquire on one master: [`ACQUIRE`] with the fence from the
/// master's counter, and whether this master is still in its restart
/// quarantine. The plain commands of `super::plain` do the same for a
/// free lock on a master whose counter and up mark are in place; this
/// script runs when they are not, and when the lock was there.
///
/// `KEYS[1]` lock, `KEYS[2]` the master's fence counter, `KEYS[3]` its
/// up mark; `ARGV[1]` owner token, `ARGV[2]` ttl in ms, `ARGV[3]` the
/// restart quarantine in ms. A busy lock is marked, as by [`ACQUIRE`].
/// Returns `{1, fence, left}` when granted, where
/// `left` is the quarantine still to run in ms (0 once passed), or
/// `{0, pttl, now}` when busy, `now` the master's clock in µs (compared
/// with the release messages it sends later). A counter below [`SEEDED`]
/// (missing, or counted up from nothing by plain `INCR`s) is first set to
/// the master's clock (µs), so that a master that lost its data does not
/// start again from 1. A retry that finds the lock ours is answered with a fresh
/// increment, as one node answers with its clock now: above the grant
/// whose reply was lost, below any later owner's.
///
/// A master up for less than the quarantine may have restarted empty and
/// forgotten locks whose leases still run on the other masters, so its
/// grant is *fresh*: the caller counts it only when it cannot complete a
/// second majority (see `votes.rs`). Uptime comes from `INFO server`, read
/// once per master start: the up mark records the outcome, `<q>` once the
/// quarantine `q` has passed (one `GET` per acquisition from then on), or
/// `fresh:<q>` expiring when it will have (a `PTTL` more). A restart without
/// persistence loses the mark with the locks, and the uptime is read again.
/// A master whose uptime is unknown is trusted, and so is one restarted
/// from a snapshot older than its last lock, which brings the mark back
/// without that lock (the README tells operators to avoid that).
/// The quarantine's bookkeeping is the engine's (`quarantine.lua`,
/// prepended), shared with every primitive offered on Redlock.
pub(crate) static ACQUIRE_COUNTED: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(concat!(
        include_str!("../../../engine/quarantine.lua"),
        include_str!("acquire_counted.lua")
    ))
});

/// Redlock, after a majority granted: confirms the lock is still ours on
/// this master and raises its counter to the fence handed out (the highest
/// of the majority's), so that any later majority, which shares a master
/// with this one, counts on from there. A counter below [`SEEDED`] (the
/// master came back empty since it granted) is first seeded from the
/// master's clock, as [`ACQUIRE_COUNTED`] seeds it: raised to this one
/// fence alone, it would stay below others handed out for other keys.
///
/// `KEYS[1]` lock, `KEYS[2]` counter; `ARGV[1]` owner token, `ARGV[2]` fence.
/// Returns 1 when the lock is ours (and the counter is now at least the
/// fence), 0 when it is not.
pub(crate) static RAISE_COUNTER: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("raise_counter.lua")));

/// Every script, for loading on a fresh master.
pub(crate) fn all() -> &'static [&'static LuaScript] {
    static ALL: LazyLock<[&'static LuaScript; 6]> = LazyLock::new(|| {
        [
            &*ACQUIRE,
            &*RELEASE,
            &*YIELD,
            &*PASS,
            &*ACQUIRE_COUNTED,
            &*RAISE_COUNTER,
        ]
    });
    &*ALL
}
