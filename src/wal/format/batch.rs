//! The batch header: the first [`BATCH_HEADER_BYTES`] of every batch.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `STRIAWB1` |
//! | 8 | 8 | first LSN |
//! | 16 | 4 | record count (> 0) |
//! | 20 | 4 | payload length in bytes |
//! | 24 | 8 | seq of the segment it was written into |
//! | 32 | 8 | durable LSN: every LSN up to it was durable everywhere (< first LSN) |
//! | 40 | 8 | epoch of the writer |
//! | 48 | 4 | CRC32C of the payload |
//! | 52 | 8 | zero |
//! | 60 | 4 | CRC32C of bytes 0..60 |
//!
//! A batch whose segment seq differs from its segment's is left over from an
//! earlier use of the segment: stale, and the end of that segment's log.

use super::{round_up, u32_at, u64_at, FormatError, RECORD_HEADER_BYTES};
use crate::wal::Lsn;

/// Identifies a WAL batch header.
pub const BATCH_MAGIC: [u8; 8] = *b"STRIAWB1";
/// Bytes of a batch header; the payload follows at once.
pub const BATCH_HEADER_BYTES: usize = 64;

const CRC_AT: usize = BATCH_HEADER_BYTES - 4;

/// What a batch header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub first_lsn: Lsn,
    pub count: u32,
    pub payload_len: u32,
    pub segment_seq: u64,
    pub durable_lsn: Lsn,
    pub epoch: u64,
    pub payload_crc: u32,
}

impl BatchHeader {
    /// Bytes the batch occupies on the device: header and payload rounded up
    /// to whole blocks.
    pub fn padded_len(&self, block_size: u32) -> usize {
        round_up(BATCH_HEADER_BYTES + self.payload_len as usize, block_size)
    }

    /// The last LSN in the batch.
    pub fn last_lsn(&self) -> Lsn {
        self.first_lsn + u64::from(self.count) - 1
    }

    /// Encodes into the first [`BATCH_HEADER_BYTES`] of `out`.
    pub(crate) fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..BATCH_HEADER_BYTES];
        out[0..8].copy_from_slice(&BATCH_MAGIC);
        out[8..16].copy_from_slice(&self.first_lsn.to_le_bytes());
        out[16..20].copy_from_slice(&self.count.to_le_bytes());
        out[20..24].copy_from_slice(&self.payload_len.to_le_bytes());
        out[24..32].copy_from_slice(&self.segment_seq.to_le_bytes());
        out[32..40].copy_from_slice(&self.durable_lsn.to_le_bytes());
        out[40..48].copy_from_slice(&self.epoch.to_le_bytes());
        out[48..52].copy_from_slice(&self.payload_crc.to_le_bytes());
        out[52..60].fill(0);
        let crc = crc32c::crc32c(&out[..CRC_AT]);
        out[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Decodes the header at the start of `block` and checks it: magic,
/// checksum, and fields that make sense together (at least one record, a
/// payload long enough for that many records, the whole batch within
/// `max_batch` bytes, LSNs that do not overflow, a durable LSN below the
/// first LSN). Never panics, whatever the bytes.
pub fn decode_batch_header(block: &[u8], max_batch: usize) -> Result<BatchHeader, FormatError> {
    if block.len() < BATCH_HEADER_BYTES {
        return Err(FormatError::TooShort {
            what: "a batch header",
            need: BATCH_HEADER_BYTES,
            have: block.len(),
        });
    }
    let b = &block[..BATCH_HEADER_BYTES];
    if b[0..8] != BATCH_MAGIC {
        return Err(FormatError::NotABatch);
    }
    let stored = u32_at(b, CRC_AT);
    let computed = crc32c::crc32c(&b[..CRC_AT]);
    if stored != computed {
        return Err(FormatError::BadHeaderChecksum { stored, computed });
    }
    let h = BatchHeader {
        first_lsn: u64_at(b, 8),
        count: u32_at(b, 16),
        payload_len: u32_at(b, 20),
        segment_seq: u64_at(b, 24),
        durable_lsn: u64_at(b, 32),
        epoch: u64_at(b, 40),
        payload_crc: u32_at(b, 48),
    };
    let bad = |why: String| Err(FormatError::BadHeader(why));
    if b[52..60].iter().any(|&x| x != 0) {
        return bad("reserved bytes 52..60 are not zero".into());
    }
    if h.count == 0 {
        return bad("no records".into());
    }
    let min_payload = u64::from(h.count) * RECORD_HEADER_BYTES as u64;
    if u64::from(h.payload_len) < min_payload {
        return bad(format!(
            "{} records cannot fit in a {}-byte payload",
            h.count, h.payload_len
        ));
    }
    let total = BATCH_HEADER_BYTES as u64 + u64::from(h.payload_len);
    if total > max_batch as u64 {
        return bad(format!(
            "{total} bytes with its header, more than the {max_batch}-byte batch limit"
        ));
    }
    if h.first_lsn == 0 || h.first_lsn.checked_add(u64::from(h.count)).is_none() {
        return bad(format!(
            "LSNs {} + {} are out of range",
            h.first_lsn, h.count
        ));
    }
    if h.durable_lsn >= h.first_lsn {
        return bad(format!(
            "durable LSN {} is not below its first LSN {}",
            h.durable_lsn, h.first_lsn
        ));
    }
    Ok(h)
}

/// Checks that `payload` is the payload `header` describes: its length and
/// checksum.
pub fn verify_payload(header: &BatchHeader, payload: &[u8]) -> Result<(), FormatError> {
    if payload.len() != header.payload_len as usize {
        return Err(FormatError::TooShort {
            what: "the payload",
            need: header.payload_len as usize,
            have: payload.len(),
        });
    }
    let computed = crc32c::crc32c(payload);
    if computed != header.payload_crc {
        return Err(FormatError::BadPayloadChecksum {
            stored: header.payload_crc,
            computed,
        });
    }
    Ok(())
}
