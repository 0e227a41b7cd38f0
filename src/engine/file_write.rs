//! Writing a block file: built by a flush or a compaction, streamed to
//! the extent of each of its copies in `flush-chunk` writes,
//! `flush-depth` in flight per copy, then FLUSHed.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::error::{EngineError, Result};
use super::flush::FlushCounters;
use super::Inner;
use crate::device::{wait, Completion, Device, IoBuf, Queue, Request};
use crate::table::{CopyCrcs, TableBuilder, TableError, TableMeta};

pub(super) fn table_error(dev: u32, offset: u64, e: TableError) -> EngineError {
    EngineError::Layout(format!(
        "building a block file at byte {offset} of data device {dev}: {e}"
    ))
}

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    /// Builds a block file with `fill` and writes it whole at each of
    /// `places` (a copy per data device, each block's checksum bound to
    /// its copy's place and the file's id, so a block read back from
    /// anywhere else, a misdirected write, or left there by an earlier
    /// file, a stale block under a lost write, fails it), then flushes
    /// those devices. `Ok(None)`: it would not fit in `room` bytes (nothing
    /// referenced the extents yet).
    pub(super) fn write_file(
        &self,
        queues: &mut [D::Queue],
        id: u64,
        places: &[(u32, u64)],
        room: u64,
        fill: impl FnOnce(&mut TableBuilder, &mut FileWriter<'_, D>) -> Result<()>,
    ) -> Result<Option<TableMeta>> {
        let (dev, offset) = places[0];
        let place = |&(d, start): &(u32, u64)| crate::table::Place::file(d, start, id);
        let mut builder = TableBuilder::new(self.opts.table.clone())
            .at(place(&places[0]))
            .copies(places[1..].iter().map(place).collect());
        let spin = self
            .opts
            .flush_reactors
            .first()
            .is_some_and(|c| c.idle == crate::config::IdlePolicy::Poll);
        let mut slots: Vec<Option<&mut D::Queue>> = queues.iter_mut().map(Some).collect();
        let copies = places
            .iter()
            .map(|&(d, start)| CopyWriter {
                dev: d,
                device: &self.store.devices[d as usize],
                queue: slots[d as usize]
                    .take()
                    .expect("a file's copies are on distinct devices"),
                start,
                written: 0,
                depth: self.opts.flush_depth.max(1),
                in_flight: 0,
                writes: 0,
                spare: Vec::new(),
                done: Vec::new(),
                spin,
            })
            .collect();
        let mut w = FileWriter {
            copies,
            room,
            chunk: self.opts.flush_chunk,
            overflow: false,
            failed: None,
        };
        let written = (|| {
            let filled = fill(&mut builder, &mut w);
            if let Err(e) = filled {
                w.drain_all()?;
                return Err(e);
            }
            if w.overflow {
                w.drain_all()?;
                return Ok(None);
            }
            let (tail, meta, crcs) = builder
                .finish_copies()
                .map_err(|e| table_error(dev, offset, e))?;
            let mut at = w.written();
            if at + tail.len() as u64 > room {
                w.drain_all()?;
                return Ok(None);
            }
            for piece in tail.chunks(w.chunk) {
                let mut buf = w.copies[0].buffer(piece.len());
                buf.copy_from_slice(piece);
                w.submit(buf, at, &crcs)?;
                at += piece.len() as u64;
            }
            w.finish(&self.counters.flush, meta.file_bytes)?;
            Ok(Some(meta))
        })();
        if written.is_err() {
            // Nothing of the file may still be in flight when its extents
            // go back.
            w.drain_all().ok();
        }
        if let (Err(e), Some(d), true) = (&written, w.failed, places.len() > 1) {
            // With other copies, the device is left out and the file is
            // written again on the devices left (see `Inner::lost_copy`);
            // alone, the flush fails.
            self.store
                .lose(d, &format!("a block file write failed ({e})"));
        }
        written
    }
}

/// Streams a block file's bytes to the extent of each of its copies.
pub(super) struct FileWriter<'a, D: Device> {
    /// The first copy's bytes are the builder's; the others' differ in
    /// their checksums ([`CopyCrcs`]).
    copies: Vec<CopyWriter<'a, D>>,
    room: u64,
    chunk: usize,
    overflow: bool,
    /// The data device of the first copy whose write failed.
    failed: Option<u32>,
}

impl<D: Device> FileWriter<'_, D> {
    /// Writes out every whole chunk the builder has ready, to each copy.
    pub(super) fn drain(&mut self, builder: &mut TableBuilder) -> Result<()> {
        loop {
            if self.overflow {
                return Ok(());
            }
            let mut buf = self.copies[0].buffer(self.chunk);
            if !builder.fill_ready(&mut buf) {
                self.copies[0].spare.push(buf);
                return Ok(());
            }
            let at = self.written();
            if at + self.chunk as u64 > self.room {
                self.overflow = true;
                self.copies[0].spare.push(buf);
                return Ok(());
            }
            self.submit(buf, at, builder.copy_crcs())?;
            builder.copy_crcs().forget_before(at + self.chunk as u64);
        }
    }

    /// Bytes of the file written (or in flight) so far.
    fn written(&self) -> u64 {
        self.copies[0].written
    }

    /// Writes `buf`, the first copy's bytes at file offset `at`, to every
    /// copy, each with its own checksums.
    fn submit(&mut self, buf: IoBuf, at: u64, crcs: &CopyCrcs) -> Result<()> {
        for k in 1..self.copies.len() {
            let cw = &mut self.copies[k];
            let mut copy = cw.buffer(buf.len());
            copy.copy_from_slice(&buf);
            crcs.patch(k, at, &mut copy);
            if let Err(e) = cw.submit(copy) {
                self.failed.get_or_insert(cw.dev);
                return Err(e);
            }
        }
        let cw = &mut self.copies[0];
        cw.submit(buf).inspect_err(|_| {
            self.failed.get_or_insert(cw.dev);
        })
    }

    /// Waits for every copy's writes, then flushes each copy's device.
    fn finish(&mut self, counters: &FlushCounters, file_bytes: u64) -> Result<()> {
        self.drain_all()?;
        for cw in &mut self.copies {
            let d = cw.dev as usize;
            counters.device_writes[d].fetch_add(cw.writes, Ordering::Relaxed);
            counters.device_flush_commands[d].fetch_add(1, Ordering::Relaxed);
            let flushed = wait::run(cw.queue, Request::flush(u64::MAX))
                .map_err(|r| r.error)
                .and_then(|c| c.result);
            if let Err(e) = flushed {
                self.failed.get_or_insert(cw.dev);
                return Err(e.into());
            }
            counters.device_bytes[d].fetch_add(file_bytes, Ordering::Relaxed);
        }
        Ok(())
    }

    fn drain_all(&mut self) -> Result<()> {
        let mut first = None;
        for cw in &mut self.copies {
            if let Err(e) = cw.drain_all() {
                self.failed.get_or_insert(cw.dev);
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Streams one copy of a block file to its extent, `depth` writes in
/// flight.
struct CopyWriter<'a, D: Device> {
    dev: u32,
    device: &'a D,
    queue: &'a mut D::Queue,
    start: u64,
    written: u64,
    depth: usize,
    in_flight: usize,
    /// Write requests submitted.
    writes: u64,
    spare: Vec<IoBuf>,
    done: Vec<Completion>,
    /// Under the `poll` idle policy, spin on the queue instead of sleeping.
    spin: bool,
}

impl<D: Device> CopyWriter<'_, D> {
    fn buffer(&mut self, len: usize) -> IoBuf {
        match self.spare.pop() {
            Some(mut b) if b.capacity() >= len => {
                b.restore_len();
                b.truncate(len);
                b
            }
            _ => self.device.alloc_buf(len),
        }
    }

    fn submit(&mut self, buf: IoBuf) -> Result<()> {
        while self.in_flight >= self.depth {
            self.reap(true)?;
        }
        let bs = u64::from(self.device.info().block_size);
        let len = buf.len() as u64;
        let lba = (self.start + self.written) / bs;
        self.queue
            .submit(Request::write(self.written, lba, vec![buf]))
            .map_err(|r| r.error)?;
        self.written += len;
        self.in_flight += 1;
        self.writes += 1;
        Ok(())
    }

    fn reap(&mut self, block: bool) -> Result<()> {
        loop {
            self.queue.poll(&mut self.done);
            let mut failed = None;
            for c in self.done.drain(..) {
                self.in_flight -= 1;
                if let Err(e) = c.result {
                    failed.get_or_insert(e);
                }
                self.spare.extend(c.bufs);
            }
            if let Some(e) = failed {
                return Err(e.into());
            }
            if !block || self.in_flight < self.depth || self.in_flight == 0 {
                return Ok(());
            }
            self.idle();
        }
    }

    /// Waits a little for a completion: spins under `poll`, else sleeps
    /// until the queue's wait hint says one may be ready.
    fn idle(&self) {
        if self.spin {
            std::hint::spin_loop();
        } else {
            wait::wait(self.queue.wait_hint(), Duration::from_millis(10));
        }
    }

    fn drain_all(&mut self) -> Result<()> {
        let mut first = None;
        while self.in_flight > 0 {
            let before = self.in_flight;
            if let Err(e) = self.reap(false) {
                first.get_or_insert(e);
            }
            if self.in_flight == before {
                self.idle();
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
