//! The WAL handle: open (recover, then start the reactor), append, release,
//! close.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::commit::{GroupRecord, Msg, Payload, Published, Rejoin, Start, WalWork};
use super::format::{record_len, Geometry, RecordOp, SegmentHeader, BATCH_HEADER_BYTES};
use super::host::{self, Drive, Shared, WalHost};
use super::recovery::{recover, DeviceLog, Recovered, RecoveryOptions, WalDevice};
use super::segments::Segments;
use super::stats::{add, WalStats, WalStatsSnapshot};
use super::stripe::Dev;
use super::ticket::{Ticket, TicketState};
use super::{Lsn, WalError};
use crate::config::{DeviceLoss, Durability, WalConfig};
use crate::device::{wait, Device, DeviceError, Request};
use crate::reactor::{self, CountersSnapshot, Reactor, ReactorConfig, Sender};
use crate::record::Record;

/// How a WAL runs.
#[derive(Clone, Debug)]
pub struct WalOptions {
    pub appliance_id: u128,
    pub segment_size: u64,
    pub max_batch: u64,
    /// Batches one device may have in flight at once.
    pub in_flight_per_device: usize,
    /// Write batches holding a `sync` append with forced unit access.
    pub fua: bool,
    /// Appends the reactor's ring holds before writers wait.
    pub ring_capacity: usize,
    /// Recover from this LSN (the memstores hold everything before it);
    /// `None`: from the oldest batch found.
    pub replay_from: Option<Lsn>,
    /// Truncate the log at a corrupt batch instead of refusing to open.
    pub truncate_corrupt: bool,
    /// Devices each batch is written to.
    pub copies: usize,
    /// What a failed or vanished device does to the WAL.
    pub on_device_loss: DeviceLoss,
    /// WAL devices that may fail to read at open and be left out, the WAL
    /// starting degraded (see [`RecoveryOptions::lose_unreadable`]).
    pub lose_unreadable: usize,
    /// Devices known to lack batches ([`RecoveryOptions::stale`]).
    pub stale: Vec<u32>,
    /// Told of a device lost while the WAL runs, before any batch is
    /// acknowledged without that device's copy.
    pub on_loss: Option<LossHook>,
}

/// What the WAL calls, on its own thread, when it loses a device while it
/// runs: the device's index in the stripe and why. It returns once the
/// loss is recorded durably where a later start reads it (the engine's
/// manifest), so that a start never recovers the log from that device
/// alone; the WAL acknowledges nothing without the device's copy before.
/// An error fails the WAL instead of going on degraded.
#[derive(Clone)]
pub struct LossHook(pub Arc<RecordLoss>);

/// The function inside a [`LossHook`].
pub type RecordLoss = dyn Fn(u32, &str) -> Result<(), String> + Send + Sync;

impl std::fmt::Debug for LossHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LossHook")
    }
}

impl WalOptions {
    /// Options from the `wal` section of the device map.
    pub fn from_config(cfg: &WalConfig, appliance_id: u128) -> WalOptions {
        WalOptions {
            appliance_id,
            segment_size: cfg.segment_size,
            max_batch: cfg.max_batch,
            in_flight_per_device: 2,
            fua: cfg.fua,
            ring_capacity: 4096,
            replay_from: None,
            truncate_corrupt: false,
            copies: cfg.copies,
            on_device_loss: cfg.on_device_loss,
            lose_unreadable: 0,
            stale: Vec::new(),
            on_loss: None,
        }
    }
}

/// The record of an append the WAL's ring had no room for.
pub type Refused = Record;

/// A striped write-ahead log.
pub struct Wal {
    reactor: Option<Reactor<Msg>>,
    sender: Sender<Msg>,
    /// The reactor's state, for a host thread (`host.rs`).
    drive: Arc<dyn Drive>,
    published: Arc<Published>,
    stats: Arc<WalStats>,
    max_record: usize,
    /// Bytes per segment, for a device taken back.
    segment_size: u64,
}

impl Wal {
    /// Recovers the log on `devices` (the stripe, in order), then starts
    /// the WAL reactor with `reactor`. Returns the WAL and what recovery
    /// found, whose records the caller replays.
    pub fn open<D: Device + Clone>(
        devices: Vec<WalDevice<D>>,
        opts: &WalOptions,
        reactor: ReactorConfig,
    ) -> Result<(Wal, Recovered), WalError> {
        let Some(first) = devices.first() else {
            return Err(WalError::Config("a WAL needs at least one device".into()));
        };
        let block_size = first.device.info().block_size;
        for d in &devices {
            if d.device.info().block_size != block_size {
                return Err(WalError::Config(format!(
                    "WAL devices {} and {} have different block sizes ({} and {})",
                    first.name,
                    d.name,
                    block_size,
                    d.device.info().block_size
                )));
            }
        }
        let copies = opts.copies.max(1);
        if copies > devices.len() {
            return Err(WalError::Config(format!(
                "{copies} copies of each batch need as many WAL devices, and the stripe has {}",
                devices.len()
            )));
        }
        let bs = u64::from(block_size);
        if opts.segment_size < 2 * bs || opts.segment_size % bs != 0 {
            return Err(WalError::Config(format!(
                "segment size {} is not at least two {bs}-byte blocks",
                opts.segment_size
            )));
        }
        // A batch and its segment header must fit in one segment.
        let batch_bytes = opts.max_batch.min(opts.segment_size - bs).max(bs);
        let batch_bytes = (batch_bytes / bs * bs) as usize;
        let mut recovered = recover(
            &devices,
            &RecoveryOptions {
                replay_from: opts.replay_from,
                truncate_corrupt: opts.truncate_corrupt,
                segment_size: opts.segment_size,
                max_batch: opts.max_batch,
                appliance_id: opts.appliance_id,
                lose_unreadable: opts.lose_unreadable.min(copies - 1),
                stale: opts.stale.clone(),
            },
        )?;
        if copies == 1 {
            // A striped log of one copy has every batch on one device.
            recovered.report.single_copy_batches = 0;
        }
        let published = Arc::new(Published::default());
        let stats = Arc::new(WalStats::new(devices.len()));
        for (d, log) in recovered.devices.iter().enumerate() {
            if log.lost.is_some() {
                stats.device_lost[d].add(1);
            }
        }
        let start = Start {
            appliance_id: opts.appliance_id,
            epoch: recovered.epoch + 1,
            next_lsn: recovered.next_lsn.max(1),
            block_size,
            batch_bytes,
            // One per write slot and one more per device (to fill while
            // every slot is busy), two spare, and a reserve for the second
            // and later copies of each batch in flight.
            buffers: devices.len() * (opts.in_flight_per_device.max(1) + 1)
                + 2
                + (copies - 1) * devices.len() * opts.in_flight_per_device.max(1),
            max_in_flight: opts.in_flight_per_device.max(1),
            fua: opts.fua,
            copies,
            on_device_loss: opts.on_device_loss,
            on_loss: opts.on_loss.clone(),
        };
        let logs = recovered.devices.clone();
        let segment_size = opts.segment_size;
        let (p, s) = (published.clone(), stats.clone());
        let slot: Arc<std::sync::OnceLock<Arc<dyn Drive>>> = Arc::default();
        let made = slot.clone();
        let reactor = reactor::spawn(
            ReactorConfig {
                ring_capacity: opts.ring_capacity,
                ..reactor
            },
            move || {
                // Buffers from a device that works (a lost one may stand
                // in for a missing device of another backend).
                let alloc_dev = devices
                    .iter()
                    .zip(&logs)
                    .find(|(_, log)| log.lost.is_none())
                    .map_or(&devices[0], |(d, _)| d)
                    .device
                    .clone();
                let devs = devices
                    .iter()
                    .zip(&logs)
                    .map(|(d, log)| {
                        let geo = Geometry::new(d.device.info(), segment_size);
                        let queue = d.device.open_queue().unwrap_or_else(|e| {
                            panic!("WAL device {}: cannot open a queue: {e}", d.name)
                        });
                        let header = d.device.alloc_buf(d.device.info().block_size as usize);
                        let mut dev = Dev::new(
                            queue,
                            d.index,
                            d.name.clone(),
                            Segments::resume(geo, log),
                            header,
                        );
                        dev.lost = log.lost.clone();
                        dev
                    })
                    .collect();
                let shared = Shared::new(WalWork::new(
                    devs,
                    start,
                    |len| alloc_dev.alloc_buf(len),
                    p,
                    s,
                ));
                let _ = made.set(shared.clone());
                host::Reactor(shared)
            },
        )?;
        let wal = Wal {
            sender: reactor.sender(),
            drive: slot
                .get()
                .cloned()
                .expect("the reactor built its work before it started"),
            reactor: Some(reactor),
            published,
            stats,
            max_record: batch_bytes - BATCH_HEADER_BYTES,
            segment_size,
        };
        Ok((wal, recovered))
    }

    /// Appends one record at `durability`. Blocks only while the WAL's
    /// ring is full (back-pressure); the returned ticket says when the
    /// record reached its durability. `none` records are not logged.
    pub fn append(
        &self,
        op: RecordOp,
        region: u32,
        key: Vec<u8>,
        value: Vec<u8>,
        durability: Durability,
    ) -> Result<Ticket, WalError> {
        match self.message(op, region, Payload::Pair(key, value), durability)? {
            None => Ok(Ticket::done(0)),
            Some((msg, state)) => {
                self.send(msg)?;
                Ok(Ticket::new(state))
            }
        }
    }

    /// As [`Wal::append`] for a shared record (the reactor copies it into
    /// its batch and lets go of it), but never waits: when the WAL's ring
    /// is full it hands the record back (`Ok(Err(..))`), so a caller
    /// holding a lock can let go of it before waiting for room.
    pub fn try_append(
        &self,
        op: RecordOp,
        region: u32,
        record: Record,
        durability: Durability,
    ) -> Result<Result<Ticket, Refused>, WalError> {
        let Some((msg, state)) = self.message(op, region, Payload::Shared(record), durability)?
        else {
            return Ok(Ok(Ticket::done(0)));
        };
        match self.offer(msg) {
            Ok(()) => Ok(Ok(Ticket::new(state))),
            Err(Msg::Append {
                payload: Payload::Shared(record),
                ..
            }) => {
                if self.reactor.as_ref().is_none_or(|r| !r.is_running()) {
                    return Err(WalError::Closed);
                }
                Ok(Err(record))
            }
            Err(_) => unreachable!("try_send returns the message it was given"),
        }
    }

    /// Appends `records` as one group: consecutive LSNs in one batch, so
    /// after any crash the log holds all of them or none, in this order.
    /// Never waits: when the WAL's ring is full it hands the records back
    /// (`Ok(Err(..))`). `none` records are not logged. Their bytes in all
    /// (by [`record_len`]) must fit one batch.
    pub fn try_append_group(
        &self,
        records: Vec<GroupRecord>,
        durability: Durability,
    ) -> Result<Result<Vec<Ticket>, Vec<GroupRecord>>, WalError> {
        if durability == Durability::None {
            return Ok(Ok(records.iter().map(|_| Ticket::done(0)).collect()));
        }
        let len: usize = records
            .iter()
            .map(|(_, _, r)| record_len(r.key().len(), r.value().len()))
            .sum();
        if len > self.max_record {
            return Err(WalError::TooLarge {
                bytes: len,
                max: self.max_record,
            });
        }
        if records.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let n = records.len() as u64;
        let state = TicketState::new();
        let msg = Msg::Group {
            records,
            durability,
            ticket: state.clone(),
        };
        match self.offer(msg) {
            Ok(()) => Ok(Ok((1..=n)
                .map(|i| Ticket::before_last(state.clone(), n - i))
                .collect())),
            Err(Msg::Group { records, .. }) => {
                if self.reactor.as_ref().is_none_or(|r| !r.is_running()) {
                    return Err(WalError::Closed);
                }
                Ok(Err(records))
            }
            Err(_) => unreachable!("try_send returns the message it was given"),
        }
    }

    /// The largest group [`Wal::try_append_group`] takes, in bytes.
    pub fn max_group_bytes(&self) -> usize {
        self.max_record
    }

    /// The message for an append and its ticket's state; `None` for a
    /// `none` record, which is not logged.
    fn message(
        &self,
        op: RecordOp,
        region: u32,
        payload: Payload,
        durability: Durability,
    ) -> Result<Option<(Msg, Arc<TicketState>)>, WalError> {
        if durability == Durability::None {
            return Ok(None);
        }
        let len = record_len(payload.key().len(), payload.value().len());
        if len > self.max_record {
            return Err(WalError::TooLarge {
                bytes: len,
                max: self.max_record,
            });
        }
        let state = TicketState::new();
        let msg = Msg::Append {
            op,
            region,
            payload,
            durability,
            ticket: state.clone(),
        };
        Ok(Some((msg, state)))
    }

    /// Appends a put.
    pub fn put(
        &self,
        region: u32,
        key: Vec<u8>,
        value: Vec<u8>,
        durability: Durability,
    ) -> Result<Ticket, WalError> {
        self.append(RecordOp::Put, region, key, value, durability)
    }

    /// A ticket acknowledged once every append made before it is durable.
    pub fn barrier(&self) -> Result<Ticket, WalError> {
        let state = TicketState::new();
        self.send(Msg::Barrier(state.clone()))?;
        Ok(Ticket::new(state))
    }

    /// A barrier if the WAL's ring has room now, without waiting.
    pub fn try_barrier(&self) -> Option<Ticket> {
        let state = TicketState::new();
        self.offer(Msg::Barrier(state.clone()))
            .ok()
            .map(|()| Ticket::new(state))
    }

    /// Makes the calling thread the log's host (see `host.rs`): its
    /// appends go into the batches at once, and it submits them and reaps
    /// their completions itself, for as long as it keeps the returned
    /// handle. `None` when the log already has a host, or this thread
    /// hosts another log.
    pub fn host(&self) -> Option<WalHost> {
        WalHost::new(self.drive.clone(), self.sender.clone())
    }

    /// Hands `msg` to the WAL without waiting: into the batch at once on
    /// the host thread, else through the reactor's ring. Gives it back
    /// when there is no room now.
    fn offer(&self, msg: Msg) -> Result<(), Msg> {
        if !host::hosts(&self.drive) {
            return self.sender.try_send(msg);
        }
        match self.drive.offer(msg) {
            Ok(()) => Ok(()),
            Err(msg) => {
                // Every buffer is on its way to a device: wait for a
                // completion (a millisecond at most; nothing else reaps
                // them) before the caller's back-off.
                host::drive_while_waiting();
                self.drive.offer(msg)
            }
        }
    }

    fn send(&self, msg: Msg) -> Result<(), WalError> {
        let mut msg = match self.offer(msg) {
            Ok(()) => return Ok(()),
            Err(msg) => msg,
        };
        let waited = Instant::now();
        let sent = if host::hosts(&self.drive) {
            loop {
                if self.reactor.as_ref().is_none_or(|r| !r.is_running()) {
                    break Err(msg);
                }
                host::drive_while_waiting();
                match self.drive.offer(msg) {
                    Ok(()) => break Ok(()),
                    Err(back) => msg = back,
                }
            }
        } else {
            self.sender.send(msg)
        };
        add(
            &self.stats.writer_wait_ns,
            u64::try_from(waited.elapsed().as_nanos()).unwrap_or(u64::MAX),
        );
        sent.map_err(|_| WalError::Closed)
    }

    /// Takes back the lost WAL device at stripe position `d` (index
    /// `index` in its segment headers) as `device`: a new device in its
    /// place, whose log area is blank (`stria device replace` of a running
    /// appliance). Returns the first LSN from which every batch has its
    /// copy there again; batches below it may lack it until the memstores
    /// are flushed past it. Waits up to a second for requests to the lost
    /// device still in flight.
    pub fn rejoin<D: Device<Queue: Send + 'static>>(
        &self,
        d: usize,
        index: u32,
        device: &D,
    ) -> Result<Lsn, WalError> {
        let info = device.info();
        let geo = Geometry::new(info, self.segment_size);
        // An emptied log (`stria device replace` erases it so) has one
        // header, in segment 0, numbered above every segment the device
        // held before: the log goes on after it, so that no scan runs from
        // a new batch into an old one of the same number.
        let mut queue = device.open_queue().map_err(WalError::Device)?;
        let read = Request::read(
            0,
            geo.segment_lba(0),
            vec![device.alloc_buf(info.block_size as usize)],
        );
        let erased = wait::run(&mut queue, read)
            .ok()
            .filter(|c| c.result.is_ok())
            .and_then(|c| SegmentHeader::decode(&c.bufs[0]).ok())
            .filter(|h| h.device_index == index);
        let (next_seq, next_segment) = erased.map_or((1, 0), |h| (h.seq + 1, 1 % geo.segments));
        let deadline = Instant::now() + std::time::Duration::from_secs(1);
        loop {
            let queue = device.open_queue().map_err(WalError::Device)?;
            let header = device.alloc_buf(info.block_size as usize);
            let log = DeviceLog {
                index,
                next_seq,
                next_segment,
                live: Vec::new(),
                lost: None,
            };
            let dev = Dev::new(
                queue,
                index,
                info.name.clone(),
                Segments::resume(geo, &log),
                header,
            );
            match self.drive.rejoin(d, Box::new(dev)) {
                Ok(lsn) => return Ok(lsn),
                Err(Rejoin::Busy) if Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(Rejoin::Busy) => {
                    return Err(WalError::Failed(format!(
                    "WAL device {}: requests to the lost device are still in flight after a second",
                    info.name
                )))
                }
                Err(Rejoin::Refused(why)) => return Err(WalError::Config(why)),
            }
        }
    }

    /// Says that the memstores no longer need LSNs at or below `lsn`:
    /// segments holding only those may be reused.
    pub fn release(&self, lsn: Lsn) {
        self.published.released.fetch_max(lsn, Ordering::SeqCst);
    }

    /// Says that nothing will release log any more, because of `why` (the
    /// engine failed): from then on, a full log fails every waiting and
    /// later append instead of holding it forever. Until the log is full,
    /// appends go on as before, and [`Wal::close`] makes them durable.
    pub fn fail_when_full(&self, why: &str) {
        let _ = self.published.no_release.set(why.to_string());
    }

    /// Every LSN at or below this is durable on the devices.
    pub fn durable_lsn(&self) -> Lsn {
        self.published.sync_lsn.load(Ordering::SeqCst)
    }

    /// Segments holding log not yet released, and segments in all (both 0
    /// until the first segment is started or reclaimed).
    pub fn segment_usage(&self) -> (u64, u64) {
        (
            self.published.live_segments.load(Ordering::Relaxed),
            self.published.total_segments.load(Ordering::Relaxed),
        )
    }

    /// True while the log is full: the next batch has no segment to go to,
    /// so appends wait until [`Wal::release`] frees one.
    pub fn is_full(&self) -> bool {
        self.published.log_full.load(Ordering::SeqCst)
    }

    /// Every LSN at or below this is written (survives a process crash).
    pub fn written_lsn(&self) -> Lsn {
        self.published.write_lsn.load(Ordering::SeqCst)
    }

    pub fn stats(&self) -> WalStatsSnapshot {
        self.stats.snapshot()
    }

    /// The WAL reactor's counters: busy and parked time, wake-ups.
    pub fn reactor_counters(&self) -> Option<CountersSnapshot> {
        self.reactor.as_ref().map(|r| r.counters().snapshot())
    }

    /// Makes everything appended durable, then stops the reactor.
    pub fn close(mut self) -> Result<WalStatsSnapshot, WalError> {
        let synced = self.barrier().and_then(|t| t.wait());
        if let Some(r) = self.reactor.take() {
            r.stop()?;
        }
        synced?;
        Ok(self.stats.snapshot())
    }

    /// Stops the reactor at once, as a crashing process would: nothing is
    /// flushed and waiting appends fail. For tests of crash recovery.
    pub fn abandon(mut self) {
        if let Some(r) = self.reactor.take() {
            let _ = r.stop();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Some(r) = self.reactor.take() {
            if let Err(e) = r.stop() {
                tracing::error!("WAL reactor: {e}");
            }
        }
    }
}

impl From<DeviceError> for WalError {
    fn from(e: DeviceError) -> WalError {
        WalError::Device(e)
    }
}
