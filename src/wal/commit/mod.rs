//! Group commit: the WAL reactor's work.
//!
//! # Design
//!
//! One reactor owns a queue on every WAL device of the stripe. Writers hand
//! it appends through its bounded ring; it gives each an LSN in the order it
//! takes them and copies the record once, into the open batch's device
//! buffer. Nothing waits to fill a batch: as soon as a device has a free
//! batch slot, the open batch is sealed and written there. While batches
//! are in flight, the appends that arrive form the next ones, so the batch
//! size grows with the load by itself (the leader/follower of raft-engine's
//! write barrier, or HBase's ring of pending appends drained by one syncer,
//! with the device queue as the leader).
//!
//! Striping: a batch goes to the device with a free slot and the fewest
//! bytes in flight (to `wal.copies` such devices, each copy sealed with
//! its own segment's number; `stripe.rs`). The open batch is also sealed and queued once it holds
//! its share of the bytes not yet written (those bytes over every slot of
//! the stripe, at least 16 KiB), so that a burst spreads over all the
//! devices. Without that, the appends arriving while every slot is busy
//! form one large batch, one device writes it while the others idle, and
//! every writer behind it waits (acknowledgements go in LSN order); on
//! devices whose bandwidth is the limit, four devices then did no better
//! than one.
//!
//! Durability is tracked per batch: `Writing` until its write completes,
//! then `Written`, then `Durable` once a flush submitted after the write
//! completed has completed on its device (at once on a device without a
//! volatile cache). A device is flushed only while some `sync` append is
//! waiting, and one flush covers every batch written on that device before
//! it was sent. Acknowledgements follow two watermarks over the batches in
//! LSN order: an append is acknowledged at `write` once every batch up to
//! its LSN is written, and at `sync` once every batch up to it is durable.
//! So acknowledgements go out in LSN order at every level, and after any
//! crash the devices hold a gap-free prefix that includes every
//! acknowledged `sync` append (every `write` one, too, after a process
//! crash).
//!
//! A batch is written once every copy is written, durable once every copy
//! is (`inflight.rs`). A device error fails the WAL (every waiting and
//! later append gets the error, since what the device holds is no longer
//! known), unless the batches can go on without that device: with several
//! copies and `on-device-loss: degrade`, the device is lost instead, its
//! copies are dropped from the batches in flight (each still has one on a
//! device that works) and later batches go to the devices left, with as
//! many copies as there are devices, up to `wal.copies`. With
//! `refuse-writes`, the WAL fails once fewer devices than `wal.copies` are
//! left.

mod complete;
mod submit;

pub(crate) use complete::Rejoin;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::format::{record_len, BatchBuilder, RecordOp, RecordRef};
use super::inflight::{Batch, State};
use super::stats::WalStats;
use super::stripe::Dev;
use super::ticket::TicketState;
use super::writer::LossHook;
use super::Lsn;
use crate::config::{DeviceLoss, Durability};
use crate::device::{IoBuf, Queue, WaitHint};
use crate::reactor::{Progress, Work};
use crate::record::Record;

/// The smallest batch sealed before a device slot is free (see
/// [`WalWork::stripe_unit`]).
const STRIPE_UNIT: usize = 16 << 10;

/// The tag of flush requests; write requests carry their batch id.
const FLUSH_TAG: u64 = u64::MAX;

/// What writers send the WAL reactor.
pub(crate) enum Msg {
    Append {
        op: RecordOp,
        region: u32,
        payload: Payload,
        durability: Durability,
        ticket: Arc<TicketState>,
    },
    /// Appends that take consecutive LSNs in one batch: after any crash
    /// either all of them are in the log or none is (a batch is whole or
    /// torn away), and nothing of another writer comes between them.
    Group {
        records: Vec<GroupRecord>,
        durability: Durability,
        /// One for the group, given its last LSN.
        ticket: Arc<TicketState>,
    },
    /// Completes once every append sent before it is durable.
    Barrier(Arc<TicketState>),
}

/// One record of a [`Msg::Group`]: its op, region and the record it shares
/// with a memstore.
pub type GroupRecord = (RecordOp, u32, Record);

impl Msg {
    /// Fails every ticket of the message.
    fn fail(&self, why: &str) {
        match self {
            Msg::Append { ticket, .. } | Msg::Barrier(ticket) | Msg::Group { ticket, .. } => {
                ticket.fail(why)
            }
        }
    }
}

/// An append's key and value: the writer's own, or a record it shares
/// (with a memstore), which the reactor lets go of once copied.
pub(crate) enum Payload {
    Pair(Vec<u8>, Vec<u8>),
    Shared(Record),
}

impl Payload {
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            Payload::Pair(k, _) => k,
            Payload::Shared(r) => r.key(),
        }
    }

    pub(crate) fn value(&self) -> &[u8] {
        match self {
            Payload::Pair(_, v) => v,
            Payload::Shared(r) => r.value(),
        }
    }
}

/// Watermarks the reactor publishes for the handle.
#[derive(Debug, Default)]
pub(crate) struct Published {
    /// Every LSN at or below is written / durable.
    pub write_lsn: AtomicU64,
    pub sync_lsn: AtomicU64,
    /// The memstores no longer need LSNs at or below this.
    pub released: AtomicU64,
    /// Segments of every device holding unreleased log, and in all.
    pub live_segments: AtomicU64,
    pub total_segments: AtomicU64,
    /// The next batch has no segment to go to: appends wait for the
    /// memstores that pin the log to be flushed.
    pub log_full: AtomicBool,
    /// Nothing will release log any more (the engine failed), for this
    /// reason: a full log fails the WAL instead of waiting forever.
    pub no_release: std::sync::OnceLock<String>,
}

/// The WAL reactor's state.
pub(crate) struct WalWork<Q: Queue> {
    devs: Vec<Dev<Q>>,
    appliance_id: u128,
    epoch: u64,
    block_size: u32,
    max_in_flight: usize,
    fua: bool,
    /// Devices each batch is written to, and what a lost device does.
    copies: usize,
    on_device_loss: DeviceLoss,
    /// Records a device lost while running before the WAL goes on without it.
    on_loss: Option<LossHook>,
    rr: usize,
    /// Free batch buffers; the last [`WalWork::reserve`] of them only for
    /// second and later copies.
    pool: Vec<IoBuf>,
    /// The batch being filled, and its first LSN.
    open: Option<(BatchBuilder, Lsn)>,
    /// Full batches waiting for a device: builder, first and last LSN.
    ready: VecDeque<(BatchBuilder, Lsn, Lsn)>,
    /// An append that found no buffer; the ring holds the rest.
    stalled: Option<Msg>,
    next_lsn: Lsn,
    next_batch: u64,
    batches: VecDeque<Batch>,
    write_lsn: Lsn,
    sync_lsn: Lsn,
    write_waiters: VecDeque<(Lsn, Arc<TicketState>)>,
    sync_waiters: VecDeque<(Lsn, Arc<TicketState>)>,
    failed: Option<String>,
    /// Leave the open batch open while a batch is on its way, unless it
    /// grew to its share of the stripe (a host: see `host.rs`).
    pub(super) one_at_a_time: bool,
    released: Lsn,
    /// Devices taken back while running ([`WalWork::rejoin`]), each with
    /// the first LSN it has every batch from.
    catching_up: Vec<(usize, Lsn)>,
    log_full_since: Option<Instant>,
    published: Arc<Published>,
    stats: Arc<WalStats>,
}

/// What the reactor starts from.
pub(crate) struct Start {
    pub appliance_id: u128,
    pub epoch: u64,
    pub next_lsn: Lsn,
    pub block_size: u32,
    pub batch_bytes: usize,
    pub buffers: usize,
    pub max_in_flight: usize,
    pub fua: bool,
    pub copies: usize,
    pub on_device_loss: DeviceLoss,
    pub on_loss: Option<LossHook>,
}

impl<Q: Queue> WalWork<Q> {
    pub fn new(
        devs: Vec<Dev<Q>>,
        start: Start,
        alloc: impl Fn(usize) -> IoBuf,
        published: Arc<Published>,
        stats: Arc<WalStats>,
    ) -> WalWork<Q> {
        let durable = start.next_lsn - 1;
        published.write_lsn.store(durable, Ordering::SeqCst);
        published.sync_lsn.store(durable, Ordering::SeqCst);
        WalWork {
            devs,
            appliance_id: start.appliance_id,
            epoch: start.epoch,
            block_size: start.block_size,
            max_in_flight: start.max_in_flight.max(1),
            fua: start.fua,
            copies: start.copies.max(1),
            on_device_loss: start.on_device_loss,
            on_loss: start.on_loss,
            rr: 0,
            pool: (0..start.buffers)
                .map(|_| alloc(start.batch_bytes))
                .collect(),
            open: None,
            ready: VecDeque::new(),
            stalled: None,
            next_lsn: start.next_lsn,
            next_batch: 0,
            batches: VecDeque::new(),
            write_lsn: durable,
            sync_lsn: durable,
            write_waiters: VecDeque::new(),
            sync_waiters: VecDeque::new(),
            failed: None,
            one_at_a_time: false,
            released: 0,
            catching_up: Vec::new(),
            log_full_since: None,
            published,
            stats,
        }
    }

    /// Takes one message; gives it back when there is no buffer to put it
    /// in.
    pub(super) fn take(&mut self, msg: Msg) -> Result<(), Msg> {
        if let Some(why) = &self.failed {
            msg.fail(why);
            return Ok(());
        }
        // Room for an append (a group: all of it): seal the open batch when
        // it is full, and open a new one if a buffer is free (if none is,
        // the append waits).
        let need = match &msg {
            Msg::Append { payload, .. } => {
                Some(record_len(payload.key().len(), payload.value().len()))
            }
            Msg::Group { records, .. } => Some(
                records
                    .iter()
                    .map(|(_, _, r)| record_len(r.key().len(), r.value().len()))
                    .sum(),
            ),
            Msg::Barrier(_) => None,
        };
        if let Some(need) = need {
            let fits = self.open.as_ref().is_some_and(|(b, _)| b.fits_len(need));
            if !fits {
                self.seal_open();
                if self.open.is_none() {
                    if self.pool.len() <= self.reserve() {
                        return Err(msg);
                    }
                    let buf = self.pool.pop().expect("more buffers than the reserve");
                    self.open = Some((BatchBuilder::new(buf, self.block_size), self.next_lsn));
                }
            }
        }
        match msg {
            Msg::Barrier(ticket) => {
                let last = self.next_lsn - 1;
                if last <= self.sync_lsn {
                    ticket.complete(last);
                } else {
                    self.sync_waiters.push_back((last, ticket));
                }
                Ok(())
            }
            Msg::Append {
                op,
                region,
                payload,
                durability,
                ticket,
            } => {
                self.push(
                    op,
                    region,
                    payload.key(),
                    payload.value(),
                    durability,
                    ticket,
                );
                drop(payload);
                self.seal_at_stripe_unit();
                Ok(())
            }
            Msg::Group {
                records,
                durability,
                ticket,
            } => {
                let mut last = 0;
                for (op, region, record) in &records {
                    last = self.push_record(*op, *region, record.key(), record.value());
                }
                self.await_lsn(last, durability, ticket);
                drop(records);
                // Only after the whole group: it never spans two batches.
                self.seal_at_stripe_unit();
                Ok(())
            }
        }
    }

    /// Copies a record into the open batch (which has room for it) and
    /// gives it the next LSN.
    fn push(
        &mut self,
        op: RecordOp,
        region: u32,
        key: &[u8],
        value: &[u8],
        durability: Durability,
        ticket: Arc<TicketState>,
    ) {
        let lsn = self.push_record(op, region, key, value);
        self.await_lsn(lsn, durability, ticket);
    }

    /// Copies a record into the open batch (which has room for it), and
    /// returns the LSN it gets.
    fn push_record(&mut self, op: RecordOp, region: u32, key: &[u8], value: &[u8]) -> Lsn {
        let (builder, _) = self.open.as_mut().expect("an open batch");
        builder.push(RecordRef {
            op,
            region,
            key,
            value,
        });
        let lsn = self.next_lsn;
        self.next_lsn += 1;
        self.stats.appends.add(1);
        lsn
    }

    /// Gives `ticket` the LSN `lsn`, and acknowledges it when `durability`
    /// is reached.
    fn await_lsn(&mut self, lsn: Lsn, durability: Durability, ticket: Arc<TicketState>) {
        // Before the watermarks can pass it: the engine learns from them
        // which appends have an LSN at or below what is written.
        ticket.give(lsn);
        match durability {
            Durability::None | Durability::Async => ticket.complete(lsn),
            Durability::Write => self.write_waiters.push_back((lsn, ticket)),
            Durability::Sync => self.sync_waiters.push_back((lsn, ticket)),
        }
    }

    /// Seals the open batch once it holds its share of the stripe (see
    /// [`WalWork::stripe_unit`]).
    fn seal_at_stripe_unit(&mut self) {
        let Some((builder, _)) = self.open.as_ref() else {
            return;
        };
        let open = builder.payload_len();
        if open >= STRIPE_UNIT && self.ready.len() < self.slots() && open >= self.stripe_unit(open)
        {
            self.seal_open();
        }
    }

    /// Devices the WAL still uses.
    fn live(&self) -> usize {
        self.devs.iter().filter(|d| d.lost.is_none()).count()
    }

    /// Copies of the next batch: `wal.copies`, or as many devices as are
    /// left once some are lost.
    fn want(&self) -> usize {
        self.copies.min(self.live()).max(1)
    }

    /// Batches the stripe can have in flight at once.
    fn slots(&self) -> usize {
        (self.live() * self.max_in_flight / self.want()).max(1)
    }

    /// Pool buffers kept for second and later copies: one for each write
    /// slot that can hold one. The pool holds that many more than one copy
    /// needs, and an append never takes them, so a batch that has its
    /// devices always has its copies' buffers.
    fn reserve(&self) -> usize {
        (self.copies - 1) * self.devs.len() * self.max_in_flight
    }

    /// How large the open batch grows before it is sealed and queued: the
    /// bytes not yet written (in flight, queued and open) shared evenly over
    /// every batch slot of the stripe (a batch of N copies takes N), and at
    /// least [`STRIPE_UNIT`].
    fn stripe_unit(&self, open: usize) -> usize {
        // Each batch in flight is on `want` devices: count its bytes once.
        let in_flight = self.devs.iter().map(|d| d.in_flight_bytes).sum::<usize>() / self.want();
        let bytes: usize = in_flight
            + self
                .ready
                .iter()
                .map(|(b, _, _)| b.payload_len())
                .sum::<usize>()
            + open;
        (bytes / self.slots()).max(STRIPE_UNIT)
    }

    /// Moves the open batch, if it holds anything, to the end of `ready`.
    fn seal_open(&mut self) {
        match self.open.take() {
            Some((b, first)) if !b.is_empty() => {
                let last = first + u64::from(b.count()) - 1;
                self.ready.push_back((b, first, last));
            }
            empty => self.open = empty,
        }
    }

    /// Where batch `id` is in `batches` (ids are consecutive from the front).
    pub(super) fn batch_index(&self, id: u64) -> Option<usize> {
        let front = self.batches.front()?.id;
        let i = usize::try_from(id.checked_sub(front)?).ok()?;
        (i < self.batches.len()).then_some(i)
    }

    /// Whether a `sync` append (or barrier) waits on an LSN in `first..=last`.
    fn sync_waits_in(&self, first: Lsn, last: Lsn) -> bool {
        let i = self.sync_waiters.partition_point(|(lsn, _)| *lsn < first);
        self.sync_waiters
            .get(i)
            .is_some_and(|(lsn, _)| *lsn <= last)
    }

    /// Advances the watermarks and acknowledges whoever they now cover.
    fn acknowledge(&mut self) -> usize {
        let (written, synced) = (self.write_lsn, self.sync_lsn);
        while let Some(b) = self.batches.front() {
            if b.state() != State::Durable {
                break;
            }
            self.sync_lsn = b.last;
            self.batches.pop_front();
        }
        self.write_lsn = self.write_lsn.max(self.sync_lsn);
        for b in &self.batches {
            if b.state() == State::Writing {
                break;
            }
            self.write_lsn = b.last;
        }
        // Published only when they move: most loop turns move neither. And
        // before the waiters wake, so a woken writer never reads an older
        // written or durable LSN than the one that woke it.
        if self.write_lsn != written {
            self.published
                .write_lsn
                .store(self.write_lsn, Ordering::SeqCst);
        }
        if self.sync_lsn != synced {
            self.published
                .sync_lsn
                .store(self.sync_lsn, Ordering::SeqCst);
        }
        complete_upto(&mut self.write_waiters, self.write_lsn)
            + complete_upto(&mut self.sync_waiters, self.sync_lsn)
    }

    /// The hints that do not come from a device: a full log notices
    /// released segments by polling the watermark.
    pub(super) fn timer_hints(&self, out: &mut Vec<WaitHint>) {
        if self.log_full_since.is_some() {
            out.push(WaitHint::Deadline(
                Instant::now() + Duration::from_millis(1),
            ));
        }
    }

    /// The hints a host needs beside the event descriptors it watches:
    /// those of devices without one, and the timers. (A watched
    /// descriptor is not read: each completion signals it again.)
    pub(super) fn host_hints(&self, out: &mut Vec<WaitHint>) {
        for dev in &self.devs {
            if dev.queue.event_fd().is_none() {
                out.push(dev.queue.wait_hint());
            }
        }
        self.timer_hints(out);
    }

    /// True while some device has a request in flight.
    pub(super) fn in_flight(&self) -> bool {
        self.devs.iter().any(|d| d.queue.in_flight() > 0)
    }

    /// The descriptors that become readable as the devices complete
    /// requests (devices without one say what to do in their hints).
    pub(super) fn event_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.devs
            .iter()
            .filter_map(|d| d.queue.event_fd())
            .collect()
    }

    fn reclaim(&mut self) {
        let released = self.published.released.load(Ordering::SeqCst);
        if released > self.released {
            self.released = released;
            for dev in &mut self.devs {
                let freed = dev.segments.reclaim(released);
                self.stats.segments_reclaimed.add(freed);
            }
            self.publish_usage();
        }
    }

    /// Tells writers how much of the log is live (so the engine can flush
    /// the memstores that pin it before it fills).
    fn publish_usage(&self) {
        // A lost device's ring is log no batch can use.
        let (live, total) = self
            .devs
            .iter()
            .filter(|d| d.lost.is_none())
            .map(|d| d.segments.usage())
            .fold((0, 0), |(l, t), (dl, dt)| (l + dl, t + dt));
        self.published.live_segments.store(live, Ordering::Relaxed);
        self.published
            .total_segments
            .store(total, Ordering::Relaxed);
    }
}

/// Acknowledges the waiters (in LSN order) whose LSN is at or below `upto`.
fn complete_upto(waiters: &mut VecDeque<(Lsn, Arc<TicketState>)>, upto: Lsn) -> usize {
    let mut n = 0;
    while waiters.front().is_some_and(|(lsn, _)| *lsn <= upto) {
        let (lsn, t) = waiters.pop_front().expect("front exists");
        t.complete(lsn);
        n += 1;
    }
    n
}

impl<Q: Queue + 'static> Work for WalWork<Q> {
    type Msg = Msg;

    fn handle(&mut self, msg: Msg) {
        if let Err(msg) = self.take(msg) {
            self.stalled = Some(msg);
        }
    }

    fn accepting(&self) -> bool {
        self.stalled.is_none()
    }

    fn poll(&mut self) -> Progress {
        self.reclaim();
        let completions = self.reap();
        let mut work = 0;
        if let Some(msg) = self.stalled.take() {
            match self.take(msg) {
                Ok(()) => work += 1,
                Err(msg) => self.stalled = Some(msg),
            }
        }
        work += self.submit();
        work += self.flush();
        work += self.acknowledge();
        Progress { completions, work }
    }

    fn wait_hints(&self, out: &mut Vec<WaitHint>) {
        for dev in &self.devs {
            out.push(dev.queue.wait_hint());
        }
        self.timer_hints(out);
    }

    fn finish(&mut self) {
        let why = "the WAL was closed".to_string();
        for (_, t) in self
            .write_waiters
            .drain(..)
            .chain(self.sync_waiters.drain(..))
        {
            t.fail(&why);
        }
        if let Some(msg) = self.stalled.take() {
            msg.fail(&why);
        }
    }
}
