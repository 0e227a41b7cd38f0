//! Devices, as both renderers show them.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::device::Device;
use crate::engine::{Engine, EngineStats};

/// One device's figures, WAL or data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFigures {
    pub name: String,
    /// `wal` or `data`.
    pub role: &'static str,
    pub backend: &'static str,
    pub capacity: u64,
    /// Free bytes of the extent allocator (data devices only).
    pub free: Option<u64>,
    /// Block reads and their bytes (data devices only: WAL devices are read
    /// only by recovery, which does not count them).
    pub reads: Option<(u64, u64)>,
    /// Write requests and bytes written (WAL batches; block files and
    /// manifest records).
    pub writes: u64,
    pub written: u64,
    /// Flush commands.
    pub flushes: u64,
    /// WAL batches written with forced unit access (WAL devices only).
    pub fua_writes: Option<u64>,
    /// Requests that completed with an error.
    pub errors: u64,
    /// The WAL lost the device and goes on without it (degraded: WAL
    /// devices with `wal.copies` above one only).
    pub lost: bool,
}

/// Every device of `engine`, WAL stripe first, with the figures in `stats`.
pub fn device_figures<D: Device<Queue: Send> + Clone>(
    engine: &Engine<D>,
    stats: &EngineStats,
) -> Vec<DeviceFigures> {
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let mut out = Vec::new();
    for (i, d) in engine.wal_devices().iter().enumerate() {
        let info = d.info();
        out.push(DeviceFigures {
            name: info.name.clone(),
            role: "wal",
            backend: info.backend.as_str(),
            capacity: info.capacity_bytes(),
            free: None,
            reads: None,
            writes: at(&stats.wal.device_batches, i),
            written: at(&stats.wal.device_bytes, i),
            flushes: at(&stats.wal.flushes, i),
            fua_writes: Some(at(&stats.wal.device_fua, i)),
            errors: d.errors(),
            lost: at(&stats.wal.device_lost, i) > 0,
        });
    }
    let m = &stats.manifest;
    let mdevs = stats.manifest_devices.max(1) as u64;
    for (i, d) in engine.data_devices().iter().enumerate() {
        let info = d.info();
        let (mwrites, mbytes) = if i < stats.manifest_devices {
            (m.writes, m.bytes_written / mdevs)
        } else {
            (0, 0)
        };
        out.push(DeviceFigures {
            name: info.name.clone(),
            role: "data",
            backend: info.backend.as_str(),
            capacity: info.capacity_bytes(),
            free: stats.device_free.get(i).copied(),
            reads: Some(stats.device_reads.get(i).copied().unwrap_or((0, 0))),
            writes: at(&stats.device_writes, i) + mwrites,
            written: at(&stats.device_written, i) + mbytes,
            flushes: at(&stats.device_flush_commands, i),
            fua_writes: None,
            errors: d.errors(),
            lost: stats.data_lost.get(i).copied().unwrap_or(false),
        });
    }
    out
}

/// Seconds since the Unix epoch of `t`.
pub(crate) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
