//! The shard's row cache: clean engine keys (their newest write is in the
//! engine) with their values, or their absence. A read of a hot key (a
//! GET, a collection's metadata, an element) is then one hash probe,
//! where the engine would search the region's memstores, probe a bloom
//! filter per block file and decode entries of a block. RocksDB's
//! `row_cache` does the same below its memtables; here it sits above the
//! dirty table, so it only ever holds what the engine holds.
//!
//! It is kept exact because the shard is the only writer of the keys it
//! caches, and a read asks the dirty table first: while a key is dirty
//! its row (what the engine held before the write) is never read, and
//! when the write leaves the dirty table the row is replaced with the
//! value the engine now has. So a write need not touch the cache (a hash
//! probe per key written, most of them for keys it does not hold). The
//! server's own keys (`00 00 stria:...`), which the clock and the version
//! reservations write to the engine directly, are never cached. A failed write leaves its key
//! out: the next read asks the engine.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use quick_cache::unsync::Cache;
use quick_cache::Weighter;

use crate::server::keys;

/// Bytes an entry costs beyond its key and value, about: the key's and
/// the value's allocations and headers, the `Rc`, the cache's slot and
/// its share of the ghost entries the cache keeps of evicted keys.
const OVERHEAD: u64 = 160;

/// What a cached key holds: its value, or `None` when it has none.
/// (Shared with the dirty table's value when a write leaves it.)
pub type Row = Option<Rc<Vec<u8>>>;

fn weight(key: &[u8], row: &Row) -> u64 {
    key.len() as u64 + row.as_ref().map_or(0, |v| v.len() as u64) + OVERHEAD
}

#[derive(Clone)]
struct Weight;

impl Weighter<Vec<u8>, Row> for Weight {
    fn weight(&self, key: &Vec<u8>, row: &Row) -> u64 {
        weight(key, row)
    }
}

/// The cache, off when its capacity is 0.
pub struct Rows {
    cache: Option<RefCell<Cache<Vec<u8>, Row, Weight>>>,
    /// The largest entry it takes: a value that would push out many
    /// others is read from the engine.
    max_entry: u64,
    hits: Cell<u64>,
    misses: Cell<u64>,
}

/// What INFO and `/metrics` report of the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowStats {
    pub capacity: u64,
    pub bytes: u64,
    pub entries: u64,
    pub hits: u64,
    pub misses: u64,
}

impl Rows {
    /// A cache of at most `capacity` bytes (by [`Weight`]); 0: none.
    pub fn new(capacity: u64) -> Rows {
        let cache = (capacity > 0).then(|| {
            // Estimated entries, for the table's first size only.
            let items = (capacity / 512).clamp(16, 1 << 20) as usize;
            RefCell::new(Cache::with_weighter(items, capacity, Weight))
        });
        Rows {
            cache,
            max_entry: (capacity / 16).min(1 << 20),
            hits: Cell::new(0),
            misses: Cell::new(0),
        }
    }

    /// Whether `key` is one the cache may hold.
    fn cacheable(key: &[u8]) -> bool {
        !key.starts_with(&[0, 0])
    }

    /// Whether the cache keeps `key` when it is read or written: not a
    /// key commands only read in ranges, nor a list's element or a
    /// stream's entry, read at most once by point (every pushed element
    /// went in, cost a hash insert and about 190 bytes, and served no
    /// read: a pop reads it once and deletes it).
    fn kept(key: &[u8]) -> bool {
        Rows::cacheable(key) && keys::reads(key) == keys::Reads::Point
    }

    /// `key`'s cached row: `Some(None)` when it is known to have no value,
    /// `None` when it is not cached.
    pub fn get(&self, key: &[u8]) -> Option<Row> {
        let cache = self.cache.as_ref()?;
        if !Rows::cacheable(key) {
            return None;
        }
        match cache.borrow().get(key) {
            Some(row) => {
                self.hits.set(self.hits.get() + 1);
                Some(row.clone())
            }
            None => {
                self.misses.set(self.misses.get() + 1);
                None
            }
        }
    }

    /// Remembers what the engine holds for `key`: `row`, shared with
    /// the reader.
    pub fn fill(&self, key: &[u8], row: Row) {
        if self.cache.is_some() && Rows::kept(key) {
            self.put(key.to_vec(), row);
        }
    }

    /// Remembers `row` for `key`, whose write is now the engine's. A key
    /// the cache does not keep ([`Rows::kept`]) would only push out keys
    /// that are looked up; neither this nor [`Rows::fill`] ever put it in,
    /// so there is no older row of it to drop.
    pub fn put(&self, key: Vec<u8>, row: Row) {
        let Some(cache) = &self.cache else { return };
        if !Rows::kept(&key) {
            return;
        }
        let mut cache = cache.borrow_mut();
        if weight(&key, &row) > self.max_entry {
            cache.remove(&key);
            return;
        }
        cache.insert(key, row);
    }

    /// Forgets `key`: what the engine holds for it may have changed.
    pub fn forget(&self, key: &[u8]) {
        if let Some(cache) = &self.cache {
            cache.borrow_mut().remove(key);
        }
    }

    pub fn stats(&self) -> RowStats {
        let (bytes, entries, capacity) = match &self.cache {
            Some(c) => {
                let c = c.borrow();
                (c.weight(), c.len() as u64, c.capacity())
            }
            None => (0, 0, 0),
        };
        RowStats {
            capacity,
            bytes,
            entries,
            hits: self.hits.get(),
            misses: self.misses.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &[u8]) -> Row {
        Some(Rc::new(v.to_vec()))
    }

    #[test]
    fn rows_hold_values_and_absences_until_forgotten() {
        let rows = Rows::new(1 << 20);
        assert_eq!(rows.get(b"k"), None);
        rows.fill(b"k", row(b"v"));
        rows.fill(b"gone", None);
        assert_eq!(rows.get(b"k"), Some(Some(Rc::new(b"v".to_vec()))));
        assert_eq!(rows.get(b"gone"), Some(None));
        rows.forget(b"k");
        assert_eq!(rows.get(b"k"), None);
        let s = rows.stats();
        assert_eq!((s.hits, s.misses, s.entries), (2, 2, 1));
    }

    #[test]
    fn the_servers_own_keys_and_huge_values_are_never_cached() {
        let rows = Rows::new(1 << 20);
        rows.fill(b"\0\0stria:versions", row(b"7"));
        assert_eq!(rows.get(b"\0\0stria:versions"), None);
        rows.fill(b"big", row(&[1; 1 << 17]));
        assert_eq!(rows.get(b"big"), None);
        rows.fill(b"big", row(b"small"));
        rows.fill(b"big", row(&[1; 1 << 17]));
        assert_eq!(rows.get(b"big"), None, "a huge value replaces a cached one");
    }

    #[test]
    fn keys_read_only_in_ranges_are_never_kept() {
        let rows = Rows::new(1 << 20);
        let by_score = keys::element(b"z", 1, keys::BY_SCORE, b"\0\0\0\0\0\0\0\0m");
        let index = keys::expiry(5, b"k");
        for k in [&by_score, &index] {
            rows.fill(k, None);
            rows.put(k.clone(), row(b""));
            assert_eq!(rows.get(k), None);
        }
        let scored = keys::element(b"z", 1, keys::SCORED, b"m");
        rows.put(scored.clone(), row(b"score"));
        assert_eq!(rows.get(&scored), Some(row(b"score")));
        assert_eq!(rows.stats().entries, 1);
    }

    #[test]
    fn list_elements_and_stream_entries_are_never_kept() {
        let rows = Rows::new(1 << 20);
        let item = keys::element(b"l", 1, keys::ITEM, &7u64.to_be_bytes());
        let entry = keys::element(b"s", 1, keys::ENTRY, &[0; 16]);
        for k in [&item, &entry] {
            rows.fill(k, row(b"v"));
            rows.put(k.clone(), row(b"w"));
            assert_eq!(rows.get(k), None);
        }
        let meta = keys::meta(b"l");
        rows.put(meta.clone(), row(b"m"));
        assert_eq!(rows.get(&meta), Some(row(b"m")));
        assert_eq!(rows.stats().entries, 1);
    }

    #[test]
    fn a_cache_of_no_bytes_is_off() {
        let rows = Rows::new(0);
        rows.fill(b"k", row(b"v"));
        assert_eq!(rows.get(b"k"), None);
        assert_eq!(rows.stats(), RowStats::default());
    }

    #[test]
    fn the_cache_stays_within_its_bytes() {
        let rows = Rows::new(64 << 10);
        for i in 0..10_000u32 {
            rows.fill(&i.to_be_bytes(), row(&[0; 100]));
        }
        assert!(rows.stats().bytes <= 64 << 10, "{:?}", rows.stats());
    }
}
