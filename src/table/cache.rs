//! The block cache: data blocks of block files kept in memory, checked.
//!
//! A point lookup that misses the memstores reads one data block; without a
//! cache every such lookup was a device read, even for the same hot keys
//! (`GET` from block files ran at a twentieth of its rate from memstores).
//! Blocks are kept by (file id, block number): file ids are never reused,
//! so an entry can never stand for other bytes, and the blocks of a file
//! that compaction removed age out like any other.
//!
//! What fills it: point lookups, and the first few blocks of each scan
//! (a short range reads them again). Scans and compactions use the
//! blocks that are cached but do not add the rest of theirs, so that one
//! pass over everything (DBSIZE, SCAN, a compaction) does not push out the
//! blocks lookups need, as RocksDB's `fill_cache = false` and HBase's
//! `setCacheBlocks(false)` do for such reads. Eviction and sharding are quick_cache's (CLOCK-Pro like,
//! weighted by bytes).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

/// What an entry costs beyond its bytes (the key, the shared handle and
/// the cache's own slot).
const ENTRY_OVERHEAD: u64 = 64;

/// The body of one data block (its CRC checked and cut off), and where
/// lookups may start in it.
pub type CachedBlock = Arc<super::seek::Block>;

#[derive(Clone)]
struct ByBytes;

impl Weighter<(u64, u32), CachedBlock> for ByBytes {
    fn weight(&self, _key: &(u64, u32), block: &CachedBlock) -> u64 {
        block.weight() as u64 + ENTRY_OVERHEAD
    }
}

/// A block cache of a fixed number of bytes; of none, it keeps nothing.
pub struct BlockCache {
    cache: Option<Cache<(u64, u32), CachedBlock, ByBytes>>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// A block cache's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub capacity: u64,
    pub bytes: u64,
    pub blocks: u64,
    pub hits: u64,
    pub misses: u64,
}

impl BlockCache {
    /// A cache of `capacity` bytes, sized for blocks of about
    /// `block_bytes`; 0 turns it off.
    pub fn new(capacity: u64, block_bytes: usize) -> BlockCache {
        let cache = (capacity > 0).then(|| {
            let per_block = block_bytes as u64 + ENTRY_OVERHEAD;
            let items = (capacity / per_block.max(1)).clamp(16, 1 << 24) as usize;
            Cache::with_weighter(items, capacity, ByBytes)
        });
        BlockCache {
            cache,
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// False when it keeps nothing.
    pub fn enabled(&self) -> bool {
        self.cache.is_some()
    }

    /// Block `block` of file `file`, if cached. Counts a hit or a miss.
    pub fn get(&self, file: u64, block: usize) -> Option<CachedBlock> {
        let cache = self.cache.as_ref()?;
        let found = u32::try_from(block)
            .ok()
            .and_then(|b| cache.get(&(file, b)));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps block `block` of file `file` (checked bytes only).
    pub fn insert(&self, file: u64, block: usize, bytes: CachedBlock) {
        if let (Some(cache), Ok(b)) = (&self.cache, u32::try_from(block)) {
            cache.insert((file, b), bytes);
        }
    }

    /// Lets go of blocks `0..blocks` of file `file` (a file compaction
    /// removed: nothing will read them again).
    pub fn forget(&self, file: u64, blocks: usize) {
        if let Some(cache) = &self.cache {
            for b in 0..u32::try_from(blocks).unwrap_or(u32::MAX) {
                cache.remove(&(file, b));
            }
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            capacity: self.capacity,
            bytes: self.cache.as_ref().map_or(0, |c| c.weight()),
            blocks: self.cache.as_ref().map_or(0, |c| c.len() as u64),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::seek::Block;
    use super::*;

    fn block(bytes: &[u8]) -> CachedBlock {
        Arc::new(Block::plain(bytes.to_vec()))
    }

    #[test]
    fn keeps_blocks_by_file_and_number_and_counts_hits() {
        let c = BlockCache::new(1 << 20, 4096);
        assert!(c.get(1, 0).is_none());
        c.insert(1, 0, block(b"one"));
        c.insert(2, 0, block(b"two"));
        assert_eq!(&**c.get(1, 0).unwrap(), b"one");
        assert_eq!(&**c.get(2, 0).unwrap(), b"two");
        assert!(c.get(1, 1).is_none());
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.blocks), (2, 2, 2));
        assert_eq!(s.bytes, 6 + 2 * ENTRY_OVERHEAD);
        c.forget(1, 4);
        assert!(c.get(1, 0).is_none());
        assert_eq!(&**c.get(2, 0).unwrap(), b"two");
        assert_eq!(c.stats().bytes, 3 + ENTRY_OVERHEAD);
    }

    #[test]
    fn stays_within_its_bytes() {
        let c = BlockCache::new(256 << 10, 4096);
        for i in 0..1000 {
            c.insert(7, i, block(&[i as u8; 4096]));
        }
        let s = c.stats();
        assert!(s.bytes <= 256 << 10, "{s:?}");
        assert!(s.blocks > 0 && s.blocks < 1000, "{s:?}");
    }

    #[test]
    fn of_no_bytes_keeps_nothing() {
        let c = BlockCache::new(0, 4096);
        assert!(!c.enabled());
        c.insert(1, 0, block(b"x"));
        assert!(c.get(1, 0).is_none());
        assert_eq!(c.stats(), CacheStats::default());
    }
}
