//! What the engine counts, and the snapshot it reports.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::flush::FlushCounters;
use super::Engine;
use crate::device::Device;
use crate::memstore::MemoryStats;
use crate::wal::stats::WalStatsSnapshot;

#[derive(Debug)]
pub(super) struct Counters {
    pub writes: AtomicU64,
    pub gets: AtomicU64,
    pub scans: AtomicU64,
    pub freezes: AtomicU64,
    /// Block files read for a key their bloom filter let through but did
    /// not hold.
    pub bloom_false: AtomicU64,
    pub flush: FlushCounters,
}

impl Counters {
    pub fn new(data_devices: usize) -> Counters {
        Counters {
            writes: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            freezes: AtomicU64::new(0),
            bloom_false: AtomicU64::new(0),
            flush: FlushCounters::new(data_devices),
        }
    }
}

/// A snapshot of the engine's figures.
#[derive(Clone, Debug)]
pub struct EngineStats {
    pub writes: u64,
    pub gets: u64,
    pub scans: u64,
    pub freezes: u64,
    pub flushes: u64,
    /// Passes that flushed part of a memstore, up to the written LSN of a
    /// full log, while some of its writes waited for log space.
    pub partial_flushes: u64,
    pub flush_bytes: u64,
    /// Summed over flushes (they overlap when several reactors run).
    pub flush_time: Duration,
    pub compactions: u64,
    pub compaction_bytes: u64,
    pub bloom_false_positives: u64,
    pub memory: MemoryStats,
    /// Per region: memstore bytes (active and frozen) and block files.
    pub region_bytes: Vec<u64>,
    pub region_files: Vec<usize>,
    /// Per data device: block-file bytes written, reads and bytes read.
    pub device_written: Vec<u64>,
    pub device_reads: Vec<(u64, u64)>,
    /// Free bytes per data device.
    pub device_free: Vec<u64>,
    /// Flushes and compactions queued, and jobs running.
    pub queued_flushes: usize,
    pub queued_compactions: usize,
    pub running_jobs: usize,
    pub wal: WalStatsSnapshot,
    /// The WAL's replay point now.
    pub replay_point: u64,
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    pub fn stats(&self) -> EngineStats {
        let i = &*self.inner;
        let c = &i.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut region_bytes = Vec::with_capacity(i.region.len());
        let mut region_files = Vec::with_capacity(i.region.len());
        for r in &i.region {
            let st = r.lock();
            region_bytes.push(st.active.bytes() + st.frozen.iter().map(|m| m.bytes()).sum::<u64>());
            region_files.push(st.tables.len());
        }
        let device_free = {
            let ext = i.store.extents.lock().expect("extents");
            (0..ext.devices() as u32)
                .map(|d| ext.free_bytes(d))
                .collect()
        };
        let (queued_flushes, queued_compactions, running_jobs) = i.sched.backlog();
        EngineStats {
            writes: load(&c.writes),
            gets: load(&c.gets),
            scans: load(&c.scans),
            freezes: load(&c.freezes),
            flushes: load(&c.flush.flushes),
            partial_flushes: load(&c.flush.partial),
            flush_bytes: load(&c.flush.flush_bytes),
            flush_time: Duration::from_nanos(load(&c.flush.flush_ns)),
            compactions: load(&c.flush.compactions),
            compaction_bytes: load(&c.flush.compaction_bytes),
            bloom_false_positives: load(&c.bloom_false),
            memory: i.memory.stats(),
            region_bytes,
            region_files,
            device_written: c.flush.device_bytes.iter().map(load).collect(),
            device_reads: i.store.read_counts(),
            device_free,
            queued_flushes,
            queued_compactions,
            running_jobs,
            wal: i.wal.stats(),
            replay_point: i.replay_point(None, None),
        }
    }
}
