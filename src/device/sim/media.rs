//! The simulated media: a persistent image and a volatile write cache.
//!
//! Completed writes that are not yet durable are kept once, as the cached
//! writes themselves in completion order, rather than as a second copy of the
//! image: a read starts from the persistent image and lays over it, block by
//! block, the newest cached write covering each block (found through a
//! block index). A flush moves the writes it covers into the persistent
//! image, oldest first; a crash decides the fate of the rest one by one
//! (see `crash`).
//!
//! Memory is therefore the written part of the persistent image plus the
//! unflushed writes. The cache has a capacity, as a drive's DRAM does: when
//! it overflows, its oldest writes are destaged into the persistent image,
//! which is what a drive does in the background and what the durability
//! contract allows (an unflushed write may survive a crash).

use std::collections::{BTreeMap, VecDeque};

use super::store::Store;

/// Capacity of the volatile cache of every simulated device, in bytes.
pub const CACHE_BYTES: u64 = 64 << 20;

/// A completed write still in the volatile cache.
#[derive(Clone)]
pub(super) struct CachedWrite {
    pub lba: u64,
    pub data: Box<[u8]>,
}

/// The persistent image and the volatile cache over it.
#[derive(Clone)]
pub(super) struct Media {
    block_size: u64,
    /// False models power-loss protection: writes go straight to `durable`.
    volatile: bool,
    /// Cache capacity; beyond it the oldest writes are destaged.
    cache_limit: u64,
    durable: Store,
    /// Completed, not yet durable writes, oldest first.
    cache: VecDeque<CachedWrite>,
    /// Sequence number of `cache[0]`; numbers are consecutive after it.
    first_seq: u64,
    /// Block -> sequence number of the newest cached write covering it.
    newest: BTreeMap<u64, u64>,
    cached_bytes: u64,
}

impl Media {
    pub(super) fn new(block_size: u32, volatile: bool) -> Media {
        Media::from_durable(Store::default(), block_size, volatile)
    }

    /// Media whose persistent image is `durable` and whose cache is empty.
    pub(super) fn from_durable(durable: Store, block_size: u32, volatile: bool) -> Media {
        Media {
            block_size: u64::from(block_size),
            volatile,
            cache_limit: CACHE_BYTES,
            durable,
            cache: VecDeque::new(),
            first_seq: 0,
            newest: BTreeMap::new(),
            cached_bytes: 0,
        }
    }

    #[cfg(test)]
    fn with_cache_limit(mut self, limit: u64) -> Media {
        self.cache_limit = limit;
        self
    }

    /// Completes a write of `data` (whole blocks) at `lba`: visible at once,
    /// durable at once only without a volatile cache.
    pub(super) fn write(&mut self, lba: u64, data: Box<[u8]>) {
        if !self.volatile {
            self.durable.write(lba * self.block_size, &data);
            return;
        }
        let seq = self.first_seq + self.cache.len() as u64;
        let blocks = data.len() as u64 / self.block_size;
        for block in lba..lba + blocks {
            self.newest.insert(block, seq);
        }
        self.cached_bytes += data.len() as u64;
        self.cache.push_back(CachedWrite { lba, data });
        while self.cached_bytes > self.cache_limit {
            self.destage_oldest();
        }
    }

    /// Completes a write of `bufs` (whole blocks, back to back) at `lba`,
    /// as [`Media::write`] does with their bytes gathered into one. Without a
    /// volatile cache the bytes go straight into the persistent image, so a
    /// device with power-loss protection copies each write once, not twice.
    pub(super) fn write_bufs(&mut self, lba: u64, bufs: &[&[u8]]) {
        if self.volatile {
            self.write(lba, bufs.concat().into_boxed_slice());
            return;
        }
        let mut offset = lba * self.block_size;
        for buf in bufs {
            self.durable.write(offset, buf);
            offset += buf.len() as u64;
        }
    }

    /// Completes a FUA write: durable at once, and nothing else made
    /// durable but the older cached writes to the same blocks (and those
    /// before them, the cache being destaged in order; a device may make
    /// cached writes durable whenever it likes), so that none of them can
    /// later land over these blocks.
    pub(super) fn write_bufs_through(&mut self, lba: u64, bufs: &[&[u8]]) {
        let bytes: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let blocks = bytes / self.block_size;
        let overlapping = self
            .newest
            .range(lba..lba + blocks)
            .map(|(_, &seq)| seq)
            .max();
        if let Some(last) = overlapping {
            while self.first_seq <= last && !self.cache.is_empty() {
                self.destage_oldest();
            }
        }
        let mut offset = lba * self.block_size;
        for buf in bufs {
            self.durable.write(offset, buf);
            offset += buf.len() as u64;
        }
    }

    /// The sequence number the next completed write will get. A flush
    /// records it when submitted and, on completion, makes durable every
    /// write numbered below it.
    pub(super) fn watermark(&self) -> u64 {
        self.first_seq + self.cache.len() as u64
    }

    /// Completes a flush submitted when [`Media::watermark`] was `covers`.
    pub(super) fn flush(&mut self, covers: u64) {
        while self.first_seq < covers && !self.cache.is_empty() {
            self.destage_oldest();
        }
    }

    fn destage_oldest(&mut self) {
        let Some(w) = self.cache.pop_front() else {
            return;
        };
        let seq = self.first_seq;
        self.first_seq += 1;
        self.durable.write(w.lba * self.block_size, &w.data);
        let blocks = w.data.len() as u64 / self.block_size;
        for block in w.lba..w.lba + blocks {
            if self.newest.get(&block) == Some(&seq) {
                self.newest.remove(&block);
            }
        }
        self.cached_bytes -= w.data.len() as u64;
    }

    /// Reads what a host sees at `lba` (whole blocks) into `out`.
    pub(super) fn read(&self, lba: u64, out: &mut [u8]) {
        self.durable.read(lba * self.block_size, out);
        let bs = self.block_size as usize;
        let blocks = out.len() as u64 / self.block_size;
        for (&block, &seq) in self.newest.range(lba..lba + blocks) {
            let w = &self.cache[(seq - self.first_seq) as usize];
            let src = (block - w.lba) as usize * bs;
            let dst = (block - lba) as usize * bs;
            out[dst..dst + bs].copy_from_slice(&w.data[src..src + bs]);
        }
    }

    /// Reads what would be left at `lba` if every unflushed write were lost.
    pub(super) fn read_durable(&self, lba: u64, out: &mut [u8]) {
        self.durable.read(lba * self.block_size, out);
    }

    /// The persistent image.
    pub(super) fn durable(&self) -> &Store {
        &self.durable
    }

    /// The writes in the cache, oldest first.
    pub(super) fn unflushed(&self) -> impl Iterator<Item = &CachedWrite> {
        self.cache.iter()
    }

    /// Bytes of completed writes not yet durable.
    pub(super) fn cached_bytes(&self) -> u64 {
        self.cached_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: u32 = 512;

    fn blocks(fill: u8, n: usize) -> Box<[u8]> {
        vec![fill; n * BS as usize].into_boxed_slice()
    }

    fn read(media: &Media, lba: u64, n: usize, durable: bool) -> Vec<u8> {
        let mut out = vec![0; n * BS as usize];
        if durable {
            media.read_durable(lba, &mut out);
        } else {
            media.read(lba, &mut out);
        }
        out
    }

    #[test]
    fn newest_cached_write_wins_and_flush_moves_covered_writes_only() {
        let mut m = Media::new(BS, true);
        m.write(0, blocks(1, 3));
        m.write(1, blocks(2, 1));
        let covers = m.watermark();
        m.write(2, blocks(3, 1));
        let seen = read(&m, 0, 4, false);
        assert_eq!(
            seen,
            [blocks(1, 1), blocks(2, 1), blocks(3, 1), blocks(0, 1)].concat()
        );
        assert!(read(&m, 0, 4, true).iter().all(|&b| b == 0));

        m.flush(covers);
        let durable = read(&m, 0, 4, true);
        assert_eq!(
            durable,
            [blocks(1, 1), blocks(2, 1), blocks(1, 1), blocks(0, 1)].concat()
        );
        assert_eq!(read(&m, 0, 4, false), seen);
        assert_eq!(m.cached_bytes(), u64::from(BS));
    }

    #[test]
    fn written_buffers_land_back_to_back_with_or_without_a_cache() {
        for volatile in [false, true] {
            let mut m = Media::new(BS, volatile);
            m.write_bufs(3, &[&blocks(4, 1), &blocks(5, 2)]);
            let seen = read(&m, 2, 5, false);
            assert_eq!(
                seen,
                [blocks(0, 1), blocks(4, 1), blocks(5, 2), blocks(0, 1)].concat()
            );
            assert_eq!(read(&m, 2, 5, true) == seen, !volatile);
        }
    }

    #[test]
    fn without_a_volatile_cache_writes_are_durable_at_once() {
        let mut m = Media::new(BS, false);
        m.write(5, blocks(9, 2));
        assert_eq!(read(&m, 5, 2, true), blocks(9, 2).to_vec());
        assert_eq!(m.cached_bytes(), 0);
    }

    #[test]
    fn an_overflowing_cache_destages_its_oldest_writes() {
        let mut m = Media::new(BS, true).with_cache_limit(2 * u64::from(BS));
        m.write(0, blocks(1, 1));
        m.write(1, blocks(2, 1));
        m.write(0, blocks(3, 1));
        assert_eq!(m.cached_bytes(), 2 * u64::from(BS));
        assert_eq!(read(&m, 0, 2, true), [blocks(1, 1), blocks(0, 1)].concat());
        assert_eq!(read(&m, 0, 2, false), [blocks(3, 1), blocks(2, 1)].concat());
    }
}
