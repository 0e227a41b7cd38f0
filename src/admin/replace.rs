//! `stria device replace`: put a new device where a WAL or data device was
//! lost, offline (stop the appliance first: the device locks refuse
//! otherwise).
//!
//! With `wal.copies` above one the appliance runs degraded when a WAL
//! device fails, and starts degraded while one is missing or unreadable.
//! Replacing it writes the new device through (file devices), gives it an
//! empty log ([`erase_device`]) and this appliance's superblock, with the
//! index and role the map gives it, after the manifest has marked it as
//! lacking the log (so that no start recovers the log from it alone). The
//! next start (the caller makes one) writes every new batch to it again,
//! flushes the memstores and clears the mark. A WAL device the running
//! appliance lost is replaced online instead ([`prepare_online`], then the
//! engine takes it into the WAL's stripe).
//!
//! A data device, with `flush.copies` above one: the new device gets a
//! blank manifest area and the superblock; the caller then opens the
//! engine, which reads every file from its other copies, and rebuilds the
//! copies the device held ([`crate::engine::Engine::restore_copies`]).
//! With one copy of each block file a lost data device has nothing to be
//! rebuilt from, and is refused.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use super::erase::erase_device;
use super::format::in_memory;
use super::{read_superblock, write_superblock, AdminError};
use crate::config::{BackendConfig, Config, DeviceConfig, Role};
use crate::device::{self, AnyDevice, Device};
use crate::layout::{Superblock, FORMAT_VERSION};

/// Replaces the WAL device `name` of `cfg` by a new, empty one at its path
/// in the map, or at `with` (then the map must be pointed at it). Refuses
/// a device that still holds this appliance's valid superblock unless
/// `force`.
pub fn replace(
    cfg: &Config,
    name: &str,
    with: Option<PathBuf>,
    force: bool,
) -> Result<Superblock, AdminError> {
    let refuse = |why: String| AdminError::Replace(why);
    let (index, mut dev) = target(cfg, name)?;
    if dev.role == Role::Wal && cfg.wal.copies < 2 && !force {
        return Err(refuse(format!(
            "with wal.copies: 1 the log on {name} has no other copy: replacing it loses what the engine has not flushed (pass --force to replace it anyway)"
        )));
    }
    if let Some(path) = with {
        match &mut dev.backend {
            BackendConfig::Psync { path: p } | BackendConfig::Uring { path: p, .. } => *p = path,
            _ => {
                return Err(refuse(format!(
                    "{name} is not a file or block device: --with takes a path"
                )))
            }
        }
    }
    // No engine may run on the map meanwhile: hold every device's lock.
    let mut locks = Vec::new();
    for d in cfg.devices.iter().filter(|d| d.name != name).chain([&dev]) {
        let Some(path) = d.path() else { continue };
        match device::lock_exclusive(path) {
            Ok(Some(file)) => locks.push(file),
            Ok(None) => {
                return Err(refuse(format!(
                    "device {} ({}) is in use by another engine (a running `stria serve`?); stop it first",
                    d.name,
                    path.display()
                )))
            }
            Err(_) => {} // missing: the replacement creates it, others say so below
        }
    }
    let others = Others::read(cfg, name)?;
    let current = AnyDevice::open(&dev, &cfg.spdk).ok();
    if let Some(Ok(sb)) = current
        .as_ref()
        .map(read_superblock)
        .transpose()
        .ok()
        .flatten()
    {
        if sb.appliance_id == others.appliance_id && sb.device == dev.name && !force {
            return Err(refuse(format!(
                "{name} still holds a valid superblock of appliance {}: if it is failing, pass --force (its copies of the {} are lost)",
                others.appliance,
                if dev.role == Role::Wal { "log" } else { "block files" }
            )));
        }
    }
    drop(current);
    // Before the device is blank, the manifest says it lacks the log, so
    // that no start recovers the log from it alone.
    // A data device holding a copy of the manifest: its copy is blank
    // until a start writes to both, so the WAL devices say so first.
    let mirror = cfg.flush.devices.iter().position(|d| d == name);
    if let Some(mirror) = mirror.filter(|&m| m < 2 && cfg.flush.devices.len() > 1) {
        crate::engine::mark_manifest_copy_replaced(cfg, mirror).map_err(|e| {
            refuse(format!(
                "cannot record on the WAL devices that {name}'s manifest copy is blank: {e}"
            ))
        })?;
    }
    if let Some(stripe) = cfg.wal.devices.iter().position(|d| d == name) {
        crate::engine::mark_wal_replaced(cfg, stripe as u32).map_err(|e| {
            refuse(format!(
                "cannot record in the manifest that {name} is blank: {e}"
            ))
        })?;
    }
    let (_, sb) = write_new(cfg, &dev, index, &others)?;
    drop(locks);
    Ok(sb)
}

/// For a running appliance whose WAL lost the device `name`: writes a new,
/// empty device at its path in the map (created, written through, an
/// empty log, the appliance's superblock) and returns it opened, with its
/// position in the WAL's stripe, for the engine to take into the stripe
/// ([`crate::engine::Engine::replace_wal_device`], which also keeps the
/// manifest's mark until the device holds the log). The engine holds the
/// devices' locks and the manifest, so neither is touched here. A data
/// device is refused: it is replaced with the appliance stopped.
pub fn prepare_online(cfg: &Config, name: &str) -> Result<(usize, AnyDevice), AdminError> {
    let (index, dev) = target(cfg, name)?;
    let Some(stripe) = cfg.wal.devices.iter().position(|d| d == name) else {
        return Err(AdminError::Replace(format!(
            "{name} is a data device: it is replaced with the appliance stopped (`stria device replace`); online, only a WAL device is"
        )));
    };
    let others = Others::read(cfg, name)?;
    let (opened, _) = write_new(cfg, &dev, index, &others)?;
    Ok((stripe, opened))
}

/// The device `name` of the map, with its index, if it can be replaced:
/// one of the map's WAL or flush devices, not in memory, and a data
/// device only when its block files have another copy.
fn target(cfg: &Config, name: &str) -> Result<(usize, DeviceConfig), AdminError> {
    let refuse = |why: String| AdminError::Replace(why);
    let Some(index) = cfg.devices.iter().position(|d| d.name == name) else {
        return Err(refuse(format!("the map has no device named {name:?}")));
    };
    let dev = cfg.devices[index].clone();
    let used = cfg.wal.devices.contains(&dev.name) || cfg.flush.devices.contains(&dev.name);
    if !used {
        return Err(refuse(format!(
            "{name} is not one of the map's WAL or flush devices"
        )));
    }
    if dev.role == Role::Data && cfg.flush.copies < 2 {
        return Err(refuse(format!(
            "{name} is a data device and flush.copies is 1: its block files have no other copy, so there is nothing to rebuild it from"
        )));
    }
    if in_memory(&dev) {
        return Err(refuse(format!(
            "{name} is a sim device, in memory: there is nothing to replace"
        )));
    }
    Ok((index, dev))
}

/// What the map's other devices say: the appliance, and what the WAL
/// devices say of the manifest copies (kept on a new WAL device too).
struct Others {
    appliance_id: u128,
    appliance: String,
    stale_manifest: u8,
}

impl Others {
    fn read(cfg: &Config, name: &str) -> Result<Others, AdminError> {
        let mut appliance = None;
        let mut stale_manifest = 0;
        for other in cfg
            .devices
            .iter()
            .filter(|d| d.name != name && !in_memory(d))
        {
            if other.path().is_some_and(|p| !p.exists()) {
                continue;
            }
            if let Ok(Ok(sb)) = AnyDevice::open(other, &cfg.spdk).and_then(|d| read_superblock(&d))
            {
                if sb.role == Role::Wal {
                    stale_manifest |= sb.stale_manifest;
                }
                appliance.get_or_insert((sb.appliance_id, sb.appliance));
            }
        }
        let Some((appliance_id, appliance)) = appliance else {
            return Err(AdminError::Replace(
                "no other device of the map holds a Stria superblock to take the appliance from: `stria format` the map instead".to_string(),
            ));
        };
        Ok(Others {
            appliance_id,
            appliance,
            stale_manifest,
        })
    }
}

/// Creates `dev` (index `index` of the map) new: written through (file
/// devices), an empty log or a blank manifest area, and the appliance's
/// superblock.
fn write_new(
    cfg: &Config,
    dev: &DeviceConfig,
    index: usize,
    others: &Others,
) -> Result<(AnyDevice, Superblock), AdminError> {
    AnyDevice::create(dev)?;
    let opened = AnyDevice::open(dev, &cfg.spdk)?;
    if dev.path().is_some() {
        device::write_through(dev)?;
    }
    erase_device(cfg, dev, &opened, others.appliance_id)?;
    let sb = Superblock {
        version: FORMAT_VERSION,
        device_index: index as u32,
        appliance_id: others.appliance_id,
        appliance: others.appliance.clone(),
        device: dev.name.clone(),
        role: dev.role,
        block_size: dev.block_size,
        capacity_blocks: opened.info().capacity_blocks,
        formatted_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        stale_manifest: if dev.role == Role::Wal {
            others.stale_manifest
        } else {
            0
        },
    };
    write_superblock(&opened, &sb)?;
    tracing::info!(device = %dev.name, "replaced: {sb}");
    Ok((opened, sb))
}
