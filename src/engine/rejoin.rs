//! A WAL device taken back while the engine runs: `stria device replace`
//! of a running appliance.
//!
//! The new device (blank log area, the appliance's superblock) joins the
//! WAL's stripe at once ([`crate::wal::Wal::rejoin`]): every batch from
//! some LSN on has its copy there again. The batches before it do not, so
//! the manifest's mark that the device lacks batches (made when it was
//! lost, or now) stays until the replay point passes that LSN: every
//! region is frozen, so the flushes that follow move it there, and the
//! flush that sees the point past it clears the mark ([`Rejoined`]). A
//! crash before then is a start with a marked device, which flushes and
//! clears the mark itself, or, without the other device, is refused.
//!
//! A device lost again before its mark goes keeps the mark: the WAL's
//! loss hook drops its pending entry first, under the same lock the
//! clearing holds while it records.

use std::sync::Mutex;

use super::error::{EngineError, Result};
use super::{wal_marks, Engine, Inner};
use crate::device::Device;
use crate::wal::Lsn;

/// WAL devices taken back while running whose marks have yet to go, each
/// with the first LSN every batch of which it holds.
#[derive(Default)]
pub(super) struct Rejoined(Mutex<Vec<(u32, Lsn)>>);

impl Rejoined {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u32, Lsn)>> {
        self.0.lock().expect("rejoined lock")
    }

    /// Device `index` was lost (again): its mark stays.
    pub(super) fn forget(&self, index: u32) {
        self.lock().retain(|&(d, _)| d != index);
    }

    /// How many devices wait for the replay point to pass their LSN.
    pub(super) fn pending(&self) -> usize {
        self.lock().len()
    }
}

impl<D: Device<Queue: Send + 'static> + Clone> Engine<D> {
    /// Puts `device` in place of the WAL device at stripe position `d`,
    /// which the WAL lost, while the engine runs. `device` must be new to
    /// the log: its log area blank (`stria device replace` writes it so).
    /// From the LSN returned on, every batch has its copy there; once the
    /// flushes this starts move the replay point past it, the device
    /// holds the log again and its mark goes (see the module's
    /// documentation; [`super::EngineStats::wal_catching_up`] says how many are
    /// still waiting).
    pub fn replace_wal_device(&self, d: usize, device: D) -> Result<Lsn> {
        let inner = &self.inner;
        let (name, block_size) = {
            let devs = inner.wal_devices.lock().expect("wal devices lock");
            let Some(old) = devs.get(d) else {
                return Err(EngineError::Layout(format!(
                    "the WAL has no device at position {d}"
                )));
            };
            let keep = devs.iter().enumerate().find(|&(i, _)| i != d);
            let block_size = keep.map_or(device.info().block_size, |(_, k)| k.info().block_size);
            (old.info().name.clone(), block_size)
        };
        if device.info().block_size != block_size {
            return Err(EngineError::Layout(format!(
                "the new {name} has {}-byte blocks, the log {block_size}-byte ones",
                device.info().block_size
            )));
        }
        if inner.wal.stats().device_lost.get(d).copied().unwrap_or(0) == 0 {
            return Err(EngineError::Layout(format!(
                "WAL device {name} is in service: only a lost WAL device is replaced while the appliance runs"
            )));
        }
        // Marked already when it was lost; a mark now if not, before any
        // batch is written to it.
        let on = inner.manifest_on();
        wal_marks::mark_missing(&inner.manifest, &on, vec![d as u32])?;
        // Pending before the WAL writes to it, at no LSN yet: a loss the
        // moment it joins drops the entry (the WAL's loss hook), and it
        // is not put back.
        let index = d as u32;
        inner.rejoined.lock().push((index, Lsn::MAX));
        let from = match inner.wal.rejoin(d, index, &device) {
            Ok(from) => from,
            Err(e) => {
                inner.rejoined.forget(index);
                return Err(e.into());
            }
        };
        inner.wal_devices.lock().expect("wal devices lock")[d] = device;
        for entry in inner.rejoined.lock().iter_mut() {
            if entry.0 == index {
                entry.1 = from;
            }
        }
        // Every LSN below `from` written first: a memstore begun after
        // this (by the freeze, or at its first write) takes its floor at
        // or above it, so once the frozen ones are flushed the replay
        // point is past `from`.
        let written = inner.wal.barrier().and_then(|t| t.wait());
        if let Err(e) = written {
            tracing::error!(
                "WAL device {name} joined the log at LSN {from}, but the log failed: {e}"
            );
            return Ok(from);
        }
        for r in 0..inner.region.len() {
            inner.freeze(r);
        }
        // With nothing to flush the point may be past it already; the
        // device is in the log now, so an error here is the next flush's.
        if let Err(e) = inner.settle_rejoined() {
            tracing::error!(
                "WAL device {name} joined the log at LSN {from}; its mark stays for now: {e}"
            );
        }
        Ok(from)
    }
}

impl<D: Device<Queue: Send> + Clone> Inner<D> {
    /// After a flush: the marks of devices taken back go once the replay
    /// point has passed the LSN they joined at, recorded with that point.
    pub(super) fn settle_rejoined(&self) -> Result<()> {
        let mut pending = self.rejoined.lock();
        if pending.is_empty() {
            return Ok(());
        }
        let point = self.replay_point(None, None);
        let whole: Vec<u32> = pending
            .iter()
            .filter(|&&(_, from)| point >= from)
            .map(|&(d, _)| d)
            .collect();
        if whole.is_empty() {
            return Ok(());
        }
        // Under the lock: a loss of one of them meanwhile waits, and marks
        // it again after.
        wal_marks::make_whole(&self.manifest, &self.manifest_on(), whole.clone(), point)?;
        pending.retain(|(d, _)| !whole.contains(d));
        drop(pending);
        self.wal.release(point.saturating_sub(1));
        let devs = self.wal_devices.lock().expect("wal devices lock");
        for d in whole {
            let name = devs.get(d as usize).map(|x| x.info().name.clone());
            tracing::info!(
                "WAL device {} holds the log again from LSN {point} on: its mark is cleared",
                name.unwrap_or_default()
            );
        }
        Ok(())
    }
}
