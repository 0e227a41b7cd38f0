//! Block files: the immutable sorted tables memstores are flushed to.
//!
//! This module is the format only: [`TableBuilder`] encodes entries into a
//! file's bytes (streamed out in device-block-aligned chunks), [`Table`]
//! opens those bytes through a [`BlockSource`] and answers point lookups and
//! range scans. Device I/O is the caller's business. Every integer is
//! little-endian, every checksum is CRC32C, and decoding never panics,
//! whatever the bytes.
//!
//! # File
//!
//! | offset | bytes | part |
//! |---|---|---|
//! | 0 | .. | data blocks, back to back, in key order |
//! | `index_off` | `index_len` | index block |
//! | `bloom_off` | `bloom_len` | bloom filter block |
//! | `meta_off` | `meta_len` | meta block |
//! | .. | < `device_block` | zeros |
//! | `file_bytes - 64` | 64 | footer |
//!
//! The parts follow each other without gaps, and the zeros make the file a
//! whole number of `device_block`s, so that the footer is the last 64 bytes
//! of the last device block. Each block (data, index, bloom, meta) ends with
//! the CRC32C (u32) of the bytes before it in the block.
//!
//! # Data block
//!
//! Entries back to back, then the CRC. A block holds about
//! [`TableOptions::block_bytes`]; an entry larger than that is a block of its
//! own. The key of each entry is stored as the bytes it does not share with
//! the previous key in the block (the first entry of a block shares none):
//!
//! | bytes | field |
//! |---|---|
//! | varint | shared: bytes of the previous key that start this key |
//! | varint | unshared: key bytes that follow |
//! | varint | value length (0 for a tombstone) |
//! | varint | LSN |
//! | 1 | kind: 1 put, 2 delete (tombstone) |
//! | unshared | key suffix |
//! | value length | value |
//!
//! Varints are LEB128 (7 bits a byte, least significant first, at most 10
//! bytes). Keys are strictly increasing within a block and across blocks.
//!
//! # Index block
//!
//! | bytes | field |
//! |---|---|
//! | 4 | data block count |
//! | per block: varint | length of its last key |
//! | .. | its last key, in full |
//! | 8 | its offset from the start of the file |
//! | 8 | its length, CRC included |
//! | 4 | CRC32C |
//!
//! # Bloom filter block
//!
//! | bytes | field |
//! |---|---|
//! | 4 | k: probes per key (0: no filter, every key may be present) |
//! | n | the filter's bits, bit `i` in byte `i / 8`, bit `i % 8` |
//! | 4 | CRC32C |
//!
//! A key's probes are bits `(h + i * (rotl(h, 32) | 1)) mod 8n` for
//! `i < k`, where `h` is the key's 64-bit XXH3.
//!
//! # Meta block
//!
//! | bytes | field |
//! |---|---|
//! | 8 | entries |
//! | 8 | tombstones |
//! | 4 | data blocks |
//! | 8 | smallest LSN (0 if no entries) |
//! | 8 | largest LSN (0 if no entries) |
//! | 4 + n | smallest key: length, bytes (empty if no entries) |
//! | 4 + n | largest key: length, bytes (empty if no entries) |
//! | 4 | CRC32C |
//!
//! # Footer
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `STRIA\0BF` |
//! | 8 | 4 | format version |
//! | 12 | 4 | device block size the file was padded to |
//! | 16 | 8 | `index_off` |
//! | 24 | 8 | `bloom_off` |
//! | 32 | 8 | `meta_off` |
//! | 40 | 4 | `index_len` |
//! | 44 | 4 | `bloom_len` |
//! | 48 | 4 | `meta_len` |
//! | 52 | 8 | `file_bytes`, the footer included |
//! | 60 | 4 | CRC32C of bytes 0..60 |

mod block;
mod bloom;
mod builder;
mod cache;
mod codec;
mod copy;
mod error;
mod footer;
mod index;
mod iter;
mod meta;
mod reader;
mod seek;
#[cfg(test)]
mod tests;
mod verify;

pub use bloom::hash as key_hash;
pub use builder::{CopyCrcs, TableBuilder};
pub use cache::{BlockCache, CacheStats, CachedBlock};
pub(crate) use codec::check_crc;
pub use codec::Place;
pub use error::{KeyDisplay, TableError};
pub use footer::{FOOTER_BYTES, FORMAT_VERSION, MAGIC};
pub use iter::{OwnedTableIter, TableIter};
pub use reader::{BlockSource, Table};
pub use verify::{BadBlock, Verified};

/// What a block file call returns.
pub type Result<T> = std::result::Result<T, TableError>;

/// Whether an entry sets its key or deletes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// The key has the entry's value.
    Put,
    /// A tombstone: the key is deleted (the value is empty).
    Delete,
}

impl EntryKind {
    pub(crate) fn code(self) -> u8 {
        match self {
            EntryKind::Put => 1,
            EntryKind::Delete => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<EntryKind> {
        match code {
            1 => Some(EntryKind::Put),
            2 => Some(EntryKind::Delete),
            _ => None,
        }
    }
}

/// One version of one key, as stored in a block file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub lsn: u64,
    pub kind: EntryKind,
    /// Empty for a tombstone.
    pub value: Vec<u8>,
}

/// How a block file is built.
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// Target size of a data block (an entry larger than this is a block of
    /// its own). Default 32 KiB.
    pub block_bytes: usize,
    /// Bloom filter bits per key; 0 for no filter. Default 10 (about 1%
    /// false positives).
    pub bloom_bits_per_key: u32,
    /// The file is padded to a whole number of these. Default 4096.
    pub device_block: u32,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            block_bytes: 32 * 1024,
            bloom_bits_per_key: 10,
            device_block: 4096,
        }
    }
}

/// What a block file holds, from its meta block and footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    /// Entries, tombstones included.
    pub entries: u64,
    /// Entries that are tombstones.
    pub tombstones: u64,
    pub data_blocks: u32,
    /// Length of the file, padding and footer included.
    pub file_bytes: u64,
    /// Smallest key (empty if there are no entries).
    pub min_key: Vec<u8>,
    /// Largest key (empty if there are no entries).
    pub max_key: Vec<u8>,
    /// Smallest LSN (0 if there are no entries).
    pub min_lsn: u64,
    /// Largest LSN (0 if there are no entries).
    pub max_lsn: u64,
}
