//! The segment header: the first block of every segment.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `STRIAWSG` |
//! | 8 | 4 | format version (1) |
//! | 12 | 4 | device index in the stripe |
//! | 16 | 16 | appliance id |
//! | 32 | 8 | seq: device-local, grows with every segment started |
//! | 40 | 8 | epoch: WAL incarnation, +1 at every open |
//! | 48 | 8 | first LSN the segment was started for |
//! | 56 | 8 | released: every LSN at or below was no longer needed when the segment started |
//! | 64 | 4 | CRC32C of bytes 0..64 |
//!
//! The rest of the block is zero.

use super::{u32_at, u64_at, FormatError};
use crate::wal::Lsn;

/// Identifies a WAL segment header.
pub const SEGMENT_MAGIC: [u8; 8] = *b"STRIAWSG";
/// The WAL format version this build writes and reads.
pub const WAL_FORMAT_VERSION: u32 = 1;
/// Bytes of the header proper, checksum included.
pub const SEGMENT_HEADER_BYTES: usize = 68;

const CRC_AT: usize = SEGMENT_HEADER_BYTES - 4;

/// What the first block of a segment says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub device_index: u32,
    pub appliance_id: u128,
    pub seq: u64,
    pub epoch: u64,
    pub first_lsn: Lsn,
    /// Every LSN at or below this was released (its segments may have been
    /// reused) when this segment was started: where replay must begin at
    /// the latest, when the caller does not say.
    pub released: Lsn,
}

impl SegmentHeader {
    /// Encodes into `block` and zeroes the rest of it.
    ///
    /// # Panics
    /// If `block` is shorter than [`SEGMENT_HEADER_BYTES`].
    pub fn encode(&self, block: &mut [u8]) {
        block.fill(0);
        let out = &mut block[..SEGMENT_HEADER_BYTES];
        out[0..8].copy_from_slice(&SEGMENT_MAGIC);
        out[8..12].copy_from_slice(&WAL_FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&self.device_index.to_le_bytes());
        out[16..32].copy_from_slice(&self.appliance_id.to_le_bytes());
        out[32..40].copy_from_slice(&self.seq.to_le_bytes());
        out[40..48].copy_from_slice(&self.epoch.to_le_bytes());
        out[48..56].copy_from_slice(&self.first_lsn.to_le_bytes());
        out[56..64].copy_from_slice(&self.released.to_le_bytes());
        let crc = crc32c::crc32c(&out[..CRC_AT]);
        out[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes the first block of a segment. Never panics, whatever the bytes.
    pub fn decode(block: &[u8]) -> Result<SegmentHeader, FormatError> {
        if block.len() < SEGMENT_HEADER_BYTES || block[0..8] != SEGMENT_MAGIC {
            return Err(FormatError::NotASegment);
        }
        let b = &block[..SEGMENT_HEADER_BYTES];
        let stored = u32_at(b, CRC_AT);
        let computed = crc32c::crc32c(&b[..CRC_AT]);
        if stored != computed {
            return Err(FormatError::BadHeaderChecksum { stored, computed });
        }
        let version = u32_at(b, 8);
        if version != WAL_FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion(version));
        }
        Ok(SegmentHeader {
            device_index: u32_at(b, 12),
            appliance_id: u128::from_le_bytes(b[16..32].try_into().expect("16 bytes")),
            seq: u64_at(b, 32),
            epoch: u64_at(b, 40),
            first_lsn: u64_at(b, 48),
            released: u64_at(b, 56),
        })
    }
}
