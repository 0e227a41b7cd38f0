//! Administration: formatting devices, inspecting what they hold, and
//! erasing the engine's metadata from them.

mod erase;
mod format;
mod inspect;

pub use erase::{erase, guard, holdings};
pub use format::{format, FormatReport, Formatted};
pub use inspect::{inspect, DeviceReport, DeviceState};

use crate::device::{wait, AnyDevice, Device, DeviceError, IoKind, Request};
use crate::layout::{Superblock, SuperblockError};

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
}

/// Reads block 0 of `dev` and decodes its superblock.
pub(crate) fn read_superblock(
    dev: &AnyDevice,
) -> Result<Result<Superblock, SuperblockError>, DeviceError> {
    let mut queue = dev.open_queue()?;
    let bs = dev.info().block_size as usize;
    let done =
        wait::run(&mut queue, Request::read(0, 0, vec![dev.alloc_buf(bs)])).map_err(|r| r.error)?;
    done.result?;
    Ok(Superblock::decode(&done.bufs[0]))
}

/// Writes `sb` to block 0 of `dev` and flushes it.
pub(crate) fn write_superblock(dev: &AnyDevice, sb: &Superblock) -> Result<(), DeviceError> {
    let mut queue = dev.open_queue()?;
    let mut block = dev.alloc_buf(dev.info().block_size as usize);
    sb.encode(&mut block);
    for req in [Request::write(0, 0, vec![block]), Request::flush(1)] {
        let done = wait::run(&mut queue, req).map_err(|r| r.error)?;
        done.result?;
    }
    // Read it back: a superblock that does not decode is worse than none.
    match read_superblock(dev)? {
        Ok(back) if &back == sb => Ok(()),
        other => Err(DeviceError::Io {
            device: dev.info().name.clone(),
            kind: IoKind::Read,
            lba: 0,
            source: std::io::Error::other(format!(
                "superblock read back does not match what was written: {other:?}"
            )),
        }),
    }
}
