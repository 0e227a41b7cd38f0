//! `stria format`: create file devices and write a superblock on each.
//!
//! Formatting destroys what a device holds, so it goes in three passes and
//! writes no superblock until every device has passed the first two:
//!
//! 1. Look, touching nothing: a device whose block 0, or the block of any
//!    other superblock copy, holds a Stria superblock (valid or damaged) or
//!    anything but zeroes is refused unless `force`; two devices that are one file are refused always.
//! 2. Prepare: create and size every file, open every device. If any fails,
//!    the files (and folders) this pass created are removed again.
//! 3. Erase what an engine kept there (the manifest area of a data device,
//!    the segment headers of a WAL device), then write each superblock,
//!    flush it, read it back.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::erase::erase_device;
use super::superblock::{copy_offset, SUPERBLOCK_COPIES};
use super::{write_superblock, AdminError};
use crate::config::{BackendConfig, Config, DeviceConfig};
use crate::device::{wait, AnyDevice, Device, Request};
use crate::layout::{Superblock, SuperblockError, FORMAT_VERSION, SUPERBLOCK_BYTES};

/// What happened to one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Formatted {
    /// A superblock was written.
    Written(Superblock),
    /// Nothing to do (an in-memory `sim` device is formatted when opened).
    Skipped(String),
}

/// What `format` did, device by device, in map order.
#[derive(Clone, Debug)]
pub struct FormatReport {
    pub appliance_id: u128,
    pub devices: Vec<(String, Formatted)>,
}

/// Formats every device of `cfg`.
pub fn format(cfg: &Config, force: bool) -> Result<FormatReport, AdminError> {
    for dev in cfg.devices.iter().filter(|d| !in_memory(d)) {
        if let Some(found) = look(dev, cfg)? {
            if !force {
                return Err(AdminError::Refused(format!(
                    "device {} already holds {found}; pass --force to overwrite it",
                    dev.name
                )));
            }
        }
    }
    check_distinct(cfg)?;
    let opened = prepare(cfg)?;

    let appliance_id: u128 = rand::random();
    let formatted_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut devices = Vec::with_capacity(cfg.devices.len());
    for (index, (dev, opened)) in cfg.devices.iter().zip(opened).enumerate() {
        let Some(opened) = opened else {
            devices.push((
                dev.name.clone(),
                Formatted::Skipped("in memory; formatted each time it is opened".into()),
            ));
            continue;
        };
        let sb = Superblock {
            version: FORMAT_VERSION,
            device_index: index as u32,
            appliance_id,
            appliance: cfg.appliance.clone(),
            device: dev.name.clone(),
            role: dev.role,
            block_size: dev.block_size,
            capacity_blocks: opened.info().capacity_blocks,
            formatted_at,
            stale_manifest: 0,
        };
        if dev.path().is_some() {
            crate::device::write_through(dev)?;
        }
        // A device formatted again must not keep the manifest or the log
        // segments of the engine it held before.
        erase_device(cfg, dev, &opened, appliance_id)?;
        write_superblock(&opened, &sb)?;
        tracing::info!(device = %dev.name, "formatted: {sb}");
        devices.push((dev.name.clone(), Formatted::Written(sb)));
    }
    Ok(FormatReport {
        appliance_id,
        devices,
    })
}

/// A `sim` device: in memory, formatted (and empty) at every open.
pub(super) fn in_memory(dev: &DeviceConfig) -> bool {
    matches!(dev.backend, BackendConfig::Sim(_))
}

/// Pass 1: what the device holds that formatting would destroy, if anything.
/// Reads the block of every superblock copy with a plain read, whatever the
/// device's size or backend (an spdk device, which has no file, through one
/// of its queues).
fn look(dev: &DeviceConfig, cfg: &Config) -> Result<Option<String>, AdminError> {
    let Some(path) = dev.path() else {
        // spdk: a build without SPDK fails here, before anything changes.
        let opened = AnyDevice::open(dev, &cfg.spdk)?;
        let bs = opened.info().block_size as usize;
        let len = SUPERBLOCK_BYTES.div_ceil(bs) * bs;
        let mut queue = opened.open_queue()?;
        for copy in 0..SUPERBLOCK_COPIES {
            let lba = copy_offset(copy) / bs as u64;
            let read = Request::read(0, lba, vec![opened.alloc_buf(len)]);
            let done = wait::run(&mut queue, read).map_err(|r| r.error)?;
            done.result?;
            if let Some(found) = describe(&done.bufs[0], len) {
                return Ok(Some(found));
            }
        }
        return Ok(None);
    };
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refused(dev, path, &e)),
    };
    // Every superblock copy's place: a device whose copy 0 was lost still
    // belongs to an appliance.
    for copy in 0..SUPERBLOCK_COPIES {
        let at = copy_offset(copy);
        let mut head = vec![0u8; SUPERBLOCK_BYTES.max(dev.block_size as usize)];
        let mut got = 0;
        while got < head.len() {
            match file.read_at(&mut head[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(refused(dev, path, &e)),
            }
        }
        if let Some(found) = describe(&head, got) {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// What the first `got` bytes of a device (read into `head`) hold.
fn describe(head: &[u8], got: usize) -> Option<String> {
    match Superblock::decode(&head[..got.max(SUPERBLOCK_BYTES).min(head.len())]) {
        Ok(sb) => Some(format!(
            "a Stria superblock (appliance {}, device {})",
            sb.appliance, sb.device
        )),
        Err(SuperblockError::NotFormatted) if head[..got].iter().all(|&b| b == 0) => None,
        Err(SuperblockError::NotFormatted) => {
            Some("data that is not Stria's (its first block is not blank)".to_string())
        }
        Err(e) => Some(format!("a Stria superblock that does not decode ({e})")),
    }
}

fn refused(dev: &DeviceConfig, path: &Path, e: &std::io::Error) -> AdminError {
    AdminError::Refused(format!(
        "device {}: cannot read {}: {e}",
        dev.name,
        path.display()
    ))
}

/// Two devices of the map must never be one file, whatever the paths say
/// (`a/../a/x.img`, symlinks, `/dev/disk/by-id` aliases).
fn check_distinct(cfg: &Config) -> Result<(), AdminError> {
    let mut seen: HashMap<(u64, u64), &str> = HashMap::new();
    for dev in &cfg.devices {
        let Some(path) = dev.path() else { continue };
        let Ok(meta) = fs::metadata(path) else {
            continue;
        };
        let id = if meta.file_type().is_file() {
            (meta.dev(), meta.ino())
        } else {
            (u64::MAX, meta.rdev())
        };
        if let Some(other) = seen.insert(id, &dev.name) {
            return Err(AdminError::Refused(format!(
                "devices {other} and {} are the same file ({})",
                dev.name,
                path.display()
            )));
        }
    }
    Ok(())
}

/// Pass 2: creates and opens every device; on failure removes what it created.
fn prepare(cfg: &Config) -> Result<Vec<Option<AnyDevice>>, AdminError> {
    let mut created: Vec<PathBuf> = Vec::new();
    let result = (|| {
        let mut opened = Vec::with_capacity(cfg.devices.len());
        for dev in &cfg.devices {
            if in_memory(dev) {
                opened.push(None);
                continue;
            }
            if let Some(path) = dev.path() {
                created.extend(missing_ancestors(path));
            }
            AnyDevice::create(dev)?;
            opened.push(Some(AnyDevice::open(dev, &cfg.spdk)?));
        }
        check_distinct(cfg)?;
        Ok(opened)
    })();
    if result.is_err() {
        // Newest first: files, then the folders that held them.
        for path in created.iter().rev() {
            let _ = fs::remove_file(path).or_else(|_| fs::remove_dir(path));
        }
    }
    result
}

/// `path` and those of its ancestors that do not exist yet, outermost first.
fn missing_ancestors(path: &Path) -> Vec<PathBuf> {
    let mut missing: Vec<PathBuf> = path
        .ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .take_while(|p| !p.exists())
        .map(Path::to_path_buf)
        .collect();
    missing.reverse();
    missing
}
