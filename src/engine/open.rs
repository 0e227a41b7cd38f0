//! Opening the engine: superblocks, manifest, block files, WAL replay.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::error::{EngineError, Result};
use super::region::Region;
use super::rejoin::Rejoined;
use super::sched::Scheduler;
use super::stats::Counters;
use super::store::{Store, TableHandle};
use super::{flush, scrubber, stale_manifest, wal_marks, Engine, EngineOptions, Inner};
use crate::config::{Config, Role, RESERVED_BYTES};
use crate::device::{AnyDevice, BackendKind, Device};
use crate::layout::extents::Extents;
use crate::layout::manifest::{Edit, Manifest, ManifestState};
use crate::memstore::{entry_bytes, Admission, Memory, Regions};
use crate::table::{BlockCache, EntryKind};
use crate::wal::format::RecordOp;
use crate::wal::recovery::WalDevice;
use crate::wal::{Wal, WalOptions};

/// The devices an engine runs on.
pub struct EngineDevices<D> {
    /// The WAL stripe, in order.
    pub wal: Vec<D>,
    /// The data devices; the first one (and the second, if any) hold the
    /// manifest.
    pub data: Vec<D>,
}

/// What opening found.
#[derive(Clone, Debug)]
pub struct OpenReport {
    /// The manifest was created (the devices were blank).
    pub created: bool,
    /// Block files and their bytes.
    pub files: usize,
    pub file_bytes: u64,
    /// WAL records replayed into the memstores, and records skipped
    /// because their region's block files already held them.
    pub replayed: u64,
    pub skipped: u64,
    pub replay_from: u64,
    /// What WAL recovery said.
    pub wal: String,
    pub took: Duration,
}

impl std::fmt::Display for OpenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.created {
            write!(f, "new engine (empty manifest written); ")?;
        }
        write!(
            f,
            "{} block files ({} bytes), replayed {} WAL records from LSN {} ({} already in block files) in {:.1?}; WAL: {}",
            self.files, self.file_bytes, self.replayed, self.replay_from, self.skipped, self.took, self.wal
        )
    }
}

impl Engine<AnyDevice> {
    /// Opens the engine on the devices of the map `cfg`. Devices other
    /// than `sim` ones must have been formatted (`stria format`).
    ///
    /// Takes an exclusive lock (flock) on every file or block device of the
    /// map first, held while the engine is open, so a second engine (a
    /// second `serve`, a `scrub` or `bench ingest` beside a running
    /// appliance) is refused instead of writing under the first.
    pub fn open_config(cfg: &Config) -> Result<(Engine<AnyDevice>, OpenReport)> {
        let locks = lock_devices(cfg)?;
        let open = |name: &String| -> Result<AnyDevice> {
            let d = cfg.device(name).expect("validated device name");
            Ok(AnyDevice::open(d, &cfg.spdk)?)
        };
        // With copies, a device that cannot be opened or checked is given
        // to the engine as one whose every request fails. For the WAL,
        // recovery goes on without it when the others hold every batch
        // (the manifest says whether they do), and refuses otherwise; for
        // the data devices, see `stale_manifest.rs`.
        let mut appliance_id = None;
        let mut unusable: Vec<(String, String)> = Vec::new();
        let mut take = |names: &[String],
                        copies: usize,
                        bits: &mut u8,
                        unusable: &mut Vec<(String, String)>|
         -> Result<Vec<AnyDevice>> {
            let mut out = Vec::new();
            for name in names {
                let checked = open(name).and_then(|d| {
                    let sb = check_superblock(cfg, &d, &mut appliance_id)?;
                    *bits |= sb.map_or(0, |sb| sb.stale_manifest);
                    Ok(d)
                });
                match checked {
                    Ok(d) => out.push(d),
                    Err(e) if copies > 1 => {
                        let d = cfg.device(name).expect("validated device name");
                        unusable.push((name.clone(), e.to_string()));
                        out.push(AnyDevice::missing(d, format!("cannot be used: {e}")));
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        };
        // The data devices first: they name the appliance the WAL devices
        // must belong to.
        let mut ignored = 0;
        let data = take(
            &cfg.flush.devices,
            cfg.flush.copies,
            &mut ignored,
            &mut unusable,
        )?;
        let lost_data: Vec<(u32, String)> = unusable
            .iter()
            .map(|(name, why)| {
                let i = cfg.flush.devices.iter().position(|d| d == name);
                (
                    i.expect("a data device") as u32,
                    format!("cannot be used at the start ({why})"),
                )
            })
            .collect();
        let mut stale = 0;
        let wal = take(&cfg.wal.devices, cfg.wal.copies, &mut stale, &mut unusable)?;
        stale_manifest::check(cfg, &lost_data, stale)?;
        let mut opts = EngineOptions::from_config(cfg, appliance_id.unwrap_or(0));
        opts.lost_data = lost_data;
        opts.manifest_watch = stale_manifest::hook(&wal);
        let (mut engine, report) =
            Engine::open(EngineDevices { wal: wal.clone(), data }, opts).map_err(|e| {
                if unusable.is_empty() {
                    return e;
                }
                let names: Vec<&str> = unusable.iter().map(|(n, _)| n.as_str()).collect();
                EngineError::Layout(format!(
                    "{e}; devices that cannot be used: {}: replace each with `stria device replace --config {} --device NAME`, then start again",
                    names.join(", "),
                    cfg.source
                ))
            })?;
        stale_manifest::clear_if_whole(&engine, &wal, stale);
        engine._locks = locks;
        Ok((engine, report))
    }
}

/// Checks the superblock of `d` (not of `sim` devices, which have none):
/// its role is the map's, and its appliance the one of the devices before
/// it (`appliance_id`, set by the first). Damaged copies are rewritten from
/// those that agree.
fn check_superblock(
    cfg: &Config,
    d: &AnyDevice,
    appliance_id: &mut Option<u128>,
) -> Result<Option<crate::layout::Superblock>> {
    if d.kind() == BackendKind::Sim {
        return Ok(None);
    }
    let copies = crate::admin::read_superblock_copies(d)?;
    if let (Ok(sb), false) = (&copies.chosen, copies.bad.is_empty()) {
        // Repair from the copies that agree: rewrite all of them.
        tracing::warn!(
            device = %d.info().name,
            "superblock copies repaired from the {} that agree: {}",
            crate::admin::SUPERBLOCK_COPIES - copies.bad.len(),
            copies.describe_bad()
        );
        crate::admin::write_superblock(d, sb)?;
    }
    match copies.chosen {
        Ok(sb) => {
            let expected = cfg.device(&d.info().name).map(|c| c.role);
            if Some(sb.role) != expected {
                return Err(EngineError::Layout(format!(
                    "device {} was formatted as a {} device; the map makes it a {} device",
                    d.info().name,
                    sb.role,
                    expected.unwrap_or(Role::Data)
                )));
            }
            if *appliance_id.get_or_insert(sb.appliance_id) != sb.appliance_id {
                return Err(EngineError::Layout(format!(
                    "device {} belongs to another appliance ({}) than the devices before it",
                    d.info().name,
                    sb.appliance
                )));
            }
            Ok(Some(sb))
        }
        Err(e) => Err(EngineError::Layout(format!(
            "device {}: {e}; run `stria format --config {}` first",
            d.info().name,
            cfg.source
        ))),
    }
}

/// An exclusive lock on each file-backed device of `cfg` the engine uses.
fn lock_devices(cfg: &Config) -> Result<Vec<std::fs::File>> {
    let mut locks = Vec::new();
    for name in cfg.wal.devices.iter().chain(&cfg.flush.devices) {
        let Some(path) = cfg.device(name).and_then(|d| d.path()) else {
            continue;
        };
        match crate::device::lock_exclusive(path) {
            Ok(Some(file)) => locks.push(file),
            Ok(None) => {
                return Err(EngineError::Layout(format!(
                    "device {name} ({}) is in use by another engine (a running `stria serve`?); stop it first",
                    path.display()
                )))
            }
            // Missing: opening the device says so, with its own error.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(EngineError::Layout(format!(
                    "device {name} ({}): cannot lock it: {e}",
                    path.display()
                )))
            }
        }
    }
    Ok(locks)
}

impl<D: Device<Queue: Send> + Clone> Engine<D> {
    /// Opens (recovers) the engine: the manifest (created on blank
    /// devices), the block files it lists, then the WAL from the replay
    /// point into the memstores; starts the flush reactors.
    pub fn open(
        devices: EngineDevices<D>,
        mut opts: EngineOptions,
    ) -> Result<(Engine<D>, OpenReport)> {
        let started = Instant::now();
        let data = devices.data;
        let Some(first) = data.first() else {
            return Err(EngineError::Layout(
                "the engine needs at least one data device".into(),
            ));
        };
        let block = first.info().block_size;
        opts.table.device_block = block;
        let area = (RESERVED_BYTES, opts.manifest_bytes);
        let unit = opts.extent_unit.max(u64::from(block));
        let mut areas = Vec::with_capacity(data.len());
        for d in &data {
            let info = d.info();
            if info.block_size != block {
                return Err(EngineError::Layout(format!(
                    "data devices {} and {} have different block sizes ({block} and {})",
                    first.info().name,
                    info.name,
                    info.block_size
                )));
            }
            let start = (RESERVED_BYTES + opts.manifest_bytes).div_ceil(unit) * unit;
            let end = info.capacity_bytes() / unit * unit;
            if end <= start {
                return Err(EngineError::Layout(format!(
                    "data device {} ({} bytes) has no room after the reserved area and the {}-byte manifest",
                    info.name,
                    info.capacity_bytes(),
                    opts.manifest_bytes
                )));
            }
            areas.push((start, end));
        }
        let manifest_devices = data.len().min(2);
        let mut queues = data[..manifest_devices]
            .iter()
            .map(|d| d.open_queue())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let regions_n = opts.split_keys.len() + 1;
        let absent: Vec<usize> = opts
            .lost_data
            .iter()
            .map(|&(d, _)| d as usize)
            .filter(|&d| d < manifest_devices)
            .collect();
        let (manifest, state, created) = match Manifest::open_watched(
            data[..manifest_devices].to_vec(),
            area,
            &mut queues,
            opts.manifest_watch.clone(),
            &absent,
        )? {
            Some((m, s)) => (m, s, false),
            // A blank copy left is no manifest to start from.
            None if !absent.is_empty() => {
                return Err(EngineError::Layout(format!(
                    "the manifest copy on the data devices left is blank, and {} cannot be used: a start without it needs the other copy",
                    absent
                        .iter()
                        .map(|&d| data[d].info().name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
            None => {
                let init = ManifestState {
                    replay_from: 1,
                    next_file_id: 1,
                    ..ManifestState::new(opts.split_keys.clone())
                };
                let mut m = Manifest::create(
                    data[..manifest_devices].to_vec(),
                    area,
                    init.clone(),
                    &mut queues,
                )?;
                m.set_watch(opts.manifest_watch.clone());
                (m, init, true)
            }
        };
        drop(queues);
        // A manifest device the open's checkpoint could not be written to
        // is one to start without only when the caller knows the other's
        // copy is whole (`Engine::open_config` checks the WAL devices'
        // marks); otherwise the start needs it, as every other.
        let allowed: Vec<&str> = opts
            .lost_data
            .iter()
            .map(|(d, _)| data[*d as usize].info().name.as_str())
            .collect();
        if let Some(name) = manifest
            .lost()
            .iter()
            .find(|n| !allowed.contains(&n.as_str()))
        {
            return Err(EngineError::Layout(format!(
                "data device {name}: the manifest could not be written there at the start; it is needed to start"
            )));
        }
        // File ids are never given twice, not even to a file written after
        // a crash in place of one the manifest never recorded: a block of
        // that one left under a lost write would pass a check bound to the
        // same id and place. Each run takes ids above 2^32 times the
        // manifest generation its open wrote, above every id of every run
        // before it.
        let first_file_id = state.next_file_id.max(manifest.generation() << 32).max(1);
        if state.split_keys != opts.split_keys {
            return Err(EngineError::Layout(format!(
                "the devices hold {} regions split at {:?}, but the map asks for {} regions split at {:?}; keep the map's regions as they were when the devices were first used",
                state.split_keys.len() + 1,
                printable(&state.split_keys),
                regions_n,
                printable(&opts.split_keys)
            )));
        }
        let mut extents = Extents::new(&areas, unit);
        for f in state.files.values() {
            let far = f.places().map(|(d, _)| d).max().unwrap_or(0);
            if far as usize >= data.len() || f.region as usize >= regions_n {
                return Err(EngineError::Layout(format!(
                    "the manifest lists block file {} on data device {far} of region {}, but the map has {} data devices and {regions_n} regions",
                    f.id,
                    f.region,
                    data.len()
                )));
            }
            for (dev, offset) in f.places() {
                extents.mark_used(dev, offset, f.len)?;
            }
        }
        let cache = BlockCache::new(opts.block_cache, opts.table.block_bytes);
        let store = Arc::new(Store::new(data, extents, cache));
        for (d, why) in &opts.lost_data {
            store.lose(*d, why);
        }
        let mut tables: Vec<Vec<Arc<TableHandle<D>>>> =
            (0..regions_n).map(|_| Vec::new()).collect();
        let mut file_bytes = 0;
        for f in state.files.values() {
            file_bytes += f.len;
            tables[f.region as usize].push(Arc::new(TableHandle::open(store.clone(), f.clone())?));
        }
        // Newest first: a region's flush marks only grow, and a compacted
        // file holds the oldest data; ties go to the later file.
        for t in &mut tables {
            t.sort_by_key(|t| std::cmp::Reverse((t.file.max_lsn, t.file.id)));
        }

        let replay_from = state.replay_from.max(1);
        let manifest = Arc::new(Mutex::new(manifest));
        let manifest_on = store.devices[..manifest_devices].to_vec();
        let rejoined = Arc::new(Rejoined::default());
        // The log may be recovered without a WAL device (as many as each
        // batch has copies, less one) when none of those left is marked in
        // the manifest as lacking batches; a device lost while running is
        // marked before anything is acknowledged without it.
        let wal_opts = WalOptions {
            replay_from: Some(replay_from),
            lose_unreadable: opts.wal.copies.saturating_sub(1),
            stale: state.wal_stale.iter().copied().collect(),
            on_loss: Some(wal_marks::loss_hook(
                manifest.clone(),
                manifest_on.clone(),
                rejoined.clone(),
            )),
            ..opts.wal.clone()
        };
        let (wal, recovered) = Wal::open(
            WalDevice::stripe(&devices.wal),
            &wal_opts,
            opts.wal_reactor.clone(),
        )?;
        let missing: Vec<u32> = recovered
            .devices
            .iter()
            .filter(|l| l.lost.is_some())
            .map(|l| l.index)
            .collect();
        if !missing.is_empty() {
            wal_marks::mark_missing(&manifest, &manifest_on, missing)?;
        }
        let highest_mark = state.flushed_lsn.iter().copied().max().unwrap_or(0);
        if recovered.next_lsn <= highest_mark {
            return Err(EngineError::Layout(format!(
                "the WAL ends before LSN {} ({}; {}) but block files hold records up to LSN {highest_mark}: the log lost records it had made durable",
                recovered.next_lsn, recovered.report.end, recovered.report.ends
            )));
        }
        let regions = Regions::new(opts.split_keys.clone());
        let floor = replay_from - 1;
        let next_memstore = AtomicU64::new(1);
        let region = tables
            .into_iter()
            .map(|t| {
                let id = next_memstore.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Region::new(Arc::new(crate::memstore::Memstore::new(id, floor)), t)
            })
            .collect();
        let data_devices = store.devices.len();
        let inner = Arc::new(Inner {
            memory: Memory::new(opts.global_limit, opts.low_water),
            sched: Scheduler::new(regions_n),
            regions,
            region,
            store,
            manifest,
            manifest_devices,
            high_lsn: AtomicU64::new(recovered.next_lsn.saturating_sub(1)),
            next_memstore,
            next_file: AtomicU64::new(first_file_id),
            replaying: AtomicU64::new(replay_from),
            started: Instant::now(),
            relieved_at: AtomicU64::new(0),
            failed: Mutex::new(None),
            filter: Mutex::new(None),
            scrub: Default::default(),
            counters: Counters::new(data_devices, opts.flush_reactors.len()),
            wal,
            wal_devices: Mutex::new(devices.wal.clone()),
            rejoined,
            opts,
        });
        // Segments below the replay point hold nothing the memstores need.
        inner.wal.release(replay_from - 1);
        let flushers = flush::spawn(&inner)?;
        let mut engine = Engine {
            inner,
            flushers,
            scrubber: None,
            _locks: Vec::new(),
        };
        let (mut replayed, mut skipped) = (0, 0);
        for rec in recovered.records {
            let r = rec.region as usize;
            if r >= regions_n || engine.inner.regions.of(&rec.key) != r {
                return Err(EngineError::Layout(format!(
                    "WAL record {} says region {} for a key of region {}; the regions changed under the log",
                    rec.lsn,
                    rec.region,
                    engine.inner.regions.of(&rec.key)
                )));
            }
            if rec.lsn <= state.flushed_lsn.get(r).copied().unwrap_or(0) {
                skipped += 1;
                continue;
            }
            engine.inner.replaying.store(rec.lsn, Ordering::SeqCst);
            engine
                .inner
                .replay(r, rec.lsn, rec.op, rec.key, rec.value)?;
            replayed += 1;
        }
        engine.inner.replaying.store(u64::MAX, Ordering::SeqCst);
        // Batches of the log found on one device alone, with copies asked
        // for: flushed to block files now, before anything relies on them,
        // so the replay point moves past them. Left in the log, a fault of
        // the device that holds them would lose them though later batches
        // (on both devices) say they were durable.
        let single_copy = recovered.report.single_copy_batches;
        if engine.inner.opts.wal.copies > 1 && single_copy > 0 {
            tracing::warn!(
                "{single_copy} WAL batches were found on one device alone: flushing the memstores before serving"
            );
            engine.flush_all()?;
            engine.inner.record_replay_point()?;
        }
        // Every WAL device is back (or replaced) after some were marked as
        // lacking batches: once the memstores are flushed, the log from the
        // replay point on is on all of them, and the marks go.
        if !state.wal_stale.is_empty() && recovered.report.lost_devices.is_empty() {
            if single_copy == 0 {
                engine.flush_all()?;
            }
            let point = engine.inner.replay_point(None, None);
            wal_marks::make_whole(
                &engine.inner.manifest,
                &manifest_on,
                state.wal_stale.iter().copied().collect(),
                point,
            )?;
            engine.inner.wal.release(point - 1);
            tracing::info!(
                "every WAL device holds the log from LSN {point} on: marks of WAL devices lacking batches cleared"
            );
        }
        // Block files with fewer copies than `flush.copies` (written while
        // a data device was lost): their regions are compacted, which
        // writes each again in as many copies.
        let sound = engine.inner.store.lost().iter().filter(|&&l| !l).count();
        let want = engine.inner.opts.file_copies.min(sound);
        for (r, region) in engine.inner.region.iter().enumerate() {
            if region
                .view()
                .tables
                .iter()
                .any(|t| t.file.places().count() < want)
            {
                engine.inner.sched.push_compaction(r as u32);
            }
        }
        // After the replay, which has the devices until then; a failure
        // here drops the engine, which stops the flush reactors.
        engine.scrubber = scrubber::spawn(&engine.inner, engine.inner.opts.scrub)
            .map_err(|e| EngineError::Layout(format!("cannot start the background scrub: {e}")))?;
        let report = OpenReport {
            created,
            files: state.files.len(),
            file_bytes,
            replayed,
            skipped,
            replay_from,
            wal: recovered.report.to_string(),
            took: started.elapsed(),
        };
        Ok((engine, report))
    }
}

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    /// Records in the manifest the replay point the memstores allow, when
    /// it is past the one recorded, and releases the log below it. After
    /// [`Engine::flush_all`] at a start that must not serve until the log
    /// has moved past some batches: flushes of two regions that finish
    /// together each count the other's memstore in the point they record,
    /// so neither may move it.
    fn record_replay_point(&self) -> Result<()> {
        let point = self.replay_point(None, None);
        if point > self.recorded_replay_point() {
            let edit = Edit {
                replay_from: Some(point),
                ..Edit::default()
            };
            wal_marks::record(&self.manifest, &self.manifest_on(), &edit)?;
        }
        self.wal.release(point.saturating_sub(1));
        Ok(())
    }

    /// Inserts one recovered record into region `r`'s active memstore.
    fn replay(&self, r: usize, lsn: u64, op: RecordOp, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        if self.memory.is_over() {
            self.memory
                .wait_below_low(|| self.relieve(), || self.failure())?;
        }
        let kind = match op {
            RecordOp::Put => EntryKind::Put,
            RecordOp::Delete => EntryKind::Delete,
        };
        let bytes = entry_bytes(key.len(), value.len());
        // Admitted under the region's lock like a write, so a flush of the
        // memstore (frozen meanwhile) waits for the insert.
        let admission = Admission::new(vec![crate::wal::Ticket::done(lsn)]);
        let ms = {
            let st = self.region[r].lock();
            // A memstore first used here holds records from this LSN on
            // (one a freeze made during replay has the log's end as floor).
            if st.active.is_unused() {
                st.active.set_floor(lsn - 1);
            }
            st.active.admit(1, bytes);
            st.active.track(admission.clone());
            st.active.clone()
        };
        self.memory.charge(bytes);
        ms.insert(key, lsn, true, kind, value);
        admission.advance();
        ms.inserted(1);
        if ms.bytes() >= self.opts.flush_size {
            let mut st = self.region[r].lock();
            if Arc::ptr_eq(&st.active, &ms) {
                self.freeze_locked(r, &mut st);
            }
        }
        Ok(())
    }
}

fn printable(keys: &[Vec<u8>]) -> Vec<String> {
    keys.iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}
