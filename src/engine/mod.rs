//! The engine: the in-process API over the WAL, the memstores and the
//! block files.
//!
//! ```text
//!  put/delete ─► admit (global limit) ─► region lock: pick the active memstore,
//!                charge it, append to the WAL ─► wait for the ack at the write's
//!                level ─► insert into that memstore (now readers see it)
//!  region full ─► freeze ─► flush reactor: wait for its pending writes ─► sorted
//!                block file on a data device (large writes, then FLUSH) ─►
//!                manifest edit (file, region flushed up to LSN, replay point) ─►
//!                swap the memstore for the file ─► WAL may reclaim to the replay point
//!  get  ─► memstores newest first ─► block files newest first (bloom, then one block)
//!  scan ─► merge of all of them in key order, newest version wins, tombstones hidden
//! ```
//!
//! **Why writes of a region get LSNs in memstore order.** A writer takes the
//! region's lock, picks the active memstore and sends its append to the WAL
//! ring before letting go; a freeze takes the same lock. The ring is FIFO
//! and the WAL numbers appends in the order it takes them, so every LSN in
//! a frozen memstore is below every LSN of the memstore after it. Flushes
//! of one region run one at a time, oldest memstore first, so "region `r`
//! is flushed up to LSN `n`" (the manifest's `flushed_lsn`) means every
//! record of `r` at or below `n` is in a block file, and a record is
//! replayed into the memstores exactly when its LSN is above its region's
//! mark. Readers can stop at the first memstore or file that has the key.
//!
//! **Visibility.** A write is inserted only after the WAL acknowledged it
//! at its level, so no reader sees a write that could still be lost at
//! that level, and the writer sees its own write when its call returns.
//!
//! **Replay point.** Each memstore knows a floor below every LSN it will
//! hold (the WAL's written LSN when it was first used); the replay point
//! is the lowest floor + 1 of the memstores not yet flushed, or the WAL's
//! written LSN + 1 when every memstore is empty. The WAL reclaims the
//! segments below it.
//!
//! **A flush never waits for log space.** A flush waits for the writes
//! admitted to its memstore, and the log it frees may be what some of
//! them wait for. Each memstore tracks its admitted writes in groups
//! (their tickets in LSN order, and how many are inserted), and a ticket
//! knows its LSN before it is acknowledged. While the log is full, a flush
//! reads the written LSN `w` and, once every write of the memstore at or
//! below `w` is inserted, while the memstore has or will have a write
//! above it, makes a pass: the newest version at or below `w` of each key
//! goes to a block file with `w` as the region's flush mark (the log is
//! durable to `w`: it flushes itself while full), and `w` becomes the
//! floor of the memstore and of every later one of the region (their
//! writes come after that write above `w`). The replay point and the log
//! move past `w`; the memstore stays frozen, readable and first of its
//! region, and is queued again for the rest. Every write at or below `w`
//! is acknowledged without log space (written; `sync` ones once the full
//! log flushes), and writers insert in LSN order as acknowledgements come,
//! so the pass does not wait on anything that waits for it. A flush of a
//! whole memstore that finds the log full below its highest LSN (an
//! `async` write is inserted once it has an LSN) records nothing and is
//! queued again for a pass.

mod compact;
mod error;
mod file_write;
mod filter;
mod flush;
mod fold;
mod merge;
mod open;
mod purge;
mod read;
mod region;
mod rejoin;
mod repair;
mod sched;
mod scrub;
mod scrubber;
mod stale_manifest;
mod stats;
mod store;
mod wal_marks;
mod write;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub use error::{EngineError, Result};
pub use filter::{CompactionFilter, FilterFactory};
pub use fold::FoldAhead;
pub use open::{EngineDevices, OpenReport};
pub use purge::PURGE_AFTER;
pub use read::{Below, BelowRange, PointRead};
pub use scrub::{ScrubFinding, ScrubReport};
pub use scrubber::{ScrubOptions, ScrubProgress};
pub use stale_manifest::mark_replaced as mark_manifest_copy_replaced;
pub use stale_manifest::rewatch_wal;
pub use stats::{EngineStats, FlushReactorStats};
pub use wal_marks::mark_replaced as mark_wal_replaced;
pub use write::Pending;

use crate::config::{Config, Durability};
use crate::device::Device;
use crate::layout::manifest::Manifest;
use crate::memstore::{Memory, Regions};
use crate::reactor::ReactorConfig;
use crate::table::TableOptions;
use crate::wal::{Wal, WalOptions};
use region::Region;
use sched::Scheduler;
use stats::Counters;
use store::Store;

/// How an engine runs.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Region boundaries (see [`crate::config::MemstoreConfig::split_keys`]).
    pub split_keys: Vec<Vec<u8>>,
    pub flush_size: u64,
    pub global_limit: u64,
    pub low_water: f64,
    /// Once more than this fraction of the WAL's segments hold unreleased
    /// log, or whenever the log is full, the memstores holding its older
    /// half are frozen so their flushes let it reclaim (0.5).
    pub log_freeze_at: f64,
    pub max_key: usize,
    pub max_value: usize,
    /// The level of a write that does not name one.
    pub durability: Durability,
    pub table: TableOptions,
    /// A region with more block files than this is compacted.
    pub compact_at: usize,
    /// Data devices each block file is written to, one copy on each.
    pub file_copies: usize,
    /// Bytes of data blocks kept in memory for point lookups (0: none).
    pub block_cache: u64,
    /// Bytes after the reserved area of each data device for the manifest.
    pub manifest_bytes: u64,
    /// Unit of the extent allocator.
    pub extent_unit: u64,
    /// Bytes per write request of a flush, and how many are in flight.
    pub flush_chunk: usize,
    pub flush_depth: usize,
    /// The background scrub of block files.
    pub scrub: ScrubOptions,
    /// Data devices (by index) that cannot be used at this start: they
    /// stand in failing every request, and the engine runs without them
    /// (degraded), reading every file from its other copies.
    pub lost_data: Vec<(u32, String)>,
    /// Told of a manifest device that writes leave out (see
    /// [`crate::layout::manifest::MirrorHook`]).
    pub manifest_watch: Option<crate::layout::manifest::MirrorHook>,
    pub wal: WalOptions,
    pub wal_reactor: ReactorConfig,
    /// One flush reactor each.
    pub flush_reactors: Vec<ReactorConfig>,
}

impl EngineOptions {
    /// The options the device map gives.
    pub fn from_config(cfg: &Config, appliance_id: u128) -> EngineOptions {
        let m = &cfg.memstore;
        let block = cfg
            .flush
            .devices
            .first()
            .and_then(|n| cfg.device(n))
            .map_or(4096, |d| d.block_size);
        EngineOptions {
            split_keys: m.split_keys.clone(),
            flush_size: m.flush_size,
            global_limit: m.global_limit,
            low_water: m.low_water,
            log_freeze_at: 0.5,
            max_key: m.max_key as usize,
            max_value: m.max_value as usize,
            durability: cfg.wal.durability,
            table: TableOptions {
                block_bytes: cfg.flush.block_size as usize,
                bloom_bits_per_key: cfg.flush.bloom_bits,
                device_block: block,
            },
            compact_at: cfg.flush.compact_at as usize,
            file_copies: cfg.flush.copies,
            block_cache: cfg.flush.block_cache,
            manifest_bytes: cfg.flush.manifest_size,
            extent_unit: 64 << 10,
            flush_chunk: 1 << 20,
            flush_depth: 4,
            scrub: ScrubOptions {
                rate: cfg.flush.scrub_rate,
                every: cfg.flush.scrub_every,
            },
            lost_data: Vec::new(),
            manifest_watch: None,
            wal: WalOptions::from_config(&cfg.wal, appliance_id),
            wal_reactor: ReactorConfig::pinned("wal", cfg.reactors.wal[0], &cfg.reactors),
            flush_reactors: cfg
                .reactors
                .flush
                .iter()
                .enumerate()
                .map(|(i, &core)| ReactorConfig::pinned(format!("flush{i}"), core, &cfg.reactors))
                .collect(),
        }
    }
}

/// The storage engine. Share it between threads with an `Arc`; every call
/// takes `&self`.
pub struct Engine<D: Device<Queue: Send> + Clone> {
    inner: Arc<Inner<D>>,
    flushers: Vec<JoinHandle<()>>,
    scrubber: Option<JoinHandle<()>>,
    /// Exclusive locks on the map's file devices while the engine is open
    /// (see [`Engine::open_config`]); released when it is dropped.
    _locks: Vec<std::fs::File>,
}

/// What the engine and its flush reactors share.
struct Inner<D: Device<Queue: Send> + Clone> {
    opts: EngineOptions,
    regions: Regions,
    region: Vec<Region<D>>,
    wal: Wal,
    /// The WAL stripe, in order, for the devices' names and sizes (a
    /// device taken back while running takes its place).
    wal_devices: Mutex<Vec<D>>,
    /// WAL devices taken back while running, until their marks go.
    rejoined: Arc<rejoin::Rejoined>,
    memory: Memory,
    store: Arc<Store<D>>,
    manifest: Arc<Mutex<Manifest<D>>>,
    /// Data devices that hold the manifest (the first one or two).
    manifest_devices: usize,
    sched: Scheduler,
    /// While the WAL is replayed at open, the LSN of the record about to be
    /// replayed (no replay point may pass it); `u64::MAX` after.
    replaying: AtomicU64,
    /// The highest LSN acknowledged: the version of a `none` write, taken
    /// when it is admitted.
    high_lsn: AtomicU64,
    next_memstore: AtomicU64,
    next_file: AtomicU64,
    /// When the engine opened, and when (µs after) writers last asked for
    /// flushes above the low-water mark.
    started: std::time::Instant,
    relieved_at: AtomicU64,
    /// The first error a flush or the WAL hit; writes are refused after it.
    failed: Mutex<Option<String>>,
    counters: Counters,
    filter: Mutex<Option<FilterFactory>>,
    scrub: scrubber::ScrubState,
}

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    fn fail(&self, why: String) {
        tracing::error!("engine failed: {why}");
        // No flush will release log now: writes waiting for log space
        // would wait forever.
        self.wal.fail_when_full(&why);
        self.failed.lock().expect("failed lock").get_or_insert(why);
        self.memory.wake_all();
    }

    fn failure(&self) -> Option<EngineError> {
        self.failed
            .lock()
            .expect("failed lock")
            .as_ref()
            .map(|why| EngineError::Failed(why.clone()))
    }

    /// The replay point the manifest has.
    pub(super) fn recorded_replay_point(&self) -> u64 {
        self.manifest
            .lock()
            .expect("manifest lock")
            .state()
            .replay_from
    }

    /// The data devices that hold the manifest.
    pub(super) fn manifest_on(&self) -> Vec<D> {
        self.store.devices[..self.manifest_devices].to_vec()
    }

    fn new_memstore(&self, floor: u64) -> Arc<crate::memstore::Memstore> {
        let id = self.next_memstore.fetch_add(1, Ordering::Relaxed);
        Arc::new(crate::memstore::Memstore::new(id, floor))
    }
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// Installs the filter every compaction from now on runs its entries
    /// through.
    pub fn set_compaction_filter(&self, f: FilterFactory) {
        *self.inner.filter.lock().expect("filter lock") = Some(f);
    }

    /// The regions' boundaries.
    pub fn regions(&self) -> &Regions {
        &self.inner.regions
    }

    /// Bytes the memstores hold (INFO's `used_memory`).
    pub fn memory_used(&self) -> u64 {
        self.inner.memory.total()
    }

    /// The WAL, for its figures.
    pub fn wal(&self) -> &Wal {
        &self.inner.wal
    }

    /// The block files readers use now, per region newest first.
    pub fn files(&self) -> Vec<crate::layout::manifest::FileRecord> {
        self.inner
            .region
            .iter()
            .flat_map(|r| {
                r.view()
                    .tables
                    .iter()
                    .map(|t| t.file.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The data devices.
    pub fn data_devices(&self) -> &[D] {
        &self.inner.store.devices
    }

    /// The WAL devices, in stripe order.
    pub fn wal_devices(&self) -> Vec<D> {
        self.inner
            .wal_devices
            .lock()
            .expect("wal devices lock")
            .clone()
    }

    /// The options the engine runs with.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.opts
    }

    /// Every flush and compaction queued so far is done; for tests and
    /// benches that want a quiet engine.
    pub fn wait_idle(&self) -> Result<()> {
        self.inner.sched.wait_idle(|| self.inner.failure())
    }

    /// Freezes every region's memstore and waits until all are flushed.
    pub fn flush_all(&self) -> Result<()> {
        for r in 0..self.inner.region.len() {
            self.inner.freeze(r);
        }
        self.wait_idle()
    }

    /// Makes every acknowledged write durable, stops the flush reactors
    /// (after the flush or compaction each is running) and the WAL, and
    /// closes the devices. What is in the memstores is replayed from the
    /// WAL at the next open.
    pub fn close(self) -> Result<EngineStats> {
        let stats = self.stats();
        let inner = self.inner.clone();
        drop(self);
        let inner = Arc::into_inner(inner).expect("the flush reactors have stopped");
        inner.wal.close()?;
        Ok(stats)
    }

    /// Stops at once, as a crashing process would: flush reactors stop
    /// after their current step, the WAL flushes nothing more. For tests.
    pub fn abandon(self) {
        let inner = self.inner.clone();
        drop(self);
        if let Some(inner) = Arc::into_inner(inner) {
            inner.wal.abandon();
        }
    }
}

impl<D: Device<Queue: Send> + Clone> Drop for Engine<D> {
    fn drop(&mut self) {
        self.inner.scrub.stop();
        if let Some(h) = self.scrubber.take() {
            if h.join().is_err() {
                tracing::error!("the background scrub panicked");
            }
        }
        self.inner.sched.stop();
        self.inner.memory.wake_all();
        for h in self.flushers.drain(..) {
            if h.join().is_err() {
                tracing::error!("a flush reactor panicked");
            }
        }
    }
}
