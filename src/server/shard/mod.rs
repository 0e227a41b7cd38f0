//! A shard's state: the keys it owns as its commands see them. Commands
//! run here serially, to completion, on the shard's thread: a write is
//! applied at once to the shard's table of dirty keys (so the next
//! command on that key, a hot INCR, reads it at memory speed) and goes to
//! the turn's batch for its durability level; at the end of the turn the
//! batches go to the engine together and share the WAL's group commit.
//!
//! A reply never reveals a write that a crash could lose: every command
//! collects the [`Deps`] of what it read (the dirty keys' writes and what
//! they depended on in turn) and of what it wrote, and its reply leaves
//! only once those writes are acknowledged at their own levels (early
//! lock release with flush pipelining, as Aether names it; Redis with
//! `appendfsync always` does the same for a whole event-loop turn). A
//! dirty key stays in the table until its write is acknowledged and in
//! the engine's memstore, and what it depended on is acknowledged too:
//! from then on, a read of the engine reveals nothing a crash could lose.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use super::script::Vm;
use super::ServerEngine;
use crate::config::Durability;
use crate::device::AnyDevice;
use crate::engine::{EngineError, Pending};
use crate::wal::format::record_len;
use crate::wal::{Notify, Ticket};
use access::AccessClock;
use ahead::Ahead;
use blocking::Blocking;
use busy::Busy;
use dirty::DirtyTable;
use draws::Draws;
use gaps::Gaps;
use pubsub::PubSub;
use rows::Rows;
pub use rows::{Row, RowStats};
use sockets::Sockets;
use tracking::Tracking;
use watch::Watches;

/// Engine writes per submission at most (and per scan step). A
/// submission is one WAL group too (see [`Shard::submit`]).
pub const CHUNK: usize = 1024;

/// An engine write: a key and its value, or `None` for a delete.
pub type Write = (Vec<u8>, Option<Vec<u8>>);

/// A write as the shard keeps it: its value shared between the dirty
/// table and the batch, so a SET copies its value once.
type Queued = (Rc<[u8]>, Option<Rc<Vec<u8>>>);

/// Engine keys and values a scan found.
pub type Found = Vec<(Vec<u8>, Vec<u8>)>;

/// The writes of one turn at one durability level, or a barrier (WAITAOF).
pub struct Batch<'a> {
    /// Order of creation on the shard, which is the order of submission,
    /// and so of LSNs.
    seq: u64,
    level: Durability,
    /// Engine writes (`None`: a delete) and where each command's end.
    writes: RefCell<Vec<Queued>>,
    ends: RefCell<Vec<usize>>,
    /// For each write whose key a later command of the batch wrote again,
    /// where that write is (`u32::MAX` for the others; empty while there
    /// is none): a submission holding both logs only the later one.
    later: RefCell<Vec<u32>>,
    /// The keys written, kept after submission to leave the dirty table.
    keys: RefCell<Vec<Rc<[u8]>>>,
    /// What the writes of the batch depended on.
    deps: RefCell<Deps<'a>>,
    state: RefCell<State<'a>>,
    /// Acknowledged, and every write succeeded: known once, for the many
    /// replies that ask before `retire` settles the batch.
    succeeded: Cell<bool>,
    /// Acknowledged (or failed): every connection that waits for the
    /// batch asks, each turn and before each poll.
    done: Cell<bool>,
}

enum State<'a> {
    Open,
    Submitted(Vec<Pending<'a, AnyDevice>>),
    Barrier(Ticket),
    Done(Result<(), String>),
}

impl<'a> Batch<'a> {
    /// A batch with room for `writes` writes of `commands` commands.
    fn new(seq: u64, level: Durability, (writes, commands): (usize, usize)) -> Batch<'a> {
        Batch {
            seq,
            level,
            writes: RefCell::new(Vec::with_capacity(writes)),
            ends: RefCell::new(Vec::with_capacity(commands)),
            later: RefCell::new(Vec::new()),
            keys: RefCell::new(Vec::new()),
            deps: RefCell::new(Deps::default()),
            state: RefCell::new(State::Open),
            succeeded: Cell::new(false),
            done: Cell::new(false),
        }
    }

    /// Acknowledged (or failed) at its level.
    pub fn is_done(&self) -> bool {
        if self.done.get() {
            return true;
        }
        let done = match &*self.state.borrow() {
            State::Open => false,
            State::Submitted(p) => p.iter().all(Pending::is_done),
            State::Barrier(t) => t.is_done(),
            State::Done(_) => true,
        };
        self.done.set(done);
        done
    }

    /// Once done: the outcome, the writes inserted into the memstores.
    fn settle(&self) -> Result<(), String> {
        let mut st = self.state.borrow_mut();
        let r = match std::mem::replace(&mut *st, State::Open) {
            State::Submitted(ps) => ps
                .into_iter()
                .try_for_each(|p| p.wait().map_err(|e| e.to_string())),
            State::Barrier(t) => t
                .wait()
                .map(|_| ())
                .map_err(|e| format!("the log could not be made durable: {e}")),
            State::Done(r) => r,
            State::Open => Err("internal error: the write was not submitted".into()),
        };
        *st = State::Done(r.clone());
        r
    }

    /// The failure, once done. A batch that succeeded is not settled: its
    /// inserts wait for `retire`, after the turn's replies are out.
    fn failure(&self) -> Option<String> {
        if self.succeeded.get() || !self.is_done() {
            return None;
        }
        if let State::Submitted(ps) = &*self.state.borrow() {
            if ps.iter().all(|p| matches!(p.outcome(), Some(Ok(())))) {
                self.succeeded.set(true);
                return None;
            }
        }
        self.settle().err()
    }
}

/// The writes a reply (or a dirty key) depends on: per level that a reply
/// waits for, the newest such batch of the shard. Batches of one level
/// are acknowledged in the order they were submitted (the WAL's written
/// and durable LSNs only grow), so the newest stands for all before it.
/// `none` and `async` writes are acknowledged before they are durable by
/// their meaning: nothing waits for them.
#[derive(Clone, Default)]
pub struct Deps<'a> {
    written: Option<Rc<Batch<'a>>>,
    synced: Option<Rc<Batch<'a>>>,
}

impl<'a> Deps<'a> {
    /// Depends on `b` too.
    pub fn add(&mut self, b: &Rc<Batch<'a>>) {
        let slot = match b.level {
            Durability::Write => &mut self.written,
            Durability::Sync => &mut self.synced,
            Durability::None | Durability::Async => return,
        };
        if slot.as_ref().is_none_or(|s| s.seq < b.seq) {
            *slot = Some(b.clone());
        }
    }

    /// Depends on everything `o` depends on too.
    pub fn merge(&mut self, o: &Deps<'a>) {
        for b in o.written.iter().chain(&o.synced) {
            self.add(b);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.written.is_none() && self.synced.is_none()
    }

    /// Every write depended on is acknowledged (or failed).
    pub fn ready(&self) -> bool {
        self.written.iter().chain(&self.synced).all(|b| b.is_done())
    }

    /// What is left to wait for: the writes not yet acknowledged, and
    /// those that failed (a reply that depends on them is an error).
    pub fn unsettled(&self) -> Deps<'a> {
        let keep = |b: &Option<Rc<Batch<'a>>>| {
            b.as_ref()
                .filter(|b| !b.is_done() || b.failure().is_some())
                .cloned()
        };
        Deps {
            written: keep(&self.written),
            synced: keep(&self.synced),
        }
    }

    /// Why a write depended on failed, once [`Deps::ready`].
    pub fn failure(&self) -> Option<String> {
        self.written
            .iter()
            .chain(&self.synced)
            .find_map(|b| b.failure())
    }
}

/// Wakes no one: for a shard outside a loop (tests).
#[derive(Debug)]
struct NoNotify;

impl Notify for NoNotify {
    fn notify(&self) {}
}

/// A key written on the shard whose write is not yet acknowledged and in
/// the engine (or whose dependencies are not).
struct Dirty<'a> {
    value: Option<Rc<Vec<u8>>>,
    batch: Rc<Batch<'a>>,
    /// Where the write is in its batch's writes.
    slot: usize,
    /// The write itself, and what it depended on.
    deps: Deps<'a>,
}

/// One shard's state.
pub struct Shard<'a> {
    engine: &'a ServerEngine,
    dirty: RefCell<DirtyTable<Dirty<'a>>>,
    /// Keys whose last write failed after its reply went out (`none` and
    /// `async`, which no reply waits for), and why: the engine holds what
    /// was there before, which the client was told is gone, so a read of
    /// them is that error until a write of them is in.
    lost: RefCell<BTreeMap<Vec<u8>, String>>,
    /// Ranges of keys known to hold no live key, for scans to skip.
    gaps: RefCell<Gaps<'a>>,
    /// Members of large sets SPOP found ahead of its next pops.
    draws: RefCell<Draws>,
    /// Batches of the turn under way, in order.
    open: RefCell<Vec<Rc<Batch<'a>>>>,
    /// Submitted batches whose keys are still dirty.
    flight: RefCell<VecDeque<Rc<Batch<'a>>>>,
    next_seq: std::cell::Cell<u64>,
    /// The writes and commands of the last batch submitted: a new batch
    /// starts with room for as many (see [`SIZE_HINT_MAX`]), so a turn
    /// of hundreds of commands does not grow its queue a dozen times,
    /// each growth a copy of it into memory the CPU's cache has not seen.
    size_hint: std::cell::Cell<(usize, usize)>,
    /// What the dirty keys hold, by [`dirty_bytes`].
    dirty_bytes: std::cell::Cell<usize>,
    /// What the block files held of keys read lately that no memstore
    /// had (see [`rows`]).
    rows: Rows,
    /// What the block files held of the keys runs of pops read next
    /// (see [`ahead`]).
    ahead: Ahead,
    /// The keys connections watch.
    watches: RefCell<Watches>,
    /// The clients blocked on keys.
    blocking: RefCell<Blocking>,
    /// Pub/sub subscriptions, and messages to hand over.
    pubsub: RefCell<PubSub<'a>>,
    /// CLIENT TRACKING: who tracks what, and invalidations to hand over.
    tracking: RefCell<Tracking<'a>>,
    /// The shard's Lua state, once a script has run.
    scripting: RefCell<Option<Vm>>,
    /// A transaction runs: its commands' writes are one command's (one
    /// WAL group) until it ends.
    atomic: std::cell::Cell<bool>,
    /// The connections a script past busy-reply-threshold answers.
    busy: Rc<Busy>,
    /// When keys were last read or written (OBJECT IDLETIME).
    access: RefCell<AccessClock>,
    /// An entry of the expiry index was written since the active expiry
    /// cycle last asked ([`Shard::take_expiry_written`]).
    expiry_written: std::cell::Cell<bool>,
    /// MIGRATE's connections to target servers.
    sockets: RefCell<Sockets>,
    /// What wakes the shard's loop when a batch is acknowledged.
    notify: RefCell<Option<Arc<dyn Notify>>>,
}

/// The error of a read of a key whose acknowledged write failed.
fn lost_write(why: &str) -> EngineError {
    EngineError::Failed(format!(
        "a write of this key that was acknowledged before it was durable failed: {why}"
    ))
}

/// The most writes (and commands) a new batch makes room for ahead: a
/// batch of a big transaction does not leave every later one as large.
const SIZE_HINT_MAX: usize = 4096;

/// A dirty key's bytes as [`Shard::pending_bytes`] counts them.
fn dirty_bytes(key: &[u8], value: Option<&Rc<Vec<u8>>>) -> usize {
    key.len() + value.map_or(0, |v| v.len()) + 64
}

/// A batch whose command read what an earlier command of the same batch
/// wrote depends on itself, a cycle of `Rc`s that only its retirement
/// breaks (`retire` empties a batch's dependencies). A shard dropped
/// with such batches unretired (a clean stop right after its last reply
/// went out) breaks the cycles here, or the batches, their pending writes
/// and so the engine would never be let go: its close would find itself
/// still owned.
impl Drop for Shard<'_> {
    fn drop(&mut self) {
        let open = self.open.borrow();
        let flight = self.flight.borrow();
        for b in open.iter().chain(flight.iter()) {
            *b.deps.borrow_mut() = Deps::default();
        }
    }
}

impl<'a> Shard<'a> {
    /// A shard with a row cache of `row_cache` bytes (0: none).
    pub fn new(engine: &'a ServerEngine, row_cache: u64) -> Shard<'a> {
        Shard {
            engine,
            dirty: RefCell::new(DirtyTable::default()),
            lost: RefCell::default(),
            gaps: RefCell::default(),
            draws: RefCell::default(),
            open: RefCell::new(Vec::new()),
            flight: RefCell::new(VecDeque::new()),
            next_seq: std::cell::Cell::new(0),
            size_hint: std::cell::Cell::new((0, 0)),
            dirty_bytes: std::cell::Cell::new(0),
            rows: Rows::new(row_cache),
            ahead: Ahead::default(),
            watches: RefCell::new(Watches::default()),
            blocking: RefCell::new(Blocking::default()),
            pubsub: RefCell::new(PubSub::default()),
            tracking: RefCell::new(Tracking::default()),
            scripting: RefCell::new(None),
            atomic: std::cell::Cell::new(false),
            busy: Rc::default(),
            access: RefCell::default(),
            expiry_written: std::cell::Cell::new(false),
            sockets: RefCell::default(),
            notify: RefCell::new(None),
        }
    }

    /// Members of large sets found ahead of their next pops (SPOP).
    pub fn draws(&self) -> std::cell::RefMut<'_, Draws> {
        self.draws.borrow_mut()
    }

    /// The connections a script past busy-reply-threshold answers `BUSY`.
    pub fn busy(&self) -> &Rc<Busy> {
        &self.busy
    }

    /// Sets what [`Shard::make_durable`] submits with: the loop's waker.
    pub fn set_notify(&self, notify: Arc<dyn Notify>) {
        *self.notify.borrow_mut() = Some(notify);
    }

    /// Submits the turn's batches and waits until the writes `deps`
    /// depends on are acknowledged, for a command that hands what it read
    /// to another server (MIGRATE): what leaves the shard must not be a
    /// write a crash could lose. Refused inside a transaction or script,
    /// whose writes go to the log together when it ends.
    pub fn make_durable(&self, deps: &Deps<'a>) -> Result<(), String> {
        if deps.ready() {
            return Ok(());
        }
        if self.in_atomic() {
            return Err("a key whose last write is not yet durable cannot be sent to another server from a transaction or script".into());
        }
        let notify = self.notify.borrow().clone();
        self.submit(&notify.unwrap_or_else(|| Arc::new(NoNotify)));
        for b in deps.written.iter().chain(&deps.synced) {
            // A blocking wait drives a log this thread hosts.
            b.settle()?;
        }
        Ok(())
    }

    /// MIGRATE's connections to target servers.
    pub fn sockets(&self) -> std::cell::RefMut<'_, Sockets> {
        self.sockets.borrow_mut()
    }

    /// When keys were last read or written.
    pub fn access(&self) -> std::cell::RefMut<'_, AccessClock> {
        self.access.borrow_mut()
    }

    /// The keys connections watch (WATCH).
    pub fn watches(&self) -> std::cell::RefMut<'_, Watches> {
        self.watches.borrow_mut()
    }

    /// The clients blocked on keys (BLPOP and the like).
    pub fn blocking(&self) -> std::cell::RefMut<'_, Blocking> {
        self.blocking.borrow_mut()
    }

    /// The shard's Lua state (`None` until a script runs).
    pub fn scripting(&self) -> std::cell::RefMut<'_, Option<Vm>> {
        self.scripting.borrow_mut()
    }

    /// Pub/sub subscriptions and the messages to hand over.
    pub fn pubsub(&self) -> std::cell::RefMut<'_, PubSub<'a>> {
        self.pubsub.borrow_mut()
    }

    /// Whether the event loop has other connections to serve before the
    /// next command: waiters whose key was written, messages published.
    pub fn has_events(&self) -> bool {
        self.blocking.borrow().has_ready()
            || self.pubsub.borrow().has_outbox()
            || self.tracking.borrow().has_outbox()
    }

    pub fn tracking(&self) -> std::cell::RefMut<'_, Tracking<'a>> {
        self.tracking.borrow_mut()
    }

    /// What a command's writes of engine keys `written` tell the keys'
    /// watchers (WATCH) and waiters (BLPOP).
    pub fn note_writes(&self, written: &[Write]) {
        self.watches
            .borrow_mut()
            .touch(written.iter().map(|(k, _)| k.as_slice()));
        self.blocking
            .borrow_mut()
            .touch(written.iter().map(|(k, _)| k.as_slice()));
    }

    /// Whether a running transaction's commands are what runs now.
    pub fn in_atomic(&self) -> bool {
        self.atomic.get()
    }

    /// From here to [`Shard::end_atomic`], writes are those of one command:
    /// one WAL group, logged whole or not at all (EXEC).
    pub fn begin_atomic(&self) {
        self.atomic.set(true);
    }

    /// Ends what [`Shard::begin_atomic`] began: the writes since are one
    /// command's in every batch they went to.
    pub fn end_atomic(&self) {
        if !self.atomic.replace(false) {
            return;
        }
        for b in self.open.borrow().iter() {
            let n = b.writes.borrow().len();
            let mut ends = b.ends.borrow_mut();
            if n > 0 && ends.last() != Some(&n) {
                ends.push(n);
            }
        }
    }

    /// The batch a write at `level` joins: the turn's last one if it is
    /// at that level (and not `fresh`), else a new one after it. Never an
    /// earlier one: its LSNs would come before those of a later batch of
    /// another level, and recovery would replay this write before writes
    /// the shard applied before it (an INCR at `write` after one at `sync`
    /// of the same key would come back as the older value).
    fn batch(&self, level: Durability, fresh: bool) -> Rc<Batch<'a>> {
        let mut open = self.open.borrow_mut();
        if !fresh {
            if let Some(b) = open.last().filter(|b| b.level == level) {
                return b.clone();
            }
        }
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        let b = Rc::new(Batch::new(seq, level, self.size_hint.get()));
        open.push(b.clone());
        b
    }

    /// The value of engine key `key` as the shard's commands see it; what
    /// the reply then depends on goes to `deps`.
    pub fn get(&self, key: &[u8], deps: &mut Deps<'a>) -> Result<Option<Vec<u8>>, EngineError> {
        self.read(key, None::<fn() -> (Vec<u8>, Vec<u8>)>, deps)
            .map(ahead::Found::owned)
    }

    /// [`Shard::get`], the value shared with the dirty table or the row
    /// cache rather than copied (a GET copies it once, into its reply).
    pub fn get_shared(&self, key: &[u8], deps: &mut Deps<'a>) -> Result<Row, EngineError> {
        self.read(key, None::<fn() -> (Vec<u8>, Vec<u8>)>, deps)
            .map(ahead::Found::row)
    }

    /// What the row cache holds and has served, and the read-ahead.
    pub fn row_stats(&self) -> RowStats {
        let (ahead_hits, ahead_reads) = self.ahead.stats();
        RowStats {
            ahead_hits,
            ahead_reads,
            ..self.rows.stats()
        }
    }

    /// Applies `writes` (one command's) at once and queues them for the
    /// end of the turn at `level`. They depend on `deps` (what the command
    /// read), and `deps` then on them.
    pub fn write(&self, level: Durability, writes: Vec<Write>, deps: &mut Deps<'a>) {
        if writes.is_empty() {
            return;
        }
        // A `none` write has no LSN: the engine gives it the highest LSN
        // inserted so far. Over a key whose earlier write is still on its
        // way, that version would sort below the earlier write's LSN, and
        // the earlier write would come back over it once inserted. Such a
        // write goes at `async`: it gets an LSN after the earlier one, and
        // its reply still waits for nothing.
        let level = match level {
            // One batch for a whole transaction: a `none` write in it
            // goes at `async`, which waits for nothing either.
            Durability::None if self.atomic.get() => Durability::Async,
            Durability::None
                if writes
                    .iter()
                    .any(|(k, _)| self.dirty.borrow().contains_key(k)) =>
            {
                Durability::Async
            }
            l => l,
        };
        let b = self.batch(level, false);
        // What the command read, not the batch itself: a batch never
        // depends on itself (see `retire` for the batches of one turn
        // that depend on each other).
        b.deps.borrow_mut().merge(deps);
        deps.add(&b);
        let mut dirty = self.dirty.borrow_mut();
        let mut queued = b.writes.borrow_mut();
        let mut bytes = self.dirty_bytes.get();
        // This command's (or transaction's) writes so far in the batch:
        // one WAL group, whole or gone after a crash.
        let group = b.ends.borrow().last().copied().unwrap_or(0);
        let mut gaps = self.gaps.borrow_mut();
        let mut ours = Deps::default();
        ours.add(&b);
        for (k, v) in writes {
            if v.is_some() {
                if k.starts_with(super::keys::EXPIRES) {
                    self.expiry_written.set(true);
                }
                gaps.written(&k);
            } else {
                gaps.deleted(&k, &ours);
            }
            // The row cache keeps the key's old row: reads ask this
            // table first, and `retire` replaces the row.
            let v = v.map(Rc::new);
            let k: Rc<[u8]> = k.into();
            bytes += dirty_bytes(&k, v.as_ref());
            // A key the same group wrote before (INCR then EXPIRE in one
            // transaction) is written once, with its last value: no one
            // can see the first, in the shard or after a crash.
            let mut again = None;
            let mut before = None;
            let old = dirty.put(k.clone(), |old| {
                let ours = old.filter(|o| Rc::ptr_eq(&o.batch, &b));
                again = ours.filter(|o| o.slot >= group).map(|o| o.slot);
                // An earlier command of the batch wrote it: the submission
                // that holds both (one WAL group, whole or gone after a
                // crash) need not log the first.
                before = ours.filter(|o| o.slot < group).map(|o| o.slot);
                Dirty {
                    value: v.clone(),
                    batch: b.clone(),
                    slot: again.unwrap_or(queued.len()),
                    deps: deps.clone(),
                }
            });
            if let Some(old) = old {
                bytes -= dirty_bytes(&k, old.value.as_ref());
            }
            match again {
                Some(i) => queued[i].1 = v,
                None => {
                    if let Some(i) = before {
                        let mut later = b.later.borrow_mut();
                        // Room for every write the queue has room for.
                        let room = queued.capacity().saturating_sub(later.len());
                        later.reserve(room);
                        later.resize(queued.len(), u32::MAX);
                        later[i] = u32::try_from(queued.len()).expect("fewer than 2^32 writes");
                    }
                    queued.push((k, v));
                }
            }
        }
        self.dirty_bytes.set(bytes);
        if !self.atomic.get() {
            b.ends.borrow_mut().push(queued.len());
        }
    }

    /// Whether the turn has a batch to submit that waits for the log's
    /// FLUSH (a `sync` batch or a barrier): more clients may as well share
    /// that FLUSH.
    pub fn awaits_flush(&self) -> bool {
        self.open
            .borrow()
            .iter()
            .any(|b| b.level == Durability::Sync)
    }

    /// The writes queued in the turn's batches, not yet submitted.
    #[cfg(test)]
    pub fn queued_writes(&self) -> usize {
        self.open
            .borrow()
            .iter()
            .map(|b| b.writes.borrow().len())
            .sum()
    }

    /// Whether an entry of the expiry index was written since the last
    /// call: then keys with an expiry exist, or did a moment ago.
    pub fn take_expiry_written(&self) -> bool {
        self.expiry_written.replace(false)
    }

    /// A barrier after every write so far: `deps` waits until they are
    /// all durable (WAITAOF). A new batch, submitted after every other of
    /// the turn; `sync` writes that join it later only move it on.
    pub fn barrier(&self, deps: &mut Deps<'a>) {
        let b = self.batch(Durability::Sync, true);
        deps.add(&b);
    }

    /// Submits the turn's batches to the engine, in order; `notify` is
    /// told as each is acknowledged. True if one of them was done before
    /// `notify` could be told (it failed at once, or the log acknowledged
    /// it before the notice was registered): then no notice comes for it.
    pub fn submit(&self, notify: &Arc<dyn Notify>) -> bool {
        let mut done = false;
        let open = std::mem::take(&mut *self.open.borrow_mut());
        for b in open {
            let writes = std::mem::take(&mut *b.writes.borrow_mut());
            let ends = std::mem::take(&mut *b.ends.borrow_mut());
            let later = std::mem::take(&mut *b.later.borrow_mut());
            self.size_hint.set((
                writes.len().min(SIZE_HINT_MAX),
                ends.len().min(SIZE_HINT_MAX),
            ));
            let state = if writes.is_empty() {
                // A barrier.
                match self.engine.wal().barrier() {
                    Ok(t) => {
                        t.notify(notify.clone());
                        State::Barrier(t)
                    }
                    Err(e) => State::Done(Err(format!("the log could not be made durable: {e}"))),
                }
            } else {
                self.submit_writes(&b, &writes, &ends, &later, notify)
            };
            // A key written again later in the batch is listed once, at
            // its last write: retirement takes it out of the dirty table once.
            let mut keys = Vec::with_capacity(writes.len());
            keys.extend(
                writes
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| later.get(*i).is_none_or(|&l| l == u32::MAX))
                    .map(|(_, (k, _))| k),
            );
            *b.keys.borrow_mut() = keys;
            // Never asked before now: `is_done` remembers a `true`.
            debug_assert!(matches!(*b.state.borrow(), State::Open) && !b.done.get());
            *b.state.borrow_mut() = state;
            done |= b.is_done();
            self.flight.borrow_mut().push_back(b);
        }
        done
    }

    fn submit_writes(
        &self,
        b: &Batch<'a>,
        writes: &[Queued],
        ends: &[usize],
        later: &[u32],
        notify: &Arc<dyn Notify>,
    ) -> State<'a> {
        // Commands' writes together, each submission one WAL group (so
        // after a crash the log holds the whole of it or none, in the
        // order the shard applied it) of at most CHUNK writes: commands
        // are never split, and one that alone is larger than a group goes
        // alone (the engine then splits it).
        let max = self.engine.wal().max_group_bytes();
        let mut pendings = Vec::new();
        let (mut from, mut start, mut bytes) = (0, 0, 0);
        let mut result = Ok(());
        for &end in ends {
            let cmd: usize = writes[start..end]
                .iter()
                .map(|(k, v)| record_len(k.len(), v.as_ref().map_or(0, |v| v.len())))
                .sum();
            if start > from && (bytes + cmd > max || end - from > CHUNK) {
                result =
                    self.submit_range(b.level, writes, (from, start), later, notify, &mut pendings);
                if result.is_err() {
                    break;
                }
                (from, bytes) = (start, 0);
            }
            bytes += cmd;
            start = end;
        }
        if result.is_ok() && from < writes.len() {
            let all = (from, writes.len());
            result = self.submit_range(b.level, writes, all, later, notify, &mut pendings);
        }
        match result {
            Ok(()) => State::Submitted(pendings),
            Err(e) => {
                for p in pendings {
                    let _ = p.wait();
                }
                State::Done(Err(e))
            }
        }
    }

    /// Submits `writes[from..to]` as one WAL group, but those a later
    /// write of the group replaces.
    fn submit_range(
        &self,
        level: Durability,
        writes: &[Queued],
        (from, to): (usize, usize),
        later: &[u32],
        notify: &Arc<dyn Notify>,
        pendings: &mut Vec<Pending<'a, AnyDevice>>,
    ) -> Result<(), String> {
        let replaced = |i: usize| later.get(i).is_some_and(|&l| (l as usize) < to);
        let mut refs: Vec<(&[u8], Option<&[u8]>)> = Vec::with_capacity(to - from);
        refs.extend((from..to).filter(|&i| !replaced(i)).map(|i| {
            let (k, v) = &writes[i];
            (&**k, v.as_deref().map(Vec::as_slice))
        }));
        let p = self
            .engine
            .submit(&refs, Some(level))
            .map_err(|e| e.to_string())?;
        p.notify(notify.clone());
        pendings.push(p);
        Ok(())
    }

    /// Lets go of the batches that are acknowledged: their writes go into
    /// the memstores, and their keys leave the dirty table once what they
    /// depended on is acknowledged too (a failed write's keys leave it at
    /// once: reads find the engine's value again).
    pub fn retire(&self) {
        // Before any write leaves the dirty table: an element read absent
        // and not written since is still absent.
        self.rows
            .settle_absent(|k| self.dirty.borrow().contains_key(k));
        let mut flight = self.flight.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        // A batch kept in flight, before the one at hand.
        let mut earlier = false;
        flight.retain(|b| {
            let keep = if !b.is_done() {
                true
            } else {
                let failed = b.settle().is_err();
                // A failed batch lets go of its keys only after the
                // batches before it: one of them may have written the
                // same key, and until it is in the memstore a read of the
                // engine would find what came before both (and the row
                // cache keep it). Until then its keys read as its writes,
                // and the replies that read them get its error.
                (failed && earlier) || (!failed && !b.deps.borrow().ready())
            };
            if keep {
                earlier = true;
                return true;
            }
            let failure = b.settle().err();
            // A failed `none` or `async` write was acknowledged before it
            // failed: its keys must not read as the engine has them.
            let unwaited = matches!(b.level, Durability::None | Durability::Async);
            let mut lost = self.lost.borrow_mut();
            // Batches of one turn at two levels may depend on each other
            // (a command at one level read a key written at the other):
            // the references go with the batch, so neither outlives it.
            *b.deps.borrow_mut() = Deps::default();
            // One search of the table per key.
            for k in std::mem::take(&mut *b.keys.borrow_mut()) {
                let d = match dirty.take_if(k.clone(), |d| Rc::ptr_eq(&d.batch, b)) {
                    Ok(d) => d,
                    // A later write of the key is dirty (and ends the
                    // loss, once it is in).
                    Err(true) => {
                        if let (Some(why), true) = (&failure, unwaited) {
                            lost.insert(k.to_vec(), why.clone());
                        }
                        continue;
                    }
                    Err(false) => continue,
                };
                match &failure {
                    Some(why) if unwaited => {
                        lost.insert(k.to_vec(), why.clone());
                    }
                    Some(_) => {}
                    None => {
                        if !lost.is_empty() {
                            lost.remove(&*k);
                        }
                    }
                }
                // Reads find the write in its memstore now (the row cache
                // is below the memstores: nothing to change there).
                self.dirty_bytes
                    .set(self.dirty_bytes.get() - dirty_bytes(&k, d.value.as_ref()));
            }
            false
        });
    }

    /// The error of a scan of `[start, end)` if a key in it is lost (see
    /// the `lost` field).
    fn lost_in(&self, start: &[u8], end: Option<&[u8]>) -> Option<EngineError> {
        let lost = self.lost.borrow();
        if lost.is_empty() {
            return None;
        }
        let upto = end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let mut hit = lost.range::<[u8], _>((std::ops::Bound::Included(start), upto));
        hit.next().map(|(_, why)| lost_write(why))
    }

    /// Dirty keys, and the bytes they hold (keys, values and overhead).
    pub fn pending(&self) -> (usize, usize) {
        (self.dirty.borrow().len(), self.dirty_bytes.get())
    }

    /// Waits for every batch submitted (a stopping server).
    pub fn settle_all(&self) {
        for b in self.flight.borrow().iter() {
            let _ = b.settle();
        }
        self.retire();
    }
}

pub mod access;
mod ahead;
pub mod blocking;
pub mod busy;
#[cfg(test)]
pub(crate) mod crash_tests;
mod dirty;
pub mod draws;
mod gaps;
#[cfg(test)]
mod prefix_tests;
pub mod pubsub;
mod rows;
mod scan;
pub mod sockets;
#[cfg(test)]
pub(crate) mod tests;
pub mod tracking;
pub mod watch;
