//! WAL counters, updated by the reactor and the writers, read by anyone.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one WAL, shared by its reactor and its handle.
#[derive(Debug, Default)]
pub struct WalStats {
    /// Appends accepted (all durability levels but `none`).
    pub appends: AtomicU64,
    /// Batches written, records in them, and bytes written (padded).
    pub batches: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    /// Flush commands issued, per device in stripe order.
    pub flushes: Vec<AtomicU64>,
    /// Batches written, per device in stripe order.
    pub device_batches: Vec<AtomicU64>,
    /// Bytes written (padded), per device in stripe order.
    pub device_bytes: Vec<AtomicU64>,
    /// Nanoseconds writers spent waiting for room in the WAL's ring, which
    /// fills when the log is full or the devices fall behind.
    pub writer_wait_ns: AtomicU64,
    /// Times the reactor found no free segment for a batch.
    pub log_full: AtomicU64,
    /// Segments reclaimed after `release`.
    pub segments_reclaimed: AtomicU64,
}

impl WalStats {
    pub fn new(devices: usize) -> WalStats {
        WalStats {
            flushes: (0..devices).map(|_| AtomicU64::new(0)).collect(),
            device_batches: (0..devices).map(|_| AtomicU64::new(0)).collect(),
            device_bytes: (0..devices).map(|_| AtomicU64::new(0)).collect(),
            ..WalStats::default()
        }
    }

    pub fn snapshot(&self) -> WalStatsSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WalStatsSnapshot {
            appends: get(&self.appends),
            batches: get(&self.batches),
            records: get(&self.records),
            bytes: get(&self.bytes),
            flushes: self.flushes.iter().map(get).collect(),
            device_batches: self.device_batches.iter().map(get).collect(),
            device_bytes: self.device_bytes.iter().map(get).collect(),
            writer_wait_ns: get(&self.writer_wait_ns),
            log_full: get(&self.log_full),
            segments_reclaimed: get(&self.segments_reclaimed),
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
    pub writer_wait_ns: u64,
    pub log_full: u64,
    pub segments_reclaimed: u64,
}

impl WalStatsSnapshot {
    /// Records per batch, on average.
    pub fn records_per_batch(&self) -> f64 {
        self.records as f64 / self.batches.max(1) as f64
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
