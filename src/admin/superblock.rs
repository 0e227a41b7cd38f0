//! The superblock copies of a device, and choosing among them.
//!
//! A device keeps [`SUPERBLOCK_COPIES`] identical superblocks in its
//! reserved first MiB, a quarter MiB apart, so that a bad sector, a torn
//! or misdirected write, or a flipped bit in one of them does not make the
//! device unusable (TigerBeetle keeps four as well). A reader takes the
//! superblock most valid copies agree on; copies that do not decode, or
//! that disagree with it, are reported. Devices formatted before there were
//! copies hold only copy 0: the others read as blank and are reported as
//! missing, and the device is used as before.

use crate::config::RESERVED_BYTES;
use crate::device::{wait, AnyDevice, Device, DeviceError, IoKind, Request};
use crate::layout::{Superblock, SuperblockError};

/// Superblock copies per device.
pub const SUPERBLOCK_COPIES: usize = 4;

/// Byte offset of copy `i` on the device.
pub(super) fn copy_offset(i: usize) -> u64 {
    i as u64 * (RESERVED_BYTES / SUPERBLOCK_COPIES as u64)
}

/// What the copies of one device hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copies {
    /// The superblock the most valid copies agree on, or why there is none:
    /// [`SuperblockError::NotFormatted`] when every copy is blank.
    pub chosen: Result<Superblock, SuperblockError>,
    /// Copies that are blank, do not decode, or disagree with the chosen
    /// one: (copy number, byte offset, what is wrong). Empty on a healthy
    /// device.
    pub bad: Vec<(usize, u64, String)>,
}

impl Copies {
    /// The bad copies, for a message: `copy 2 at byte 524288: blank; ...`.
    pub fn describe_bad(&self) -> String {
        self.bad
            .iter()
            .map(|(i, at, what)| format!("copy {i} at byte {at}: {what}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Reads every superblock copy of `dev` and chooses among them.
pub(crate) fn read_superblock_copies(dev: &AnyDevice) -> Result<Copies, DeviceError> {
    let mut queue = dev.open_queue()?;
    let bs = dev.info().block_size as usize;
    // Per copy: what it decodes to, or why it cannot be read.
    let mut copies: Vec<Result<Result<Superblock, SuperblockError>, DeviceError>> =
        Vec::with_capacity(SUPERBLOCK_COPIES);
    for i in 0..SUPERBLOCK_COPIES {
        let lba = copy_offset(i) / bs as u64;
        let read = Request::read(0, lba, vec![dev.alloc_buf(bs)]);
        let done = wait::run(&mut queue, read).map_err(|r| r.error)?;
        // A copy that cannot be read (a bad sector) is a bad copy, not an
        // unusable device.
        copies.push(done.result.map(|()| Superblock::decode(&done.bufs[0])));
    }
    let valid: Vec<&Superblock> = copies
        .iter()
        .filter_map(|c| match c {
            Ok(Ok(sb)) => Some(sb),
            _ => None,
        })
        .collect();
    let votes = |sb: &Superblock| valid.iter().filter(|o| **o == sb).count();
    // The value most copies hold; among equals, the lowest copy's.
    let mut best: Option<&Superblock> = None;
    for sb in &valid {
        if best.is_none_or(|b| votes(sb) > votes(b)) {
            best = Some(sb);
        }
    }
    let chosen = match best {
        Some(sb) if valid.iter().any(|o| *o != sb && votes(o) == votes(sb)) => {
            Err(SuperblockError::Corrupt(format!(
                "its superblock copies disagree: {} copies each hold different superblocks",
                votes(sb)
            )))
        }
        Some(sb) => Ok(sb.clone()),
        None if copies
            .iter()
            .all(|c| matches!(c, Ok(Err(SuperblockError::NotFormatted)))) =>
        {
            Err(SuperblockError::NotFormatted)
        }
        None => {
            // Nothing valid: copy 0 says why, unless it is only blank.
            let why = copies
                .iter()
                .find_map(|c| match c {
                    Ok(Err(SuperblockError::NotFormatted)) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(e) => Some(e.to_string()),
                    Ok(Ok(_)) => None,
                })
                .unwrap_or_default();
            Err(SuperblockError::Corrupt(format!(
                "no superblock copy is valid ({why})"
            )))
        }
    };
    let mut bad = Vec::new();
    for (i, c) in copies.iter().enumerate() {
        let what = match c {
            Err(e) => e.to_string(),
            Ok(Err(SuperblockError::NotFormatted)) => "blank".to_string(),
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(sb)) if chosen.as_ref().is_ok_and(|c| c != sb) => {
                format!("disagrees with the others ({sb})")
            }
            Ok(Ok(_)) => continue,
        };
        bad.push((i, copy_offset(i), what));
    }
    if chosen == Err(SuperblockError::NotFormatted) {
        bad.clear();
    }
    Ok(Copies { chosen, bad })
}

/// The superblock most copies of `dev` agree on.
pub(crate) fn read_superblock(
    dev: &AnyDevice,
) -> Result<Result<Superblock, SuperblockError>, DeviceError> {
    Ok(read_superblock_copies(dev)?.chosen)
}

/// Writes `sb` to every copy on `dev`, flushes, and reads them back.
pub(crate) fn write_superblock(dev: &AnyDevice, sb: &Superblock) -> Result<(), DeviceError> {
    let mut queue = dev.open_queue()?;
    let bs = dev.info().block_size as usize;
    for i in 0..SUPERBLOCK_COPIES {
        let mut block = dev.alloc_buf(bs);
        sb.encode(&mut block);
        let write = Request::write(0, copy_offset(i) / bs as u64, vec![block]);
        let done = wait::run(&mut queue, write).map_err(|r| r.error)?;
        done.result?;
    }
    let done = wait::run(&mut queue, Request::flush(1)).map_err(|r| r.error)?;
    done.result?;
    // Read them back: a superblock that does not decode is worse than none.
    let back = read_superblock_copies(dev)?;
    match back.chosen {
        Ok(b) if &b == sb && back.bad.is_empty() => Ok(()),
        other => Err(DeviceError::Io {
            device: dev.info().name.clone(),
            kind: IoKind::Read,
            lba: 0,
            source: std::io::Error::other(format!(
                "superblock copies read back do not match what was written: {other:?}, bad copies {:?}",
                back.bad
            )),
        }),
    }
}
