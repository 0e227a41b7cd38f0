//! One memstore: a concurrent sorted map of versions.

use std::cmp::Reverse;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Weak};

use crossbeam_skiplist::SkipMap;

use crate::table::{Entry, EntryKind};

/// Bytes an entry costs beyond its key and value: the skip-list node
/// (header and an average tower of 1.33 pointers), the `Vec` headers of
/// key and value, the version, and allocator rounding.
pub const ENTRY_OVERHEAD: u64 = 96;

/// What an entry of `key_len` and `value_len` bytes is charged.
pub fn entry_bytes(key_len: usize, value_len: usize) -> u64 {
    key_len as u64 + value_len as u64 + ENTRY_OVERHEAD
}

/// Writes admitted to a memstore that can be inserted by someone other
/// than their writer once the WAL acknowledged them: a flush that waits
/// for a memstore's pending writes asks them, so a writer that holds
/// acknowledged writes without waiting for them cannot hold a flush up.
pub trait Inserter: Send + Sync {
    /// Inserts the writes if they are acknowledged; otherwise nothing.
    fn insert_acknowledged(&self);
}

/// Key of the map: versions of a key sort newest first.
///
/// `prefix` is the key's first eight bytes, big-endian and zero-padded,
/// which orders keys as the bytes do (a key that is shorter sorts first on
/// equal prefixes through `key`). Most comparisons in the skip list end at
/// it, without following the pointer to the key's bytes: a cache miss
/// fewer per level of every search.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Versioned {
    prefix: u64,
    key: Vec<u8>,
    version: Reverse<u64>,
}

impl Versioned {
    fn new(key: Vec<u8>, version: u64) -> Versioned {
        Versioned {
            prefix: prefix(&key),
            key,
            version: Reverse(version),
        }
    }
}

fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

#[derive(Debug)]
struct Value {
    kind: EntryKind,
    value: Vec<u8>,
}

/// One region's memstore.
///
/// A version is the LSN of the write; a write at `none` durability, which
/// has no LSN, takes the highest LSN acknowledged so far, and a later
/// insert with the same version replaces an earlier one.
pub struct Memstore {
    id: u64,
    map: SkipMap<Versioned, Value>,
    /// Charged bytes: inserted entries plus admitted writes not yet inserted.
    bytes: AtomicU64,
    /// Writes admitted to this memstore whose insert has not happened yet.
    pending: AtomicU64,
    /// The highest LSN of a logged write inserted.
    max_lsn: AtomicU64,
    /// Every logged write this memstore gets has an LSN above this.
    floor: AtomicU64,
    frozen: AtomicBool,
    /// Writers' batches that can insert their writes themselves.
    inserters: Mutex<Vec<Weak<dyn Inserter>>>,
}

/// Counts of one memstore, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemstoreStats {
    pub bytes: u64,
    /// Entries (every version of every key).
    pub entries: u64,
    pub pending: u64,
    pub max_lsn: u64,
}

impl Memstore {
    /// An empty memstore whose logged writes will have LSNs above `floor`.
    pub fn new(id: u64, floor: u64) -> Memstore {
        Memstore {
            id,
            map: SkipMap::new(),
            bytes: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            max_lsn: AtomicU64::new(0),
            floor: AtomicU64::new(floor),
            frozen: AtomicBool::new(false),
            inserters: Mutex::new(Vec::new()),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Charges `writes` writes of `bytes` in all that will be inserted (or
    /// [`Memstore::cancel`]led).
    pub fn admit(&self, writes: u64, bytes: u64) {
        self.pending.fetch_add(writes, Ordering::SeqCst);
        self.bytes.fetch_add(bytes, Ordering::SeqCst);
    }

    /// Undoes [`Memstore::admit`] for writes that failed.
    pub fn cancel(&self, writes: u64, bytes: u64) {
        self.bytes.fetch_sub(bytes, Ordering::SeqCst);
        self.pending.fetch_sub(writes, Ordering::SeqCst);
    }

    /// Ends the pending state of `writes` admitted writes, once inserted
    /// with [`Memstore::insert`].
    pub fn inserted(&self, writes: u64) {
        self.pending.fetch_sub(writes, Ordering::SeqCst);
    }

    /// Inserts a write (`logged`: it has a real LSN). Its bytes were
    /// charged by [`Memstore::admit`] or [`Memstore::charge`].
    pub fn insert(
        &self,
        key: Vec<u8>,
        version: u64,
        logged: bool,
        kind: EntryKind,
        value: Vec<u8>,
    ) {
        if logged && version > self.max_lsn.load(Ordering::Relaxed) {
            self.max_lsn.fetch_max(version, Ordering::SeqCst);
        }
        self.map
            .insert(Versioned::new(key, version), Value { kind, value });
    }

    /// Charges bytes without a pending write (replay inserts at once).
    pub fn charge(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::SeqCst);
    }

    /// The newest version of `key`, a tombstone included.
    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        let probe = Versioned::new(key.to_vec(), u64::MAX);
        let e = self.map.lower_bound(Bound::Included(&probe))?;
        (e.key().key == key).then(|| Entry {
            key: key.to_vec(),
            lsn: e.key().version.0,
            kind: e.value().kind,
            value: e.value().value.clone(),
        })
    }

    /// Up to `max` entries, the newest version of each key, from `from`
    /// (inclusive, or exclusive when `after`) up to `to` (exclusive).
    pub fn range_newest(
        &self,
        from: &[u8],
        after: bool,
        to: Option<&[u8]>,
        max: usize,
    ) -> Vec<Entry> {
        let probe = Versioned::new(from.to_vec(), if after { 0 } else { u64::MAX });
        let start = if after {
            Bound::Excluded(probe)
        } else {
            Bound::Included(probe)
        };
        let mut out: Vec<Entry> = Vec::new();
        for e in self.map.range((start, Bound::Unbounded)) {
            let k = &e.key().key;
            if to.is_some_and(|to| k.as_slice() >= to) {
                break;
            }
            if after && k.as_slice() == from {
                continue;
            }
            if out.last().is_some_and(|last| last.key == *k) {
                continue;
            }
            if out.len() == max {
                break;
            }
            out.push(Entry {
                key: k.clone(),
                lsn: e.key().version.0,
                kind: e.value().kind,
                value: e.value().value.clone(),
            });
        }
        out
    }

    /// Calls `f` with the newest version of every key, in key order.
    pub fn for_each_newest<E>(
        &self,
        mut f: impl FnMut(&[u8], u64, EntryKind, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut prev: Option<crossbeam_skiplist::map::Entry<'_, Versioned, Value>> = None;
        for e in self.map.iter() {
            if prev.as_ref().is_some_and(|p| p.key().key == e.key().key) {
                continue;
            }
            f(
                &e.key().key,
                e.key().version.0,
                e.value().kind,
                &e.value().value,
            )?;
            prev = Some(e);
        }
        Ok(())
    }

    /// Remembers a batch of admitted writes that can insert itself.
    pub fn register(&self, inserter: Weak<dyn Inserter>) {
        let mut list = self.inserters.lock().expect("inserters lock");
        if list.len() >= 64 {
            list.retain(|w| w.strong_count() > 0);
        }
        list.push(inserter);
    }

    /// Asks every registered batch to insert its writes if acknowledged.
    pub fn insert_acknowledged(&self) {
        let list: Vec<Weak<dyn Inserter>> = self.inserters.lock().expect("inserters lock").clone();
        for w in list {
            if let Some(i) = w.upgrade() {
                i.insert_acknowledged();
            }
        }
    }

    /// Charged bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    /// Writes admitted and not yet inserted.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::SeqCst)
    }

    /// True when nothing was ever admitted or inserted.
    pub fn is_unused(&self) -> bool {
        self.pending() == 0 && self.map.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The highest LSN of a logged write inserted (0: none).
    pub fn max_lsn(&self) -> u64 {
        self.max_lsn.load(Ordering::SeqCst)
    }

    /// Every logged write of this memstore has an LSN above this.
    pub fn floor(&self) -> u64 {
        self.floor.load(Ordering::SeqCst)
    }

    /// Moves the floor up, while the memstore is unused.
    pub fn set_floor(&self, floor: u64) {
        self.floor.store(floor, Ordering::SeqCst);
    }

    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    pub fn stats(&self) -> MemstoreStats {
        MemstoreStats {
            bytes: self.bytes(),
            entries: self.map.len() as u64,
            pending: self.pending(),
            max_lsn: self.max_lsn(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(m: &Memstore, k: &str, v: u64, val: &str) {
        m.insert(
            k.as_bytes().to_vec(),
            v,
            true,
            EntryKind::Put,
            val.as_bytes().to_vec(),
        );
    }

    #[test]
    fn newest_version_wins_and_ranges_skip_older_versions() {
        let m = Memstore::new(1, 0);
        put(&m, "b", 5, "b5");
        put(&m, "b", 9, "b9");
        put(&m, "a", 3, "a3");
        m.insert(b"c".to_vec(), 7, true, EntryKind::Delete, Vec::new());
        put(&m, "c", 2, "c2");
        assert_eq!(m.get(b"b").unwrap().value, b"b9");
        assert_eq!(m.get(b"c").unwrap().kind, EntryKind::Delete);
        assert!(m.get(b"bb").is_none());
        let r = m.range_newest(b"a", false, None, 10);
        let keys: Vec<_> = r.iter().map(|e| (e.key.clone(), e.lsn)).collect();
        assert_eq!(
            keys,
            vec![(b"a".to_vec(), 3), (b"b".to_vec(), 9), (b"c".to_vec(), 7)]
        );
        let r = m.range_newest(b"a", true, Some(b"c"), 10);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].value, b"b9");
        assert_eq!(m.range_newest(b"a", false, None, 2).len(), 2);
        let mut seen = Vec::new();
        m.for_each_newest::<()>(|k, v, _, _| {
            seen.push((k.to_vec(), v));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, keys);
        assert_eq!(m.max_lsn(), 9);
    }

    #[test]
    fn the_inline_prefix_keeps_byte_order() {
        let m = Memstore::new(1, 0);
        let keys: [&[u8]; 9] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\x01",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgi",
            b"b",
        ];
        for (i, k) in keys.iter().enumerate().rev() {
            m.insert(k.to_vec(), i as u64, true, EntryKind::Put, Vec::new());
        }
        let got: Vec<Vec<u8>> = m
            .range_newest(b"", false, None, 100)
            .into_iter()
            .map(|e| e.key)
            .collect();
        let want: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        assert_eq!(got, want);
        assert!(m.get(b"abcdefgh\0").is_some() && m.get(b"abcdefg").is_none());
    }

    #[test]
    fn admitted_writes_are_pending_until_inserted_or_cancelled() {
        let m = Memstore::new(1, 4);
        assert!(m.is_unused());
        m.admit(1, 100);
        assert!(!m.is_unused());
        m.insert(b"k".to_vec(), 5, true, EntryKind::Put, b"v".to_vec());
        m.inserted(1);
        assert_eq!(m.pending(), 0);
        m.admit(2, 50);
        m.cancel(2, 50);
        assert_eq!(m.bytes(), 100);
        assert_eq!(m.stats().entries, 1);
    }
}
