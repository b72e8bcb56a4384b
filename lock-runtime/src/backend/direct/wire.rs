//! One TCP connection whose callers write their own requests.
//!
//! A multiplexed redis-rs connection hands every request to its driver
//! task, on the library's thread, which writes it: each call crosses to
//! that thread and back, two wake-ups of an idle thread per lock call.
//! Here a caller appends its request to the connection's outgoing bytes
//! and writes them itself, from its own thread; only the replies are read
//! on the library's thread, by a task that hands each to its caller. One
//! crossing per call instead of two.
//!
//! Requests and their answer slots are queued together under one lock, so
//! the wire's order is the slots' order. Callers that arrive together
//! share one write: the first one to find nobody writing yields once (the
//! others append meanwhile), then writes everything queued. A caller on
//! the library's thread never yields, and takes over a batch whose leader
//! yielded: background work never waits for a busy application runtime.
//! A caller whose waker holds wake-ups back learns of a yield from
//! [`polled_with_yields`]. A
//! write the socket cannot take at once, or a batch whose leader was
//! cancelled, is finished by a flusher task on the library's thread.
//!
//! The response timeout is the reader's, not each caller's: a request
//! carries its deadline, and one timer on the library's thread fails the
//! requests whose deadline passed. It is armed for the oldest request
//! waiting and, when it goes off, moved on to the next: while answers
//! flow it goes off about once per timeout, where a timer per call cost
//! the caller about a thousand instructions to arm and disarm.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use redis::Value;
use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio::sync::{Notify, oneshot};
use tokio::time::{Duration, Instant};

use super::reply;

thread_local! {
    /// Whether this thread runs the wires' reader tasks: the library's
    /// own, whose callers write at once, never yielding to lead a batch.
    static ON_LIBRARY_THREAD: Cell<bool> = const { Cell::new(false) };
    /// How many times a caller on this thread yielded to lead a batch.
    static YIELDS: Cell<u64> = const { Cell::new(0) };
}

/// Runs `poll` (polls of calls) and tells whether a call in it yielded to
/// lead a batch. For a caller whose waker holds wake-ups back until
/// several answers may be in (a Redlock round): such a call must be
/// polled again soon, whatever its waker does, or its batch (and the
/// requests of other callers in it) waits for the other answers.
pub(crate) fn polled_with_yields<R>(poll: impl FnOnce() -> R) -> (R, bool) {
    let before = YIELDS.with(Cell::get);
    let polled = poll();
    (polled, YIELDS.with(Cell::get) != before)
}

/// Runs `run` as if on the library's thread.
#[cfg(test)]
pub(super) fn as_on_library_thread<R>(run: impl FnOnce() -> R) -> R {
    let before = ON_LIBRARY_THREAD.with(|on| on.replace(true));
    let ran = run();
    ON_LIBRARY_THREAD.with(|on| on.set(before));
    ran
}

/// The largest write buffer a connection keeps between batches.
const KEPT_BUFFER: usize = 64 * 1024;

/// The replies a request waits for, answered in full or with the error
/// that broke the connection.
pub(super) type Answer = oneshot::Receiver<redis::RedisResult<Vec<Value>>>;

/// The connection, shared by its callers; dropping it closes the socket
/// (its tasks end, and so does their hold on it).
pub(super) struct Wire {
    shared: Arc<Shared>,
}

struct Shared {
    stream: TcpStream,
    /// Bound of a request's wait for its replies; `None` for a connection
    /// whose callers bound it (`WAIT` may rightly take as long as asked).
    response_timeout: Option<Duration>,
    queue: Mutex<Queue>,
    /// Set once the connection failed: no request is taken after it.
    broken: AtomicBool,
    /// Wakes the flusher: a batch to finish.
    flush: Notify,
    /// Wakes the reader: the handle is gone, or a request with a deadline
    /// came while its timer was not armed.
    attention: Notify,
    /// Set when the handle is gone (both tasks then end).
    closed: AtomicBool,
    /// Numbers each batch's leader, so that a leader back from its yield
    /// knows whether its batch was taken over.
    leaders: AtomicU64,
}

/// What is written and awaited, under one lock so that both keep one order.
struct Queue {
    outgoing: Vec<u8>,
    /// One slot per request written or queued, in wire order.
    slots: VecDeque<Slot>,
    writer: Writer,
    /// Why the connection failed, once it did.
    failure: Option<(io::ErrorKind, String)>,
    /// Whether the reader's timer is armed (or about to be) for a
    /// request's deadline.
    timer_armed: bool,
}

/// Who writes the queued bytes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    Nobody,
    /// The leader of a batch, numbered, yielding before it writes.
    Leader(u64),
    /// A caller in the middle of a write.
    Caller,
    /// The flusher task.
    Flusher,
}

/// Where one request's replies go.
struct Slot {
    /// Replies read and dropped first (none for the lock's commands).
    skip: usize,
    take: usize,
    replies: Vec<Value>,
    /// When the request is answered with a timeout if its replies are not
    /// all in.
    deadline: Option<Instant>,
    /// Taken when answered: a request that timed out keeps its place, to
    /// take its replies when they come.
    answer: Option<Sender>,
}

/// Where a request's answer is sent.
type Sender = oneshot::Sender<redis::RedisResult<Vec<Value>>>;

impl Wire {
    /// Starts the reader and the flusher of `stream` on `runtime` (the
    /// library's); each request waits at most `response_timeout` for its
    /// replies.
    pub(super) fn start(
        stream: TcpStream,
        runtime: &Handle,
        response_timeout: Option<Duration>,
    ) -> Self {
        let shared = Arc::new(Shared {
            stream,
            response_timeout,
            queue: Mutex::new(Queue {
                outgoing: Vec::new(),
                slots: VecDeque::new(),
                writer: Writer::Nobody,
                failure: None,
                timer_armed: false,
            }),
            broken: AtomicBool::new(false),
            flush: Notify::new(),
            attention: Notify::new(),
            closed: AtomicBool::new(false),
            leaders: AtomicU64::new(0),
        });
        runtime.spawn(read_replies(shared.clone()));
        runtime.spawn(flush(shared.clone()));
        Self { shared }
    }

    /// Whether the connection failed (a new one is needed).
    pub(super) fn is_broken(&self) -> bool {
        self.shared.broken.load(Ordering::Acquire)
    }

    /// Sends the request `write` appends to the outgoing bytes (one or
    /// more whole commands) and waits for its replies, within the response
    /// timeout: `skip` dropped, then `take` returned.
    pub(super) async fn request(
        &self,
        write: impl FnOnce(&mut Vec<u8>),
        skip: usize,
        take: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        if skip + take == 0 {
            // Nothing to wait for: an empty pipeline.
            return Ok(Vec::new());
        }
        let answer = self.send(write, skip, take).await?;
        match answer.await {
            Ok(replies) => replies,
            // The connection went away with its slots unanswered.
            Err(_) => Err(closed_error()),
        }
    }

    /// Queues the request `write` appends and its slot, and writes (or has
    /// written) the queue; returns where its replies will arrive.
    async fn send(
        &self,
        write: impl FnOnce(&mut Vec<u8>),
        skip: usize,
        take: usize,
    ) -> redis::RedisResult<Answer> {
        let shared = &self.shared;
        let (sender, answer) = oneshot::channel();
        let at_once = ON_LIBRARY_THREAD.with(Cell::get);
        let mut arm = false;
        let lead = {
            let mut queue = shared.lock();
            if let Some((kind, why)) = &queue.failure {
                return Err(io::Error::new(*kind, why.clone()).into());
            }
            // Read under the lock: deadlines rise in wire order.
            let deadline = shared.response_timeout.map(|bound| Instant::now() + bound);
            write(&mut queue.outgoing);
            queue.slots.push_back(Slot {
                skip,
                take,
                replies: Vec::with_capacity(take),
                deadline,
                answer: Some(sender),
            });
            if deadline.is_some() && !queue.timer_armed {
                queue.timer_armed = true;
                arm = true;
            }
            match queue.writer {
                Writer::Nobody | Writer::Leader(_) if at_once => {
                    queue.writer = Writer::Caller;
                    Lead::Now
                }
                Writer::Nobody => {
                    let number = shared.leaders.fetch_add(1, Ordering::Relaxed);
                    queue.writer = Writer::Leader(number);
                    Lead::AfterYield(number)
                }
                Writer::Leader(_) | Writer::Caller | Writer::Flusher => Lead::No,
            }
        };
        if arm {
            shared.attention.notify_one();
        }
        match lead {
            Lead::No => {}
            Lead::Now => shared.write_queued(),
            Lead::AfterYield(number) => {
                let leading = Leading { shared, number };
                YIELDS.with(|yields| yields.set(yields.get().wrapping_add(1)));
                tokio::task::yield_now().await;
                // Back from the yield: still this batch's leader, unless a
                // caller on the library's thread took it over.
                std::mem::forget(leading);
                let still_leading = {
                    let mut queue = shared.lock();
                    let mine = queue.writer == Writer::Leader(number);
                    if mine {
                        queue.writer = Writer::Caller;
                    }
                    mine
                };
                if still_leading {
                    shared.write_queued();
                }
            }
        }
        Ok(answer)
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        // Stored permits: a task not waiting yet sees it at its next wait.
        self.shared.attention.notify_one();
        self.shared.flush.notify_one();
    }
}

/// What a caller does after queueing its request.
enum Lead {
    /// Someone else writes it.
    No,
    /// It writes the queue at once.
    Now,
    /// It leads the batch numbered so: yields once, then writes.
    AfterYield(u64),
}

/// A leader yielding: if its future is dropped there, the flusher writes
/// its batch.
struct Leading<'a> {
    shared: &'a Shared,
    number: u64,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let mut queue = self.shared.lock();
        if queue.writer == Writer::Leader(self.number) {
            queue.writer = Writer::Flusher;
            drop(queue);
            self.shared.flush.notify_one();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue's state is whole between statements: a panic elsewhere
        // leaves nothing half-done in it.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the queue as the writer (a caller), until it is empty; hands
    /// what the socket cannot take now to the flusher.
    fn write_queued(&self) {
        match self.write_until_empty(Writer::Caller) {
            Written::All | Written::Failed => {}
            Written::Blocked => self.flush.notify_one(),
        }
    }

    /// Writes queued bytes until none are left (then nobody writes), the
    /// socket is full (the flusher is then the writer) or it failed.
    fn write_until_empty(&self, writer: Writer) -> Written {
        let mut batch = Vec::new();
        loop {
            {
                let mut queue = self.lock();
                debug_assert_eq!(queue.writer, writer);
                if queue.failure.is_some() {
                    return Written::Failed;
                }
                if queue.outgoing.is_empty() {
                    queue.writer = Writer::Nobody;
                    // The written batch's buffer takes the next requests:
                    // no allocation per batch (unless a large one grew it).
                    if queue.outgoing.capacity() < batch.capacity()
                        && batch.capacity() <= KEPT_BUFFER
                    {
                        batch.clear();
                        std::mem::swap(&mut batch, &mut queue.outgoing);
                    }
                    return Written::All;
                }
                batch.clear();
                std::mem::swap(&mut batch, &mut queue.outgoing);
            }
            let mut written = 0;
            while written < batch.len() {
                match self.stream.try_write(&batch[written..]) {
                    Ok(0) => {
                        self.fail(io::ErrorKind::WriteZero, "the connection took no bytes");
                        return Written::Failed;
                    }
                    Ok(count) => written += count,
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                        let mut queue = self.lock();
                        let mut rest = batch.split_off(written);
                        rest.extend_from_slice(&queue.outgoing);
                        queue.outgoing = rest;
                        queue.writer = Writer::Flusher;
                        return Written::Blocked;
                    }
                    Err(err) => {
                        self.fail(err.kind(), &format!("writing to Redis: {err}"));
                        return Written::Failed;
                    }
                }
            }
        }
    }

    /// Fails the connection: every request waiting, and every later one,
    /// gets `kind`'s error.
    fn fail(&self, kind: io::ErrorKind, why: &str) {
        self.broken.store(true, Ordering::Release);
        let slots = {
            let mut queue = self.lock();
            if queue.failure.is_none() {
                queue.failure = Some((kind, why.to_owned()));
            }
            queue.outgoing = Vec::new();
            std::mem::take(&mut queue.slots)
        };
        for answer in slots.into_iter().filter_map(|slot| slot.answer) {
            let _ = answer.send(Err(io::Error::new(kind, why.to_owned()).into()));
        }
    }

    /// Answers every request whose deadline passed with a timeout, and
    /// tells when the next deadline is (None: no request has one; the
    /// timer is then disarmed until a request brings one).
    fn expire_overdue(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut overdue = Vec::new();
        let next = {
            let mut queue = self.lock();
            let mut next = None;
            // In wire order, so in order of their deadlines.
            for slot in queue.slots.iter_mut() {
                let Some(deadline) = slot.deadline else {
                    continue;
                };
                if deadline > now {
                    next = Some(deadline);
                    break;
                }
                overdue.extend(slot.answer.take());
            }
            queue.timer_armed = next.is_some();
            next
        };
        for answer in overdue {
            let _ = answer.send(Err(io::Error::from(io::ErrorKind::TimedOut).into()));
        }
        next
    }

    /// Hands `replies`, in order, to the slots waiting for them;
    /// `answered` is room for the answers, empty and kept between calls.
    fn deliver(
        &self,
        replies: &mut Vec<Value>,
        answered: &mut Vec<(Sender, Vec<Value>)>,
    ) -> Result<(), &'static str> {
        {
            let mut queue = self.lock();
            for reply in replies.drain(..) {
                let Some(slot) = queue.slots.front_mut() else {
                    return Err("a reply nobody asked for");
                };
                if slot.skip > 0 {
                    slot.skip -= 1;
                    continue;
                }
                slot.replies.push(reply);
                if slot.replies.len() == slot.take
                    && let Some(slot) = queue.slots.pop_front()
                    && let Some(answer) = slot.answer
                {
                    answered.push((answer, slot.replies));
                }
            }
        }
        // Outside the lock: a woken caller may queue its next request.
        for (answer, replies) in answered.drain(..) {
            let _ = answer.send(Ok(replies));
        }
        Ok(())
    }
}

/// How far a writer got.
enum Written {
    All,
    Blocked,
    Failed,
}

/// The reader task: reads replies until the connection fails or its
/// handle is dropped, and fails every slot left when it stops.
async fn read_replies(shared: Arc<Shared>) {
    ON_LIBRARY_THREAD.with(|on| on.set(true));
    let mut buffer = Vec::with_capacity(16 * 1024);
    let mut replies = Vec::new();
    let mut answered = Vec::new();
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    let mut timing = false;
    // Kept across turns, and made again only once it fired: a wait made
    // each turn costs a registration and a removal per read.
    let attention = shared.attention.notified();
    tokio::pin!(attention);
    let (kind, why) = loop {
        if shared.closed.load(Ordering::Acquire) {
            break (
                io::ErrorKind::BrokenPipe,
                "the connection was closed".to_owned(),
            );
        }
        let expire = tokio::select! {
            biased;
            () = &mut attention => {
                attention.set(shared.attention.notified());
                true
            }
            () = &mut timer, if timing => true,
            readable = shared.stream.readable() => {
                if let Err(err) = readable {
                    break (err.kind(), format!("reading from Redis: {err}"));
                }
                false
            }
        };
        if expire {
            let next = shared.expire_overdue();
            timing = next.is_some();
            if let Some(next) = next {
                timer.as_mut().reset(next);
            }
            continue;
        }
        match shared.stream.try_read_buf(&mut buffer) {
            Ok(0) => {
                break (
                    io::ErrorKind::ConnectionReset,
                    "the server closed the connection".to_owned(),
                );
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) => break (err.kind(), format!("reading from Redis: {err}")),
        }
        let mut used = 0;
        let parsed = loop {
            match reply::parse(&buffer[used..]) {
                Ok(Some((value, length))) => {
                    replies.push(value);
                    used += length;
                }
                Ok(None) => break Ok(()),
                Err(why) => break Err(why),
            }
        };
        buffer.drain(..used);
        if let Err(why) = parsed {
            break (
                io::ErrorKind::InvalidData,
                format!("reading from Redis: {why}"),
            );
        }
        if let Err(why) = shared.deliver(&mut replies, &mut answered) {
            break (
                io::ErrorKind::InvalidData,
                format!("reading from Redis: {why}"),
            );
        }
    };
    shared.fail(kind, &why);
    // The flusher learns it at its next look.
    shared.flush.notify_one();
}

/// The flusher task: writes what a blocked or cancelled writer left.
async fn flush(shared: Arc<Shared>) {
    loop {
        shared.flush.notified().await;
        if shared.closed.load(Ordering::Acquire) || shared.broken.load(Ordering::Acquire) {
            return;
        }
        if shared.lock().writer != Writer::Flusher {
            continue;
        }
        loop {
            if let Err(err) = shared.stream.writable().await {
                shared.fail(err.kind(), &format!("writing to Redis: {err}"));
                return;
            }
            match shared.write_until_empty(Writer::Flusher) {
                Written::All => break,
                Written::Blocked => continue,
                Written::Failed => return,
            }
        }
    }
}

/// The error of a request whose connection closed before it was answered.
fn closed_error() -> redis::RedisError {
    io::Error::new(io::ErrorKind::BrokenPipe, "the connection was closed").into()
}
