//! What an engine keeps on a map's devices, and erasing it.
//!
//! Commands that write raw to a map's devices (`bench wal-pe` appends its
//! own records to the log, `devbench` overwrites every block past the
//! reserved area) would destroy an appliance's data and leave the devices
//! in a state the engine reads as corruption. So they first ask
//! [`holdings`] what the engine keeps there, touching nothing: the block
//! files its manifest lists, and the log records a recovery would replay
//! from the manifest's replay point. They refuse when it is anything
//! unless forced ([`guard`]), and afterwards [`erase`] the engine's
//! metadata (each data device's manifest area; every WAL segment gets an
//! empty header), so the next open finds an empty engine on formatted
//! devices.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::{Config, DeviceConfig, Role, RESERVED_BYTES};
use crate::device::{wait, AnyDevice, Device, DeviceError, Request};
use crate::layout::Manifest;
use crate::wal::format::{Geometry, SegmentHeader};
use crate::wal::recovery::{survey, RecoveryOptions, WalDevice};

use super::format::in_memory;
use super::{read_superblock, AdminError};

/// Bytes written per request while erasing.
const CHUNK: u64 = 1 << 20;

/// What the engine keeps on the devices of `cfg`, one line per thing, or
/// nothing. Sim devices are in memory and keep nothing between opens;
/// devices without a Stria superblock hold nothing of an engine's.
/// Reads only.
pub fn holdings(cfg: &Config) -> Result<Vec<String>, AdminError> {
    let Some((wal, data, appliance_id)) = open_formatted(cfg)? else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    let manifest_devices = &data[..data.len().min(2)];
    let mut queues = manifest_devices
        .iter()
        .map(|d| d.open_queue())
        .collect::<Result<Vec<_>, _>>()?;
    let area = (RESERVED_BYTES, cfg.flush.manifest_size);
    let replay_from = match Manifest::peek(manifest_devices, area, &mut queues) {
        Ok(None) => 1,
        Ok(Some(state)) => {
            if !state.files.is_empty() {
                let bytes: u64 = state.files.values().map(|f| f.len).sum();
                found.push(format!(
                    "the manifest lists {} block files ({})",
                    state.files.len(),
                    bytesize::ByteSize::b(bytes)
                ));
            }
            state.replay_from.max(1)
        }
        Err(e) => {
            found.push(format!("a manifest that does not read back ({e})"));
            1
        }
    };
    drop(queues);
    let opts = RecoveryOptions {
        replay_from: Some(replay_from),
        truncate_corrupt: false,
        segment_size: cfg.wal.segment_size,
        max_batch: cfg.wal.max_batch,
        appliance_id,
        lose_unreadable: 0,
        stale: Vec::new(),
    };
    match survey(&WalDevice::stripe(&wal), &opts) {
        Ok(s) if s.records > 0 => found.push(format!(
            "the log holds {} records past the replay point (LSNs {}..{})",
            s.records,
            s.first_lsn,
            s.next_lsn - 1
        )),
        Ok(_) => {}
        Err(e) => found.push(format!("a log that does not recover ({e})")),
    }
    Ok(found)
}

/// Refuses to let `command` run on `cfg` when the engine keeps anything
/// there, unless `force`. Returns what was found (and is about to be
/// destroyed, when forced).
pub fn guard(cfg: &Config, command: &str, force: bool) -> Result<Vec<String>, AdminError> {
    let found = holdings(cfg)?;
    if !found.is_empty() && !force {
        return Err(AdminError::WouldDestroy(format!(
            "`{command}` would destroy the engine's data on the devices of {}: {}; \
             pass --force to run it anyway (the devices are then left formatted and empty)",
            cfg.source,
            found.join("; ")
        )));
    }
    Ok(found)
}

/// Erases the engine's metadata from every device of `cfg` but sim ones,
/// keeping their superblocks: each data device's manifest area is zeroed,
/// and every segment of each WAL device gets a new, empty header (see
/// [`erase_device`]). The next open creates an empty manifest and finds an
/// empty log.
pub fn erase(cfg: &Config) -> Result<(), AdminError> {
    for dev in cfg.devices.iter().filter(|d| !in_memory(d)) {
        if dev.path().is_some_and(|p| !p.exists()) {
            continue;
        }
        let opened = AnyDevice::open(dev, &cfg.spdk)?;
        // Devices without a superblock are used with appliance id 0.
        let appliance_id = match read_superblock(&opened)? {
            Ok(sb) => sb.appliance_id,
            Err(_) => 0,
        };
        erase_device(cfg, dev, &opened, appliance_id)?;
    }
    Ok(())
}

/// Erases the engine's metadata from `opened`, the device `dev` of `cfg`,
/// for the appliance `appliance_id`.
///
/// Zeroing a WAL device's segment headers would not do: the batches after
/// them stay, and once a new log restarts its segment numbers at 1, a scan
/// of a segment would read on from the new batches into old ones that carry
/// the same segment number (zeroing the whole device would take minutes on
/// a real drive). So segment 0 gets an empty header whose number is above
/// every number an earlier log on the device can have used (the clock in
/// microseconds, or the highest number found plus the segment count if
/// that is more), and every other header is zeroed: the writer goes on
/// from that number with LSN 1 in segment 1, each segment it starts gets a
/// higher number than any old batch carries, and a scan of a segment stops
/// at the first old batch.
pub(super) fn erase_device(
    cfg: &Config,
    dev: &DeviceConfig,
    opened: &AnyDevice,
    appliance_id: u128,
) -> Result<(), DeviceError> {
    let info = opened.info().clone();
    let bs = u64::from(info.block_size);
    let mut queue = opened.open_queue()?;
    match dev.role {
        Role::Wal => {
            let geo = Geometry::new(&info, cfg.wal.segment_size);
            let device_index = cfg
                .wal
                .devices
                .iter()
                .position(|n| *n == dev.name)
                .unwrap_or(0) as u32;
            let mut highest = 0u64;
            for i in 0..geo.segments {
                let read =
                    Request::read(0, geo.segment_lba(i), vec![opened.alloc_buf(bs as usize)]);
                let done = wait::run(&mut queue, read).map_err(|r| r.error)?;
                done.result?;
                if let Ok(h) = SegmentHeader::decode(&done.bufs[0]) {
                    highest = highest.max(h.seq).max(h.epoch);
                }
            }
            let now_us = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            let base = now_us.max(highest + geo.segments) + 1;
            for i in 0..geo.segments {
                let mut block = opened.alloc_buf(bs as usize);
                if i == 0 {
                    SegmentHeader {
                        device_index,
                        appliance_id,
                        seq: base,
                        epoch: base,
                        first_lsn: 1,
                        released: 0,
                    }
                    .encode(&mut block);
                }
                let write = Request::write(0, geo.segment_lba(i), vec![block]);
                let done = wait::run(&mut queue, write).map_err(|r| r.error)?;
                done.result?;
            }
        }
        Role::Data => {
            let first = RESERVED_BYTES / bs;
            let end = (RESERVED_BYTES + cfg.flush.manifest_size)
                .div_ceil(bs)
                .min(info.capacity_blocks);
            let per = (CHUNK / bs).max(1);
            let mut lba = first;
            while lba < end {
                let n = (end - lba).min(per);
                let write = Request::write(0, lba, vec![opened.alloc_buf((n * bs) as usize)]);
                let done = wait::run(&mut queue, write).map_err(|r| r.error)?;
                done.result?;
                lba += n;
            }
        }
    }
    let done = wait::run(&mut queue, Request::flush(1)).map_err(|r| r.error)?;
    done.result
}

/// The map's WAL and data devices and their appliance id, when every one
/// of them exists, is not a sim device and carries a Stria superblock;
/// `None` otherwise (then no engine can have kept anything on them).
#[allow(clippy::type_complexity)]
fn open_formatted(
    cfg: &Config,
) -> Result<Option<(Vec<AnyDevice>, Vec<AnyDevice>, u128)>, AdminError> {
    let mut appliance_id = None;
    let mut open = |names: &[String]| -> Result<Option<Vec<AnyDevice>>, AdminError> {
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let dev = cfg.device(name).expect("validated device name");
            if in_memory(dev) || dev.path().is_some_and(|p| !p.exists()) {
                return Ok(None);
            }
            let opened = AnyDevice::open(dev, &cfg.spdk)?;
            match read_superblock(&opened)? {
                Ok(sb) => {
                    appliance_id.get_or_insert(sb.appliance_id);
                }
                Err(_) => return Ok(None),
            }
            out.push(opened);
        }
        Ok(Some(out))
    };
    let (Some(wal), Some(data)) = (open(&cfg.wal.devices)?, open(&cfg.flush.devices)?) else {
        return Ok(None);
    };
    Ok(Some((wal, data, appliance_id.unwrap_or(0))))
}
