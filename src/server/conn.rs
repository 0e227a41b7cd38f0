//! One connection's state: what it has read, and the replies it owes in
//! order, each waiting until the writes it depends on are acknowledged
//! (see [`super::shard`]). The event loop ([`super::event`]) drives it.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::cmd::Blocked;
use super::multi::{Tx, Watched};
use super::pubsub::Subscriptions;
use super::resp::{Parsed, Parser, ProtocolError, Reply};
use super::shard::{Deps, Shard};
use super::{Client, Shared};
use crate::config::Durability;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Bytes of replies encoded and not yet sent, and held for durability (by
/// [`Reply::weight`]), and replies held, before the connection stops
/// taking requests off its buffer until they are sent: what bounds the
/// memory of a client that does not read, or a huge pipeline.
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

/// A reply in order, and the writes it waits for.
struct Slot<'a> {
    reply: Reply,
    weight: usize,
    deps: Deps<'a>,
    /// A published message: dropped, not answered with an error, when a
    /// write it waited for failed (what it told of did not happen).
    message: bool,
}

/// What running a request asks of the connection.
pub enum Outcome {
    Reply(Reply),
    /// Reply, then close (QUIT).
    Close(Reply),
    /// Close without a reply (SHUTDOWN).
    Stop,
    /// No reply yet: the connection waits in a blocking command.
    Block,
}

/// Whether replies are sent (CLIENT REPLY).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Not the reply of the next command (nor of CLIENT REPLY SKIP itself).
    Skip,
}

/// How taking requests off the buffer ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// What is left is not a whole request.
    Incomplete,
    /// The connection owes enough replies: it takes no more requests
    /// until they are sent.
    Busy,
    /// The connection is to close once its replies are out (QUIT, SHUTDOWN,
    /// a protocol error).
    Close,
    /// The connection waits in a blocking command: it takes nothing more
    /// until it is served or times out.
    Blocked,
    /// A key that clients wait on was written: they are to be served
    /// before this connection's next request.
    Yield,
}

/// A connection's state.
pub struct Conn<'a> {
    pub shared: &'a Shared,
    pub client: Arc<Client>,
    pub proto: u8,
    pub authed: bool,
    pub durability: Durability,
    /// The shard that runs its commands.
    pub shard: Rc<Shard<'a>>,
    /// What the command running now has read and written: its reply waits
    /// for these.
    pub deps: Deps<'a>,
    /// The metadata key the last lookup made, for the command's write of
    /// that key's metadata to take rather than make again
    /// (`Conn::meta_key`).
    pub(super) meta_key: std::cell::Cell<Option<Vec<u8>>>,
    slots: VecDeque<Slot<'a>>,
    /// The slots' weight in all.
    held: usize,
    /// Replies held and their bytes since the metrics were last told
    /// ([`Conn::report_held`]): told once per read or release, not per
    /// reply.
    held_unreported: (i64, i64),
    /// When the request before in this [`Conn::take`] ended: the next
    /// one's start, so a pipeline reads the clock once per command.
    ended: Option<Instant>,
    /// Encoded replies not yet sent.
    pub out: Vec<u8>,
    /// The time the running command judges expiry by (milliseconds since
    /// the epoch), as Redis's command time snapshot; 0 until it asks.
    pub now: u64,
    /// Whether the running command only reads: a key it finds missing is
    /// a `keymiss` event ([`super::notify::KEY_MISS`]), as in Redis.
    pub reading: bool,
    /// Whether the running command's key lookups count as accesses
    /// (OBJECT IDLETIME; see [`super::shard::access`]).
    pub touching: bool,
    /// CLIENT NO-TOUCH: only TOUCH touches the keys it reads.
    pub no_touch: bool,
    /// The ACL user it runs commands as, and the ACL's generation it was
    /// read at.
    pub user: Arc<super::acl::user::User>,
    pub user_generation: u64,
    /// Whether that user may run every command on every key and channel,
    /// so a command needs no ACL check.
    pub user_open: bool,
    /// Whether the running command is a script's `redis.call` (MONITOR
    /// shows it as `lua`).
    pub scripting: bool,
    /// The script that just ran ended with an error its call already
    /// counted (INFO errorstats): its reply counts as a failed call only.
    pub error_counted: bool,
    /// The transaction being queued (MULTI).
    pub tx: Option<Tx>,
    /// The keys it watches.
    pub watching: Vec<Watched>,
    /// Its place in its event loop (what the shard knows it by).
    pub token: usize,
    /// The blocking command it waits in (BLPOP and the like).
    pub blocked: Option<Blocked>,
    /// Its pub/sub subscriptions.
    pub subs: Subscriptions,
    /// CLIENT REPLY.
    pub reply_mode: ReplyMode,
}

impl<'a> Conn<'a> {
    pub fn new(shared: &'a Shared, client: Arc<Client>, shard: Rc<Shard<'a>>) -> Conn<'a> {
        Conn {
            shared,
            client,
            proto: 2,
            authed: shared.acl.default_open(),
            durability: shared.settings.durability(),
            shard,
            deps: Deps::default(),
            slots: VecDeque::new(),
            held: 0,
            held_unreported: (0, 0),
            ended: None,
            out: Vec::with_capacity(16 * 1024),
            now: 0,
            reading: false,
            touching: true,
            no_touch: false,
            user: shared.acl.get("default").expect("the default user"),
            user_generation: shared.acl.generation(),
            user_open: false,
            scripting: false,
            error_counted: false,
            tx: None,
            watching: Vec::new(),
            token: 0,
            blocked: None,
            subs: Subscriptions::default(),
            reply_mode: ReplyMode::On,
            meta_key: std::cell::Cell::new(None),
        }
    }

    /// Takes every complete request off `input` and runs it, until the
    /// buffer holds no whole request, the connection owes enough replies
    /// ([`Taken::Busy`]), or it is to close.
    pub fn take(&mut self, parser: &mut Parser, input: &mut Input<'_>) -> Taken {
        let mut off = 0;
        self.ended = None;
        let taken = loop {
            if self.out.len() + self.held >= MAX_OUT || self.slots.len() >= MAX_SLOTS {
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
                    let mode = self.reply_mode;
                    let outcome = self.request(args);
                    parser.set_authenticated(self.authed);
                    match outcome {
                        Outcome::Reply(r) => self.push_reply(r, mode),
                        Outcome::Close(r) => {
                            self.push(r);
                            break Taken::Close;
                        }
                        Outcome::Stop => break Taken::Close,
                        Outcome::Block => break Taken::Blocked,
                    }
                    if self.shard.has_events() {
                        break Taken::Yield;
                    }
                }
            }
        };
        input.consume(off);
        self.report_held();
        taken
    }

    /// Bytes of replies owed: encoded and not yet sent, or held.
    pub fn owed(&self) -> usize {
        self.out.len() + self.held
    }

    /// Whether replies wait for writes to be acknowledged.
    pub fn in_flight(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Whether a busy script may answer this connection's next request
    /// (`BUSY`, or SCRIPT KILL): it owes nothing, and is in no state that
    /// gives the request another meaning (not yet authenticated,
    /// subscribed, blocked; a MULTI the hook follows).
    pub fn answerable_while_busy(&self) -> bool {
        self.authed
            && self.out.is_empty()
            && self.slots.is_empty()
            && self.blocked.is_none()
            && !self.subs.any()
    }

    /// Queues a command's reply, as CLIENT REPLY says (`before`: the mode
    /// before the command ran). Pub/sub pushes always go.
    fn push_reply(&mut self, r: Reply, before: ReplyMode) {
        let push = |r: &Reply| matches!(r, Reply::Push(_) | Reply::SharedPush(..));
        let pushed = push(&r) || matches!(&r, Reply::Seq(s) if s.iter().all(push));
        let now = self.reply_mode;
        let send = pushed
            || match (before, now) {
                // CLIENT REPLY OFF or SKIP: not even its own reply.
                (_, ReplyMode::Off) => false,
                (ReplyMode::On, ReplyMode::Skip) => false,
                (ReplyMode::Skip, ReplyMode::Skip) => {
                    self.reply_mode = ReplyMode::On;
                    false
                }
                _ => true,
            };
        if send {
            self.push(r);
        } else {
            // What it waited for still orders what comes after.
            let deps = std::mem::take(&mut self.deps);
            if !deps.is_empty() || !self.slots.is_empty() {
                self.deps = deps;
                self.push(Reply::Seq(vec![]));
            }
        }
    }

    /// Queues a reply after every earlier one, waiting for what the
    /// command that made it depends on.
    pub fn push(&mut self, r: Reply) {
        let deps = std::mem::take(&mut self.deps);
        self.hold(r, deps, false);
    }

    /// Queues a published message after every earlier reply, waiting for
    /// the writes its publisher had read or made.
    pub fn push_message(&mut self, r: Reply, deps: Deps<'a>) {
        self.hold(r, deps, true);
    }

    fn hold(&mut self, r: Reply, deps: Deps<'a>, message: bool) {
        if self.slots.is_empty() && deps.is_empty() {
            r.encode(&mut self.out, self.proto);
        } else {
            let weight = r.weight();
            self.held += weight;
            self.slots.push_back(Slot {
                reply: r,
                weight,
                deps,
                message,
            });
            self.held_unreported.0 += 1;
            self.held_unreported.1 += weight as i64;
        }
    }

    /// Tells the metrics how many replies this connection holds now.
    fn report_held(&mut self) {
        let (n, bytes) = std::mem::take(&mut self.held_unreported);
        if n != 0 || bytes != 0 {
            self.shared.metrics.replies_held(n, bytes);
        }
    }

    /// Encodes the replies owed, in order, up to the first whose writes
    /// are not yet acknowledged. A reply whose write failed says why.
    pub fn progress(&mut self) {
        while self.slots.front().is_some_and(|s| s.deps.ready()) {
            let slot = self.slots.pop_front().expect("a slot");
            self.held -= slot.weight;
            self.held_unreported.0 -= 1;
            self.held_unreported.1 -= slot.weight as i64;
            match slot.deps.failure() {
                None => slot.reply.encode(&mut self.out, self.proto),
                Some(_) if slot.message => {}
                Some(why) => Reply::err(why).encode(&mut self.out, self.proto),
            }
        }
        self.report_held();
    }

    /// Whether the first reply waiting can go (so [`Conn::progress`] has
    /// something to do).
    pub fn ready(&self) -> bool {
        self.slots.front().is_some_and(|s| s.deps.ready())
    }

    /// Runs one request and records it.
    fn request(&mut self, args: Vec<Vec<u8>>) -> Outcome {
        let started = self.ended.take().unwrap_or_else(Instant::now);
        let client = &self.client;
        client.last_active.store(
            started.saturating_duration_since(client.since).as_millis() as u64,
            Ordering::Relaxed,
        );
        self.deps = Deps::default();
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
                self.shard.end_atomic();
                (
                    "unknown",
                    Outcome::Close(Reply::err(
                        "internal error running the command; the connection is closed",
                    )),
                )
            }
        };
        self.tracking_command_done(name);
        // A command queued by MULTI counts when EXEC runs it.
        match &outcome {
            Outcome::Reply(Reply::Status("QUEUED")) => {}
            Outcome::Reply(r) | Outcome::Close(r) => self.count(name, started, r),
            _ => {}
        }
        outcome
    }

    /// Counts a command that answered `r`: an error a script's call
    /// already counted counts as the command's failed call only.
    pub fn count(&mut self, name: &str, started: Instant, r: &Reply) {
        let counted = std::mem::take(&mut self.error_counted);
        let ended = Instant::now();
        self.ended = Some(ended);
        let took = ended.saturating_duration_since(started);
        match r.error_message() {
            Some(_) if counted => self.shared.metrics.command_failed_counted(name, took),
            e => self.shared.metrics.command(name, took, e),
        }
    }

    /// The time since the client's last command, for CLIENT LIST.
    pub fn idle_of(c: &Client) -> u64 {
        let active = c.last_active.load(Ordering::Relaxed);
        (c.since.elapsed().as_millis() as u64).saturating_sub(active) / 1000
    }
}

impl Drop for Conn<'_> {
    /// A connection that goes with replies held (its client went): the
    /// shard keeps their writes; the replies are not counted any more.
    fn drop(&mut self) {
        self.unwatch_all();
        self.unblock();
        self.unsubscribe_all();
        self.report_held();
        self.shared
            .metrics
            .replies_held(-(self.slots.len() as i64), -(self.held as i64));
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
