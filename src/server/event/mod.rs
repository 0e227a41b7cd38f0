//! The shard reactor's event loop: it serves many connections on one
//! thread (epoll, through mio), Redis-style, and runs every command of
//! its shard ([`Shard`]) to completion, serially, with no lock and no
//! other thread on the command path. It never waits for an
//! acknowledgement; it does wait where the engine pushes back on every
//! writer (memstores over the global limit, a full WAL ring) and for a
//! device read.
//!
//! A turn: encode the replies whose writes are acknowledged; read what
//! every ready connection has and run its complete requests, each applying
//! its writes to the shard at once and queueing its reply behind them
//! ([`Conn`]); write each connection's encoded replies without blocking;
//! when the turn submits a batch the log must FLUSH, poll again without
//! sleeping and serve who sent requests meanwhile, so that they share its
//! group commit; submit the turn's batches to the engine together; let go
//! of the batches acknowledged (their writes go into the memstores, off
//! the path from an acknowledgement to its replies); poll again. An acknowledgement
//! wakes it ([`LoopNotify`]), so while one group commit is on its way the
//! loop reads and runs the requests of the next.
//!
//! A connection whose replies do not all fit in its socket waits for it to
//! drain before the loop reads or runs anything more of it, so a client
//! that does not read holds at most [`MAX_OUT`](super::conn) of replies.

use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

use super::conn::{Conn, Input};
use super::expiry::Expiry;
use super::resp::{Parser, Reply};
use super::shard::busy::Entry;
use super::shard::tracking::Invalidation;
use super::shard::Shard;
use super::sweep::Sweep;
use super::Shared;
use crate::wal::{Notify, WalHost};
use connection::{flush, serve, Connection, HOLD_AHEAD};
use idle::IdleFold;

mod connection;
mod idle;

/// The token of a loop's waker (new connections, acknowledgements, the
/// stop).
const WAKER: Token = Token(usize::MAX);

/// The token of the WAL devices' completion descriptors, on a loop that
/// submits its own log writes.
const WAL: Token = Token(usize::MAX - 1);

/// Polls at most, after a turn's work, for requests that arrived while it
/// ran, before the turn submits a batch the log must FLUSH.
const GATHER_ROUNDS: usize = 4;

/// How long a stopping loop goes on answering clients that read slowly.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long a loop with replies to come sleeps at most, should a wake be
/// lost (none should be).
const WAIT_AT_MOST: Duration = Duration::from_millis(50);

/// Bytes a subscriber may owe before it is disconnected (Redis's default
/// hard limit for pub/sub clients).
const PUBSUB_LIMIT: usize = 32 << 20;

/// Keys over `tracking-table-max-keys` invalidated a turn at most.
const TRACKING_EFFORT: usize = 10_000;

pub use super::shard::busy::Handoff;

/// Wakes a loop that sleeps in its poll; an awake loop is not told (it
/// looks at its connections each turn), which saves a system call per
/// acknowledgement under load.
#[derive(Debug)]
pub struct LoopNotify {
    waker: Arc<Waker>,
    /// The loop is about to sleep, or sleeps.
    armed: AtomicBool,
    /// Acknowledgements told so far: while it has not moved, no reply
    /// that waited can have become ready (see `Loop::acked`).
    told: AtomicU64,
}

impl Notify for LoopNotify {
    fn notify(&self) {
        self.told.fetch_add(1, Ordering::SeqCst);
        if self.armed.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }
}

/// A running loop, as the server sees it.
pub struct LoopHandle {
    pub waker: Arc<Waker>,
    pub thread: JoinHandle<()>,
}

/// What a loop is made of before it runs.
pub struct Parts {
    poll: Poll,
    notify: Arc<LoopNotify>,
}

impl Parts {
    pub fn new() -> io::Result<Parts> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        Ok(Parts {
            poll,
            notify: Arc::new(LoopNotify {
                waker,
                armed: AtomicBool::new(false),
                told: AtomicU64::new(0),
            }),
        })
    }
}

/// Starts loop `i`; connections sent on the returned sender (then a
/// [`Waker::wake`]) are served by it.
pub fn spawn(
    shared: Arc<Shared>,
    i: usize,
    parts: Parts,
) -> io::Result<(LoopHandle, Sender<Handoff>)> {
    let waker = parts.notify.waker.clone();
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(format!("stria-shard-{i}"))
        .spawn(move || run(&shared, parts, rx))?;
    Ok((LoopHandle { waker, thread }, tx))
}

struct Loop<'a> {
    shared: &'a Shared,
    notify: Arc<LoopNotify>,
    /// The loop submits the WAL's batches and reaps their completions
    /// itself (`wal.submit: shard`).
    wal: Option<WalHost>,
    /// The shard whose commands the loop runs.
    shard: Rc<Shard<'a>>,
    conns: Vec<Option<Connection<'a>>>,
    free: Vec<usize>,
    /// Connections to read or run in the next turn.
    work: Vec<usize>,
    /// Connections with replies waiting for writes.
    waiting: Vec<usize>,
    /// `notify.told` when `waiting` was last looked at: every connection
    /// in it was found not ready since.
    checked: u64,
    /// A batch submitted since was done before its notice was registered.
    unnoticed: bool,
    /// Connections by client id (where CLIENT TRACKING redirects).
    ids: HashMap<u64, usize>,
    expiry: Expiry,
    sweep: Sweep,
    idle: IdleFold,
}

fn run(shared: &Shared, parts: Parts, rx: Receiver<Handoff>) {
    let shard = Rc::new(Shard::new(&shared.engine, shared.opts.row_cache));
    shard.busy().set_incoming(rx);
    let Parts { mut poll, notify } = parts;
    shard.set_notify(notify.clone());
    let wal = host_wal(shared, poll.registry());
    let mut lp = Loop {
        shared,
        notify,
        wal,
        shard,
        conns: Vec::new(),
        free: Vec::new(),
        work: Vec::new(),
        waiting: Vec::new(),
        checked: 0,
        unnoticed: false,
        ids: HashMap::new(),
        expiry: Expiry::default(),
        sweep: Sweep::default(),
        idle: IdleFold::default(),
    };
    let mut events = Events::with_capacity(1024);
    let mut deadline: Option<Instant> = None;
    loop {
        let stopping = shared.stopping();
        if stopping {
            let d = *deadline.get_or_insert_with(|| Instant::now() + STOP_GRACE);
            if lp.answered() || Instant::now() >= d {
                break;
            }
        }
        let mut due = lp.expiry.due_in();
        if let Some(d) = lp.shard.blocking().next_deadline() {
            due = due.min(d.saturating_duration_since(Instant::now()));
        }
        // A stopping loop's own timeout is never `None`: it folds nothing.
        let timeout = Some(lp.idle.timeout(lp.timeout(stopping), due));
        let polled = poll.poll(&mut events, timeout);
        lp.notify.armed.store(false, Ordering::SeqCst);
        if let Err(e) = polled {
            if e.kind() != ErrorKind::Interrupted {
                tracing::error!("event loop poll: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        lp.idle.after_poll(&shared.engine, events.is_empty());
        lp.events(&events, poll.registry(), stopping);
        lp.turn(stopping, &mut poll, &mut events);
        // A WAL device written for an online replacement joins the
        // stripe; a host watches its queue too.
        if shared.metrics.replacements.poll(&shared.engine) {
            if let Some(h) = &lp.wal {
                for fd in h.rewatch() {
                    // Those watched already say so; they stay watched.
                    let _ = poll
                        .registry()
                        .register(&mut SourceFd(&fd), WAL, Interest::READABLE);
                }
            }
        }
    }
    for i in 0..lp.conns.len() {
        lp.close(i);
    }
    // The WAL reactor watches the devices again.
    drop(lp.wal.take());
    // Writes applied are acknowledged before the engine closes.
    lp.shard.settle_all();
    // Connections handed over after the loop stopped looking.
    for ((client, _stream), _) in lp.shard.busy().accept() {
        shared.forget(&client);
    }
}

/// Makes the loop's thread the host of the engine's WAL and watches its
/// devices' completions, when the map asks for it and every device can be
/// watched; `None` leaves the log to its reactor.
fn host_wal(shared: &Shared, registry: &Registry) -> Option<WalHost> {
    if !shared.opts.wal_on_shard {
        return None;
    }
    let host = shared.engine.wal().host()?;
    for fd in host.event_fds() {
        if let Err(e) = registry.register(&mut SourceFd(&fd), WAL, Interest::READABLE) {
            tracing::warn!("cannot watch a WAL device ({e}): the WAL reactor submits the log");
            for fd in host.event_fds() {
                let _ = registry.deregister(&mut SourceFd(&fd));
            }
            return None;
        }
    }
    Some(host)
}

impl<'a> Loop<'a> {
    /// How long the next poll may sleep: not at all with work to do or a
    /// reply ready; else until woken (with a bound while replies are due,
    /// and by when the WAL's devices must be polled).
    fn timeout(&self, stopping: bool) -> Option<Duration> {
        if !self.work.is_empty() {
            return Some(Duration::ZERO);
        }
        let ready = || {
            self.acked()
                && self
                    .waiting
                    .iter()
                    .any(|&i| self.conns[i].as_ref().is_some_and(|c| c.conn.ready()))
        };
        let wal = match &self.wal {
            // Before arming: what this completes is seen below, without a
            // wake.
            Some(h) if !ready() => h.next_drive(),
            _ => None,
        };
        // Armed first, then checked: an acknowledgement in between is seen
        // here or wakes the poll.
        self.notify.armed.store(true, Ordering::SeqCst);
        let sleep = if ready() {
            Some(Duration::ZERO)
        } else if stopping {
            Some(Duration::from_millis(10))
        } else if !self.waiting.is_empty() {
            Some(WAIT_AT_MOST)
        } else {
            None
        };
        match (sleep, wal) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether a waiting reply may have become ready since `waiting` was
    /// last looked at: an acknowledgement was told since, or a batch was
    /// done before it could be. Otherwise a look would find none: at
    /// `-P 1` the loop looked at every waiting connection three times a
    /// turn.
    fn acked(&self) -> bool {
        self.unnoticed || self.notify.told.load(Ordering::SeqCst) != self.checked
    }

    /// Takes the connections the acceptor handed over.
    fn accept(&mut self, registry: &Registry) {
        for ((client, stream), known) in self.shard.busy().accept() {
            let i = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            // A second descriptor, for a busy script's hook to answer it.
            let known = match known {
                Some(k) => Ok(k),
                None => stream.try_clone().map(Entry::of),
            };
            let mut stream = match stream.set_nonblocking(true) {
                Ok(()) => TcpStream::from_std(stream),
                Err(e) => {
                    tracing::warn!("client {}: {e}", client.id);
                    self.free.push(i);
                    self.shared.forget(&client);
                    continue;
                }
            };
            // Both interests, once: edge-triggered, WRITABLE only reports
            // a socket that filled and drained again.
            if let Err(e) = registry.register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            ) {
                tracing::warn!("client {}: cannot watch its socket: {e}", client.id);
                self.free.push(i);
                self.shared.forget(&client);
                continue;
            }
            match known {
                Ok(known) => self.shard.busy().join(i, known),
                Err(e) => tracing::debug!(
                    "client {}: no second descriptor ({e}): not answered while a script is busy",
                    client.id
                ),
            }
            let shared = self.shared;
            let mut parser = Parser::new(shared.opts.limits);
            self.ids.insert(client.id, i);
            let mut conn = Conn::new(shared, client, self.shard.clone());
            conn.token = i;
            parser.set_authenticated(conn.authed);
            self.conns[i] = Some(Connection {
                stream,
                conn,
                parser,
                input: Input::new(&shared.buffered),
                sent: 0,
                readable: true,
                hup: false,
                eof: false,
                blocked: false,
                closing: false,
                dead: false,
                queued: false,
                waiting: false,
            });
            self.queue(i);
        }
    }

    /// Takes in what a poll reported: connections to serve, new ones.
    fn events(&mut self, events: &Events, registry: &Registry, stopping: bool) {
        let mut woken = false;
        for ev in events.iter() {
            match ev.token() {
                WAKER => woken = true,
                // The turn reaps the completions.
                WAL => {}
                Token(i) => self.event(
                    i,
                    ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    ev.is_read_closed() || ev.is_error(),
                    ev.is_writable() || ev.is_error(),
                ),
            }
        }
        if woken && !stopping {
            self.accept(registry);
        }
    }

    fn queue(&mut self, i: usize) {
        if let Some(c) = self.conns[i].as_mut() {
            if !c.queued {
                c.queued = true;
                self.work.push(i);
            }
        }
    }

    /// Readiness of connection `i`.
    fn event(&mut self, i: usize, readable: bool, hup: bool, writable: bool) {
        let Some(c) = self.conns.get_mut(i).and_then(|c| c.as_mut()) else {
            return;
        };
        if readable {
            c.readable = true;
        }
        if hup {
            c.hup = true;
        }
        if writable && c.blocked {
            flush(self.shared, c);
        }
        if readable || !c.blocked || c.dead {
            self.queue(i);
        }
    }

    /// Whether a stopping loop has answered everything it read: no
    /// connection has replies to come or left to send, or a request left
    /// to run.
    fn answered(&self) -> bool {
        self.work.is_empty()
            && self
                .conns
                .iter()
                .flatten()
                .all(|c| c.dead || (!c.blocked && !c.conn.in_flight()))
    }

    fn turn(&mut self, stopping: bool, poll: &mut Poll, events: &mut Events) {
        self.shard.access().tick();
        // Completions of the log's writes, and the acknowledgements they
        // make, before the replies that wait for them.
        if let Some(h) = &self.wal {
            h.drive();
        }
        // Its deletes go to the engine with the turn's writes.
        self.expiry.run(self.shared, &self.shard);
        self.sweep.run(self.shared, &self.shard);
        {
            let mut sockets = self.shard.sockets();
            if !sockets.is_empty() {
                sockets.close_idle();
                self.shared.metrics.set_migrate_sockets(sockets.len());
            }
        }
        // Keys over tracking-table-max-keys are invalidated.
        if !self.shard.tracking().is_idle() {
            let max = self
                .shared
                .settings
                .number("tracking-table-max-keys")
                .unwrap_or(0);
            self.shard
                .tracking()
                .limit(max.max(0) as usize, TRACKING_EFFORT);
        }
        // The `expired` events of the cycle, and their invalidations.
        self.deliver();
        // Replies whose writes were acknowledged. Read before looking:
        // an acknowledgement during the look moves it again.
        if self.acked() {
            self.unnoticed = false;
            self.checked = self.notify.told.load(Ordering::SeqCst);
            for i in std::mem::take(&mut self.waiting) {
                let Some(c) = self.conns[i].as_mut() else {
                    continue;
                };
                c.waiting = false;
                if c.conn.ready() {
                    self.queue(i);
                } else {
                    c.waiting = true;
                    self.waiting.push(i);
                }
            }
        }
        self.time_out_blocked();
        self.serve_blocked();
        self.work_all(stopping);
        // Clients answered early in the turn may have sent their next
        // requests while it ran the others: when the turn submits a batch
        // the log must FLUSH (to a log this loop writes itself; on `psync`
        // the turn then waits for the FLUSH), they join it, as Redis's
        // clients answered after its fsync are read by its next poll
        // before it syncs again. Left to the next turn, half of a closed
        // loop's clients went in every other group commit.
        let hosted = self.wal.is_some();
        for _ in 0..GATHER_ROUNDS {
            if !hosted
                || !self.shard.awaits_flush()
                || poll.poll(events, Some(Duration::ZERO)).is_err()
            {
                break;
            }
            self.events(events, poll.registry(), stopping);
            if self.work.is_empty() {
                break;
            }
            self.shared.metrics.gathered(self.work.len() as u64);
            self.work_all(stopping);
        }
        // The keys written under BCAST prefixes this turn.
        self.shard.tracking().broadcast();
        self.deliver();
        // Connections a busy script answered, with replies left to send.
        for t in self.shard.busy().owing() {
            self.queue(t);
        }
        // The turn's writes go to the engine together.
        let notify: Arc<dyn Notify> = self.notify.clone();
        if self.shard.submit(&notify) {
            self.unnoticed = true;
        }
        // On their way to the devices now, not when the loop next polls.
        if let Some(h) = &self.wal {
            h.drive();
        }
        // The batches acknowledged go into the memstores last: the
        // replies they answer are out and the next batch is on its way
        // first. Until then their keys read from the dirty table.
        self.shard.retire();
        let (keys, bytes) = self.shard.pending();
        self.shared.metrics.set_dirty(keys as u64, bytes as u64);
        self.shared.metrics.set_rows(self.shard.row_stats());
    }

    /// Serves the connections queued.
    fn work_all(&mut self, stopping: bool) {
        let work = std::mem::take(&mut self.work);
        for i in work {
            self.work_on(i, stopping);
            if self.shard.has_events() {
                self.serve_blocked();
                self.deliver();
            }
        }
    }

    /// Serves connection `i`: encodes and writes its replies, reads and
    /// runs its requests.
    fn work_on(&mut self, i: usize, stopping: bool) {
        {
            let Some(c) = self.conns[i].as_mut() else {
                return;
            };
            c.queued = false;
            let busy = self.shard.busy();
            // What a busy script's hook did to its transaction, first.
            if let Some(tx) = busy.take_tx(i) {
                c.conn.take_busy_tx(tx.multi, tx.failed);
            }
            busy.set_idle(i, false, c.conn.proto, false);
            // Replies a busy script's hook answered that the socket did not
            // take go before anything else.
            let owed = busy.take_owed(i);
            if !owed.is_empty() {
                c.conn.out.splice(0..0, owed);
            }
            let mut again = false;
            c.conn.progress();
            // Replies owed from before this turn go out this turn.
            let owed_before = !c.conn.out.is_empty();
            if !c.dead && !c.blocked && !c.closing {
                again = serve(self.shared, c, stopping);
            }
            c.conn.progress();
            // Replies this turn's requests made ready ahead of one that
            // waits for its write go out with it, in one send, as Redis
            // sends a turn's replies after its fsync: a client's pipeline
            // (MULTI ... EXEC) is answered by one write and wakes it once,
            // not twice. They wait at most until the connection's next
            // turn, which the waiting reply or new requests bring.
            let holding = !owed_before && c.conn.in_flight() && c.conn.out.len() < HOLD_AHEAD;
            if !c.dead && !c.blocked && !c.conn.out.is_empty() && !holding {
                flush(self.shared, c);
            }
            // A connection whose replies wait for writes goes once they are
            // out (a dead one at once: the shard keeps the writes).
            let settled = !c.conn.in_flight();
            if c.dead || (settled && c.closing && !c.blocked) {
                self.close(i);
                return;
            }
            let idle = settled
                && !c.blocked
                && !c.closing
                && c.input.bytes().is_empty()
                && c.conn.answerable_while_busy();
            self.shard
                .busy()
                .set_idle(i, idle, c.conn.proto, c.conn.tx.is_some());
            if !settled {
                if !c.waiting {
                    c.waiting = true;
                    self.waiting.push(i);
                }
            } else if again && !c.blocked && !c.dead {
                self.queue(i);
            }
        }
    }

    /// Runs again the commands of the connections blocked on keys written
    /// since, first blocked first, until no written key has a waiter that
    /// finds something (a served BLMOVE writes another key).
    fn serve_blocked(&mut self) {
        loop {
            let ended = self.shard.blocking().take_unblocked();
            for (t, error) in ended {
                if let Some(c) = self.conns.get_mut(t).and_then(|c| c.as_mut()) {
                    if let Some(r) = c.conn.unblocked_by_client(error) {
                        c.conn.push(r);
                        self.queue(t);
                    }
                }
            }
            let ready = self.shard.blocking().take_ready();
            if ready.is_empty() {
                return;
            }
            for o in ready {
                let waiters = self.shard.blocking().waiters(&o);
                for t in waiters {
                    let Some(c) = self.conns.get_mut(t).and_then(|c| c.as_mut()) else {
                        continue;
                    };
                    if let Some(r) = c.conn.retry_blocked() {
                        c.conn.push(r);
                        self.queue(t);
                    }
                }
            }
        }
    }

    /// Hands the messages published to their subscribers. A subscriber
    /// that owes more than [`PUBSUB_LIMIT`] (it does not read) is
    /// disconnected, as Redis's `client-output-buffer-limit pubsub`.
    fn deliver(&mut self) {
        let outbox = self.shard.pubsub().take_outbox();
        for (t, msg, deps) in outbox {
            let Some(c) = self.conns.get_mut(t).and_then(|c| c.as_mut()) else {
                continue;
            };
            if c.dead {
                continue;
            }
            c.conn.push_message(msg, deps);
            if c.conn.owed() > PUBSUB_LIMIT {
                tracing::warn!(
                    "client {} ({}): over the pub/sub output limit of {PUBSUB_LIMIT} bytes; closing it",
                    c.conn.client.id,
                    c.conn.client.addr
                );
                c.dead = true;
            }
            self.queue(t);
        }
        let invalidations = self.shard.tracking().take_outbox();
        for inv in invalidations {
            self.invalidate(inv);
        }
    }

    /// Hands a CLIENT TRACKING invalidation to its connection, or to the
    /// one it redirects to: a push in RESP3, a `__redis__:invalidate`
    /// message to a subscribed RESP2 connection, nothing to a RESP2
    /// connection that does not redirect. A redirect to a connection that
    /// is gone breaks: the tracking connection is told (in RESP3).
    fn invalidate(&mut self, inv: Invalidation<'a>) {
        let Some(redirect) = self
            .shard
            .tracking()
            .get(inv.token)
            .map(|t| t.mode.redirect)
        else {
            return;
        };
        let target = if redirect == 0 {
            Some(inv.token)
        } else {
            self.ids.get(&redirect).copied()
        };
        let Some(target) = target.filter(|&t| self.conns.get(t).is_some_and(Option::is_some))
        else {
            if let Some(t) = self.shard.tracking().get_mut(inv.token) {
                t.broken = true;
            }
            let Some(c) = self.conns.get_mut(inv.token).and_then(|c| c.as_mut()) else {
                return;
            };
            c.conn.show_tracking();
            if c.conn.proto >= 3 {
                let msg = Reply::Push(vec![
                    Reply::bulk("tracking-redir-broken"),
                    Reply::Int(redirect as i64),
                ]);
                c.conn.push_message(msg, inv.deps);
                self.queue(inv.token);
            }
            return;
        };
        let Some(c) = self.conns.get_mut(target).and_then(|c| c.as_mut()) else {
            return;
        };
        let keys = match inv.keys {
            Some(ks) => Reply::Array(ks.into_iter().map(Reply::Bulk).collect()),
            None => Reply::Nil,
        };
        let msg = if c.conn.proto >= 3 {
            Reply::Push(vec![Reply::bulk("invalidate"), keys])
        } else if redirect != 0 && c.conn.subs.any() {
            Reply::Push(vec![
                Reply::bulk("message"),
                Reply::bulk("__redis__:invalidate"),
                keys,
            ])
        } else {
            return;
        };
        if c.dead {
            return;
        }
        c.conn.push_message(msg, inv.deps);
        self.queue(target);
    }

    /// Answers the blocked connections whose time is up.
    fn time_out_blocked(&mut self) {
        let due = self.shard.blocking().due(Instant::now());
        for t in due {
            if let Some(c) = self.conns.get_mut(t).and_then(|c| c.as_mut()) {
                if let Some(r) = c.conn.time_out_blocked() {
                    c.conn.push(r);
                    self.queue(t);
                }
            }
        }
    }

    fn close(&mut self, i: usize) {
        if let Some(c) = self.conns[i].take() {
            self.ids.remove(&c.conn.client.id);
            self.shard.tracking().disable(i);
            self.shard.pubsub().unmonitor(i);
            self.shard.busy().leave(i);
            self.free.push(i);
        }
    }
}
