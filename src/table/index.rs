//! The index block: where each data block is and the last key in it.

use super::codec::{check_crc, put_varint, seal_crc, Decoder, Place};
use super::Result;

/// Fixed bytes of an index entry besides its key and the key's length.
pub(crate) const HANDLE_FIXED: u64 = 16;

/// Bytes of the index block besides its entries: count and CRC.
pub(crate) const INDEX_FIXED: u64 = 8;

/// Where one data block is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlockHandle {
    /// The last (largest) key in the block.
    pub last_key: Vec<u8>,
    /// From the start of the file.
    pub offset: u64,
    /// The block's length, its CRC included.
    pub len: u64,
}

/// The index block being built, one data block at a time.
pub(crate) struct IndexWriter {
    buf: Vec<u8>,
    count: u64,
}

impl IndexWriter {
    pub(crate) fn new() -> IndexWriter {
        IndexWriter {
            buf: vec![0; 4],
            count: 0,
        }
    }

    /// Records a data block.
    pub(crate) fn add(&mut self, last_key: &[u8], offset: u64, len: u64) {
        put_varint(&mut self.buf, last_key.len() as u64);
        self.buf.extend_from_slice(last_key);
        self.buf.extend_from_slice(&offset.to_le_bytes());
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.count += 1;
    }

    /// Data blocks recorded.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The whole index block. The caller has checked that the count fits
    /// in a u32.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf[..4].copy_from_slice(&(self.count as u32).to_le_bytes());
        seal_crc(&mut self.buf, 0);
        self.buf
    }
}

/// Decodes and checks the index block at file offset `offset`: data blocks
/// back to back from offset 0 to `data_end`, each long enough for its CRC,
/// last keys strictly increasing.
pub(crate) fn decode_index(
    block: &[u8],
    offset: u64,
    data_end: u64,
    place: Place,
) -> Result<Vec<BlockHandle>> {
    let body = check_crc(block, "index block", offset, place)?;
    let mut d = Decoder::new(body, offset, &"index block");
    let count = d.u32("block count")?;
    // Each entry takes at least its fixed bytes, so a lying count cannot
    // make this allocation larger than the block warrants.
    let cap = (count as usize).min(d.remaining() / (HANDLE_FIXED as usize + 1));
    let mut handles: Vec<BlockHandle> = Vec::with_capacity(cap);
    let mut next_offset = 0u64;
    for i in 0..count {
        let at = d.pos();
        let key_len = d.varint("key length")?;
        let last_key = d.bytes(key_len, "key")?.to_vec();
        let block_offset = d.u64("block offset")?;
        let len = d.u64("block length")?;
        if block_offset != next_offset {
            return Err(d.corrupt_at(
                at,
                format!("data block {i} at {block_offset}, expected at {next_offset}"),
            ));
        }
        if len < 5 || len > data_end - block_offset {
            return Err(d.corrupt_at(
                at,
                format!("data block {i} of {len} bytes at {block_offset}, data ends at {data_end}"),
            ));
        }
        if handles.last().is_some_and(|h| h.last_key >= last_key) {
            return Err(d.corrupt_at(at, format!("data block {i}: last key out of order")));
        }
        next_offset = block_offset + len;
        handles.push(BlockHandle {
            last_key,
            offset: block_offset,
            len,
        });
    }
    if d.remaining() != 0 {
        return Err(d.corrupt(format!("{} bytes after the last entry", d.remaining())));
    }
    if next_offset != data_end {
        return Err(d.corrupt_at(
            0,
            format!("data blocks end at {next_offset}, the index starts at {data_end}"),
        ));
    }
    Ok(handles)
}
