//! One memstore: a concurrent sorted map of versions.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use std::sync::RwLock;

use super::admission::{Admission, Inserter, TRIM_AT};
use super::chain::Version;
use super::key::{KeyProbe, MapKey, Probe};
use super::tree::{Slot, Tree};
use crate::hash::neighbor_hash;
use crate::record::Record;
use crate::table::{Entry, EntryKind};

/// Bytes a version costs beyond its key and value: its share of the
/// B-tree node (a 64-byte key with its 40-byte inline prefix and the
/// index of its chain; nodes about three quarters full), the 56-byte
/// chain holding one version (its shared record's handle, its LSN and
/// kind), and allocator rounding. Key and value share one buffer per
/// group of writes, whose header this leaves out, as it leaves out the
/// key's entry in the hash index (about 16 bytes a key, not a version)
/// and a long key's copy of its bytes past the prefix.
pub const ENTRY_OVERHEAD: u64 = 120;

/// New keys a memstore holds outside its B-tree at most
/// ([`Memstore::insert_records`]): a fold of that many takes a
/// millisecond or two.
const FOLD_AT: usize = 4096;

/// Most entries [`Memstore::range_newest`] makes room for at once: callers ask
/// for a chunk (64) or for everything (`usize::MAX`).
const RANGE_RESERVE: usize = 256;

/// What an entry of `key_len` and `value_len` bytes is charged.
pub fn entry_bytes(key_len: usize, value_len: usize) -> u64 {
    key_len as u64 + value_len as u64 + ENTRY_OVERHEAD
}

/// What a version is charged.
fn version_bytes(v: &Version) -> u64 {
    entry_bytes(v.record.key_len(), v.record.value_len())
}

/// One region's memstore.
///
/// A version is the LSN of the write; a write at `none` durability, which
/// has no LSN, takes the highest LSN acknowledged when it was admitted,
/// and a later insert with the same version replaces an earlier one.
pub struct Memstore {
    id: u64,
    /// Each key's versions, by hash and in a B-tree ([`Tree`]), behind
    /// one reader-writer lock. Each insert holds the write lock for a run
    /// of inserts; gets hold the read lock while they copy a value out,
    /// scans while they copy entries out, a flush while it walks the
    /// memstore (its writes are all in by then, but for a pass up to an
    /// LSN of a full log: then writes above that LSN wait for the pass);
    /// a scan or a walk that finds keys not yet in the B-tree first takes
    /// the write lock to fold them in. A B-tree keeps
    /// a dozen keys side by side per node: an insert or a lookup visits a
    /// handful of nodes where a skip list of as many entries took a cache
    /// miss for each of some thirty towers, and a walk reads keys in
    /// order from the same nodes.
    map: RwLock<Tree>,
    /// A scan has read this memstore: from then on inserts keep its
    /// B-tree nearly whole, so the next scan's fold is short.
    scanned: AtomicBool,
    /// A pass over a full log walks the map twice (to count, then to
    /// write what it counted): no version is dropped meanwhile.
    passing: AtomicBool,
    /// Every version inserted, with its key and value bytes: a bound of
    /// what a flush of it writes.
    inserted_entries: AtomicU64,
    inserted_key_bytes: AtomicU64,
    inserted_value_bytes: AtomicU64,
    /// Charged bytes: inserted entries plus admitted writes not yet inserted.
    bytes: AtomicU64,
    /// Writes admitted to this memstore whose insert has not happened yet.
    pending: AtomicU64,
    /// The highest LSN of a logged write inserted.
    max_lsn: AtomicU64,
    /// Every logged write this memstore gets has an LSN above this.
    floor: AtomicU64,
    /// The LSN up to which the last pass over a full log wrote this
    /// memstore to a recorded block file (0: none did).
    passed: AtomicU64,
    frozen: AtomicBool,
    /// Writers' batches that can insert their writes themselves.
    inserters: Mutex<Vec<Weak<dyn Inserter>>>,
    /// Every group of writes admitted and not known to be all inserted,
    /// and the length at which the list is next trimmed.
    admissions: Mutex<(Vec<Arc<Admission>>, usize)>,
}

/// While alive, no version leaves the memstore ([`Memstore::keep_versions`]).
pub struct KeepVersions<'m>(&'m Memstore);

impl Drop for KeepVersions<'_> {
    fn drop(&mut self) {
        self.0.passing.store(false, Ordering::SeqCst);
    }
}

/// Counts of one memstore, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemstoreStats {
    pub bytes: u64,
    /// Entries: the versions kept (a durable write drops older ones).
    pub entries: u64,
    pub pending: u64,
    pub max_lsn: u64,
}

impl Memstore {
    /// An empty memstore whose logged writes will have LSNs above `floor`.
    pub fn new(id: u64, floor: u64) -> Memstore {
        Memstore {
            id,
            map: RwLock::default(),
            scanned: AtomicBool::new(false),
            passing: AtomicBool::new(false),
            inserted_entries: AtomicU64::new(0),
            inserted_key_bytes: AtomicU64::new(0),
            inserted_value_bytes: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            max_lsn: AtomicU64::new(0),
            floor: AtomicU64::new(floor),
            passed: AtomicU64::new(0),
            frozen: AtomicBool::new(false),
            inserters: Mutex::new(Vec::new()),
            admissions: Mutex::new((Vec::new(), TRIM_AT)),
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

    /// Remembers a group of admitted writes (under the region's lock, with
    /// [`Memstore::admit`]) until every one of them is inserted.
    pub fn track(&self, admission: Arc<Admission>) {
        let mut guard = self.admissions.lock().expect("admissions lock");
        let (list, trim_at) = &mut *guard;
        if list.len() >= *trim_at {
            list.retain(|a| !a.is_done());
            *trim_at = (list.len() * 2).max(TRIM_AT);
        }
        list.push(admission);
    }

    /// Whether every write admitted to this memstore whose LSN is at or
    /// below `lsn` is inserted. Read `lsn` from a WAL watermark before
    /// calling (see [`Admission`]).
    pub fn inserted_through(&self, lsn: u64) -> bool {
        let mut guard = self.admissions.lock().expect("admissions lock");
        guard.0.retain(|a| !a.is_done());
        guard.0.iter().all(|a| a.inserted_through(lsn))
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
        self.insert_record(Record::new(&key, &value), version, logged, kind);
    }

    /// As [`Memstore::insert`], for a write whose key and value are a
    /// shared record.
    pub fn insert_record(&self, record: Record, version: u64, logged: bool, kind: EntryKind) {
        self.insert_records(&mut vec![(record, version, kind)], logged, false);
    }

    /// Inserts the writes `(record, version, kind)` of `run`, in order,
    /// under one lock of the map, and empties `run`. The engine's runs
    /// are in LSN order; a run out of order is inserted as well, but a
    /// durable write may then keep an older version beside it.
    ///
    /// `durable`: the writes are logged and durable (acknowledged at
    /// `sync`). Then the older versions of each key are dropped, and the
    /// bytes they were charged returned: no read sees them, a flush
    /// writes the newest version, and a pass over a full log up to an LSN
    /// below this write's may leave the key out, since the log keeps this
    /// write for the replay after it. A version shadowed by a write a
    /// power cut can still lose (`write`, `async`) stays: after such a
    /// crash it is the key's value again. A key written again and again
    /// (a counter, a collection's size) so holds one version, replaced
    /// where it is: one search of the map per write, where inserting a
    /// version and dropping the older ones every few writes took two
    /// searches and a removal (a sixth of INCR's server CPU).
    pub fn insert_records(
        &self,
        run: &mut Vec<(Record, u64, EntryKind)>,
        logged: bool,
        durable: bool,
    ) -> u64 {
        if run.is_empty() {
            return 0;
        }
        let (mut max, mut keys, mut values) = (0, 0, 0);
        // The hashes are computed before the lock is taken.
        let entries: Vec<(Version, u64)> = run
            .drain(..)
            .map(|(record, lsn, kind)| {
                max = max.max(lsn);
                keys += record.key_len() as u64;
                values += record.value_len() as u64;
                let hash = neighbor_hash(record.key());
                (Version { lsn, record, kind }, hash)
            })
            .collect();
        if logged && max > self.max_lsn.load(Ordering::Relaxed) {
            self.max_lsn.fetch_max(max, Ordering::SeqCst);
        }
        // Counted before they are in (see `is_empty`).
        self.inserted_entries
            .fetch_add(entries.len() as u64, Ordering::Release);
        self.inserted_key_bytes.fetch_add(keys, Ordering::Relaxed);
        self.inserted_value_bytes
            .fetch_add(values, Ordering::Relaxed);
        // In the run's order: a later version of a key replaces or joins
        // an earlier one in its chain (a durable one drops it, returning
        // its bytes), and an unlogged write replaces an earlier one of
        // the same version. Keys are found by hash, and new ones join the
        // B-tree later, sorted ([`Tree::fold`]), so the run is not sorted.
        let mut freed = 0;
        let mut guard = self.map.write().expect("memstore lock");
        let tree = &mut *guard;
        let shed = durable && !self.passing.load(Ordering::SeqCst);
        for (version, hash) in entries {
            let Some(chain) = tree.find_mut(hash, version.record.key()) else {
                tree.add(hash, version);
                continue;
            };
            if shed {
                let (gained, bytes) = chain.insert_durable(version, version_bytes);
                tree.versions = tree.versions.wrapping_add_signed(gained);
                freed += bytes;
            } else {
                let gained = chain.insert(version);
                tree.versions += gained;
            }
        }
        // Once scans read this memstore, a bounded fold now and then: the
        // next scan would otherwise hold the write lock while it sorts
        // every key since. A memstore no scan reads skips the B-tree's
        // inserts (a tenth of ZADD's server CPU); its flush sorts aside.
        if tree.unfolded() >= FOLD_AT && self.scanned.load(Ordering::Relaxed) {
            tree.fold();
        }
        freed
    }

    /// Versions inserted so far and their key and value bytes: at least
    /// what the newest versions alone hold.
    pub fn inserted_totals(&self) -> (u64, u64, u64) {
        (
            self.inserted_entries.load(Ordering::Relaxed),
            self.inserted_key_bytes.load(Ordering::Relaxed),
            self.inserted_value_bytes.load(Ordering::Relaxed),
        )
    }

    /// Charges bytes without a pending write (replay inserts at once).
    pub fn charge(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::SeqCst);
    }

    /// The newest version of `key`, a tombstone included.
    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.newest(key, |v| Entry {
            key: key.to_vec(),
            lsn: v.lsn,
            kind: v.kind,
            value: v.record.value().to_vec(),
        })
    }

    /// The newest version of `key` (a tombstone included): its kind and a
    /// copy of its value, and no copy of the key.
    pub fn get_value(&self, key: &[u8]) -> Option<(EntryKind, Vec<u8>)> {
        self.newest(key, |v| (v.kind, v.record.value().to_vec()))
    }

    /// A key whose hash was never counted has no version here: most
    /// lookups (a write's read of a key or element it creates, a read of a
    /// key in the region's other memstores) end at that probe instead of a
    /// search of the whole tree.
    fn newest<T>(&self, key: &[u8], f: impl FnOnce(&Version) -> T) -> Option<T> {
        let hash = neighbor_hash(key);
        let tree = self.map.read().expect("memstore lock");
        Some(f(tree.find(hash, key)?.newest()))
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
        let probe = KeyProbe::new(from);
        let probe: &dyn Probe = &probe;
        let start = if after {
            Bound::Excluded(probe)
        } else {
            Bound::Included(probe)
        };
        let within = (from, to);
        let to = to.map(KeyProbe::new);
        self.sorted(within, |tree| {
            let mut out: Vec<Entry> = Vec::with_capacity(max.min(RANGE_RESERVE));
            // The range is open-ended, each key checked against `to`: a
            // range with two bounds descends the B-tree once for each.
            // Keys are copied from the map's keys: a tombstone passed
            // (SPOP's, before a live member) reads its chain and never
            // its record.
            let keys = tree.keys.range::<dyn Probe, _>((start, Bound::Unbounded));
            let below = |k: &MapKey| {
                to.as_ref()
                    .is_none_or(|to| (k as &dyn Probe) < (to as &dyn Probe))
            };
            // The keys first, then their newest versions, then the copies
            // (see `WALK_BATCH`; callers ask for a chunk at a time).
            let slots: Vec<(&MapKey, Slot)> = keys
                .take_while(|(k, _)| below(k))
                .take(max)
                .map(|(k, &slot)| (k, slot))
                .collect();
            let newest: Vec<&Version> = slots
                .iter()
                .map(|&(_, slot)| tree.chain(slot).newest())
                .collect();
            for (&(k, _), v) in slots.iter().zip(newest) {
                out.push(Entry {
                    key: k.bytes(),
                    lsn: v.lsn,
                    kind: v.kind,
                    value: match v.kind {
                        EntryKind::Put => v.record.value().to_vec(),
                        EntryKind::Delete => Vec::new(),
                    },
                });
            }
            out
        })
    }

    /// Runs `f` on the map with every key in its B-tree, under the read
    /// lock, for a scan of `[from, to)`: the fresh keys are folded in
    /// first ([`Tree::fold`]) under the write lock, which is let go before
    /// `f` runs. A range no key can be in ([`Tree::may_hold`]) gets
    /// `R::default()` at once, without a fold and without counting as a
    /// scan of this memstore.
    fn sorted<R: Default>(
        &self,
        (from, to): (&[u8], Option<&[u8]>),
        f: impl FnOnce(&Tree) -> R,
    ) -> R {
        loop {
            {
                let tree = self.map.read().expect("memstore lock");
                if !tree.may_hold(from, to) {
                    return R::default();
                }
                if !self.scanned.load(Ordering::Relaxed) {
                    self.scanned.store(true, Ordering::Relaxed);
                }
                if tree.is_folded() {
                    return f(&tree);
                }
            }
            self.map.write().expect("memstore lock").fold();
        }
    }

    /// Keys outside the B-tree: the next scan folds them in first.
    pub fn unfolded(&self) -> usize {
        self.map.read().expect("memstore lock").unfolded()
    }

    /// Folds at most `most` of the keys outside the B-tree into it, when
    /// at least [`FOLD_AT`] wait and the memstore takes writes: the work
    /// the next scan would otherwise do before it could answer, holding
    /// the write lock (a tenth of a second for the 216,000 keys a bulk
    /// load leaves), done ahead while the server idles. Never waits for
    /// the lock. Returns how many it folded, and whether at least
    /// [`FOLD_AT`] keys still wait.
    pub fn fold_ahead(&self, most: usize) -> (usize, bool) {
        if self.is_frozen() {
            return (0, false);
        }
        let Ok(mut tree) = self.map.try_write() else {
            return (0, true);
        };
        let before = tree.unfolded();
        if before < FOLD_AT {
            return (0, false);
        }
        tree.fold_some(most);
        let left = tree.unfolded();
        (before - left, left >= FOLD_AT)
    }

    /// Calls `f` with the newest version of every key, in key order.
    pub fn for_each_newest<E>(
        &self,
        f: impl FnMut(&[u8], u64, EntryKind, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.for_each_newest_upto(u64::MAX, f)
    }

    /// Calls `f` with the newest version at or below `upto` of every key
    /// that has one, in key order.
    pub fn for_each_newest_upto<E>(
        &self,
        upto: u64,
        f: impl FnMut(&[u8], u64, EntryKind, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.for_each_newest_between(None, upto, f)
    }

    /// As [`Memstore::for_each_newest_upto`], for the keys whose newest
    /// version at or below `upto` is above `above` (`None`: every key).
    pub fn for_each_newest_between<E>(
        &self,
        above: Option<u64>,
        upto: u64,
        mut f: impl FnMut(&[u8], u64, EntryKind, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        // No fold: a flush's memstore takes no more writes, and the keys
        // not in the B-tree are sorted aside under the read lock.
        let tree = self.map.read().expect("memstore lock");
        tree.for_each_in_order(|chain| {
            let Some(v) = chain.newest_upto(upto) else {
                return Ok(());
            };
            if above.is_some_and(|a| v.lsn <= a) {
                return Ok(());
            }
            f(v.record.key(), v.lsn, v.kind, v.record.value())
        })
    }

    /// The LSN up to which a recorded pass over a full log wrote this
    /// memstore, if one did.
    pub fn passed(&self) -> Option<u64> {
        match self.passed.load(Ordering::SeqCst) {
            0 => None,
            lsn => Some(lsn),
        }
    }

    /// A pass wrote this memstore up to `lsn` (the newest version at or
    /// below it of every key) to a block file the manifest now holds.
    pub fn set_passed(&self, lsn: u64) {
        self.passed.fetch_max(lsn, Ordering::SeqCst);
    }

    /// Keeps every version in the map until the guard is dropped: a pass
    /// over a full log counts the versions it will write, then writes
    /// them, and a durable insert between the two walks must not take
    /// counted ones away.
    pub fn keep_versions(&self) -> KeepVersions<'_> {
        self.passing.store(true, Ordering::SeqCst);
        KeepVersions(self)
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
        self.pending() == 0 && self.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        // Versions are counted as inserted, before they are in, and the
        // count never goes down (a durable write's older versions leave the
        // map, the write itself is in it): by the time a writer ends its
        // pending state, its entry is counted here.
        self.inserted_entries.load(Ordering::Acquire) == 0
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

    /// Moves the floor up to `floor` (never down): every logged write this
    /// memstore holds at or below it is in a durable block file, and every
    /// one it will still get is above it.
    pub fn raise_floor(&self, floor: u64) {
        self.floor.fetch_max(floor, Ordering::SeqCst);
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
            entries: self.map.read().expect("memstore lock").versions,
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
    fn an_unlogged_write_replaces_one_of_the_same_version_value_and_all() {
        let m = Memstore::new(1, 0);
        assert!(m.is_empty());
        m.insert(b"k".to_vec(), 4, false, EntryKind::Put, b"old".to_vec());
        m.insert(b"k".to_vec(), 4, false, EntryKind::Put, b"newer".to_vec());
        assert!(!m.is_empty());
        assert_eq!(m.stats().entries, 1);
        assert_eq!(m.get(b"k").unwrap().value, b"newer");
        // Unlogged writes leave the highest logged LSN alone.
        assert_eq!(m.max_lsn(), 0);
    }

    #[test]
    fn new_keys_wait_outside_the_tree_a_bounded_while_once_scanned() {
        let m = Memstore::new(1, 0);
        let walk = |m: &Memstore| {
            let mut seen = Vec::new();
            m.for_each_newest(|k, _, _, _| {
                seen.push(k.to_vec());
                Ok::<(), ()>(())
            })
            .unwrap();
            seen
        };
        // Unscanned: no fold, and a walk sorts the new keys aside (keys
        // in the reverse of their order, so the sort shows).
        let key = |i: u64| format!("k{:06}", 999_999 - i);
        for i in 0..(FOLD_AT as u64 + 100) {
            put(&m, &key(i), i + 1, "v");
        }
        assert_eq!(m.map.read().unwrap().unfolded(), FOLD_AT + 100);
        let seen = walk(&m);
        assert_eq!(seen.len(), FOLD_AT + 100);
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        assert!(!m.map.read().unwrap().is_folded());
        // A scan of a range no key can be in neither folds nor counts.
        assert!(m
            .range_newest(b"\0\x02", false, Some(b"\0\x03"), 1)
            .is_empty());
        assert!(!m.map.read().unwrap().is_folded());
        assert!(!m.scanned.load(Ordering::Relaxed));
        // A scan folds them in; from then on inserts fold now and then.
        assert_eq!(
            m.range_newest(b"", false, None, 1)[0].key,
            key(FOLD_AT as u64 + 99).as_bytes()
        );
        assert!(m.map.read().unwrap().is_folded());
        let more = |i: u64| format!("j{i:06}");
        for i in 0..(FOLD_AT as u64 + 100) {
            put(&m, &more(i), i + 1, "v");
            assert!(m.map.read().unwrap().unfolded() < FOLD_AT);
        }
        assert_eq!(m.map.read().unwrap().unfolded(), 100);
        // A walk merges the tree's keys with the new ones, in order.
        let seen = walk(&m);
        assert_eq!(seen.len(), 2 * (FOLD_AT + 100));
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(seen[0], more(0).into_bytes());
    }

    /// Folding ahead takes a chunk at a time, only while enough keys
    /// wait, never a frozen memstore's, and leaves the keys in order.
    #[test]
    fn folding_ahead_goes_a_chunk_at_a_time_while_enough_keys_wait() {
        let m = Memstore::new(1, 0);
        let key = |i: u64| format!("k{:06}", 999_999 - i);
        for i in 0..(FOLD_AT as u64 - 1) {
            put(&m, &key(i), i + 1, "v");
        }
        // Too few to be worth it: the next scan folds them.
        assert_eq!(m.fold_ahead(1000), (0, false));
        assert_eq!(m.unfolded(), FOLD_AT - 1);
        let n = 3 * FOLD_AT as u64;
        for i in (FOLD_AT as u64 - 1)..n {
            put(&m, &key(i), i + 1, "v");
        }
        let mut chunks = 0;
        loop {
            let (folded, more) = m.fold_ahead(1000);
            assert!(folded <= 1000);
            chunks += 1;
            if !more {
                break;
            }
            assert_eq!(folded, 1000);
        }
        assert!(m.unfolded() < FOLD_AT);
        assert_eq!(chunks, (n as usize - FOLD_AT) / 1000 + 1);
        // Not scanned yet: the fold ahead is not a scan.
        assert!(!m.scanned.load(Ordering::Relaxed));
        let all = m.range_newest(b"", false, None, usize::MAX);
        assert_eq!(all.len(), n as usize);
        assert!(all.windows(2).all(|w| w[0].key < w[1].key));
        // A frozen memstore is left to its flush.
        let f = Memstore::new(2, 0);
        for i in 0..n {
            put(&f, &key(i), i + 1, "v");
        }
        f.freeze();
        assert_eq!(f.fold_ahead(1000), (0, false));
        assert_eq!(f.unfolded(), n as usize);
    }

    #[test]
    fn a_run_of_records_goes_in_at_once_in_order() {
        let m = Memstore::new(1, 0);
        let recs =
            Record::group([(&b"b"[..], &b"b1"[..]), (b"a", b"a1"), (b"b", b"b2")].into_iter());
        let mut run: Vec<(Record, u64, EntryKind)> = recs
            .into_iter()
            .zip([5, 6, 7])
            .map(|(r, v)| (r, v, EntryKind::Put))
            .collect();
        m.insert_records(&mut run, true, false);
        assert!(run.is_empty());
        assert_eq!(m.max_lsn(), 7);
        assert_eq!(m.inserted_totals(), (3, 3, 6));
        assert_eq!(m.get(b"b").unwrap().value, b"b2");
        assert_eq!(m.get(b"a").unwrap().lsn, 6);
        let mut seen = Vec::new();
        m.for_each_newest::<()>(|k, v, _, val| {
            seen.push((k.to_vec(), v, val.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), 6, b"a1".to_vec()),
                (b"b".to_vec(), 7, b"b2".to_vec())
            ]
        );
    }

    #[test]
    fn a_durable_write_drops_the_older_versions_of_its_key() {
        let m = Memstore::new(1, 0);
        let run = |writes: &[(&[u8], u64)], durable: bool| {
            let recs = Record::group(writes.iter().map(|(k, _)| (*k, &b"vv"[..])));
            let mut run: Vec<(Record, u64, EntryKind)> = recs
                .into_iter()
                .zip(writes.iter().map(|w| w.1))
                .map(|(r, v)| (r, v, EntryKind::Put))
                .collect();
            m.insert_records(&mut run, true, durable)
        };
        // Not durable (`write`, `async`): every version stays, since a
        // power cut may still take the newer one.
        for v in 1..8 {
            assert_eq!(run(&[(b"k", v)], false), 0);
        }
        assert_eq!(run(&[(b"j", 50)], true), 0);
        assert_eq!(m.stats().entries, 8);
        // A durable write drops the older versions, and their charge
        // comes back.
        assert_eq!(run(&[(b"k", 60)], true), 7 * entry_bytes(1, 2));
        assert_eq!(m.stats().entries, 2);
        assert_eq!(m.get(b"k").unwrap().lsn, 60);
        // Two writes of a key in one durable run (in LSN order, as the
        // engine's runs are) keep the newer.
        assert_eq!(run(&[(b"k", 61), (b"k", 62)], true), 2 * entry_bytes(1, 2));
        assert_eq!(m.stats().entries, 2);
        assert_eq!(m.get(b"k").unwrap().lsn, 62);
        // Another key's versions, before or after it, stay.
        assert_eq!(m.get(b"j").unwrap().lsn, 50);
        // Every version inserted is still counted for the flush's bound.
        assert_eq!(m.inserted_totals().0, 11);
        // While a pass walks the memstore, every version stays.
        let keep = m.keep_versions();
        for v in 70..78 {
            assert_eq!(run(&[(b"k", v)], true), 0);
        }
        drop(keep);
        assert_eq!(m.stats().entries, 10);
        assert_eq!(run(&[(b"k", 90)], true), 9 * entry_bytes(1, 2));
        assert_eq!(m.stats().entries, 2);
        // A durable write below a newer version that is not durable
        // drops only what is older than itself.
        assert_eq!(run(&[(b"k", 95)], false), 0);
        assert_eq!(run(&[(b"k", 92)], true), entry_bytes(1, 2));
        assert_eq!(m.stats().entries, 3);
        assert_eq!(m.get(b"k").unwrap().lsn, 95);
        let mut upto = Vec::new();
        m.for_each_newest_upto::<()>(93, |k, v, _, _| {
            upto.push((k.to_vec(), v));
            Ok(())
        })
        .unwrap();
        assert_eq!(upto, vec![(b"j".to_vec(), 50), (b"k".to_vec(), 92)]);
    }

    #[test]
    fn the_inline_prefix_keeps_byte_order() {
        let m = Memstore::new(1, 0);
        let keys: [&[u8]; 14] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\x01",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgh\0\0\0\0\0\0\0\0",
            b"abcdefghijklmnop",
            b"abcdefghijklmnop\0",
            b"abcdefghijklmnop\x01",
            b"abcdefghijklmnoq",
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
        assert!(m.get(b"abcdefghijklmnop\0").is_some());
        assert!(m.get(b"abcdefghijklmno").is_none() && m.get(b"abcdefghijklmnop\0\0").is_none());
    }

    #[test]
    fn iteration_up_to_an_lsn_takes_the_newest_version_at_or_below_it() {
        let m = Memstore::new(1, 0);
        put(&m, "a", 3, "a3");
        put(&m, "a", 9, "a9");
        put(&m, "b", 8, "b8");
        put(&m, "c", 2, "c2");
        put(&m, "c", 5, "c5");
        let mut seen = Vec::new();
        m.for_each_newest_upto::<()>(6, |k, v, _, _| {
            seen.push((k.to_vec(), v));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(b"a".to_vec(), 3), (b"c".to_vec(), 5)]);
    }

    #[test]
    fn a_memstore_knows_when_its_writes_up_to_an_lsn_are_inserted() {
        use crate::wal::Ticket;
        let m = Memstore::new(1, 0);
        // Two groups: LSNs 4 and 6, then 7 and one not given yet.
        let (t4, t6, t7, tx) = (
            Ticket::given(4),
            Ticket::given(6),
            Ticket::given(7),
            Ticket::given(0),
        );
        let a = Admission::new(vec![t4, t6]);
        let b = Admission::new(vec![t7, tx]);
        m.track(a.clone());
        m.track(b.clone());
        assert!(m.inserted_through(3));
        assert!(!m.inserted_through(4));
        a.advance();
        assert!(m.inserted_through(5));
        assert!(!m.inserted_through(6));
        a.advance();
        assert!(m.inserted_through(6));
        assert!(!m.inserted_through(100));
        b.advance();
        // The last write has no LSN yet: it will get one above any given.
        assert!(m.inserted_through(100));
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
