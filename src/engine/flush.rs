//! The flush reactor set: pinned threads, each with its own queue on every
//! data device, turning frozen memstores into block files and merging a
//! region's files when it has too many.
//!
//! A flush: wait until the memstore's last admitted writes are inserted
//! (while the log is full, only those at or below the written LSN, and
//! the pass flushes only those: see `Inner::flush`); reserve an extent (an
//! upper bound of the file size) on the data device with the fewest
//! flushes running; stream the block file out in
//! `flush-chunk` writes, `flush-depth` in flight; FLUSH the device; give
//! back the unused tail of the extent; record the file, the region's
//! flushed LSN and the new replay point in the manifest (durable on
//! return); swap the memstore for the file; let the WAL reclaim.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::error::{EngineError, Result};
use super::file_write::table_error;
use super::sched::Job;
use super::store::TableHandle;
use super::Inner;
use crate::device::Device;
use crate::layout::manifest::{Edit, FileRecord};
use crate::memstore::Memstore;
use crate::table::{TableBuilder, TableMeta};

/// Starts one flush reactor per entry of `opts.flush_reactors`.
pub(super) fn spawn<D: Device<Queue: Send> + Clone>(
    inner: &Arc<Inner<D>>,
) -> Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::new();
    for (index, cfg) in inner.opts.flush_reactors.clone().into_iter().enumerate() {
        let shared = inner.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::Builder::new()
            .name(cfg.name.clone())
            .spawn(move || {
                if let Some(core) = cfg.core {
                    if let Err(e) = crate::reactor::pin_to_core(core) {
                        let _ = tx.send(Err(format!(
                            "flush reactor {}: cannot pin to core {core}: {e}",
                            cfg.name
                        )));
                        return;
                    }
                }
                let inner = shared;
                let mut queues = Vec::with_capacity(inner.store.devices.len());
                for d in &inner.store.devices {
                    match d.open_queue() {
                        Ok(q) => queues.push(q),
                        Err(e) => {
                            let _ = tx.send(Err(format!("flush reactor {}: {e}", cfg.name)));
                            return;
                        }
                    }
                }
                let _ = tx.send(Ok(()));
                run(&inner, queues, &inner.counters.flush.reactors[index]);
            })
            .map_err(|e| EngineError::Layout(format!("cannot start a flush reactor: {e}")))?;
        match rx.recv() {
            Ok(Ok(())) => handles.push(h),
            Ok(Err(why)) => {
                let _ = h.join();
                inner.sched.stop();
                for h in handles {
                    let _ = h.join();
                }
                return Err(EngineError::Layout(why));
            }
            Err(_) => return Err(EngineError::Layout("a flush reactor died starting".into())),
        }
    }
    Ok(handles)
}

fn run<D: Device<Queue: Send> + Clone>(
    inner: &Inner<D>,
    mut queues: Vec<D::Queue>,
    time: &ReactorTime,
) {
    let ns = |since: Instant| u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut waiting = Instant::now();
    while let Some(job) = inner.sched.next(|| inner.relieve_log()) {
        let working = Instant::now();
        time.idle_ns.fetch_add(ns(waiting), Ordering::Relaxed);
        let result = match &job {
            Job::Flush(r, ms) => inner.flush(&mut queues, *r, ms.clone()).map(|again| {
                if again {
                    inner.sched.requeue_flush(*r, ms.clone());
                }
            }),
            Job::Compact(r) => inner.compact(&mut queues, *r),
        };
        if let Err(e) = result {
            inner.fail(e.to_string());
        }
        // Counted before the job is done, so whoever waits for it sees it.
        time.busy_ns.fetch_add(ns(working), Ordering::Relaxed);
        time.jobs.fetch_add(1, Ordering::Relaxed);
        waiting = Instant::now();
        inner.sched.done(&job);
    }
    time.idle_ns.fetch_add(ns(waiting), Ordering::Relaxed);
}

/// Where a flush reactor's time went: running flushes and compactions
/// (the relief checks it makes while waiting count as idle), or waiting
/// for one.
#[derive(Debug, Default)]
pub(super) struct ReactorTime {
    pub busy_ns: AtomicU64,
    pub idle_ns: AtomicU64,
    pub jobs: AtomicU64,
}

/// Counters of the flush reactors.
#[derive(Debug, Default)]
pub(super) struct FlushCounters {
    pub flushes: AtomicU64,
    /// Passes that flushed a memstore up to the written LSN of a full log.
    pub partial: AtomicU64,
    /// Entries those passes wrote to block files.
    pub partial_entries: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub flush_ns: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_bytes: AtomicU64,
    /// Entries compactions dropped because the filter said so.
    pub compaction_filtered: AtomicU64,
    /// Flushes running now, per data device.
    pub running: Vec<AtomicU64>,
    /// Bytes written per data device.
    pub device_bytes: Vec<AtomicU64>,
    /// Block-file write requests and flush commands, per data device.
    pub device_writes: Vec<AtomicU64>,
    pub device_flush_commands: Vec<AtomicU64>,
    /// Memstore flushes and their file bytes, per data device.
    pub device_flushes: Vec<AtomicU64>,
    pub device_flush_bytes: Vec<AtomicU64>,
    /// When the last flush was recorded, in milliseconds since the Unix
    /// epoch (0: none since open).
    pub last_flush_ms: AtomicU64,
    /// Per flush reactor, in the order of `flush_reactors`.
    pub reactors: Vec<ReactorTime>,
}

impl FlushCounters {
    pub fn new(devices: usize, reactors: usize) -> FlushCounters {
        let zeros = || (0..devices).map(|_| AtomicU64::new(0)).collect();
        FlushCounters {
            running: zeros(),
            device_bytes: zeros(),
            device_writes: zeros(),
            device_flush_commands: zeros(),
            device_flushes: zeros(),
            device_flush_bytes: zeros(),
            reactors: (0..reactors).map(|_| ReactorTime::default()).collect(),
            ..FlushCounters::default()
        }
    }
}

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    /// Flushes frozen memstore `ms` of region `r`: all of it, or, while the
    /// log is full, what is written of it. Returns true when a pass left
    /// writes for another (the memstore stays frozen, first of its region).
    fn flush(&self, queues: &mut [D::Queue], r: u32, ms: Arc<Memstore>) -> Result<bool> {
        let started = Instant::now();
        // After a failed flush, no later memstore of any region may record
        // a flush mark above the failed one's LSNs.
        if let Some(e) = self.failure() {
            return Err(e);
        }
        {
            let st = self.region[r as usize].lock();
            if !st.frozen.front().is_some_and(|m| Arc::ptr_eq(m, &ms)) {
                return Err(EngineError::Layout(format!(
                    "region {r}: a memstore came to flush before an older one"
                )));
            }
        }
        // Wait until every write admitted to the memstore is inserted. While
        // the log is full, some may wait for the log space that only this
        // flush frees: once every write at or below the written LSN is in,
        // a pass flushes up to it (`Some`), and the rest waits for the next.
        // The inserts are checked against the written LSN before the
        // pending count is read, so a pass is chosen only while the
        // memstore has, or will have, a write above that LSN (and every
        // later memstore of the region only writes above that write).
        let upto = loop {
            ms.insert_acknowledged();
            let written = self.wal.is_full().then(|| self.wal.written_lsn());
            let through = written.filter(|&w| ms.inserted_through(w));
            if ms.pending() == 0 {
                // All in; but an `async` write is in once it has its LSN,
                // which may wait for log space as much as a pending write.
                break through.filter(|&w| ms.max_lsn() > w);
            }
            if through.is_some() {
                break through;
            }
            if let Some(e) = self.failure() {
                return Err(e);
            }
            std::thread::sleep(Duration::from_micros(50));
        };
        let Some(upto) = upto else {
            return self.flush_whole(queues, r, &ms, started);
        };
        if !self.flush_upto(queues, r, &ms, upto, started)? {
            // Nothing to record since the last pass: other memstores pin
            // the log. Freeze them (this reactor is not idle, so its tick
            // would not) and let their flushes go first.
            self.relieve_log();
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(true)
    }

    /// Flushes the whole of `ms`, whose writes are all inserted, and swaps
    /// it for its block file. True when the log filled before it held
    /// every LSN of `ms` durably: then nothing changed, and the next pass
    /// flushes up to the written LSN.
    fn flush_whole(
        &self,
        queues: &mut [D::Queue],
        r: u32,
        ms: &Arc<Memstore>,
        started: Instant,
    ) -> Result<bool> {
        let region = &self.region[r as usize];
        if ms.is_empty() {
            let mut st = region.lock();
            st.frozen.retain(|m| !Arc::ptr_eq(m, ms));
            region.publish(&st);
            drop(st);
            self.memory.release(ms.bytes());
            self.settle_rejoined()?;
            return Ok(false);
        }
        // Everything logged so far becomes durable before the manifest says
        // the region is flushed up to its LSNs: otherwise a power cut could
        // take LSNs at or below the mark out of the log, the WAL would hand
        // them out again, and the next recovery would skip those writes as
        // already flushed.
        let (file, handle, bytes) =
            match self.write_memstore(queues, r, ms, None, u64::MAX, ms.max_lsn())? {
                MemstoreFile::File(file, handle, bytes) => (file, handle, bytes),
                MemstoreFile::Stalled => return Ok(true),
                MemstoreFile::Empty => unreachable!("a memstore with entries has a file"),
            };
        let devs: Vec<u32> = file.places().map(|(d, _)| d).collect();
        let replay = self.replay_point(Some(ms), None);
        // The replay point chosen, not yet recorded: another region's
        // flush finishing now still counts this memstore in its own.
        fail::fail_point!("flush-replay-point-chosen");
        let edit = Edit {
            flushed: vec![(r, file.max_lsn)],
            add: vec![file],
            replay_from: Some(replay),
            ..Edit::default()
        };
        self.apply(queues, &edit)?;
        let files = {
            let mut st = region.lock();
            st.frozen.retain(|m| !Arc::ptr_eq(m, ms));
            st.tables.insert(0, handle);
            region.publish(&st);
            st.tables.len()
        };
        self.memory.release(ms.bytes());
        self.wal.release(replay.saturating_sub(1));
        self.settle_rejoined()?;
        self.counters.flush.flushes.fetch_add(1, Ordering::Relaxed);
        self.count_flush(&devs, bytes, started);
        if files > self.opts.compact_at || region.passed.purging() {
            self.sched.push_compaction(r);
        }
        Ok(false)
    }

    /// One pass over `ms` while the log is full: every write of it at or
    /// below `upto` (the written LSN) is inserted, and it has or will have
    /// one above. Writes the newest version at or below `upto` of each key
    /// as a block file, if any, with `upto` as the region's flush mark (it
    /// is not below the mark the region has): only the keys whose version
    /// is above what an earlier pass over `ms` wrote, so a log that moves a
    /// little at a time adds small files of what is new, not copies of the
    /// whole memstore. Then `upto` is the floor of `ms` and of every later
    /// memstore of the region (their writes all come after that write
    /// above it), so the replay point and the log move past it; `ms` stays
    /// frozen and readable, first of its region, for the pass that flushes
    /// the rest. False when there was nothing to record: nothing new to
    /// write, and the replay point where the manifest has it.
    fn flush_upto(
        &self,
        queues: &mut [D::Queue],
        r: u32,
        ms: &Arc<Memstore>,
        upto: u64,
        started: Instant,
    ) -> Result<bool> {
        let region = &self.region[r as usize];
        let above = ms.passed();
        let (file, handle, bytes) = match self.write_memstore(queues, r, ms, above, upto, upto)? {
            MemstoreFile::File(file, handle, bytes) => (Some(file), Some(handle), bytes),
            MemstoreFile::Empty => (None, None, 0),
            MemstoreFile::Stalled => unreachable!("the log is written up to {upto}"),
        };
        let devs: Vec<u32> = file
            .iter()
            .flat_map(|f| f.places().map(|(d, _)| d))
            .collect();
        let entries = file.as_ref().map_or(0, |f| f.entries);
        let replay = self.replay_point(None, Some((r as usize, upto)));
        if file.is_none() && replay <= self.recorded_replay_point() {
            // Every key's newest version at or below `upto` is in a file
            // already.
            ms.set_passed(upto);
            return Ok(false);
        }
        let edit = Edit {
            flushed: file.iter().map(|f| (r, f.max_lsn)).collect(),
            add: file.into_iter().collect(),
            replay_from: Some(replay),
            ..Edit::default()
        };
        self.apply(queues, &edit)?;
        let files = {
            let mut st = region.lock();
            if let Some(h) = handle {
                st.tables.insert(0, h);
            }
            // Only now that the manifest holds the file may a replay point
            // that another flush computes pass its writes.
            for m in st.frozen.iter().chain(std::iter::once(&st.active)) {
                m.raise_floor(upto);
            }
            ms.set_passed(upto);
            region.publish(&st);
            st.tables.len()
        };
        self.wal.release(replay.saturating_sub(1));
        self.settle_rejoined()?;
        self.counters.flush.partial.fetch_add(1, Ordering::Relaxed);
        self.counters
            .flush
            .partial_entries
            .fetch_add(entries, Ordering::Relaxed);
        self.count_flush(&devs, bytes, started);
        if files > self.opts.compact_at || region.passed.purging() {
            self.sched.push_compaction(r);
        }
        Ok(true)
    }

    /// Counts a flush (or a pass) that wrote `bytes` to each data device of
    /// `devs` (none: it wrote no file).
    fn count_flush(&self, devs: &[u32], bytes: u64, started: Instant) {
        let c = &self.counters.flush;
        c.flush_bytes.fetch_add(bytes, Ordering::Relaxed);
        c.flush_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        for &d in devs {
            c.device_flushes[d as usize].fetch_add(1, Ordering::Relaxed);
            c.device_flush_bytes[d as usize].fetch_add(bytes, Ordering::Relaxed);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        c.last_flush_ms.store(now, Ordering::Relaxed);
    }

    /// Region `r`'s flush mark for a file of LSNs up to `lsn`: never below
    /// the mark it has (it only grows, even for a memstore of unlogged
    /// writes alone; files are ordered by it at open).
    fn flush_mark(&self, r: u32, lsn: u64) -> u64 {
        let m = self.manifest.lock().expect("manifest lock");
        lsn.max(m.state().flushed_lsn.get(r as usize).copied().unwrap_or(0))
    }

    /// Writes the newest version at or below `upto` of every key of `ms`
    /// (of those whose version is above `above`, if given) as a block file
    /// of region `r`, waits until the log is durable up to `lsn` (the
    /// file's flush mark, or below it), and opens the file. Nothing refers
    /// to the file until the caller records it.
    fn write_memstore(
        &self,
        queues: &mut [D::Queue],
        r: u32,
        ms: &Memstore,
        above: Option<u64>,
        upto: u64,
        lsn: u64,
    ) -> Result<MemstoreFile<D>> {
        // A bound of what the file will hold (the newest version of each
        // key): for a whole memstore, whose writes are all inserted, every
        // version it holds, counted as they were inserted, without a pass
        // over the map; for a pass up to an LSN, the versions in range.
        // A pass counts, then writes: the memstore keeps every version
        // until both walks are done.
        let _keep = (upto != u64::MAX).then(|| ms.keep_versions());
        let (entries, key_bytes, value_bytes) = if upto == u64::MAX {
            ms.inserted_totals()
        } else {
            let (mut entries, mut key_bytes, mut value_bytes) = (0u64, 0u64, 0u64);
            ms.for_each_newest_between::<()>(above, upto, |k, _, _, v| {
                entries += 1;
                key_bytes += k.len() as u64;
                value_bytes += v.len() as u64;
                Ok(())
            })
            .expect("counting cannot fail");
            (entries, key_bytes, value_bytes)
        };
        if entries == 0 {
            // The mark is recorded all the same: the log must hold it.
            return Ok(match self.wait_durable(lsn)? {
                true => MemstoreFile::Empty,
                false => MemstoreFile::Stalled,
            });
        }
        let bound = TableBuilder::max_file_bytes(&self.opts.table, entries, key_bytes, value_bytes);
        let (places, id, meta) = loop {
            let places = self.allocate(bound)?;
            let (dev, offset) = places[0];
            let id = self.next_file.fetch_add(1, Ordering::SeqCst);
            let written = self.write_file(queues, id, &places, bound, |builder, w| {
                ms.for_each_newest_between(above, upto, |k, lsn, kind, v| {
                    builder
                        .add(k, lsn, kind, v)
                        .map_err(|e| table_error(dev, offset, e))?;
                    w.drain(builder)
                })
            });
            match written {
                Ok(Some(meta)) => break (places, id, meta),
                Ok(None) => unreachable!("a memstore's file always fits its bound"),
                Err(e) => {
                    self.unallocate(&places, bound);
                    if !self.lost_copy(&places) {
                        return Err(e);
                    }
                }
            }
        };
        // The flush mark must never be above what the log holds durably.
        match self.wait_durable(lsn) {
            Ok(true) => {}
            Ok(false) => {
                self.unallocate(&places, bound);
                return Ok(MemstoreFile::Stalled);
            }
            Err(e) => {
                self.unallocate(&places, bound);
                return Err(e);
            }
        }
        // A memstore's file written, not yet recorded.
        fail::fail_point!("flush-before-manifest");
        let mark = self.flush_mark(r, lsn);
        let file = self.file_record(id, r, &places, &meta, mark);
        self.shrink(&places, bound, meta.file_bytes);
        let opened = TableHandle::open(self.store.clone(), file.clone());
        let failed = self.failure();
        match (opened, failed) {
            (Ok(h), None) => Ok(MemstoreFile::File(file, Arc::new(h), meta.file_bytes)),
            (opened, failed) => {
                self.free_unrecorded(&file);
                Err(failed.unwrap_or_else(|| opened.err().expect("not both fine")))
            }
        }
    }

    /// Waits until the WAL is durable up to `lsn`, asking for it with a
    /// barrier when the WAL's ring has room. Not a blocking barrier: when the
    /// log is full the ring stops moving, and this flush is what frees it
    /// (the WAL flushes its devices by itself while the log is full).
    ///
    /// False, without waiting, when the log is full and not written up to
    /// `lsn`: what is above the written LSN waits for log space, which may
    /// be what this flush was to free.
    fn wait_durable(&self, lsn: u64) -> Result<bool> {
        let mut nudge: Option<crate::wal::Ticket> = None;
        while self.wal.durable_lsn() < lsn {
            if let Some(e) = self.failure() {
                return Err(e);
            }
            if self.wal.is_full() && self.wal.written_lsn() < lsn {
                return Ok(false);
            }
            if let Some(Err(e)) = nudge.as_ref().and_then(|t| t.poll()) {
                return Err(e.into());
            }
            if nudge.as_ref().is_none_or(|t| t.is_done()) {
                nudge = self.wal.try_barrier();
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(true)
    }

    pub(super) fn file_record(
        &self,
        id: u64,
        r: u32,
        places: &[(u32, u64)],
        meta: &TableMeta,
        max_lsn: u64,
    ) -> FileRecord {
        FileRecord {
            id,
            region: r,
            device: places[0].0,
            offset: places[0].1,
            copies: places[1..].to_vec(),
            len: meta.file_bytes,
            min_key: key_floor(&meta.min_key),
            max_key: key_ceiling(&meta.max_key),
            max_lsn,
            entries: meta.entries,
        }
    }

    /// Applies `edit` to the manifest, durably, with this reactor's queues.
    pub(super) fn apply(&self, queues: &mut [D::Queue], edit: &Edit) -> Result<()> {
        let mut m = self.manifest.lock().expect("manifest lock");
        m.apply(edit, &mut queues[..self.manifest_devices])?;
        Ok(())
    }

    /// The first LSN the WAL must replay: the lowest floor + 1 of the
    /// memstores holding or about to hold writes (`flushed` aside), else the
    /// WAL's written LSN + 1.
    ///
    /// It reads the regions' views, not their locks: a writer sets a
    /// memstore's floor before it admits its first write (both SeqCst), and
    /// any write admitted after the written LSN was read here gets a larger
    /// LSN. While the WAL is being replayed, the record about to be
    /// replayed bounds it too.
    ///
    /// `raised`: a region whose memstores are all (about to be) raised to
    /// a floor of at least this LSN by a pass that flushed up to it.
    pub(super) fn replay_point(
        &self,
        flushed: Option<&Arc<Memstore>>,
        raised: Option<(usize, u64)>,
    ) -> u64 {
        let mut point = (self.wal.written_lsn() + 1).min(self.replaying.load(Ordering::SeqCst));
        for (r, region) in self.region.iter().enumerate() {
            let least = raised.filter(|&(rr, _)| rr == r).map_or(0, |(_, lsn)| lsn);
            for ms in &region.view().mems {
                if flushed.is_some_and(|f| Arc::ptr_eq(f, ms)) || ms.is_unused() {
                    continue;
                }
                point = point.min(ms.floor().max(least) + 1);
            }
        }
        point
    }

    /// An extent of `bytes` for each copy of a file (`file_copies`), each
    /// on its own data device: those with the fewest flushes running (then
    /// the most free space) that have room.
    pub(super) fn allocate(&self, bytes: u64) -> Result<Vec<(u32, u64)>> {
        let c = &self.counters.flush;
        let mut ext = self.store.extents.lock().expect("extents");
        // Lost devices take no new file: a file gets as many copies as
        // there are devices left, up to `file_copies`.
        let mut order: Vec<u32> = (0..ext.devices() as u32)
            .filter(|&d| !self.store.is_lost(d))
            .collect();
        order.sort_by_key(|&d| {
            (
                c.running[d as usize].load(Ordering::Relaxed),
                u64::MAX - ext.free_bytes(d),
            )
        });
        if order.is_empty() {
            return Err(EngineError::Layout(
                "every data device is lost: no block file can be written".into(),
            ));
        }
        let copies = self.opts.file_copies.clamp(1, order.len());
        let mut places = Vec::with_capacity(copies);
        for d in order {
            if let Some(offset) = ext.alloc(d, bytes) {
                places.push((d, offset));
                if places.len() == copies {
                    for &(d, _) in &places {
                        c.running[d as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(places);
                }
            }
        }
        for (d, offset) in places {
            if let Err(e) = ext.free(d, offset, bytes) {
                tracing::error!("freeing an extent of too few copies: {e}");
            }
        }
        // The largest file that fits `copies` devices that are not lost.
        let mut largest: Vec<u64> = (0..ext.devices() as u32)
            .filter(|&d| !self.store.is_lost(d))
            .map(|d| ext.largest_free(d))
            .collect();
        largest.sort_unstable_by(|a, b| b.cmp(a));
        let largest = largest.get(copies - 1).copied().unwrap_or(0);
        Err(EngineError::NoSpace { bytes, largest })
    }

    /// Gives back the space of every copy of `file`, written but not
    /// recorded: nothing refers to it.
    pub(super) fn free_unrecorded(&self, file: &FileRecord) {
        let mut ext = self.store.extents.lock().expect("extents");
        for (dev, offset) in file.places() {
            if let Err(e) = ext.free(dev, offset, file.len) {
                tracing::error!("freeing an unrecorded block file: {e}");
            }
        }
    }

    /// Gives back the extents `allocate` reserved that no file will use.
    pub(super) fn unallocate(&self, places: &[(u32, u64)], bytes: u64) {
        for &(dev, offset) in places {
            self.settle(dev, "freeing an unused extent", |ext| {
                ext.free(dev, offset, bytes)
            });
        }
    }

    /// Keeps the first `keep` bytes of each extent `allocate` reserved.
    pub(super) fn shrink(&self, places: &[(u32, u64)], bytes: u64, keep: u64) {
        for &(dev, offset) in places {
            self.settle(dev, "shrinking an extent", |ext| {
                ext.shrink(dev, offset, bytes, keep)
            });
        }
    }

    /// Ends a flush's reservation on `dev` with `change` to the allocator.
    fn settle(
        &self,
        dev: u32,
        what: &str,
        change: impl FnOnce(
            &mut crate::layout::extents::Extents,
        ) -> std::result::Result<(), crate::layout::extents::ExtentError>,
    ) {
        self.counters.flush.running[dev as usize].fetch_sub(1, Ordering::Relaxed);
        if let Err(e) = change(&mut self.store.extents.lock().expect("extents")) {
            tracing::error!("{what}: {e}");
        }
    }

    /// Whether a file write that failed at `places` lost one of their
    /// devices (see [`Store::lose`]) and may be written again on the
    /// devices left.
    pub(super) fn lost_copy(&self, places: &[(u32, u64)]) -> bool {
        places.iter().any(|&(d, _)| self.store.is_lost(d)) && self.store.lost().iter().any(|&l| !l)
    }
}

/// What [`Inner::write_memstore`] made of a memstore.
enum MemstoreFile<D: Device<Queue: Send>> {
    /// The file's record (its `max_lsn` the flush mark), its handle and
    /// its bytes.
    File(FileRecord, Arc<TableHandle<D>>, u64),
    /// No key has a version in range; the log is durable up to the mark.
    Empty,
    /// The log is full below the LSN the mark needs: nothing was recorded.
    Stalled,
}

/// Bytes of a file's smallest and largest key that the manifest keeps.
/// The file's meta block holds them whole, and reads use those; the
/// manifest's copies are bounds. Whole, 16 KiB keys made a file's record
/// 32 KiB, and the 4 MiB half of the default manifest area then held only
/// about 128 files: fewer than 16 regions may keep before compaction.
pub(crate) const MANIFEST_KEY_BYTES: usize = 64;

/// A lower bound of `key` of at most [`MANIFEST_KEY_BYTES`]: its prefix.
pub(crate) fn key_floor(key: &[u8]) -> Vec<u8> {
    key[..key.len().min(MANIFEST_KEY_BYTES)].to_vec()
}

/// An upper bound of `key` of at most [`MANIFEST_KEY_BYTES`]: the key
/// itself if short enough, else the shortest key after every key that
/// shares its first [`MANIFEST_KEY_BYTES`] bytes (the last byte below
/// 0xff of that prefix incremented, the rest dropped). A prefix of only
/// 0xff bytes has no such key; the key is kept whole.
pub(crate) fn key_ceiling(key: &[u8]) -> Vec<u8> {
    if key.len() <= MANIFEST_KEY_BYTES {
        return key.to_vec();
    }
    let mut bound = key[..MANIFEST_KEY_BYTES].to_vec();
    while let Some(last) = bound.pop() {
        if last < 0xff {
            bound.push(last + 1);
            return bound;
        }
    }
    key.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_key_bounds_are_short_and_bound_the_key() {
        let n = MANIFEST_KEY_BYTES;
        let cases: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"short".to_vec(),
            vec![b'k'; n],
            vec![b'k'; n + 1],
            vec![b'k'; 16 << 10],
            [vec![b'a'; n - 1], vec![0xff; 100]].concat(),
            [vec![0xff; n], vec![b'z'; 10]].concat(),
        ];
        for key in &cases {
            let (lo, hi) = (key_floor(key), key_ceiling(key));
            assert!(lo.as_slice() <= key.as_slice(), "{key:?}");
            assert!(hi.as_slice() >= key.as_slice(), "{key:?}");
            assert!(lo.len() <= n);
            if key.len() <= n {
                assert_eq!((&lo, &hi), (key, key));
            }
        }
        assert_eq!(key_ceiling(&vec![b'k'; 16 << 10]).len(), n);
        // The last byte below 0xff of the prefix is raised, the rest cut.
        let k = [vec![b'a'; n - 1], vec![0xff; 100]].concat();
        assert_eq!(key_ceiling(&k), [vec![b'a'; n - 2], vec![b'b']].concat());
        // Every key sharing the prefix sorts below the bound.
        let other = [vec![b'k'; n], vec![0xff; 300]].concat();
        assert!(other < key_ceiling(&vec![b'k'; n + 1]));
        // A prefix of 0xff bytes only: kept whole.
        let ff = [vec![0xff; n], vec![b'z'; 10]].concat();
        assert_eq!(key_ceiling(&ff), ff);
    }
}
