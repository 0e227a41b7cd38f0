//! Writing batches: each to its devices (one copy per device, sealed with
//! that device's segment number), and flushing devices while a `sync`
//! append waits.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{WalWork, FLUSH_TAG};
use crate::device::{Queue, Request};
use crate::wal::format::{BatchBuilder, SegmentHeader};
use crate::wal::inflight::{Batch, State};
use crate::wal::stripe::{choose, Choice};
use crate::wal::Lsn;

impl<Q: Queue> WalWork<Q> {
    /// Seals and writes batches while devices have room.
    pub(super) fn submit(&mut self) -> usize {
        let mut n = 0;
        loop {
            if self.failed.is_some() {
                return n;
            }
            if self.ready.is_empty() {
                // On its way: being written or flushed. A batch written
                // and waiting for no flush (no `sync` append in it) holds
                // nothing up: it may never be flushed on its own.
                if self.one_at_a_time && self.in_flight() {
                    return n;
                }
                self.seal_open();
            }
            let Some((builder, _, _)) = self.ready.front() else {
                return n;
            };
            let blocks = (builder.padded_len() / self.block_size as usize) as u64;
            let to = match choose(&self.devs, self.want(), self.rr, self.max_in_flight, blocks) {
                Choice::To(to) => to,
                Choice::Busy => return n,
                Choice::Full => {
                    self.log_is_full();
                    return n;
                }
            };
            if self.pool.len() < to.len() - 1 {
                return n; // not reached: the pool keeps a reserve for copies
            }
            if self.log_full_since.take().is_some() {
                self.published.log_full.store(false, Ordering::SeqCst);
            }
            let (builder, first, last) = self.ready.pop_front().expect("front exists");
            self.write_batch(builder, blocks, (first, last), &to);
            n += 1;
        }
    }

    /// Writes one batch of `blocks` blocks, LSNs `first..=last`, to the
    /// devices at `to` (stripe positions).
    fn write_batch(
        &mut self,
        builder: BatchBuilder,
        blocks: u64,
        (first, last): (Lsn, Lsn),
        to: &[usize],
    ) {
        let fua = self.fua && self.sync_waits_in(first, last);
        let records = u64::from(builder.count());
        let id = self.next_batch;
        self.next_batch += 1;
        let mut builders: Vec<BatchBuilder> = (1..to.len())
            .map(|_| builder.copy_into(self.pool.pop().expect("checked")))
            .collect();
        builders.insert(0, builder);
        let mut copies = Vec::with_capacity(to.len());
        let mut new_segment = false;
        let mut len = 0;
        for (&d, builder) in to.iter().zip(builders) {
            let p = self.devs[d]
                .segments
                .place(blocks, last)
                .expect("the segment ring has room");
            new_segment |= p.new_segment.is_some();
            let (buf, sealed) = builder.seal(first, p.seq, self.sync_lsn, self.epoch);
            len = sealed;
            let dev = &mut self.devs[d];
            let (lba, bufs) = match p.new_segment {
                Some((_, seq)) => {
                    let mut header = dev.header.take().expect("one header write at a time");
                    SegmentHeader {
                        device_index: dev.index,
                        appliance_id: self.appliance_id,
                        seq,
                        epoch: self.epoch,
                        first_lsn: first,
                        released: self.released,
                    }
                    .encode(&mut header);
                    (p.lba - 1, vec![header, buf])
                }
                None => (p.lba, vec![buf]),
            };
            let dev_fua = fua && dev.volatile;
            let req = if dev_fua {
                Request::write_fua(id, lba, bufs)
            } else {
                Request::write(id, lba, bufs)
            };
            if let Err(rejected) = dev.queue.submit(req) {
                let mut bufs = rejected.request.into_bufs();
                let mut batch_buf = bufs.pop().expect("the batch buffer comes back");
                batch_buf.restore_len();
                self.pool.push(batch_buf);
                if let Some(h) = bufs.pop() {
                    self.devs[d].header = Some(h);
                }
                self.device_failed(d, rejected.error.to_string());
                continue;
            }
            dev.in_flight += 1;
            dev.in_flight_bytes += sealed;
            copies.push((d, State::Writing));
            self.stats.device_batches[d].add(1);
            self.stats.device_bytes[d].add(sealed as u64);
            if dev_fua {
                self.stats.device_fua[d].add(1);
            }
        }
        if new_segment {
            self.publish_usage();
        }
        self.rr = (to[to.len() - 1] + 1) % self.devs.len();
        if copies.is_empty() && self.failed.is_none() {
            self.fail(format!(
                "the batch of LSNs {first}..={last} could be written to no WAL device"
            ));
        }
        self.batches.push_back(Batch {
            id,
            last,
            fua,
            sent: Instant::now(),
            copies,
        });
        self.stats.batches.add(1);
        self.stats.records.add(records);
        self.stats.bytes.add(len as u64);
    }

    /// Says that the log is full (the next batch has no segment on enough
    /// devices), and fails the WAL if nothing will release log any more.
    fn log_is_full(&mut self) {
        if self.log_full_since.is_none() {
            self.log_full_since = Some(Instant::now());
            self.published.log_full.store(true, Ordering::SeqCst);
            self.stats.log_full.add(1);
        }
        if let Some(why) = self.published.no_release.get() {
            let why = format!("the log is full and will not be released: {why}");
            self.fail(why);
        }
    }

    /// Flushes the devices holding written batches while a `sync` append
    /// waits for them, or while the log is full: then nothing else can be
    /// written, and the engine waits for what is written to be durable
    /// before it records a flush that lets the log be reclaimed.
    pub(super) fn flush(&mut self) -> usize {
        let sync_waits = self
            .sync_waiters
            .front()
            .is_some_and(|&(want, _)| want > self.sync_lsn);
        if !(sync_waits || self.log_full_since.is_some()) || self.failed.is_some() {
            return 0;
        }
        let mut n = 0;
        for d in 0..self.devs.len() {
            let dev = &mut self.devs[d];
            if dev.lost.is_some() || dev.flushing.is_some() || dev.unflushed.is_empty() {
                continue;
            }
            if let Err(rejected) = dev.queue.submit(Request::flush(FLUSH_TAG)) {
                self.device_failed(d, rejected.error.to_string());
                if self.failed.is_some() {
                    return n;
                }
                continue;
            }
            dev.flushing = Some(std::mem::take(&mut dev.unflushed));
            self.stats.flushes[d].add(1);
            n += 1;
        }
        n
    }
}
