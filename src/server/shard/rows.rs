//! The shard's row cache: what the engine's block files hold for keys
//! that no memstore has, values or absences. A read of a key that is
//! in no memstore (a GET, a collection's metadata, an element, after
//! their memstore was flushed) is then one hash probe, where the engine
//! would probe a bloom filter per block file and decode entries of a
//! block. RocksDB's row cache sits at the same level: below the
//! memtables, keyed by block file.
//!
//! Each row is tagged with the epoch of the region's view it was read in
//! ([`crate::engine::Below::epoch`]), and answers only reads below a view
//! of that epoch. A view's block files never change, so a row is exact
//! for as long as it answers, without any invalidation: a write goes into
//! a memstore, which the read asks first (and until then the shard's
//! dirty table answers); a flush or a compaction publishes a new view,
//! and the rows read in the old one stop answering. Writes therefore
//! never touch the cache: a counter rewritten at every request, whose
//! memstore has it, costs no cache insert. The server's own keys
//! (`00 00 stria:...`), which the clock and the version reservations
//! write to the engine directly, are never cached.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use quick_cache::unsync::Cache;
use quick_cache::Weighter;

use crate::server::keys;

/// Bytes an entry costs beyond its key and value, about: the key's and
/// the value's allocations and headers, the `Rc`, the cache's slot and
/// its share of the ghost entries the cache keeps of evicted keys.
const OVERHEAD: u64 = 160;

/// What a key holds: its value, or `None` when it has none. (Shared
/// with the dirty table's value, or the cache's.)
pub type Row = Option<Rc<Vec<u8>>>;

/// A cached row, with the epoch of the view whose block files it is.
#[derive(Clone)]
struct Cached {
    epoch: u64,
    row: Row,
}

fn weight(key: &[u8], row: &Row) -> u64 {
    key.len() as u64 + row.as_ref().map_or(0, |v| v.len() as u64) + OVERHEAD
}

#[derive(Clone)]
struct Weight;

impl Weighter<Vec<u8>, Cached> for Weight {
    fn weight(&self, key: &Vec<u8>, c: &Cached) -> u64 {
        weight(key, &c.row)
    }
}

/// Absences held for [`Rows::settle_absent`] at most; past
/// them, a turn's further ones are not kept.
const MAX_ABSENT: usize = 4096;

/// The cache, off when its capacity is 0.
pub struct Rows {
    cache: Option<RefCell<Cache<Vec<u8>, Cached, Weight>>>,
    /// The largest entry it takes: a value that would push out many
    /// others is read from the engine.
    max_entry: u64,
    /// Keys read and found absent, with their view's epoch, not in yet
    /// ([`Rows::fill`]).
    absent: RefCell<Vec<(Vec<u8>, u64)>>,
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
    /// Windows of keys read ahead for runs of pops (see [`super::ahead`]),
    /// and reads they answered.
    pub ahead_reads: u64,
    pub ahead_hits: u64,
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

    /// Whether the cache keeps `key` once read: not a key commands only
    /// read in ranges, nor a list's element or a stream's entry, read at
    /// most once by point (a pop reads it once and deletes it).
    fn kept(key: &[u8]) -> bool {
        Rows::cacheable(key) && keys::reads(key) == keys::Reads::Point
    }

    /// `key`'s row below a view of `epoch`: `Some(None)` when it is
    /// known to have no value there, `None` when it is not cached (or was
    /// read in another view).
    pub fn get(&self, key: &[u8], epoch: u64) -> Option<Row> {
        let cache = self.cache.as_ref()?;
        if !Rows::cacheable(key) {
            return None;
        }
        match cache.borrow().get(key) {
            Some(c) if c.epoch == epoch => {
                self.hits.set(self.hits.get() + 1);
                Some(c.row.clone())
            }
            _ => {
                self.misses.set(self.misses.get() + 1);
                None
            }
        }
    }

    /// Remembers what the block files of the view of `epoch` hold for
    /// `key`: `row`, shared with the reader. An absence goes in at the
    /// next [`Rows::settle_absent`], unless a write of the key came
    /// first: most keys and elements read absent are read by the command
    /// that creates them (INCR or SET of a new key, HSET, SADD or ZADD of
    /// a new field or member), and from then on their memstore answers.
    pub fn fill(&self, key: &[u8], row: Row, epoch: u64) {
        if self.cache.is_none() || !Rows::kept(key) {
            return;
        }
        if row.is_some() {
            self.put(key.to_vec(), Cached { epoch, row });
            return;
        }
        let mut absent = self.absent.borrow_mut();
        if absent.len() < MAX_ABSENT {
            absent.push((key.to_vec(), epoch));
        }
    }

    /// Puts in the absences of elements read since the last call, but
    /// those of keys now written (`dirty`): their memstore will have
    /// them, and their rows would only push out keys that are read.
    pub fn settle_absent(&self, dirty: impl Fn(&[u8]) -> bool) {
        let absent = std::mem::take(&mut *self.absent.borrow_mut());
        for (key, epoch) in absent {
            if !dirty(&key) {
                self.put(key, Cached { epoch, row: None });
            }
        }
    }

    fn put(&self, key: Vec<u8>, c: Cached) {
        let Some(cache) = &self.cache else { return };
        let mut cache = cache.borrow_mut();
        if weight(&key, &c.row) > self.max_entry {
            cache.remove(&key);
            return;
        }
        cache.insert(key, c);
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
            ahead_reads: 0,
            ahead_hits: 0,
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
    fn rows_answer_reads_below_the_view_they_were_read_in() {
        let rows = Rows::new(1 << 20);
        assert_eq!(rows.get(b"k", 1), None);
        rows.fill(b"k", row(b"v"), 1);
        rows.fill(b"gone", None, 1);
        rows.settle_absent(|_| false);
        assert_eq!(rows.get(b"k", 1), Some(row(b"v")));
        assert_eq!(rows.get(b"gone", 1), Some(None));
        // Another view: its block files may hold something else.
        assert_eq!(rows.get(b"k", 2), None);
        rows.fill(b"k", row(b"w"), 2);
        assert_eq!(rows.get(b"k", 2), Some(row(b"w")));
        assert_eq!(rows.get(b"k", 1), None, "one row per key, the last read");
        let s = rows.stats();
        assert_eq!((s.hits, s.misses, s.entries), (3, 3, 2));
    }

    #[test]
    fn the_servers_own_keys_and_huge_values_are_never_cached() {
        let rows = Rows::new(1 << 20);
        rows.fill(b"\0\0stria:versions", row(b"7"), 1);
        assert_eq!(rows.get(b"\0\0stria:versions", 1), None);
        rows.fill(b"big", row(&[1; 1 << 17]), 1);
        assert_eq!(rows.get(b"big", 1), None);
        rows.fill(b"big", row(b"small"), 1);
        rows.fill(b"big", row(&[1; 1 << 17]), 2);
        assert_eq!(
            rows.get(b"big", 1),
            None,
            "a huge value replaces a cached one"
        );
    }

    #[test]
    fn keys_read_only_in_ranges_are_never_kept() {
        let rows = Rows::new(1 << 20);
        let by_score = keys::element(b"z", 1, keys::BY_SCORE, b"\0\0\0\0\0\0\0\0m");
        let index = keys::expiry(5, b"k");
        for k in [&by_score, &index] {
            rows.fill(k, None, 1);
            rows.fill(k, row(b""), 1);
            assert_eq!(rows.get(k, 1), None);
        }
        let scored = keys::element(b"z", 1, keys::SCORED, b"m");
        rows.fill(&scored, row(b"score"), 1);
        assert_eq!(rows.get(&scored, 1), Some(row(b"score")));
        assert_eq!(rows.stats().entries, 1);
    }

    #[test]
    fn an_absence_is_kept_only_if_the_turn_did_not_write_the_key() {
        let rows = Rows::new(1 << 20);
        let field = keys::element(b"h", 1, keys::FIELD, b"f");
        let other = keys::element(b"h", 1, keys::FIELD, b"g");
        rows.fill(&other, None, 1);
        rows.fill(&field, None, 1);
        assert_eq!(rows.get(&other, 1), None);
        rows.settle_absent(|k| k == field.as_slice());
        assert_eq!(rows.get(&other, 1), Some(None));
        assert_eq!(rows.get(&field, 1), None);
        // A value found is kept at once.
        rows.fill(&field, row(b"1"), 1);
        assert_eq!(rows.get(&field, 1), Some(row(b"1")));
        // A key's metadata too.
        let meta = keys::meta(b"h");
        let new = keys::meta(b"new");
        rows.fill(&meta, None, 1);
        rows.fill(&new, None, 1);
        assert_eq!(rows.get(&meta, 1), None);
        rows.settle_absent(|k| k == new.as_slice());
        assert_eq!(rows.get(&meta, 1), Some(None));
        assert_eq!(rows.get(&new, 1), None);
    }

    #[test]
    fn list_elements_and_stream_entries_are_never_kept() {
        let rows = Rows::new(1 << 20);
        let item = keys::element(b"l", 1, keys::ITEM, &7u64.to_be_bytes());
        let entry = keys::element(b"s", 1, keys::ENTRY, &[0; 16]);
        for k in [&item, &entry] {
            rows.fill(k, row(b"v"), 1);
            assert_eq!(rows.get(k, 1), None);
        }
        let meta = keys::meta(b"l");
        rows.fill(&meta, row(b"m"), 1);
        assert_eq!(rows.get(&meta, 1), Some(row(b"m")));
        assert_eq!(rows.stats().entries, 1);
    }

    #[test]
    fn a_cache_of_no_bytes_is_off() {
        let rows = Rows::new(0);
        rows.fill(b"k", row(b"v"), 1);
        assert_eq!(rows.get(b"k", 1), None);
        assert_eq!(rows.stats(), RowStats::default());
    }

    #[test]
    fn the_cache_stays_within_its_bytes() {
        let rows = Rows::new(64 << 10);
        for i in 0..10_000u32 {
            rows.fill(&i.to_be_bytes(), row(&[0; 100]), 1);
        }
        assert!(rows.stats().bytes <= 64 << 10, "{:?}", rows.stats());
    }
}
