//! Which WAL devices may lack batches, kept in the manifest.
//!
//! With `wal.copies` above one, every batch written while every WAL device
//! was in service has a copy on each of `copies` devices, so a start may
//! recover the log without one of them (missing, unreadable, overwritten)
//! as long as the devices it recovers from hold every batch. A device
//! lacks batches once it was lost while the appliance ran (the batches
//! after went to the others), was missing at a start, or was replaced by a
//! blank one. Nothing on the WAL devices themselves can tell: a device
//! that was lost and came back looks whole. So the engine marks such a
//! device in the manifest, which lives on the data devices, before any
//! batch is acknowledged without it ([`loss_hook`] for a device lost while
//! running, [`mark_missing`] at a start, [`mark_replaced`] for `stria
//! device replace`), and recovery refuses to go on without a device when
//! one it would recover from is marked. A start with every WAL device
//! flushes the memstores, which moves the replay point past every batch
//! written without one, and clears the marks ([`make_whole`]).

use std::sync::{Arc, Mutex};

use super::error::{EngineError, Result};
use super::rejoin::Rejoined;
use super::EngineOptions;
use crate::config::{Config, RESERVED_BYTES};
use crate::device::{AnyDevice, Device};
use crate::layout::manifest::{Edit, Manifest};
use crate::wal::LossHook;

/// Applies `edit` to `manifest` with queues of its own on `devices` (the
/// manifest devices): for a thread that has none, the WAL's or the
/// opening one's.
pub(super) fn record<D: Device + Clone>(
    manifest: &Mutex<Manifest<D>>,
    devices: &[D],
    edit: &Edit,
) -> Result<()> {
    let mut queues = devices
        .iter()
        .map(|d| d.open_queue())
        .collect::<std::result::Result<Vec<_>, _>>()?;
    manifest
        .lock()
        .expect("manifest lock")
        .apply(edit, &mut queues)?;
    Ok(())
}

/// What the WAL calls when it loses a device while running: marks it in
/// the manifest, durably, before the WAL acknowledges anything without it.
pub(super) fn loss_hook<D: Device + Clone>(
    manifest: Arc<Mutex<Manifest<D>>>,
    devices: Vec<D>,
    rejoined: Arc<Rejoined>,
) -> LossHook {
    LossHook(Arc::new(move |index, _why| {
        // Taken back while running and lost again before its mark went:
        // the mark stays.
        rejoined.forget(index);
        let edit = Edit {
            wal_lost: vec![index],
            ..Edit::default()
        };
        record(&manifest, &devices, &edit).map_err(|e| e.to_string())
    }))
}

/// Marks the WAL devices `lost` at a start (recovered without them), before
/// the engine serves.
pub(super) fn mark_missing<D: Device + Clone>(
    manifest: &Mutex<Manifest<D>>,
    devices: &[D],
    lost: Vec<u32>,
) -> Result<()> {
    let known = manifest
        .lock()
        .expect("manifest lock")
        .state()
        .wal_stale
        .clone();
    if lost.iter().all(|d| known.contains(d)) {
        return Ok(());
    }
    let edit = Edit {
        wal_lost: lost,
        ..Edit::default()
    };
    record(manifest, devices, &edit)
}

/// Clears the marks `back` (those a start with every WAL device found)
/// once the log from `replay_from` on is on every WAL device (its
/// memstores flushed). A mark made since stays.
pub(super) fn make_whole<D: Device + Clone>(
    manifest: &Mutex<Manifest<D>>,
    devices: &[D],
    back: Vec<u32>,
    replay_from: u64,
) -> Result<()> {
    let edit = Edit {
        wal_back: back,
        replay_from: Some(replay_from),
        ..Edit::default()
    };
    record(manifest, devices, &edit)
}

/// Marks the WAL device at `index` of the stripe of `cfg` as lacking every
/// batch, before `stria device replace` blanks it. Needs the data devices.
pub fn mark_replaced(cfg: &Config, index: u32) -> Result<()> {
    let opts = EngineOptions::from_config(cfg, 0);
    let data = cfg
        .flush
        .devices
        .iter()
        .take(2)
        .map(|name| {
            let d = cfg.device(name).expect("validated device name");
            Ok(AnyDevice::open(d, &cfg.spdk)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut queues = data
        .iter()
        .map(|d| d.open_queue())
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let area = (RESERVED_BYTES, opts.manifest_bytes);
    let Some((mut manifest, state)) = Manifest::open(data, area, &mut queues)? else {
        return Err(EngineError::Layout(
            "the data devices hold no manifest: `stria format` the map instead".into(),
        ));
    };
    if state.wal_stale.contains(&index) {
        return Ok(());
    }
    let edit = Edit {
        wal_lost: vec![index],
        ..Edit::default()
    };
    manifest.apply(&edit, &mut queues)?;
    Ok(())
}
