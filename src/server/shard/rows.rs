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
//! value the engine now has (for a collection's element, only if the
//! cache holds a row of it: elements go in when reads find them). So a
//! write need not touch the cache before it is in. The
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

/// Absences of elements held for [`Rows::settle_absent`] at most; past
/// them, a turn's further ones are not kept.
const MAX_ABSENT: usize = 4096;

/// How the cache keeps a key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// A string or a collection's metadata: whenever it is read or
    /// written, its absence too (every command on the key reads it).
    Always,
    /// A collection's element read by point (a hash's field, a set's
    /// member, a sorted set's member's score): when a read finds it (its
    /// absence once the turn's writes are known), and when a write
    /// replaces a row kept. Most elements are written once and seldom
    /// read by point; putting each new one in (after its absence, which
    /// the write's own read had put in) took three searches of a table
    /// of hundreds of thousands of keys per element.
    Read,
}

/// The cache, off when its capacity is 0.
pub struct Rows {
    cache: Option<RefCell<Cache<Vec<u8>, Row, Weight>>>,
    /// The largest entry it takes: a value that would push out many
    /// others is read from the engine.
    max_entry: u64,
    /// Elements read and found absent, not in yet ([`Rows::fill`]).
    absent: RefCell<Vec<Vec<u8>>>,
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
            absent: RefCell::new(Vec::new()),
            hits: Cell::new(0),
            misses: Cell::new(0),
        }
    }

    /// Whether `key` is one the cache may hold.
    fn cacheable(key: &[u8]) -> bool {
        !key.starts_with(&[0, 0])
    }

    /// Whether the cache keeps `key` when it is read or written, and how
    /// ([`Kept`]): not a key commands only read in ranges, nor a list's
    /// element or a stream's entry, read at most once by point (every
    /// pushed element went in, cost a hash insert and about 190 bytes,
    /// and served no read: a pop reads it once and deletes it).
    fn kept(key: &[u8]) -> Option<Kept> {
        if !Rows::cacheable(key) || keys::reads(key) != keys::Reads::Point {
            return None;
        }
        match keys::split(key) {
            Some((_, keys::Part::Sub(..))) => Some(Kept::Read),
            _ => Some(Kept::Always),
        }
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
    /// the reader. An element's absence goes in at the next
    /// [`Rows::settle_absent`], unless a write of it came first: the
    /// read of a field or member that a write then adds (HSET, SADD,
    /// ZADD of a new one) puts nothing in.
    pub fn fill(&self, key: &[u8], row: Row) {
        if self.cache.is_none() {
            return;
        }
        match Rows::kept(key) {
            Some(Kept::Read) if row.is_none() => {
                let mut absent = self.absent.borrow_mut();
                if absent.len() < MAX_ABSENT {
                    absent.push(key.to_vec());
                }
            }
            Some(_) => self.put_kept(key.to_vec(), row, Kept::Always),
            None => {}
        }
    }

    /// Puts in the absences of elements read since the last call, but
    /// those of keys now written (`dirty`). Called before writes leave
    /// the dirty table: a key read absent and not dirty since has had no
    /// write since.
    pub fn settle_absent(&self, dirty: impl Fn(&[u8]) -> bool) {
        let absent = std::mem::take(&mut *self.absent.borrow_mut());
        for key in absent {
            if !dirty(&key) {
                self.put_kept(key, None, Kept::Always);
            }
        }
    }

    /// Remembers `row` for `key`, whose write is now the engine's. A key
    /// the cache does not keep ([`Rows::kept`]) would only push out keys
    /// that are looked up; neither this nor [`Rows::fill`] ever put it in,
    /// so there is no older row of it to drop. An element's row is
    /// replaced if the cache has one, and not put in otherwise.
    pub fn put(&self, key: Vec<u8>, row: Row) {
        if self.cache.is_none() {
            return;
        }
        if let Some(kept) = Rows::kept(&key) {
            self.put_kept(key, row, kept);
        }
    }

    fn put_kept(&self, key: Vec<u8>, row: Row, kept: Kept) {
        let Some(cache) = &self.cache else { return };
        let mut cache = cache.borrow_mut();
        if weight(&key, &row) > self.max_entry {
            cache.remove(&key);
            return;
        }
        match kept {
            Kept::Always => cache.insert(key, row),
            // Not there: nothing to do (`Err` gives the pair back).
            Kept::Read => drop(cache.replace(key, row, false)),
        }
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
        rows.fill(&scored, row(b"score"));
        assert_eq!(rows.get(&scored), Some(row(b"score")));
        assert_eq!(rows.stats().entries, 1);
    }

    #[test]
    fn an_element_is_kept_once_read_and_its_writes_replace_it() {
        let rows = Rows::new(1 << 20);
        let field = keys::element(b"h", 1, keys::FIELD, b"f");
        let other = keys::element(b"h", 1, keys::FIELD, b"g");
        // A write of an element not kept leaves it out.
        rows.put(field.clone(), row(b"1"));
        assert_eq!(rows.get(&field), None);
        // A read that finds none keeps the absence once the turn's writes
        // are known: not for a key written since.
        rows.fill(&other, None);
        rows.fill(&field, None);
        assert_eq!(rows.get(&other), None);
        rows.settle_absent(|k| k == field.as_slice());
        assert_eq!(rows.get(&other), Some(None));
        assert_eq!(rows.get(&field), None);
        // A read that finds a value keeps it; a write replaces it, a
        // delete's absence too.
        rows.fill(&field, row(b"1"));
        rows.put(field.clone(), row(b"2"));
        assert_eq!(rows.get(&field), Some(row(b"2")));
        rows.put(field.clone(), None);
        assert_eq!(rows.get(&field), Some(None));
        // A huge value replacing a kept one leaves no row behind.
        rows.put(field.clone(), row(&[1; 1 << 17]));
        assert_eq!(rows.get(&field), None);
        // A key's metadata is kept on every read and write, absent too.
        let meta = keys::meta(b"h");
        rows.fill(&meta, None);
        assert_eq!(rows.get(&meta), Some(None));
        rows.put(meta.clone(), row(b"m"));
        assert_eq!(rows.get(&meta), Some(row(b"m")));
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
