//! One connection's state: what it has read, and the replies it owes in
//! order, some of them waiting for a write's acknowledgement or for a
//! worker. The event loop ([`super::event`]) drives it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::command::position;
use super::resp::{Parsed, Parser, ProtocolError, Reply};
use super::stripes::PlainMark;
use super::{Client, ServerEngine, Shared};
use crate::config::Durability;
use crate::device::AnyDevice;
use crate::engine::Pending;
use crate::wal::Notify;

/// The plain SETs of one turn of an event loop at one durability level:
/// submitted to the engine together once the turn has run every ready
/// connection's requests, so they go to the WAL in one burst and share
/// its group commit rather than trickling in between socket reads.
pub struct Batch<'a> {
    level: Durability,
    writes: RefCell<Vec<(Vec<u8>, Vec<u8>)>>,
    state: RefCell<BatchState<'a>>,
}

enum BatchState<'a> {
    Open,
    Submitted(Pending<'a, AnyDevice>),
    Done(Result<(), String>),
}

impl<'a> Batch<'a> {
    fn is_done(&self) -> bool {
        match &*self.state.borrow() {
            BatchState::Open => false,
            BatchState::Submitted(p) => p.is_done(),
            BatchState::Done(_) => true,
        }
    }

    /// The outcome, waiting for the acknowledgement if it has not come.
    fn result(&self) -> Result<(), String> {
        let mut st = self.state.borrow_mut();
        let r = match std::mem::replace(&mut *st, BatchState::Open) {
            BatchState::Submitted(p) => p.wait().map_err(|e| e.to_string()),
            BatchState::Done(r) => r,
            // Only a bug would leave a batch unsubmitted here.
            BatchState::Open => Err("internal error: the write was not submitted".into()),
        };
        *st = BatchState::Done(r.clone());
        r
    }
}

/// The batches of the turn under way, one per durability level.
#[derive(Default)]
pub struct Turn<'a> {
    open: RefCell<Vec<Rc<Batch<'a>>>>,
}

impl<'a> Turn<'a> {
    /// Queues a plain write for the end of the turn: its batch.
    fn add(&self, level: Durability, key: Vec<u8>, value: Vec<u8>) -> Rc<Batch<'a>> {
        let mut open = self.open.borrow_mut();
        let b = match open.iter().find(|b| b.level == level) {
            Some(b) => b.clone(),
            None => {
                let b = Rc::new(Batch {
                    level,
                    writes: RefCell::new(Vec::new()),
                    state: RefCell::new(BatchState::Open),
                });
                open.push(b.clone());
                b
            }
        };
        b.writes.borrow_mut().push((key, value));
        b
    }

    /// Submits the turn's batches; `notify` is told when each is
    /// acknowledged.
    pub fn submit(&self, engine: &'a ServerEngine, notify: &Arc<dyn Notify>) {
        for b in self.open.borrow_mut().drain(..) {
            let writes = std::mem::take(&mut *b.writes.borrow_mut());
            let refs: Vec<(&[u8], Option<&[u8]>)> = writes
                .iter()
                .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
                .collect();
            *b.state.borrow_mut() = match engine.submit(&refs, Some(b.level)) {
                Ok(p) => {
                    p.notify(notify.clone());
                    BatchState::Submitted(p)
                }
                Err(e) => BatchState::Done(Err(e.to_string())),
            };
        }
    }
}

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Replies buffered (or writes in flight) before the connection stops
/// taking requests off its buffer until they are sent.
const MAX_OUT: usize = 1 << 20;
const MAX_SLOTS: usize = 1024;

/// What a connection has read and not yet run: `buf[start..end]`. The
/// buffer is zeroed once, when it grows, not at every read. What buffers
/// hold beyond their first chunk is charged to the server-wide `budget`.
pub(super) struct Input<'a> {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    budget: &'a AtomicUsize,
}

impl<'a> Input<'a> {
    pub(super) fn new(budget: &'a AtomicUsize) -> Input<'a> {
        Input {
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            budget,
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub(super) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            // A buffer grown for a large request is given back once it is done.
            if self.buf.len() > 4 * READ_CHUNK {
                self.budget
                    .fetch_sub(self.buf.len() - READ_CHUNK, Ordering::Relaxed);
                self.buf = vec![0; READ_CHUNK];
            }
        }
    }

    /// Room to read into: at least `READ_CHUNK / 2` bytes. What is left of
    /// a request moves to the front first; the parser's limits bound how
    /// far one buffer grows, and `limit` how far all of them together do.
    pub(super) fn space(&mut self, limit: usize) -> Result<&mut [u8], ProtocolError> {
        if self.buf.len() - self.end < READ_CHUNK / 2 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() - self.end < READ_CHUNK / 2 {
                let grown = (self.buf.len() * 2).max(self.end + READ_CHUNK);
                let more = grown - self.buf.len();
                if self.budget.fetch_add(more, Ordering::Relaxed) + more > limit {
                    self.budget.fetch_sub(more, Ordering::Relaxed);
                    return Err(ProtocolError(format!(
                        "the server's request buffers are full ({limit} bytes over all connections); send smaller requests"
                    )));
                }
                self.buf.resize(grown, 0);
            }
        }
        Ok(&mut self.buf[self.end..])
    }

    pub(super) fn filled(&mut self, n: usize) {
        self.end += n;
    }
}

impl Drop for Input<'_> {
    fn drop(&mut self) {
        self.budget
            .fetch_sub(self.buf.len() - READ_CHUNK, Ordering::Relaxed);
    }
}

/// A reply in order: ready, waiting for a write's acknowledgement, or
/// waiting for a worker.
enum Slot<'a> {
    Ready(Reply),
    /// A plain SET in this turn's batch.
    Queued {
        batch: Rc<Batch<'a>>,
        mark: PlainMark,
        started: Instant,
    },
    Job,
}

/// What running a request asks of the connection.
pub enum Outcome<'a> {
    Reply(Reply),
    /// A plain write in flight; `ok` is its reply once acknowledged.
    Write {
        pending: Pending<'a, AnyDevice>,
        mark: PlainMark,
        ok: Reply,
    },
    /// A plain SET queued in this turn's batch; `OK` once acknowledged.
    Queued(Rc<Batch<'a>>, PlainMark),
    /// A command that waits (for stripes, for its writes): a worker runs it.
    Job(&'static str, Vec<Vec<u8>>),
    /// A plain write whose stripe is held: tried again once a hold ends.
    Defer(Vec<Vec<u8>>),
    /// Reply, then close (QUIT).
    Close(Reply),
    /// Close without a reply (SHUTDOWN).
    Stop,
}

/// How taking requests off the buffer ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// What is left is not a whole request.
    Incomplete,
    /// The connection cannot go on for now: it owes enough replies, waits
    /// for its writes or a worker before its next request, or that request
    /// waits for a stripe.
    Busy,
    /// The connection is to close once its replies are out (QUIT, SHUTDOWN,
    /// a protocol error).
    Close,
}

/// A command the event loop hands to a worker.
pub struct Job {
    pub name: &'static str,
    pub args: Vec<Vec<u8>>,
    pub client: Arc<Client>,
    pub proto: u8,
    pub durability: Durability,
}

/// A connection's state.
pub struct Conn<'a> {
    pub shared: &'a Shared,
    pub client: Arc<Client>,
    pub proto: u8,
    pub authed: bool,
    pub durability: Durability,
    /// Run by a worker, which may wait: runs every command itself.
    on_worker: bool,
    /// Where plain SETs wait for the end of the loop's turn.
    turn: Option<Rc<Turn<'a>>>,
    slots: VecDeque<Slot<'a>>,
    /// A request taken off the buffer that could not run yet.
    deferred: Option<Vec<Vec<u8>>>,
    /// `deferred` waits for this stripe (and is counted as parked on it).
    parked: Option<usize>,
    /// A command handed to a worker, for the loop to send.
    pub job: Option<Job>,
    /// A worker's reply is to come.
    job_out: bool,
    /// Encoded replies not yet sent.
    pub out: Vec<u8>,
}

impl<'a> Conn<'a> {
    /// A connection served by an event loop, whose plain SETs go to `turn`.
    pub fn new(shared: &'a Shared, client: Arc<Client>, turn: Rc<Turn<'a>>) -> Conn<'a> {
        Conn {
            shared,
            client,
            proto: 2,
            authed: shared.opts.password.is_none(),
            durability: shared.opts.durability,
            on_worker: false,
            turn: Some(turn),
            slots: VecDeque::new(),
            deferred: None,
            parked: None,
            job: None,
            job_out: false,
            out: Vec::with_capacity(16 * 1024),
        }
    }

    /// Runs `job` on a worker thread, waiting for what it needs: its reply.
    pub fn run_job(shared: &'a Shared, job: Job) -> Reply {
        let mut conn = Conn {
            shared,
            client: job.client,
            proto: job.proto,
            authed: true,
            durability: job.durability,
            on_worker: true,
            turn: None,
            slots: VecDeque::new(),
            deferred: None,
            parked: None,
            job: None,
            job_out: false,
            out: Vec::new(),
        };
        let started = Instant::now();
        let name = job.name;
        let args = job.args;
        // A worker's dispatch runs every command itself (`on_worker`).
        let run = AssertUnwindSafe(|| conn.dispatch(args).1);
        let r = match catch_unwind(run) {
            Ok(Outcome::Reply(r) | Outcome::Close(r)) => r,
            Ok(Outcome::Write { pending, mark, ok }) => {
                let result = pending.wait();
                shared.stripes.done(mark);
                result.map_or_else(Reply::err, |()| ok)
            }
            Ok(Outcome::Job(..) | Outcome::Defer(_) | Outcome::Queued(..) | Outcome::Stop) => {
                Reply::err("internal error: a worker cannot hand the command on")
            }
            Err(_) => {
                tracing::error!(
                    "client {} ({}): the command panicked",
                    conn.client.id,
                    conn.client.addr
                );
                Reply::err("internal error running the command")
            }
        };
        shared
            .metrics
            .command(name, started.elapsed(), r.is_error());
        r
    }

    pub fn on_worker(&self) -> bool {
        self.on_worker
    }

    /// Queues a plain write for the end of the loop's turn.
    pub fn queue_write(&self, key: Vec<u8>, value: Vec<u8>) -> Rc<Batch<'a>> {
        self.turn
            .as_ref()
            .expect("a loop's connection")
            .add(self.durability, key, value)
    }

    /// Takes every complete request off `input` and runs it, until the
    /// buffer holds no whole request, the connection cannot go on for now
    /// ([`Taken::Busy`]), or it is to close.
    pub fn take(&mut self, parser: &mut Parser, input: &mut Input<'_>) -> Taken {
        if let Some(args) = self.deferred.take() {
            if let Some(t) = self.run(args, parser) {
                return t;
            }
        }
        let mut off = 0;
        let taken = loop {
            if self.out.len() >= MAX_OUT || self.slots.len() >= MAX_SLOTS {
                break Taken::Busy;
            }
            let parsed = match parser.parse(&input.bytes()[off..]) {
                Ok(p) => p,
                Err(e) => {
                    self.shared.metrics.protocol_error();
                    self.push(Reply::err(&e));
                    break Taken::Close;
                }
            };
            match parsed {
                Parsed::Incomplete => break Taken::Incomplete,
                Parsed::Skip(n) => off += n,
                Parsed::Request(args, n) => {
                    off += n;
                    if let Some(t) = self.run(args, parser) {
                        break t;
                    }
                }
            }
        };
        input.consume(off);
        taken
    }

    /// Runs one request, unless it has to wait: then it is kept for later
    /// and `Some(Busy)` says so. `Some` also when the connection closes.
    fn run(&mut self, args: Vec<Vec<u8>>, parser: &mut Parser) -> Option<Taken> {
        // Only a plain SET goes ahead of this connection's writes in
        // flight; everything else sees them first (and a worker's reply
        // comes before anything after it).
        let plain_set = || {
            args.len() == 3
                && position(&args[0]).is_some_and(|i| super::command::COMMANDS[i].name == "set")
        };
        if self.waits_for_job() || (!self.slots.is_empty() && !plain_set()) {
            self.deferred = Some(args);
            return Some(Taken::Busy);
        }
        let outcome = self.request(args);
        parser.set_authenticated(self.authed);
        if let (Some(stripe), false) = (self.parked, matches!(outcome, Outcome::Defer(_))) {
            self.parked = None;
            self.shared.stripes.unpark(stripe);
        }
        match outcome {
            Outcome::Reply(r) => self.push(r),
            Outcome::Write { pending, mark, .. } => {
                // Only a worker's plain SET comes back submitted; a loop's
                // is queued for its turn.
                drop(pending);
                self.shared.stripes.done(mark);
                self.push(Reply::err(
                    "internal error: a submitted write on an event loop",
                ));
            }
            Outcome::Queued(batch, mark) => {
                self.slots.push_back(Slot::Queued {
                    batch,
                    mark,
                    started: Instant::now(),
                });
            }
            Outcome::Job(name, args) => {
                self.job = Some(Job {
                    name,
                    args,
                    client: self.client.clone(),
                    proto: self.proto,
                    durability: self.durability,
                });
                self.slots.push_back(Slot::Job);
                self.job_out = true;
                return Some(Taken::Busy);
            }
            Outcome::Defer(args) => {
                if self.parked.is_none() {
                    // Counted first, then tried once more: a hold that
                    // ended in between is seen by the second try or wakes
                    // the loop (see `Stripes::park`). Only a plain SET is
                    // put off: its key is `args[1]`.
                    let stripe = self.shared.stripes.of(&args[1]);
                    self.shared.stripes.park(stripe);
                    self.parked = Some(stripe);
                    return self.run(args, parser);
                }
                self.deferred = Some(args);
                return Some(Taken::Busy);
            }
            Outcome::Close(r) => {
                self.push(r);
                return Some(Taken::Close);
            }
            Outcome::Stop => return Some(Taken::Close),
        }
        None
    }

    fn waits_for_job(&self) -> bool {
        self.job_out
    }

    /// Whether a request was put off because its stripe was held.
    pub fn parked(&self) -> bool {
        self.parked.is_some()
    }

    /// Stops counting the put-off request on its stripe (it stays put
    /// off, and is counted again when it is tried and put off again).
    pub fn unpark(&mut self) {
        if let Some(stripe) = self.parked.take() {
            self.shared.stripes.unpark(stripe);
        }
    }

    /// Whether replies are still to come: writes in flight, a worker's.
    pub fn in_flight(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Whether a request waits to run (the connection has more to do once
    /// its writes, its worker or a stripe let it).
    pub fn has_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// The worker's reply to this connection's job.
    pub fn job_done(&mut self, r: Reply) {
        if let Some(slot) = self.slots.iter_mut().find(|s| matches!(s, Slot::Job)) {
            *slot = Slot::Ready(r);
        }
        self.job_out = false;
    }

    /// Queues a reply after every earlier one.
    pub fn push(&mut self, r: Reply) {
        if self.slots.is_empty() {
            r.encode(&mut self.out, self.proto);
        } else {
            self.slots.push_back(Slot::Ready(r));
        }
    }

    /// Encodes the replies owed, in order, up to the first write not yet
    /// acknowledged (or, with `wait`, waiting for each) or worker's reply
    /// not yet come.
    pub fn progress(&mut self, wait: bool) {
        while let Some(slot) = self.slots.front() {
            match slot {
                Slot::Job => break,
                Slot::Queued { batch, .. } if !wait && !batch.is_done() => break,
                _ => {}
            }
            match self.slots.pop_front().expect("a slot") {
                Slot::Ready(r) => r.encode(&mut self.out, self.proto),
                Slot::Queued {
                    batch,
                    mark,
                    started,
                } => {
                    let result = batch.result();
                    self.shared.stripes.done(mark);
                    let r = match result {
                        Ok(()) => Reply::ok(),
                        Err(e) => Reply::err(e),
                    };
                    self.shared
                        .metrics
                        .command("set", started.elapsed(), r.is_error());
                    r.encode(&mut self.out, self.proto);
                }
                Slot::Job => unreachable!(),
            }
        }
    }

    /// Whether the first write in flight is acknowledged (so
    /// [`Conn::progress`] has something to do).
    pub fn ready(&self) -> bool {
        match self.slots.front() {
            Some(Slot::Queued { batch, .. }) => batch.is_done(),
            Some(Slot::Ready(_)) => true,
            _ => false,
        }
    }

    /// Runs one request and records it.
    fn request(&mut self, args: Vec<Vec<u8>>) -> Outcome<'a> {
        let started = Instant::now();
        let client = &self.client;
        client
            .last_active
            .store(client.since.elapsed().as_millis() as u64, Ordering::Relaxed);
        // A command that panics (a bug) must not take the loop, and every
        // other connection of it, down with it: that connection alone is
        // told and closed.
        let (name, outcome) = match catch_unwind(AssertUnwindSafe(|| self.dispatch(args))) {
            Ok(done) => done,
            Err(_) => {
                tracing::error!(
                    "client {} ({}): the command panicked; closing the connection",
                    self.client.id,
                    self.client.addr
                );
                (
                    "unknown",
                    Outcome::Close(Reply::err(
                        "internal error running the command; the connection is closed",
                    )),
                )
            }
        };
        if let Outcome::Reply(r) | Outcome::Close(r) = &outcome {
            self.shared
                .metrics
                .command(name, started.elapsed(), r.is_error());
        }
        outcome
    }

    /// The time since the client's last command, for CLIENT LIST.
    pub fn idle_of(c: &Client) -> u64 {
        let active = c.last_active.load(Ordering::Relaxed);
        (c.since.elapsed().as_millis() as u64).saturating_sub(active) / 1000
    }
}

impl Drop for Conn<'_> {
    /// Writes still in flight are waited for: their stripes must be let
    /// go, and the engine's acknowledgement still comes for them.
    fn drop(&mut self) {
        self.unpark();
        self.slots.retain(|s| !matches!(s, Slot::Job));
        self.progress(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_buffers_stay_within_their_budget_and_give_it_back() {
        let budget = AtomicUsize::new(0);
        let limit = 3 * READ_CHUNK;
        let mut a = Input::new(&budget);
        let mut b = Input::new(&budget);
        // A request that keeps arriving: the buffer grows, charged to the budget.
        let mut grown = 0;
        let refused = loop {
            match a.space(limit) {
                Ok(space) => {
                    let n = space.len();
                    a.filled(n);
                    grown += n;
                }
                Err(e) => break e,
            }
            assert!(grown < 64 * READ_CHUNK, "never refused");
        };
        assert!(refused.0.contains("request buffers are full"), "{refused}");
        let charged = budget.load(Ordering::Relaxed);
        assert!(charged <= limit, "{charged} over {limit}");
        assert_eq!(charged, a.buf.len() - READ_CHUNK);
        // Another connection cannot grow past what is left either.
        b.filled(READ_CHUNK);
        assert!(b.space(limit).is_err());
        // What was read is intact; a buffer of up to four chunks is kept
        // (and stays charged) once its request is done, a larger one given
        // back, and a closed connection gives back all.
        assert_eq!(a.bytes().len(), grown);
        a.consume(grown);
        assert_eq!(budget.load(Ordering::Relaxed), a.buf.len() - READ_CHUNK);
        assert!(a.buf.len() <= 4 * READ_CHUNK);
        drop(a);
        drop(b);
        assert_eq!(budget.load(Ordering::Relaxed), 0);
        // A buffer grown past four chunks goes back as soon as it is done.
        let mut c = Input::new(&budget);
        while c.buf.len() <= 4 * READ_CHUNK {
            let n = c.space(16 * READ_CHUNK).unwrap().len();
            c.filled(n);
        }
        assert!(budget.load(Ordering::Relaxed) > 0);
        let n = c.bytes().len();
        c.consume(n);
        assert_eq!(budget.load(Ordering::Relaxed), 0);
    }
}
