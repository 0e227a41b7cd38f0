//! Data blocks: encoding entries (prefix-compressed keys) and scanning a
//! block read back from the file.

use std::ops::Range;

use super::codec::{check_crc, put_varint, varint_len, Decoder, Place};
use super::seek::Block;
use super::{CachedBlock, Entry, EntryKind, Result};

/// Bytes `key` shares at its start with `prev`.
pub(crate) fn shared_prefix(prev: &[u8], key: &[u8]) -> usize {
    prev.iter().zip(key).take_while(|(a, b)| a == b).count()
}

/// Whether a key is above the previous one, given the two past the bytes
/// they share: `prev` of the previous key, `suffix` of this one. A writer
/// shares every byte it can ([`shared_prefix`]), so the first bytes differ
/// and decide without a call to `memcmp` (2% of a range's CPU when it
/// compared whole suffixes); a block that shares fewer is compared in full.
fn increases(prev: &[u8], suffix: &[u8]) -> bool {
    match (prev.first(), suffix.first()) {
        (Some(a), Some(b)) if a != b => b > a,
        _ => suffix > prev,
    }
}

/// Bytes the entry takes after a key sharing `shared` bytes with it.
pub(crate) fn entry_len(shared: usize, key: &[u8], lsn: u64, value: &[u8]) -> usize {
    let unshared = key.len() - shared;
    varint_len(shared as u64)
        + varint_len(unshared as u64)
        + varint_len(value.len() as u64)
        + varint_len(lsn)
        + 1
        + unshared
        + value.len()
}

/// Appends an entry whose key shares `shared` bytes with the previous key
/// of its block.
pub(crate) fn put_entry(
    out: &mut Vec<u8>,
    shared: usize,
    key: &[u8],
    lsn: u64,
    kind: EntryKind,
    value: &[u8],
) {
    put_varint(out, shared as u64);
    put_varint(out, (key.len() - shared) as u64);
    put_varint(out, value.len() as u64);
    put_varint(out, lsn);
    out.push(kind.code());
    out.extend_from_slice(&key[shared..]);
    out.extend_from_slice(value);
}

/// One entry of a block as scanned: its key is [`BlockScan::key`], its value
/// the bytes `value` of the block (copied out by [`BlockScan::entry`] only
/// for the entries wanted).
pub(crate) struct RawEntry {
    pub lsn: u64,
    pub kind: EntryKind,
    pub value: Range<usize>,
}

/// The entries of one data block, read whole and checked, decoded one at a
/// time.
pub(crate) struct BlockScan {
    /// The block without its CRC, shared with the block cache.
    data: CachedBlock,
    pos: usize,
    /// The key of the entry last returned.
    key: Vec<u8>,
    count: u64,
    what: BlockName,
    offset: u64,
}

/// "data block N", for errors: made only when one is.
#[derive(Clone, Copy)]
pub(crate) struct BlockName(pub usize);

impl std::fmt::Display for BlockName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "data block {}", self.0)
    }
}

impl BlockScan {
    /// Checks the CRC of `block`, data block `number` at file offset
    /// `offset`, and starts a scan at its first entry.
    pub(crate) fn new(
        block: Vec<u8>,
        number: usize,
        offset: u64,
        place: Place,
    ) -> Result<BlockScan> {
        let body = BlockScan::check(block, number, offset, place)?;
        Ok(BlockScan::checked(
            Block::plain(body).into(),
            BlockName(number),
            offset,
        ))
    }

    /// The body of `block` once its CRC is checked (and cut off).
    pub(crate) fn check(
        mut block: Vec<u8>,
        number: usize,
        offset: u64,
        place: Place,
    ) -> Result<Vec<u8>> {
        let what = BlockName(number).to_string();
        let body = check_crc(&block, &what, offset, place)?.len();
        block.truncate(body);
        Ok(block)
    }

    /// A scan of data block `number` whose CRC was checked when it was
    /// cached: `body` is the block without it.
    pub(crate) fn cached(body: CachedBlock, number: usize, offset: u64) -> BlockScan {
        BlockScan::checked(body, BlockName(number), offset)
    }

    /// Moves the scan on to the last seek point of the block before `key`
    /// (see [`Block::seek`]): the entries skipped all have smaller keys.
    pub(crate) fn seek(&mut self, key: &[u8]) {
        if let Some((after, prev)) = self.data.seek(key) {
            if after > self.pos {
                self.pos = after;
                self.key.clear();
                self.key.extend_from_slice(prev);
                self.count = self.count.max(1);
            }
        }
    }

    pub(crate) fn checked(data: CachedBlock, what: BlockName, offset: u64) -> BlockScan {
        BlockScan {
            data,
            pos: 0,
            key: Vec::new(),
            count: 0,
            what,
            offset,
        }
    }

    /// The key of the entry last returned by [`BlockScan::next_raw`].
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// The entry last returned, copied out.
    pub(crate) fn entry(&self, raw: RawEntry) -> Entry {
        Entry {
            key: self.key.clone(),
            lsn: raw.lsn,
            kind: raw.kind,
            value: self.data[raw.value].to_vec(),
        }
    }

    /// A corruption of this block at byte `pos` of it.
    pub(crate) fn corrupt(&self, why: impl std::fmt::Display) -> super::TableError {
        Decoder::new(&self.data, self.offset, &self.what).corrupt_at(self.pos, why)
    }

    /// Where the next entry starts.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// True when every entry has been returned.
    pub(crate) fn is_done(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Decodes the next entry, or None at the end of the block. Refuses
    /// entries that run past the block, unknown kinds, tombstones with
    /// values, and keys that do not increase.
    pub(crate) fn next_raw(&mut self) -> Option<Result<RawEntry>> {
        if self.is_done() {
            return None;
        }
        let mut d = Decoder::new(&self.data, self.offset, &self.what);
        d.bytes(self.pos as u64, "skip")
            .expect("pos is within the block");
        let start = self.pos;
        let result = (|| {
            let shared = d.varint("shared key length")?;
            let unshared = d.varint("unshared key length")?;
            let value_len = d.varint("value length")?;
            let lsn = d.varint("lsn")?;
            let code = d.u8("kind")?;
            let kind = EntryKind::from_code(code)
                .ok_or_else(|| d.corrupt_at(start, format!("entry kind {code} unknown")))?;
            if shared > self.key.len() as u64 {
                return Err(d.corrupt_at(
                    start,
                    format!(
                        "entry shares {shared} key bytes with a {}-byte previous key",
                        self.key.len()
                    ),
                ));
            }
            let suffix = d.bytes(unshared, "key")?;
            let shared = shared as usize;
            if self.count > 0 && !increases(&self.key[shared..], suffix) {
                return Err(d.corrupt_at(start, "key not greater than the previous one"));
            }
            if kind == EntryKind::Delete && value_len != 0 {
                return Err(d.corrupt_at(start, format!("tombstone with a {value_len}-byte value")));
            }
            let value_at = d.pos();
            d.bytes(value_len, "value")?;
            self.key.truncate(shared);
            self.key.extend_from_slice(suffix);
            Ok(RawEntry {
                lsn,
                kind,
                value: value_at..d.pos(),
            })
        })();
        match result {
            Ok(raw) => {
                self.pos = d.pos();
                self.count += 1;
                Some(Ok(raw))
            }
            Err(e) => {
                // A corrupt entry ends the scan.
                self.pos = self.data.len();
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of `(shared, key)` entries, no CRC.
    fn scan(entries: &[(usize, &[u8])]) -> Vec<std::result::Result<Vec<u8>, String>> {
        let mut body = Vec::new();
        for &(shared, key) in entries {
            put_entry(&mut body, shared, key, 1, EntryKind::Put, b"v");
        }
        let mut b = BlockScan::checked(Block::plain(body).into(), BlockName(0), 0);
        let mut out = Vec::new();
        while let Some(r) = b.next_raw() {
            out.push(r.map(|_| b.key().to_vec()).map_err(|e| e.to_string()));
        }
        out
    }

    fn refused(r: &[std::result::Result<Vec<u8>, String>]) -> bool {
        r.last()
            .is_some_and(|e| e.as_ref().is_err_and(|e| e.contains("not greater")))
    }

    /// Keys must go up, whether they share every byte they can or fewer.
    #[test]
    fn keys_that_do_not_increase_are_refused() {
        let ok = scan(&[(0, b"ab"), (1, b"ac"), (2, b"acd"), (0, b"b")]);
        assert!(ok.iter().all(|r| r.is_ok()), "{ok:?}");
        assert_eq!(ok.len(), 4);
        // Sharing fewer bytes than it could: compared in full.
        assert!(scan(&[(0, b"ab"), (0, b"ac")]).iter().all(|r| r.is_ok()));
        assert!(refused(&scan(&[(0, b"ac"), (1, b"ab")])));
        assert!(refused(&scan(&[(0, b"ab"), (2, b"ab")])));
        assert!(refused(&scan(&[(0, b"ab"), (0, b"ab")])));
        assert!(refused(&scan(&[(0, b"ac"), (0, b"ab")])));
        assert!(refused(&scan(&[(0, b"abc"), (2, b"ab")])));
        assert!(refused(&scan(&[(0, b"b"), (0, b"a")])));
    }
}
