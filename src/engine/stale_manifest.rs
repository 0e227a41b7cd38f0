//! Which manifest copies may be stale, kept on the WAL devices.
//!
//! The manifest is mirrored on the first two data devices. A write that
//! fails on one while the other takes it leaves that one out: its copy
//! misses every later record until a start with both writes a checkpoint
//! to both. With `flush.copies` above one a start may go on without a data
//! device (every block file has a copy on another), but not by reading the
//! manifest from a copy that missed records: it could name files since
//! compacted away and their space reused, and a replay point whose log was
//! since released. Nothing on that copy's device can tell, so the engine
//! records the left-out copy on the WAL devices' superblocks (a bit per
//! manifest device, [`crate::layout::Superblock::stale_manifest`]) before
//! the write that left it out returns ([`hook`]); a start refuses to read
//! the manifest from a marked copy alone ([`check`]), and a start that
//! wrote its checkpoint to both clears the marks ([`clear_if_whole`]).

use std::sync::Arc;

use super::error::{EngineError, Result};
use super::Engine;
use crate::admin::{read_superblock, write_superblock};
use crate::config::Config;
use crate::device::{AnyDevice, BackendKind, Device};
use crate::layout::manifest::MirrorHook;

/// Refuses a start whose data devices `lost` (index, why) leave no
/// manifest copy that holds every record, or more block files without a
/// copy than `flush.copies` allows. `stale` is what the WAL devices say.
pub(super) fn check(cfg: &Config, lost: &[(u32, String)], stale: u8) -> Result<()> {
    if lost.is_empty() {
        return Ok(());
    }
    let name = |i: u32| cfg.flush.devices[i as usize].as_str();
    let listed = lost
        .iter()
        .map(|(i, why)| format!("data device {} {why}", name(*i)))
        .collect::<Vec<_>>()
        .join("; ");
    if lost.len() >= cfg.flush.copies {
        return Err(EngineError::Layout(format!(
            "{listed}; with flush.copies: {} a block file may have had every copy there: replace them with `stria device replace --config {} --device NAME`",
            cfg.flush.copies, cfg.source
        )));
    }
    let mirrors = cfg.flush.devices.len().min(2) as u32;
    let left: Vec<u32> = (0..mirrors)
        .filter(|m| lost.iter().all(|(i, _)| i != m))
        .collect();
    if left.len() as u32 == mirrors {
        return Ok(());
    }
    if let Some(&m) = left.iter().find(|&&m| stale & (1 << m) != 0) {
        return Err(EngineError::Layout(format!(
            "{listed}; the manifest cannot be read without it: its copy on data device {} may be stale (a write to it failed, or it was missing at a start, and no start with both has made them agree since): put the device back, or replace it with `stria device replace --config {} --device NAME` once the other is back",
            name(m),
            cfg.source
        )));
    }
    Ok(())
}

/// What the manifest calls when a write leaves its copy on data device `i`
/// out: marks it on every WAL device that takes the mark (at least one
/// must). `None` when no WAL device has a superblock (simulated devices).
pub(super) fn hook(wal: &[AnyDevice]) -> Option<MirrorHook> {
    let wal: Vec<AnyDevice> = wal
        .iter()
        .filter(|d| d.kind() != BackendKind::Sim)
        .cloned()
        .collect();
    if wal.is_empty() {
        return None;
    }
    Some(MirrorHook(Arc::new(move |i| {
        let mut why = Vec::new();
        let mut took = 0;
        for d in &wal {
            match mark(d, |bits| bits | (1 << i)) {
                Ok(()) => took += 1,
                Err(e) => why.push(format!("{}: {e}", d.info().name)),
            }
        }
        if took == 0 {
            return Err(format!("no WAL device took the mark ({})", why.join("; ")));
        }
        tracing::warn!(
            "manifest copy {i} marked stale on {took} WAL devices: a start does not read the manifest from it alone"
        );
        Ok(())
    })))
}

/// Clears the marks once the engine opened with both manifest copies
/// written (its open's checkpoint is on both: they agree again).
pub(super) fn clear_if_whole(engine: &Engine<AnyDevice>, wal: &[AnyDevice], stale: u8) {
    if stale == 0 {
        return;
    }
    // Under the manifest's lock: a write that leaves a copy out marks it
    // while holding it, so no mark made since the check is cleared here.
    let manifest = engine.inner.manifest.lock().expect("manifest lock");
    if !manifest.lost().is_empty() {
        return;
    }
    for d in wal.iter().filter(|d| d.kind() != BackendKind::Sim) {
        if let Err(e) = mark(d, |_| 0) {
            tracing::warn!(
                "WAL device {}: cannot clear its marks of stale manifest copies: {e}",
                d.info().name
            );
        }
    }
    tracing::info!("both manifest copies agree again: their marks on the WAL devices cleared");
}

/// After a WAL device joined the running engine's log: the marks the
/// other WAL devices hold are copied onto it, and marks from now on go to
/// it too (the manifest's hook watches the stripe as it is now). Under the
/// manifest's lock, so that no mark is made meanwhile.
pub fn rewatch_wal(engine: &Engine<AnyDevice>) -> std::result::Result<(), String> {
    let wal = engine.wal_devices();
    let mut manifest = engine.inner.manifest.lock().expect("manifest lock");
    let bits = wal
        .iter()
        .filter(|d| d.kind() != BackendKind::Sim)
        .filter_map(|d| read_superblock(d).ok()?.ok())
        .fold(0, |bits, sb| bits | sb.stale_manifest);
    if bits != 0 {
        for d in wal.iter().filter(|d| d.kind() != BackendKind::Sim) {
            // A device that cannot take them is one the WAL lost.
            let _ = mark(d, |b| b | bits);
        }
    }
    manifest.set_watch(hook(&wal));
    Ok(())
}

/// Rewrites the superblock of `d` with its stale-manifest bits changed by
/// `change`, when they change.
fn mark(d: &AnyDevice, change: impl Fn(u8) -> u8) -> std::result::Result<(), String> {
    let mut sb = read_superblock(d)
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let bits = change(sb.stale_manifest);
    if bits == sb.stale_manifest {
        return Ok(());
    }
    sb.stale_manifest = bits;
    write_superblock(d, &sb).map_err(|e| e.to_string())
}

/// Marks the manifest copy on data device `mirror` of `cfg` stale on the
/// map's WAL devices (at least one must take it), before `stria device
/// replace` blanks that device: until a start writes its checkpoint to
/// both copies, the blank one is no manifest to start from alone.
pub fn mark_replaced(cfg: &Config, mirror: usize) -> std::result::Result<(), String> {
    let mut why = Vec::new();
    let mut took = 0;
    for name in &cfg.wal.devices {
        let d = cfg.device(name).expect("validated device name");
        let marked = AnyDevice::open(d, &cfg.spdk)
            .map_err(|e| e.to_string())
            .and_then(|d| match d.kind() {
                BackendKind::Sim => Err("a sim device has no superblock".into()),
                _ => mark(&d, |bits| bits | (1 << mirror)),
            });
        match marked {
            Ok(()) => took += 1,
            Err(e) => why.push(format!("{name}: {e}")),
        }
    }
    if took == 0 {
        return Err(format!("no WAL device took the mark ({})", why.join("; ")));
    }
    Ok(())
}
