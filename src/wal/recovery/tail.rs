//! Step 4 of recovery: make the tail beyond the prefix unreadable, then
//! flush.
//!
//! A batch beyond the prefix (good or bad) must never be mistaken for one
//! the next writer writes at the same LSNs, so its first block is zeroed:
//! the scan then stops there (a zero block is no batch). Later batches of
//! the same segment have higher LSNs, so they are beyond the prefix too and
//! zeroed as well. Every device is then flushed, which also makes what
//! recovery read durable in case it was still in a drive's volatile cache
//! (after a process crash the drive keeps power and its cache).

use super::scan::Found;
use super::{RecoveryError, WalDevice};
use crate::device::{wait, Device, Request};

/// Zeroes the first block of `found[i]` for each `i` in `beyond`, then
/// flushes every device but the `lost` ones. Writes nothing when `beyond` is empty.
pub(super) fn truncate_and_flush<D: Device>(
    devices: &[WalDevice<D>],
    found: &[Found],
    beyond: &[usize],
    lost: &[Option<String>],
) -> Result<(), RecoveryError> {
    for (dev, wd) in devices.iter().enumerate() {
        if lost[dev].is_some() {
            continue; // nothing of it was read, so nothing of it is beyond
        }
        let mut queue = wd.device.open_queue()?;
        let bs = u64::from(wd.device.info().block_size);
        for f in beyond.iter().map(|&i| &found[i]).filter(|f| f.dev == dev) {
            let zero = wd.device.alloc_buf(bs as usize);
            let req = Request::write(f.offset / bs, f.offset / bs, vec![zero]);
            wait::run(&mut queue, req).map_err(|r| r.error)?.result?;
        }
        wait::run(&mut queue, Request::flush(u64::MAX))
            .map_err(|r| r.error)?
            .result?;
    }
    Ok(())
}
