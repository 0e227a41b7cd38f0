//! `stria format`: create file devices and write a superblock on each.
//!
//! Every device is checked before any is touched, so a refusal changes
//! nothing: a device that already holds a Stria superblock (valid or
//! damaged) is only overwritten with `force`.

use std::time::{SystemTime, UNIX_EPOCH};

use super::{read_superblock, write_superblock, AdminError};
use crate::config::{BackendConfig, Config, DeviceConfig};
use crate::device::{AnyDevice, Device, DeviceError};
use crate::layout::{Superblock, SuperblockError, FORMAT_VERSION};

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
    // Pass 1: look, touch nothing.
    for dev in cfg.devices.iter().filter(|d| persistent(d)) {
        if let Some(found) = existing_superblock(dev)? {
            if !force {
                return Err(AdminError::Refused(format!(
                    "device {} already holds {found}; pass --force to overwrite it",
                    dev.name
                )));
            }
        }
    }
    // Pass 2: create, write, flush, read back.
    let appliance_id: u128 = rand::random();
    let formatted_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut devices = Vec::with_capacity(cfg.devices.len());
    for (index, dev) in cfg.devices.iter().enumerate() {
        if !persistent(dev) {
            devices.push((
                dev.name.clone(),
                Formatted::Skipped("in memory; formatted each time it is opened".into()),
            ));
            continue;
        }
        AnyDevice::create(dev)?;
        let opened = AnyDevice::open(dev)?;
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
        };
        write_superblock(&opened, &sb)?;
        tracing::info!(device = %dev.name, "formatted: {sb}");
        devices.push((dev.name.clone(), Formatted::Written(sb)));
    }
    Ok(FormatReport {
        appliance_id,
        devices,
    })
}

fn persistent(dev: &DeviceConfig) -> bool {
    !matches!(dev.backend, BackendConfig::Sim(_))
}

/// A description of the Stria superblock the device holds, if it holds one.
fn existing_superblock(dev: &DeviceConfig) -> Result<Option<String>, AdminError> {
    let opened = match AnyDevice::open(dev) {
        Ok(opened) => opened,
        // Missing or too small: there is nothing on it to protect.
        Err(DeviceError::Open { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(DeviceError::TooSmall { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(match read_superblock(&opened)? {
        Ok(sb) => Some(format!(
            "a Stria superblock (appliance {}, device {})",
            sb.appliance, sb.device
        )),
        Err(SuperblockError::NotFormatted) => None,
        Err(e) => Some(format!("a Stria superblock that does not decode ({e})")),
    })
}
