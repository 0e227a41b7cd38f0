//! What the engine counts, and the snapshot it reports.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::flush::FlushCounters;
use super::Engine;
use crate::device::Device;
use crate::layout::manifest::ManifestStats;
use crate::memstore::MemoryStats;
use crate::reactor::CountersSnapshot;
use crate::table::CacheStats;
use crate::wal::stats::WalStatsSnapshot;

#[derive(Debug)]
pub(super) struct Counters {
    pub writes: AtomicU64,
    pub gets: AtomicU64,
    pub scans: AtomicU64,
    pub freezes: AtomicU64,
    /// Regions purged because their scans kept passing deletes.
    pub purges: AtomicU64,
    /// Keys folded into memstores' B-trees while the server idled.
    pub folded_ahead: AtomicU64,
    /// Block files read for a key their bloom filter let through but did
    /// not hold.
    pub bloom_false: AtomicU64,
    pub flush: FlushCounters,
}

impl Counters {
    pub fn new(data_devices: usize, flush_reactors: usize) -> Counters {
        Counters {
            writes: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            freezes: AtomicU64::new(0),
            purges: AtomicU64::new(0),
            folded_ahead: AtomicU64::new(0),
            bloom_false: AtomicU64::new(0),
            flush: FlushCounters::new(data_devices, flush_reactors),
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
    /// Regions purged because their scans kept passing deletes.
    pub purges: u64,
    /// Keys folded into memstores' B-trees while the server idled, and
    /// keys the active memstores hold outside theirs now (the next range
    /// read of one folds them first).
    pub folded_ahead: u64,
    pub unfolded: u64,
    pub flushes: u64,
    /// Passes that flushed part of a memstore, up to the written LSN of a
    /// full log, while some of its writes waited for log space.
    pub partial_flushes: u64,
    /// Entries those passes wrote: each logged version at most once.
    pub partial_entries: u64,
    pub flush_bytes: u64,
    /// Summed over flushes (they overlap when several reactors run).
    pub flush_time: Duration,
    pub compactions: u64,
    pub compaction_bytes: u64,
    /// Entries compactions dropped because the compaction filter said so.
    pub compaction_filtered: u64,
    pub bloom_false_positives: u64,
    /// The block cache of point lookups.
    pub block_cache: CacheStats,
    /// Copies of each block file written (`flush.copies`).
    pub file_copies: usize,
    /// Data blocks read from a file's other copy because the first copy
    /// read was bad.
    pub copy_reads: u64,
    /// Per data device, whether a write to it failed while the file's
    /// other copies were written: it takes no new file.
    pub data_lost: Vec<bool>,
    /// The background scrub.
    pub scrub: super::ScrubProgress,
    pub memory: MemoryStats,
    /// Per region: memstore bytes (active and frozen) and block files.
    pub region_bytes: Vec<u64>,
    pub region_files: Vec<usize>,
    /// Per region: bytes of the active memstore, of the frozen ones, and
    /// how many are frozen (waiting for or in a flush).
    pub region_active_bytes: Vec<u64>,
    pub region_frozen_bytes: Vec<u64>,
    pub region_frozen: Vec<usize>,
    /// Per data device: block-file bytes written, reads and bytes read.
    pub device_written: Vec<u64>,
    pub device_reads: Vec<(u64, u64)>,
    /// Per data device: block-file write requests and flush commands
    /// (manifest writes are in `manifest`, on the first
    /// `manifest_devices` data devices).
    pub device_writes: Vec<u64>,
    pub device_flush_commands: Vec<u64>,
    /// Per data device: memstore flushes written there, and their bytes.
    pub device_flushes: Vec<u64>,
    pub device_flush_bytes: Vec<u64>,
    pub manifest: ManifestStats,
    pub manifest_devices: usize,
    /// Free bytes per data device.
    pub device_free: Vec<u64>,
    /// Flushes and compactions queued, and jobs running.
    pub queued_flushes: usize,
    pub queued_compactions: usize,
    pub running_jobs: usize,
    pub wal: WalStatsSnapshot,
    /// The WAL's replay point now.
    pub replay_point: u64,
    /// WAL devices replaced while running that do not hold the log whole
    /// yet (the replay point has not passed where they joined).
    pub wal_catching_up: usize,
    /// Every LSN at or below these is written / durable.
    pub wal_written_lsn: u64,
    pub wal_durable_lsn: u64,
    /// WAL segments holding log not yet released, segments in all, and
    /// the segment size in bytes.
    pub wal_live_segments: u64,
    pub wal_segments: u64,
    pub wal_segment_size: u64,
    /// The WAL reactor's counters (`None` once it stopped).
    pub wal_reactor: Option<CountersSnapshot>,
    /// Per flush reactor: name, time running jobs and waiting, jobs run.
    pub flush_reactors: Vec<FlushReactorStats>,
    /// When the last flush was recorded since open.
    pub last_flush: Option<SystemTime>,
    /// Why the engine refuses writes, once a flush or the WAL failed.
    pub failed: Option<String>,
}

/// Where one flush reactor's time went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushReactorStats {
    pub name: String,
    pub busy: Duration,
    pub idle: Duration,
    pub jobs: u64,
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    pub fn stats(&self) -> EngineStats {
        let i = &*self.inner;
        let c = &i.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut region_bytes = Vec::with_capacity(i.region.len());
        let mut region_files = Vec::with_capacity(i.region.len());
        let mut region_active_bytes = Vec::with_capacity(i.region.len());
        let mut region_frozen_bytes = Vec::with_capacity(i.region.len());
        let mut region_frozen = Vec::with_capacity(i.region.len());
        let mut unfolded = 0;
        for r in &i.region {
            let st = r.lock();
            unfolded += st.active.unfolded() as u64;
            let frozen = st.frozen.iter().map(|m| m.bytes()).sum::<u64>();
            region_bytes.push(st.active.bytes() + frozen);
            region_files.push(st.tables.len());
            region_active_bytes.push(st.active.bytes());
            region_frozen_bytes.push(frozen);
            region_frozen.push(st.frozen.len());
        }
        let device_free = {
            let ext = i.store.extents.lock().expect("extents");
            (0..ext.devices() as u32)
                .map(|d| ext.free_bytes(d))
                .collect()
        };
        let (queued_flushes, queued_compactions, running_jobs) = i.sched.backlog();
        let manifest = i.manifest.lock().expect("manifest lock").stats();
        let (wal_live_segments, wal_segments) = i.wal.segment_usage();
        let flush_reactors = i
            .opts
            .flush_reactors
            .iter()
            .zip(&c.flush.reactors)
            .map(|(cfg, t)| FlushReactorStats {
                name: cfg.name.clone(),
                busy: Duration::from_nanos(load(&t.busy_ns)),
                idle: Duration::from_nanos(load(&t.idle_ns)),
                jobs: load(&t.jobs),
            })
            .collect();
        let last_flush = match load(&c.flush.last_flush_ms) {
            0 => None,
            ms => Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms)),
        };
        EngineStats {
            writes: load(&c.writes),
            gets: load(&c.gets),
            scans: load(&c.scans),
            freezes: load(&c.freezes),
            purges: load(&c.purges),
            folded_ahead: load(&c.folded_ahead),
            unfolded,
            flushes: load(&c.flush.flushes),
            partial_flushes: load(&c.flush.partial),
            partial_entries: load(&c.flush.partial_entries),
            flush_bytes: load(&c.flush.flush_bytes),
            flush_time: Duration::from_nanos(load(&c.flush.flush_ns)),
            compactions: load(&c.flush.compactions),
            compaction_bytes: load(&c.flush.compaction_bytes),
            compaction_filtered: load(&c.flush.compaction_filtered),
            bloom_false_positives: load(&c.bloom_false),
            block_cache: i.store.cache.stats(),
            file_copies: i.opts.file_copies,
            copy_reads: load(&i.store.copy_reads),
            data_lost: i.store.lost(),
            scrub: i.scrub.progress(),
            memory: i.memory.stats(),
            region_bytes,
            region_files,
            region_active_bytes,
            region_frozen_bytes,
            region_frozen,
            device_written: c.flush.device_bytes.iter().map(load).collect(),
            device_reads: i.store.read_counts(),
            device_writes: c.flush.device_writes.iter().map(load).collect(),
            device_flush_commands: c.flush.device_flush_commands.iter().map(load).collect(),
            device_flushes: c.flush.device_flushes.iter().map(load).collect(),
            device_flush_bytes: c.flush.device_flush_bytes.iter().map(load).collect(),
            manifest,
            manifest_devices: i.manifest_devices,
            device_free,
            queued_flushes,
            queued_compactions,
            running_jobs,
            wal: i.wal.stats(),
            replay_point: i.replay_point(None, None),
            wal_catching_up: i.rejoined.pending(),
            wal_written_lsn: i.wal.written_lsn(),
            wal_durable_lsn: i.wal.durable_lsn(),
            wal_live_segments,
            wal_segments,
            wal_segment_size: i.opts.wal.segment_size,
            wal_reactor: i.wal.reactor_counters(),
            flush_reactors,
            last_flush,
            failed: i.failed.lock().expect("failed lock").clone(),
        }
    }
}
