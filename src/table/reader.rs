//! Opening a block file and point lookups.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::block::BlockScan;
use super::bloom::{self, Bloom};
use super::cache::BlockCache;
use super::cache::CachedBlock;
use super::codec::Place;
use super::footer::{Footer, FOOTER_BYTES};
use super::index::{decode_index, BlockHandle};
use super::iter::TableIter;
use super::meta::decode_meta;
use super::seek::Block;
use super::{Entry, OwnedTableIter, Result, TableError, TableMeta};

/// Where a table's bytes are read from: a device (the engine maps file
/// offsets to device blocks) or memory.
pub trait BlockSource {
    /// Reads exactly `len` bytes at `offset` from the start of the file.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;

    /// The block cache this file's data blocks are kept in, and the file's
    /// id there; `None` (the default): every block is read.
    fn cache(&self) -> Option<(&BlockCache, u64)> {
        None
    }

    /// Where the file lies, which its blocks' checksums cover (default:
    /// byte 0 of data device 0, as [`TableBuilder`](super::TableBuilder)
    /// assumes unless told).
    fn place(&self) -> Place {
        Place::at(0, 0)
    }

    /// Reads the one checksummed block of `len` bytes at `offset` (a data
    /// block). The default is [`BlockSource::read_at`]; a source that keeps
    /// several copies of the file checks the block and, when its first copy
    /// is bad, returns another copy's, resealed for [`BlockSource::place`].
    fn read_block(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.read_at(offset, len)
    }
}

impl BlockSource for [u8] {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let end = offset.checked_add(len as u64);
        match end {
            Some(end) if end <= self.len() as u64 => {
                Ok(self[offset as usize..end as usize].to_vec())
            }
            _ => Err(TableError::Read(format!(
                "{len} bytes at {offset} are past the end of {} bytes",
                self.len()
            ))),
        }
    }
}

impl BlockSource for Vec<u8> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.as_slice().read_at(offset, len)
    }
}

impl<T: BlockSource + ?Sized> BlockSource for &T {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        (**self).read_at(offset, len)
    }

    fn cache(&self) -> Option<(&BlockCache, u64)> {
        (**self).cache()
    }

    fn place(&self) -> Place {
        (**self).place()
    }

    fn read_block(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        (**self).read_block(offset, len)
    }
}

impl<T: BlockSource + ?Sized> BlockSource for Arc<T> {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        (**self).read_at(offset, len)
    }

    fn cache(&self) -> Option<(&BlockCache, u64)> {
        (**self).cache()
    }

    fn place(&self) -> Place {
        (**self).place()
    }

    fn read_block(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        (**self).read_block(offset, len)
    }
}

/// An open block file: its meta, index and bloom filter in memory, its data
/// blocks read on demand.
#[derive(Debug)]
pub struct Table {
    meta: TableMeta,
    pub(crate) index: Vec<BlockHandle>,
    bloom: Bloom,
    block_reads: AtomicU64,
    /// The footer: where the index, bloom and meta blocks lie, and the
    /// format, which says what the blocks' checksums cover.
    footer: Footer,
}

impl Table {
    /// Reads and checks the footer (the last [`FOOTER_BYTES`] of the
    /// `file_bytes`-long file), then the index, bloom and meta blocks in one
    /// read. Every checksum and every offset is checked.
    pub fn open(src: &dyn BlockSource, file_bytes: u64) -> Result<Table> {
        if file_bytes < FOOTER_BYTES as u64 {
            return Err(TableError::Corrupt {
                what: format!("a file of {file_bytes} bytes has no room for its footer"),
                offset: 0,
            });
        }
        let tail = src.read_at(file_bytes - FOOTER_BYTES as u64, FOOTER_BYTES)?;
        let f = Footer::decode(&tail, file_bytes)?;
        let place = bind(f.version, src.place());
        let (index_len, bloom_len) = (f.index_len as usize, f.bloom_len as usize);
        let total = index_len + bloom_len + f.meta_len as usize;
        let blocks = src.read_at(f.index_off, total)?;
        if blocks.len() != total {
            return Err(TableError::Read(format!(
                "asked for {total} bytes at {}, got {}",
                f.index_off,
                blocks.len()
            )));
        }
        let (index, rest) = blocks.split_at(index_len);
        let (bloom, meta) = rest.split_at(bloom_len);
        let index = decode_index(index, f.index_off, f.index_off, place)?;
        let bloom = Bloom::decode(bloom, f.bloom_off, place)?;
        let meta = decode_meta(meta, f.meta_off, file_bytes, place)?;
        let last_key = index.last().map(|h| h.last_key.as_slice());
        if meta.data_blocks as usize != index.len()
            || (meta.entries > 0 && last_key != Some(meta.max_key.as_slice()))
        {
            return Err(TableError::Corrupt {
                what: format!(
                    "meta block: {} data blocks and max key disagree with the index of {}",
                    meta.data_blocks,
                    index.len()
                ),
                offset: f.meta_off,
            });
        }
        Ok(Table {
            meta,
            index,
            bloom,
            block_reads: AtomicU64::new(0),
            footer: f,
        })
    }

    /// What the file holds.
    pub fn meta(&self) -> &TableMeta {
        &self.meta
    }

    /// False if `key` is certainly not in the file (the bloom filter, and
    /// the key range).
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hashed(key, bloom::hash(key))
    }

    /// [`Table::may_contain`] of a key whose [`key_hash`] is `h`: a read
    /// that asks several files hashes the key once.
    ///
    /// [`key_hash`]: super::key_hash
    pub fn may_contain_hashed(&self, key: &[u8], h: u64) -> bool {
        self.meta.entries > 0
            && key >= self.meta.min_key.as_slice()
            && key <= self.meta.max_key.as_slice()
            && self.bloom.may_contain(h)
    }

    /// The entry (put or tombstone) for `key`, if the file has one: the
    /// bloom filter, then the index, then at most one data block read.
    pub fn get(&self, src: &dyn BlockSource, key: &[u8]) -> Result<Option<Entry>> {
        if !self.may_contain(key) {
            return Ok(None);
        }
        self.get_filtered(src, key)
    }

    /// [`Table::get`] of a key that [`Table::may_contain`] already let
    /// through: the index, then at most one data block read.
    pub fn get_filtered(&self, src: &dyn BlockSource, key: &[u8]) -> Result<Option<Entry>> {
        let i = self.index.partition_point(|h| h.last_key.as_slice() < key);
        if i == self.index.len() {
            return Ok(None);
        }
        let mut scan = self.read_block(src, i, true)?;
        scan.seek(key);
        while let Some(raw) = scan.next_raw() {
            let raw = raw?;
            match scan.key().cmp(key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    if key > self.index[i].last_key.as_slice() {
                        return Err(scan.corrupt("key past the block's last key"));
                    }
                    return Ok(Some(scan.entry(raw)));
                }
                std::cmp::Ordering::Greater => break,
            }
        }
        Ok(None)
    }

    /// Data blocks read from the source by [`Table::get`] and the
    /// iterators so far (not those found in the block cache).
    pub fn block_reads(&self) -> u64 {
        self.block_reads.load(Ordering::Relaxed)
    }

    /// Entries with keys from `from` (included) to `to` (excluded, if
    /// given), in key order. Reads one data block at a time, when needed.
    /// After an error the iterator ends.
    pub fn iter<'a>(
        &'a self,
        src: &'a dyn BlockSource,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> TableIter<'a> {
        TableIter::new(self, src, from.to_vec(), to.map(<[u8]>::to_vec))
    }

    /// Like [`Table::iter`], owning the table and the source (so the
    /// iterator can be `'static`).
    pub fn iter_owned<S: BlockSource>(
        self: &Arc<Self>,
        src: S,
        from: Vec<u8>,
        to: Option<Vec<u8>>,
    ) -> OwnedTableIter<S> {
        OwnedTableIter::new(Arc::clone(self), src, from, to)
    }

    /// Index of the first data block that may hold keys >= `key`.
    pub(crate) fn first_block(&self, key: &[u8]) -> usize {
        self.index.partition_point(|h| h.last_key.as_slice() < key)
    }

    /// Data block `i`: from the source's block cache, or read and its CRC
    /// checked (then cached if `fill`: point lookups and a scan's first
    /// four blocks fill the cache, the rest of a scan only uses it; see
    /// [`BlockCache`]).
    pub(crate) fn read_block(
        &self,
        src: &dyn BlockSource,
        i: usize,
        fill: bool,
    ) -> Result<BlockScan> {
        let h = &self.index[i];
        let cache = src.cache();
        if let Some(body) = cache.and_then(|(c, file)| c.get(file, i)) {
            return Ok(BlockScan::cached(body, i, h.offset));
        }
        let len = usize::try_from(h.len)
            .map_err(|_| TableError::Read(format!("data block {i} of {} bytes", h.len)))?;
        self.block_reads.fetch_add(1, Ordering::Relaxed);
        let bytes = src.read_block(h.offset, len)?;
        if bytes.len() != len {
            return Err(TableError::Read(format!(
                "asked for {len} bytes at {}, got {}",
                h.offset,
                bytes.len()
            )));
        }
        if let (true, Some((c, file))) = (fill, cache) {
            let body = BlockScan::check(bytes, i, h.offset, self.place(src))?;
            let block: CachedBlock = Block::indexed(body, i, h.offset).into();
            c.insert(file, i, block.clone());
            return Ok(BlockScan::cached(block, i, h.offset));
        }
        BlockScan::new(bytes, i, h.offset, self.place(src))
    }

    /// What the checksums of this file's blocks read through `src` cover:
    /// any copy of a file opens the same table, each read binds its own.
    pub(crate) fn place(&self, src: &dyn BlockSource) -> Place {
        bind(self.footer.version, src.place())
    }

    /// What the checksums of this file's blocks at `place` cover.
    pub(crate) fn bound(&self, place: Place) -> Place {
        bind(self.footer.version, place)
    }

    /// The bytes of the plain piece at `offset` (see [`Table::pieces`]):
    /// the footer, or the zeros before it.
    pub(crate) fn plain_piece(&self, offset: u64, len: u64) -> Vec<u8> {
        if offset + len == self.footer.file_bytes && len == FOOTER_BYTES as u64 {
            self.footer.encode().to_vec()
        } else {
            vec![0; len as usize]
        }
    }

    /// The file's checksummed pieces in order, as `(offset, length,
    /// sealed)`: its data blocks, index, bloom and meta blocks (whose
    /// checksums are bound to the file's place: `sealed`), then the zeros
    /// and the footer (plain). They cover the whole file.
    pub fn pieces(&self) -> Vec<(u64, u64, bool)> {
        let f = &self.footer;
        let mut out: Vec<(u64, u64, bool)> =
            self.index.iter().map(|h| (h.offset, h.len, true)).collect();
        out.push((f.index_off, f.index_len.into(), true));
        out.push((f.bloom_off, f.bloom_len.into(), true));
        out.push((f.meta_off, f.meta_len.into(), true));
        let meta_end = f.meta_off + u64::from(f.meta_len);
        let footer_at = f.file_bytes - FOOTER_BYTES as u64;
        if footer_at > meta_end {
            out.push((meta_end, footer_at - meta_end, false));
        }
        out.push((footer_at, FOOTER_BYTES as u64, false));
        out
    }
}

/// What the checksums of a block file of format `version` at `place` are
/// bound to: its place and id (format 3), its place alone (format 2), or
/// nothing (format 1).
fn bind(version: u32, place: Place) -> Place {
    match version {
        3.. => place,
        2 => place.unfiled(),
        _ => Place::UNBOUND,
    }
}
