//! Administration: formatting devices, inspecting what they hold,
//! erasing the engine's metadata from them, and replacing a lost WAL
//! device.

mod erase;
mod format;
mod inspect;
mod online;
mod replace;
mod superblock;

pub use erase::{erase, guard, holdings};
pub use format::{format, FormatReport, Formatted};
pub use inspect::{inspect, DeviceReport, DeviceState};
pub use online::{replace_online, serving};
pub use replace::{prepare_online, replace};
pub(crate) use superblock::{read_superblock, read_superblock_copies, write_superblock};
pub use superblock::{Copies, SUPERBLOCK_COPIES};

use crate::device::DeviceError;

/// Why an administrative command did nothing.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The command would destroy something and was not told it may.
    #[error("refusing to format: {0}")]
    Refused(String),
    /// A command that writes raw to the devices would destroy what the
    /// engine keeps there, and was not forced.
    #[error("{0}")]
    WouldDestroy(String),
    /// `device replace` cannot replace that device, or not now.
    #[error("refusing to replace: {0}")]
    Replace(String),
}
