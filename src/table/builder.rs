//! Building a block file: entries in, file bytes out in device-block-sized
//! chunks while the data blocks are built, the rest at the end.
//!
//! Data blocks are encoded straight into one output buffer. The bytes of
//! sealed blocks can be taken from its front with
//! [`TableBuilder::fill_ready`]; the buffer is compacted only once at least
//! half of it has been taken, so that each byte is moved at most once more.

use super::block::{entry_len, put_entry, shared_prefix};
use super::bloom::{self, BLOOM_FIXED};
use super::codec::{seal_crc, varint_len, Place, MAX_VARINT};
use super::error::KeyDisplay;
use super::footer::{Footer, FOOTER_BYTES, FORMAT_VERSION};
use super::index::{IndexWriter, HANDLE_FIXED, INDEX_FIXED};
use super::meta::{encode_meta, META_FIXED};
use super::{EntryKind, Result, TableError, TableMeta, TableOptions};

/// Writes a block file from entries added in strictly increasing key order.
pub struct TableBuilder {
    opts: TableOptions,
    /// Bytes produced and not yet taken: `out[start..]`. The sealed data
    /// blocks are `out[start..block_start]`, the open one `out[block_start..]`.
    out: Vec<u8>,
    /// File offset of `out[0]`.
    base: u64,
    start: usize,
    block_start: usize,
    block_entries: u64,
    last_key: Vec<u8>,
    index: IndexWriter,
    hashes: Vec<u64>,
    meta: TableMeta,
    /// Where the file will lie, which every block's checksum covers.
    place: Place,
    /// The checksums of the file's other copies, which differ from this
    /// one's in those alone.
    copies: CopyCrcs,
}

/// The checksums of a block file's other copies: each copy lies at its own
/// place, so each block's checksum differs from copy to copy, and nothing
/// else does. A copy's bytes are the first copy's with these patched in.
#[derive(Debug, Default)]
pub struct CopyCrcs {
    places: Vec<Place>,
    /// File offset of a block's checksum, and its value in each other
    /// copy; in file order.
    crcs: std::collections::VecDeque<(u64, Vec<[u8; 4]>)>,
}

impl CopyCrcs {
    /// How many other copies there are.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// True when the file has one copy.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Records the checksums, in every other copy, of the block `block`
    /// at file offset `at`, sealed in the first copy.
    fn add(&mut self, block: &[u8], at: u64) {
        if self.places.is_empty() {
            return;
        }
        let body = &block[..block.len() - 4];
        let crcs = self
            .places
            .iter()
            .map(|p| crc32c::crc32c_append(p.seed(at), body).to_le_bytes())
            .collect();
        self.crcs.push_back((at + body.len() as u64, crcs));
    }

    /// Turns `buf`, the first copy's bytes at file offset `at`, into copy
    /// `copy`'s (1 for the second copy).
    pub fn patch(&self, copy: usize, at: u64, buf: &mut [u8]) {
        let end = at + buf.len() as u64;
        let first = self.crcs.partition_point(|&(crc_at, _)| crc_at + 4 <= at);
        for (crc_at, crcs) in self.crcs.range(first..) {
            if *crc_at >= end {
                break;
            }
            for (i, &b) in crcs[copy - 1].iter().enumerate() {
                let pos = crc_at + i as u64;
                if (at..end).contains(&pos) {
                    buf[(pos - at) as usize] = b;
                }
            }
        }
    }

    /// Forgets the checksums that lie wholly before file offset `at`.
    pub fn forget_before(&mut self, at: u64) {
        while self
            .crcs
            .front()
            .is_some_and(|&(crc_at, _)| crc_at + 4 <= at)
        {
            self.crcs.pop_front();
        }
    }
}

impl TableBuilder {
    /// A builder for an empty file.
    ///
    /// # Panics
    /// If `opts.device_block` is 0.
    pub fn new(opts: TableOptions) -> TableBuilder {
        assert!(
            opts.device_block > 0,
            "a block file's device block is 0 bytes"
        );
        TableBuilder {
            opts,
            out: Vec::new(),
            base: 0,
            start: 0,
            block_start: 0,
            block_entries: 0,
            last_key: Vec::new(),
            index: IndexWriter::new(),
            hashes: Vec::new(),
            meta: TableMeta {
                entries: 0,
                tombstones: 0,
                data_blocks: 0,
                file_bytes: 0,
                min_key: Vec::new(),
                max_key: Vec::new(),
                min_lsn: 0,
                max_lsn: 0,
            },
            place: Place::at(0, 0),
            copies: CopyCrcs::default(),
        }
    }

    /// The file will be written at `place` (default: byte 0 of data device
    /// 0); it reads back only from there.
    pub fn at(mut self, place: Place) -> TableBuilder {
        self.place = place;
        self
    }

    /// The file will also be written at each of `places`, checksums
    /// bound to each: [`TableBuilder::copy_crcs`] turns the bytes taken
    /// into each copy's.
    pub fn copies(mut self, places: Vec<Place>) -> TableBuilder {
        self.copies.places = places;
        self
    }

    /// The other copies' checksums of the blocks sealed so far.
    pub fn copy_crcs(&mut self) -> &mut CopyCrcs {
        &mut self.copies
    }

    /// Appends an entry. Keys must be strictly increasing (else
    /// [`TableError::OutOfOrder`]); keys and values must be shorter than
    /// 4 GiB and a tombstone's value empty (else
    /// [`TableError::InvalidEntry`]). On an error nothing has changed.
    pub fn add(&mut self, key: &[u8], lsn: u64, kind: EntryKind, value: &[u8]) -> Result<()> {
        let index = self.meta.entries;
        let invalid = |why: String| Err(TableError::InvalidEntry { index, why });
        if key.len() > u32::MAX as usize {
            return invalid(format!("a key of {} bytes", key.len()));
        }
        if value.len() > u32::MAX as usize {
            return invalid(format!("a value of {} bytes", value.len()));
        }
        if kind == EntryKind::Delete && !value.is_empty() {
            return invalid(format!("a tombstone with a {}-byte value", value.len()));
        }
        if index > 0 && key <= self.last_key.as_slice() {
            return Err(TableError::OutOfOrder {
                index,
                key: KeyDisplay::of(key),
                previous: KeyDisplay::of(&self.last_key),
            });
        }

        let mut shared = 0;
        if self.block_entries > 0 {
            shared = shared_prefix(&self.last_key, key);
            let block_len = self.out.len() - self.block_start;
            if block_len + entry_len(shared, key, lsn, value) + 4 > self.opts.block_bytes {
                self.seal_block();
                shared = 0;
            }
        }
        put_entry(&mut self.out, shared, key, lsn, kind, value);
        self.block_entries += 1;
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.hashes.push(bloom::hash(key));

        let m = &mut self.meta;
        if index == 0 {
            m.min_key = key.to_vec();
            m.min_lsn = lsn;
            m.max_lsn = lsn;
        }
        m.entries += 1;
        m.tombstones += u64::from(kind == EntryKind::Delete);
        m.min_lsn = m.min_lsn.min(lsn);
        m.max_lsn = m.max_lsn.max(lsn);

        if self.out.len() - self.block_start + 4 >= self.opts.block_bytes {
            self.seal_block();
        }
        Ok(())
    }

    /// Bytes produced so far, taken by [`TableBuilder::fill_ready`] or
    /// buffered (the open data block included).
    pub fn len(&self) -> u64 {
        self.base + self.out.len() as u64
    }

    /// True before the first entry.
    pub fn is_empty(&self) -> bool {
        self.meta.entries == 0
    }

    /// If at least `out.len()` bytes of sealed data blocks are buffered,
    /// moves exactly `out.len()` of them from the front into `out` and
    /// returns true; else returns false and changes nothing (also for an
    /// empty `out`). Chunks taken are the file's bytes in order, from offset
    /// 0. Amortized O(`out.len()`).
    pub fn fill_ready(&mut self, out: &mut [u8]) -> bool {
        let n = out.len();
        if n == 0 || self.block_start - self.start < n {
            return false;
        }
        out.copy_from_slice(&self.out[self.start..self.start + n]);
        self.start += n;
        // Compact once what was taken outweighs what is left: the move
        // costs no more than the bytes taken since the last compaction.
        if self.start >= self.out.len() - self.start {
            self.out.drain(..self.start);
            self.base += self.start as u64;
            self.block_start -= self.start;
            self.start = 0;
        }
        true
    }

    /// Seals the open data block and writes the index, bloom and meta
    /// blocks, the padding and the footer. Returns every byte not yet taken
    /// by [`TableBuilder::fill_ready`] (the file is then a whole number of
    /// device blocks) and the file's meta.
    pub fn finish(self) -> Result<(Vec<u8>, TableMeta)> {
        self.finish_copies().map(|(tail, meta, _)| (tail, meta))
    }

    /// [`TableBuilder::finish`], with the checksums of the other copies'
    /// (see [`TableBuilder::copies`]) for the bytes returned.
    pub fn finish_copies(mut self) -> Result<(Vec<u8>, TableMeta, CopyCrcs)> {
        if self.block_entries > 0 {
            self.seal_block();
        }
        let data_blocks = u32::try_from(self.index.count())
            .map_err(|_| TableError::TooLarge(format!("{} data blocks", self.index.count())))?;
        self.meta.data_blocks = data_blocks;
        self.meta.max_key = std::mem::take(&mut self.last_key);

        let index_off = self.len();
        let mut index = std::mem::replace(&mut self.index, IndexWriter::new()).finish();
        let mut bloom = bloom::build(&self.hashes, self.opts.bloom_bits_per_key);
        let mut meta = encode_meta(&self.meta);
        let bloom_at = index_off + index.len() as u64;
        let meta_at = bloom_at + bloom.len() as u64;
        for (block, at) in [
            (&mut index, index_off),
            (&mut bloom, bloom_at),
            (&mut meta, meta_at),
        ] {
            self.place.reseal(block, at);
            self.copies.add(block, at);
        }
        let len32 = |what: &str, b: &[u8]| {
            u32::try_from(b.len())
                .map_err(|_| TableError::TooLarge(format!("a {what} block of {} bytes", b.len())))
        };
        let bloom_off = index_off + index.len() as u64;
        let meta_off = bloom_off + bloom.len() as u64;
        let meta_end = meta_off + meta.len() as u64;
        let bs = u64::from(self.opts.device_block);
        let file_bytes = (meta_end + FOOTER_BYTES as u64).div_ceil(bs) * bs;
        let footer = Footer {
            version: FORMAT_VERSION,
            device_block: self.opts.device_block,
            index_off,
            bloom_off,
            meta_off,
            index_len: len32("index", &index)?,
            bloom_len: len32("bloom", &bloom)?,
            meta_len: len32("meta", &meta)?,
            file_bytes,
        };
        self.meta.file_bytes = file_bytes;

        self.out.drain(..self.start);
        self.base += self.start as u64;
        self.out.reserve((file_bytes - self.len()) as usize);
        self.out.extend_from_slice(&index);
        self.out.extend_from_slice(&bloom);
        self.out.extend_from_slice(&meta);
        let footer_at = (file_bytes - self.base) as usize - FOOTER_BYTES;
        self.out.resize(footer_at, 0);
        self.out.extend_from_slice(&footer.encode());
        debug_assert_eq!(self.len(), file_bytes);
        Ok((self.out, self.meta, self.copies))
    }

    /// An upper bound of the length of a file of `entries` entries whose
    /// keys total `key_bytes` and values `value_bytes`, built with `opts`.
    pub fn max_file_bytes(
        opts: &TableOptions,
        entries: u64,
        key_bytes: u64,
        value_bytes: u64,
    ) -> u64 {
        // An entry's varints: the shared and unshared key lengths are at
        // most the longest key, the value length the longest value.
        let key_varint = varint_len(key_bytes.min(u32::MAX.into())) as u64;
        let value_varint = varint_len(value_bytes.min(u32::MAX.into())) as u64;
        let per_entry = 2 * key_varint + value_varint + MAX_VARINT as u64 + 1;
        let entry_bytes = entries
            .saturating_mul(per_entry)
            .saturating_add(key_bytes)
            .saturating_add(value_bytes);
        // Every data block holds at least one entry. A block is sealed when
        // it is full or the next entry does not fit, so any two neighbours
        // together hold more than `block_bytes - 4` entry bytes, and each
        // entry is counted in at most two such pairs.
        let mut blocks = entries;
        if opts.block_bytes > 4 {
            let pairs = entry_bytes.saturating_mul(2) / (opts.block_bytes as u64 - 4);
            blocks = blocks.min(pairs.saturating_add(1));
        }
        let data = entry_bytes.saturating_add(blocks.saturating_mul(4));
        // One last key per block: keys of distinct entries.
        let index = blocks
            .saturating_mul(key_varint + HANDLE_FIXED)
            .saturating_add(key_bytes)
            .saturating_add(INDEX_FIXED);
        let bloom = bloom::filter_bytes(entries, opts.bloom_bits_per_key) + BLOOM_FIXED;
        // The smallest and the largest key: two keys, or one twice.
        let meta_keys = if entries == 1 {
            key_bytes.saturating_mul(2)
        } else {
            key_bytes
        };
        let meta = meta_keys.saturating_add(META_FIXED);
        let bs = u64::from(opts.device_block.max(1));
        let total = [data, index, bloom, meta, FOOTER_BYTES as u64]
            .into_iter()
            .fold(0u64, u64::saturating_add);
        total.div_ceil(bs).saturating_mul(bs)
    }

    /// Ends the open data block with its CRC and indexes it.
    fn seal_block(&mut self) {
        seal_crc(&mut self.out, self.block_start);
        let at = self.base + self.block_start as u64;
        self.place.reseal(&mut self.out[self.block_start..], at);
        self.copies.add(&self.out[self.block_start..], at);
        let offset = self.base + self.block_start as u64;
        let len = (self.out.len() - self.block_start) as u64;
        self.index.add(&self.last_key, offset, len);
        self.block_start = self.out.len();
        self.block_entries = 0;
    }
}
