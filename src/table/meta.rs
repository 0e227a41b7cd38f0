//! The meta block: counts, key and LSN ranges.

use super::codec::{check_crc, seal_crc, Decoder, Place};
use super::{Result, TableMeta};

/// Bytes of the meta block besides its two keys.
pub(crate) const META_FIXED: u64 = 8 + 8 + 4 + 8 + 8 + 4 + 4 + 4;

/// Encodes the meta block (`file_bytes` is in the footer, not here).
pub(crate) fn encode_meta(m: &TableMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_FIXED as usize + m.min_key.len() + m.max_key.len());
    out.extend_from_slice(&m.entries.to_le_bytes());
    out.extend_from_slice(&m.tombstones.to_le_bytes());
    out.extend_from_slice(&m.data_blocks.to_le_bytes());
    out.extend_from_slice(&m.min_lsn.to_le_bytes());
    out.extend_from_slice(&m.max_lsn.to_le_bytes());
    for key in [&m.min_key, &m.max_key] {
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
    }
    seal_crc(&mut out, 0);
    out
}

/// Decodes and checks the meta block at file offset `offset` of a file of
/// `file_bytes`.
pub(crate) fn decode_meta(
    block: &[u8],
    offset: u64,
    file_bytes: u64,
    place: Place,
) -> Result<TableMeta> {
    let body = check_crc(block, "meta block", offset, place)?;
    let mut d = Decoder::new(body, offset, &"meta block");
    let entries = d.u64("entries")?;
    let tombstones = d.u64("tombstones")?;
    let data_blocks = d.u32("data blocks")?;
    let min_lsn = d.u64("min lsn")?;
    let max_lsn = d.u64("max lsn")?;
    let len = d.u32("min key length")?;
    let min_key = d.bytes(len.into(), "min key")?.to_vec();
    let len = d.u32("max key length")?;
    let max_key = d.bytes(len.into(), "max key")?.to_vec();
    if d.remaining() != 0 {
        return Err(d.corrupt(format!("{} bytes after the max key", d.remaining())));
    }
    let consistent = tombstones <= entries
        && (entries == 0) == (data_blocks == 0)
        && u64::from(data_blocks) <= entries
        && min_lsn <= max_lsn
        && if entries > 1 {
            min_key < max_key
        } else {
            min_key == max_key
        };
    if !consistent {
        return Err(d.corrupt_at(
            0,
            format!(
                "{entries} entries, {tombstones} tombstones, {data_blocks} blocks, \
                 lsns {min_lsn}..={max_lsn}, keys out of order or inconsistent"
            ),
        ));
    }
    Ok(TableMeta {
        entries,
        tombstones,
        data_blocks,
        file_bytes,
        min_key,
        max_key,
        min_lsn,
        max_lsn,
    })
}
