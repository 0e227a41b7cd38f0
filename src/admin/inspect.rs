//! `stria inspect`: what each configured device is and what it holds.

use std::fmt;

use super::read_superblock_copies;
use crate::config::{BackendConfig, Config, DeviceConfig};
use crate::device::{AnyDevice, Device, DeviceError};
use crate::layout::{Superblock, SuperblockError};

/// What was found on a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceState {
    /// Formatted by this appliance, as the map describes it.
    Ok(Superblock),
    /// An in-memory `sim` device: nothing persists, nothing to inspect.
    InMemory,
    /// The file or block device does not exist.
    Missing(String),
    /// It exists but is smaller than the map says, or cannot be opened.
    Unusable(String),
    /// No Stria superblock.
    Unformatted,
    /// A superblock that does not decode (checksum, version, contents).
    Corrupt(String),
    /// Formatted by another appliance.
    Foreign(Superblock),
    /// Formatted by this appliance, but not as the map describes it.
    Mismatch(Superblock, String),
    /// Formatted as the map describes it, but some superblock copies are
    /// blank, damaged or disagree; the next engine open rewrites them from
    /// the ones that agree.
    Damaged(Superblock, String),
}

impl DeviceState {
    /// True when the device can be used as the map says.
    pub fn is_healthy(&self) -> bool {
        matches!(self, DeviceState::Ok(_) | DeviceState::InMemory)
    }
}

impl fmt::Display for DeviceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceState::Ok(sb) => write!(f, "ok: {sb}"),
            DeviceState::InMemory => {
                f.write_str("in memory (sim): formatted each time it is opened")
            }
            DeviceState::Missing(why) => write!(f, "MISSING: {why}; run `stria format`"),
            DeviceState::Unusable(why) => write!(f, "UNUSABLE: {why}"),
            DeviceState::Unformatted => {
                f.write_str("UNFORMATTED: no Stria superblock; run `stria format`")
            }
            DeviceState::Corrupt(why) => write!(f, "CORRUPT: {why}"),
            DeviceState::Foreign(sb) => write!(f, "FROM ANOTHER APPLIANCE: {sb}"),
            DeviceState::Mismatch(sb, why) => write!(f, "MISMATCH: {why}: {sb}"),
            DeviceState::Damaged(sb, why) => write!(
                f,
                "DAMAGED SUPERBLOCK COPIES ({why}); usable, the next `stria serve` rewrites them: {sb}"
            ),
        }
    }
}

/// One device's report.
#[derive(Clone, Debug)]
pub struct DeviceReport {
    pub device: DeviceConfig,
    pub state: DeviceState,
}

/// Inspects every device of `cfg`, in map order. Never writes.
pub fn inspect(cfg: &Config) -> Vec<DeviceReport> {
    let mut reports: Vec<DeviceReport> = cfg
        .devices
        .iter()
        .enumerate()
        .map(|(index, dev)| DeviceReport {
            device: dev.clone(),
            state: state_of(cfg, index, dev),
        })
        .collect();
    // Devices formatted together share an id; one that differs from the
    // first formatted device was formatted for another appliance of the
    // same name.
    let first_id = reports.iter().find_map(|r| match &r.state {
        DeviceState::Ok(sb) | DeviceState::Damaged(sb, _) => Some(sb.appliance_id),
        _ => None,
    });
    if let Some(id) = first_id {
        for r in &mut reports {
            if let DeviceState::Ok(sb) | DeviceState::Damaged(sb, _) = &r.state {
                if sb.appliance_id != id {
                    r.state = DeviceState::Foreign(sb.clone());
                }
            }
        }
    }
    reports
}

fn state_of(cfg: &Config, index: usize, dev: &DeviceConfig) -> DeviceState {
    if matches!(dev.backend, BackendConfig::Sim(_)) {
        return DeviceState::InMemory;
    }
    let opened = match AnyDevice::open(dev, &cfg.spdk) {
        Ok(opened) => opened,
        Err(e @ DeviceError::Open { .. }) if is_not_found(&e) => {
            return DeviceState::Missing(e.to_string())
        }
        Err(e) => return DeviceState::Unusable(e.to_string()),
    };
    let copies = match read_superblock_copies(&opened) {
        Err(e) => return DeviceState::Unusable(e.to_string()),
        Ok(c) => c,
    };
    let sb = match &copies.chosen {
        Err(SuperblockError::NotFormatted) => return DeviceState::Unformatted,
        Err(e) => return DeviceState::Corrupt(e.to_string()),
        Ok(sb) => sb.clone(),
    };
    if sb.appliance != cfg.appliance {
        return DeviceState::Foreign(sb);
    }
    let mut problems = Vec::new();
    if sb.device != dev.name {
        problems.push(format!(
            "formatted as device {}, the map calls it {}",
            sb.device, dev.name
        ));
    }
    if sb.device_index as usize != index {
        problems.push(format!(
            "formatted as device #{}, the map has it at #{index}",
            sb.device_index
        ));
    }
    if sb.role != dev.role {
        problems.push(format!(
            "formatted for role {}, the map says {}",
            sb.role, dev.role
        ));
    }
    if sb.block_size != dev.block_size {
        problems.push(format!(
            "formatted with {}-byte blocks, the map says {}",
            sb.block_size, dev.block_size
        ));
    }
    if sb.capacity_blocks > opened.info().capacity_blocks {
        problems.push(format!(
            "formatted with {} blocks, the map gives {}",
            sb.capacity_blocks,
            opened.info().capacity_blocks
        ));
    }
    if !problems.is_empty() {
        DeviceState::Mismatch(sb, problems.join("; "))
    } else if !copies.bad.is_empty() {
        DeviceState::Damaged(sb, copies.describe_bad())
    } else {
        DeviceState::Ok(sb)
    }
}

fn is_not_found(e: &DeviceError) -> bool {
    matches!(e, DeviceError::Open { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}
