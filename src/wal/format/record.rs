//! Records: the entries of a batch's payload, back to back.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 1 | op: 1 put, 2 delete |
//! | 1 | 4 | region |
//! | 5 | 4 | key length |
//! | 9 | 4 | value length (0 for a delete) |
//! | 13 | key length | key |
//! | .. | value length | value |

use super::{u32_at, verify_payload, BatchHeader, FormatError};
use crate::wal::Lsn;

/// Bytes of a record before its key.
pub const RECORD_HEADER_BYTES: usize = 13;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// What a record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordOp {
    Put,
    Delete,
}

/// A record to append, borrowing its key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub op: RecordOp,
    pub region: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub lsn: Lsn,
    pub op: RecordOp,
    pub region: u32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl Record {
    /// A borrowed view, as the writer takes it.
    pub fn as_ref(&self) -> RecordRef<'_> {
        RecordRef {
            op: self.op,
            region: self.region,
            key: &self.key,
            value: &self.value,
        }
    }
}

/// Bytes a record with these key and value lengths takes in a payload.
pub fn record_len(key_len: usize, value_len: usize) -> usize {
    RECORD_HEADER_BYTES + key_len + value_len
}

/// Encodes `rec` at the start of `out`, which must hold
/// [`record_len`] bytes, and returns that length. Key and value lengths must
/// fit in a u32 (the builder checks).
pub(crate) fn encode_record(rec: &RecordRef<'_>, out: &mut [u8]) -> usize {
    let (k, v) = (rec.key.len(), rec.value.len());
    out[0] = match rec.op {
        RecordOp::Put => OP_PUT,
        RecordOp::Delete => OP_DELETE,
    };
    out[1..5].copy_from_slice(&rec.region.to_le_bytes());
    out[5..9].copy_from_slice(&(k as u32).to_le_bytes());
    out[9..13].copy_from_slice(&(v as u32).to_le_bytes());
    let key_at = RECORD_HEADER_BYTES;
    out[key_at..key_at + k].copy_from_slice(rec.key);
    out[key_at + k..key_at + k + v].copy_from_slice(rec.value);
    record_len(k, v)
}

/// Checks the payload against its header (length, checksum) and decodes its
/// `count` records, which must fill it exactly. Never panics, whatever the
/// bytes.
pub fn decode_records(header: &BatchHeader, payload: &[u8]) -> Result<Vec<Record>, FormatError> {
    verify_payload(header, payload)?;
    if header
        .first_lsn
        .checked_add(u64::from(header.count))
        .is_none()
    {
        return Err(FormatError::BadHeader(format!(
            "LSNs {} + {} are out of range",
            header.first_lsn, header.count
        )));
    }
    // Every record takes at least its header, so a lying count cannot make
    // this allocation larger than the payload warrants.
    let cap = (header.count as usize).min(payload.len() / RECORD_HEADER_BYTES);
    let mut records = Vec::with_capacity(cap);
    let mut at = 0usize;
    for index in 0..header.count {
        let bad = |why: String| Err(FormatError::BadRecord { index, why });
        let rest = &payload[at..];
        if rest.len() < RECORD_HEADER_BYTES {
            return bad(format!(
                "header needs {RECORD_HEADER_BYTES} bytes, {} left in the payload",
                rest.len()
            ));
        }
        let op = match rest[0] {
            OP_PUT => RecordOp::Put,
            OP_DELETE => RecordOp::Delete,
            other => return bad(format!("unknown op code {other}")),
        };
        let region = u32_at(rest, 1);
        let key_len = u32_at(rest, 5) as usize;
        let value_len = u32_at(rest, 9) as usize;
        if op == RecordOp::Delete && value_len != 0 {
            return bad(format!("a delete with a {value_len}-byte value"));
        }
        let body = &rest[RECORD_HEADER_BYTES..];
        if key_len > body.len() || value_len > body.len() - key_len {
            return bad(format!(
                "key of {key_len} and value of {value_len} bytes, {} left in the payload",
                body.len()
            ));
        }
        records.push(Record {
            lsn: header.first_lsn + u64::from(index),
            op,
            region,
            key: body[..key_len].to_vec(),
            value: body[key_len..key_len + value_len].to_vec(),
        });
        at += record_len(key_len, value_len);
    }
    if at != payload.len() {
        return Err(FormatError::BadRecord {
            index: header.count.saturating_sub(1),
            why: format!(
                "the records end at byte {at} of a {}-byte payload",
                payload.len()
            ),
        });
    }
    Ok(records)
}
