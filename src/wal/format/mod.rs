//! The WAL's on-device format. Every integer is little-endian and every
//! checksum is CRC32C.
//!
//! # Geometry
//!
//! A WAL device keeps its first [`RESERVED_BYTES`] for the superblock. After
//! it come `segments` segments of `segment_size` bytes each (a whole number
//! of blocks); whatever is left at the end of the device is unused. Each
//! device is its own ring of segments ([`Geometry`]).
//!
//! # Segment
//!
//! The first block of a segment is its [`SegmentHeader`]. Batches follow,
//! each starting on a block boundary, back to back, in increasing LSN order.
//! A segment's `seq` is device-local and grows every time a segment is
//! started, so a segment reused from the ring has a higher `seq` than any
//! batch left over from its previous use.
//!
//! # Batch
//!
//! A [`BatchHeader`] of [`BATCH_HEADER_BYTES`], the payload (records back to
//! back), then zeros up to the next block boundary. A batch holds `count`
//! consecutive LSNs starting at `first_lsn`; record `i` has LSN
//! `first_lsn + i`. Its `durable_lsn` says that every LSN up to it was
//! durable on every device when the batch was built; recovery uses that to
//! tell a torn tail (normal after a crash) from lost data (an error).
//!
//! # Record
//!
//! [`RECORD_HEADER_BYTES`] (op, region, key length, value length), then the
//! key, then the value. A delete has no value.

mod batch;
mod builder;
mod record;
mod segment;
#[cfg(test)]
mod tests;

pub use batch::{
    decode_batch_header, verify_payload, BatchHeader, BATCH_HEADER_BYTES, BATCH_MAGIC,
};
pub use builder::BatchBuilder;
pub use record::{decode_records, record_len, Record, RecordOp, RecordRef, RECORD_HEADER_BYTES};
pub use segment::{SegmentHeader, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC, WAL_FORMAT_VERSION};

use crate::config::RESERVED_BYTES;
use crate::device::DeviceInfo;

/// Where the segments of one WAL device are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub block_size: u32,
    /// LBA of segment 0: the first block after the reserved area.
    pub first_block: u64,
    /// Blocks per segment.
    pub seg_blocks: u64,
    /// Segments on the device.
    pub segments: u64,
}

impl Geometry {
    /// The segments of `info` for `segment_size`-byte segments.
    ///
    /// # Panics
    /// If `segment_size` is not a whole number of at least two blocks (a
    /// header and room for one batch). Configuration validation refuses such
    /// sizes before any device is opened.
    pub fn new(info: &DeviceInfo, segment_size: u64) -> Geometry {
        let bs = u64::from(info.block_size);
        assert!(
            segment_size % bs == 0 && segment_size >= 2 * bs,
            "device {}: WAL segment size {segment_size} is not a whole number of at least two {bs}-byte blocks",
            info.name
        );
        let first_block = RESERVED_BYTES.div_ceil(bs);
        let seg_blocks = segment_size / bs;
        Geometry {
            block_size: info.block_size,
            first_block,
            seg_blocks,
            segments: info.capacity_blocks.saturating_sub(first_block) / seg_blocks,
        }
    }

    /// LBA of the header block of segment `index`.
    pub fn segment_lba(&self, index: u64) -> u64 {
        self.first_block + index * self.seg_blocks
    }

    /// Bytes per segment.
    pub fn segment_bytes(&self) -> u64 {
        self.seg_blocks * u64::from(self.block_size)
    }

    /// Byte offset on the device of the byte `offset` into segment `index`.
    pub fn device_offset(&self, index: u64, offset: u64) -> u64 {
        self.segment_lba(index) * u64::from(self.block_size) + offset
    }
}

/// Why bytes are not a valid piece of the WAL format.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// No segment magic: a blank block or something else entirely.
    #[error("not a WAL segment header (no magic)")]
    NotASegment,
    /// No batch magic: a blank block, the end of the log, or foreign data.
    #[error("not a WAL batch header (no magic)")]
    NotABatch,
    /// The magic is there but the header's checksum does not match.
    #[error("header checksum {stored:#010x} stored, {computed:#010x} computed")]
    BadHeaderChecksum { stored: u32, computed: u32 },
    /// Written by another version of the format.
    #[error("WAL format version {0}, this build reads version {WAL_FORMAT_VERSION}")]
    UnsupportedVersion(u32),
    /// The header checks out but its fields contradict each other or the
    /// limits the reader was given.
    #[error("bad header: {0}")]
    BadHeader(String),
    /// The payload does not match the checksum in its header.
    #[error("payload checksum {stored:#010x} stored, {computed:#010x} computed")]
    BadPayloadChecksum { stored: u32, computed: u32 },
    /// A record inside a checksummed payload does not parse.
    #[error("record {index}: {why}")]
    BadRecord { index: u32, why: String },
    /// Fewer bytes than the structure needs.
    #[error("{what} needs {need} bytes, {have} given")]
    TooShort {
        what: &'static str,
        need: usize,
        have: usize,
    },
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// `len` rounded up to a whole number of `block_size` blocks.
pub(crate) fn round_up(len: usize, block_size: u32) -> usize {
    len.div_ceil(block_size as usize) * block_size as usize
}
