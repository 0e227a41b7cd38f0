//! WAL counters, updated by the reactor and the writers, read by anyone.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::reactor::Counter;

/// Counters of one WAL, shared by its reactor and its handle. The
/// [`Counter`]s only the WAL reactor writes (no locked instruction per
/// append); `writer_wait_ns`, which every writer adds to, is atomic.
#[derive(Debug, Default)]
pub struct WalStats {
    /// Appends accepted (all durability levels but `none`).
    pub appends: Counter,
    /// Batches written, records in them, and bytes written (padded).
    pub batches: Counter,
    pub records: Counter,
    pub bytes: Counter,
    /// Flush commands issued, per device in stripe order.
    pub flushes: Vec<Counter>,
    /// Batches written, per device in stripe order.
    pub device_batches: Vec<Counter>,
    /// Bytes written (padded), per device in stripe order.
    pub device_bytes: Vec<Counter>,
    /// Batches written with forced unit access (no flush after them), per
    /// device in stripe order.
    pub device_fua: Vec<Counter>,
    /// 1 for each device the WAL lost and went on without (degraded), per
    /// device in stripe order.
    pub device_lost: Vec<Counter>,
    /// Nanoseconds writers spent waiting for room in the WAL's ring, which
    /// fills when the log is full or the devices fall behind.
    pub writer_wait_ns: AtomicU64,
    /// Times the reactor found no free segment for a batch.
    pub log_full: Counter,
    /// Segments reclaimed after `release`.
    pub segments_reclaimed: Counter,
    /// Nanoseconds from submitting each batch write to its completion,
    /// summed, and the writes per [`WRITE_LATENCY_BOUNDS_NS`] bucket (one
    /// more for the slower ones), for a latency histogram.
    pub write_ns: Counter,
    pub write_latency: Vec<Counter>,
}

/// Upper bounds of the batch write latency buckets: powers of two
/// nanoseconds from about 8 µs to about 1 s.
pub const WRITE_LATENCY_BOUNDS_NS: [u64; 18] = {
    let mut b = [0u64; 18];
    let mut i = 0;
    while i < 18 {
        b[i] = 1 << (13 + i);
        i += 1;
    }
    b
};

impl WalStats {
    pub fn new(devices: usize) -> WalStats {
        WalStats {
            flushes: (0..devices).map(|_| Counter::default()).collect(),
            device_batches: (0..devices).map(|_| Counter::default()).collect(),
            device_bytes: (0..devices).map(|_| Counter::default()).collect(),
            device_fua: (0..devices).map(|_| Counter::default()).collect(),
            device_lost: (0..devices).map(|_| Counter::default()).collect(),
            write_latency: (0..=WRITE_LATENCY_BOUNDS_NS.len())
                .map(|_| Counter::default())
                .collect(),
            ..WalStats::default()
        }
    }

    /// Counts a batch write that took `ns` from submission to completion.
    /// Only the WAL reactor calls this.
    pub(crate) fn batch_written(&self, ns: u64) {
        self.write_ns.add(ns);
        let i = WRITE_LATENCY_BOUNDS_NS.partition_point(|&b| b < ns);
        self.write_latency[i].add(1);
    }

    pub fn snapshot(&self) -> WalStatsSnapshot {
        WalStatsSnapshot {
            appends: self.appends.get(),
            batches: self.batches.get(),
            records: self.records.get(),
            bytes: self.bytes.get(),
            flushes: self.flushes.iter().map(Counter::get).collect(),
            device_batches: self.device_batches.iter().map(Counter::get).collect(),
            device_bytes: self.device_bytes.iter().map(Counter::get).collect(),
            device_fua: self.device_fua.iter().map(Counter::get).collect(),
            device_lost: self.device_lost.iter().map(Counter::get).collect(),
            writer_wait_ns: self.writer_wait_ns.load(Ordering::Relaxed),
            log_full: self.log_full.get(),
            segments_reclaimed: self.segments_reclaimed.get(),
            write_ns: self.write_ns.get(),
            write_latency: self.write_latency.iter().map(Counter::get).collect(),
        }
    }
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A copy of [`WalStats`] at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalStatsSnapshot {
    pub appends: u64,
    pub batches: u64,
    pub records: u64,
    pub bytes: u64,
    pub flushes: Vec<u64>,
    pub device_batches: Vec<u64>,
    pub device_bytes: Vec<u64>,
    pub device_fua: Vec<u64>,
    /// 1 for each device lost (degraded mode), in stripe order.
    pub device_lost: Vec<u64>,
    pub writer_wait_ns: u64,
    pub log_full: u64,
    pub segments_reclaimed: u64,
    /// See [`WalStats::write_ns`] and [`WalStats::write_latency`].
    pub write_ns: u64,
    pub write_latency: Vec<u64>,
}

impl WalStatsSnapshot {
    /// Records per batch, on average.
    pub fn records_per_batch(&self) -> f64 {
        self.records as f64 / self.batches.max(1) as f64
    }

    /// Batch writes completed (the latency histogram's count).
    pub fn writes_completed(&self) -> u64 {
        self.write_latency.iter().sum()
    }
}

impl fmt::Display for WalStatsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} appends in {} batches ({:.1} records/batch, {} bytes), batches per device {:?}, \
             flushes per device {:?}, writers waited {:.3}s, log full {} times, {} segments reclaimed",
            self.appends,
            self.batches,
            self.records_per_batch(),
            self.bytes,
            self.device_batches,
            self.flushes,
            self.writer_wait_ns as f64 / 1e9,
            self.log_full,
            self.segments_reclaimed
        )
    }
}
