//! The memstore's map: each key's versions, found by the key's hash, and
//! kept in key order for walks.
//!
//! A key's first version goes into the hash index only; its place in
//! the B-tree of keys is found later ([`Tree::fold`]), when a scan of the
//! memstore needs it or, once one has, a few thousand new keys have
//! gathered. A memstore no scan reads (a write-only load) never builds
//! its tree: its flush sorts the new keys aside ([`Tree::for_each_in_order`]).
//! Point reads and writes ask
//! the index, so they never wait for the tree. The B-tree insert of a key
//! that arrived at random, a search from the root missing the CPU's
//! cache at each level (half the cost of a write's memstore insert at
//! `incr -P 1` on 100,000 keys), becomes one sort of the keys that came
//! since and a run of inserts in order, each walking the nodes the one
//! before it walked.

use std::collections::hash_map::Entry;
use std::collections::BTreeMap;

use nohash_hasher::IntMap;

use super::chain::{Chain, Version};
use super::key::{prefix, KeyProbe, MapKey, Probe};

/// Fresh keys at least this share of the tree's are folded in by
/// building a tree of them and appending it (one pass over both) rather
/// than by inserting them one by one.
const APPEND_SHARE: usize = 4;

/// Keys a walk in order takes from the B-tree before it looks up their
/// versions in the index. A key's versions are in the index's bucket for
/// its hash: in a large memstore, a miss of the CPU's cache (a line of
/// control bytes, then the bucket) at every key, unrelated to where its
/// key is. Looked up in a loop of their own, the CPU overlaps the misses
/// of many keys; one at a time between the work done with each
/// (copying it out, writing it to a block file), it waits for each in
/// turn: a range of 100 keys of a 400,000-key memstore took 46 µs that
/// way and 16 µs this way.
const WALK_BATCH: usize = 64;

/// Pairs of first bytes [`Tree::may_hold`] tells apart.
const FIRSTS: usize = 1 << 16;

/// A key's first two bytes (zero for a byte it has not), in order: a key
/// at or above another has a pair at or above the other's.
fn first_pair(key: &[u8]) -> usize {
    let byte = |i: usize| usize::from(key.get(i).copied().unwrap_or(0));
    byte(0) << 8 | byte(1)
}

/// Where a key's versions are: in the index under their hash (the
/// first key of that hash), or among the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    Hashed(u64),
    Other(u32),
}

#[derive(Default)]
pub(super) struct Tree {
    /// Each key, in order, with where its versions are; but those in
    /// `fresh`.
    pub(super) keys: BTreeMap<MapKey, Slot>,
    /// The 64-bit hash of every key, with the versions of the first key
    /// of that hash held in the table itself: a lookup is one probe and
    /// one comparison with the newest record's key, with no chain to
    /// follow. A lookup of a key whose hash is not here ends without a
    /// search, and an insert of one goes straight in; a key whose hash is
    /// here is found without a search of the tree (a rewritten counter, a
    /// collection's metadata), unless another key has the same hash (then
    /// the tree is searched: a key whose hash was taken goes into the
    /// tree at once, its versions into `others`).
    index: IntMap<u64, Chain>,
    /// The versions of keys whose hash another key had first.
    others: Vec<Chain>,
    /// Hashes of the keys not yet in `keys`, each the first of its hash.
    fresh: Vec<u64>,
    /// A bit for each pair of first bytes any key has (a key of one byte
    /// counts as that byte and a zero), in 1,024 words once a key is in:
    /// a scan of a range no key can be in (the expiry index's, in a
    /// memstore of collections) answers without a fold.
    firsts: Vec<u64>,
    /// Versions held, in every chain.
    pub(super) versions: u64,
}

impl Tree {
    /// The versions at `slot`.
    pub(super) fn chain(&self, slot: Slot) -> &Chain {
        match slot {
            Slot::Hashed(h) => &self.index[&h],
            Slot::Other(i) => &self.others[i as usize],
        }
    }

    /// The versions of `key`, whose hash is `hash`, if the map holds it.
    pub(super) fn find(&self, hash: u64, key: &[u8]) -> Option<&Chain> {
        let first = self.index.get(&hash)?;
        if first.newest().record.key() == key {
            return Some(first);
        }
        let &slot = self.keys.get(&KeyProbe::new(key) as &dyn Probe)?;
        Some(self.chain(slot))
    }

    /// [`Tree::find`], to change them.
    pub(super) fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Chain> {
        let first = self.index.get(&hash)?.newest().record.key() == key;
        let slot = if first {
            Slot::Hashed(hash)
        } else {
            *self.keys.get(&KeyProbe::new(key) as &dyn Probe)?
        };
        match slot {
            Slot::Hashed(h) => self.index.get_mut(&h),
            Slot::Other(i) => self.others.get_mut(i as usize),
        }
    }

    /// Adds a key's first version, `v` (a key `find` did not find), whose
    /// key's hash is `hash`.
    pub(super) fn add(&mut self, hash: u64, v: Version) {
        if self.firsts.is_empty() {
            self.firsts = vec![0; FIRSTS / 64];
        }
        let at = first_pair(v.record.key());
        self.firsts[at / 64] |= 1 << (at % 64);
        match self.index.entry(hash) {
            Entry::Vacant(e) => {
                e.insert(Chain::One(v));
                self.fresh.push(hash);
            }
            Entry::Occupied(_) => {
                let at = u32::try_from(self.others.len()).expect("fewer than 2^32 keys");
                let key = v.record.key();
                self.keys
                    .insert(MapKey::new(prefix(key), key), Slot::Other(at));
                self.others.push(Chain::One(v));
            }
        }
        self.versions += 1;
    }

    /// Whether every key is in `keys`.
    pub(super) fn is_folded(&self) -> bool {
        self.fresh.is_empty()
    }

    /// Whether a key in `[from, to)` may be here: false when no key's
    /// first two bytes are between theirs.
    pub(super) fn may_hold(&self, from: &[u8], to: Option<&[u8]>) -> bool {
        if self.firsts.is_empty() {
            return false;
        }
        let (lo, hi) = (first_pair(from), to.map_or(FIRSTS - 1, first_pair));
        if hi < lo || hi - lo > FIRSTS / 16 {
            // Wider than a sixteenth of the pairs: not worth the words.
            return hi >= lo;
        }
        (lo..=hi).any(|at| self.firsts[at / 64] & (1 << (at % 64)) != 0)
    }

    /// Keys not in `keys` yet.
    pub(super) fn unfolded(&self) -> usize {
        self.fresh.len()
    }

    /// Calls `f` with each key's versions in key order, without a fold:
    /// the keys not in `keys` yet are sorted aside and merged with it.
    pub(super) fn for_each_in_order<E>(
        &self,
        mut f: impl FnMut(&Chain) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut fresh: Vec<(KeyProbe<'_>, &Chain)> = self
            .fresh
            .iter()
            .map(|h| {
                let chain = &self.index[h];
                (KeyProbe::new(chain.newest().record.key()), chain)
            })
            .collect();
        fresh.sort_unstable_by(|a, b| (&a.0 as &dyn Probe).cmp(&b.0 as &dyn Probe));
        let mut fresh = fresh.into_iter().peekable();
        // The keys a batch at a time, their chains looked up before `f`
        // runs on any (see `WALK_BATCH`).
        let mut keys = self.keys.iter();
        let mut slots: Vec<(&MapKey, Slot)> = Vec::with_capacity(WALK_BATCH);
        let mut chains: Vec<&Chain> = Vec::with_capacity(WALK_BATCH);
        loop {
            slots.clear();
            slots.extend(keys.by_ref().take(WALK_BATCH).map(|(k, &slot)| (k, slot)));
            if slots.is_empty() {
                break;
            }
            chains.clear();
            chains.extend(slots.iter().map(|&(_, slot)| self.chain(slot)));
            for (&(key, _), &chain) in slots.iter().zip(&chains) {
                while let Some((_, chain)) =
                    fresh.next_if(|(p, _)| (p as &dyn Probe) < (key as &dyn Probe))
                {
                    f(chain)?;
                }
                f(chain)?;
            }
        }
        fresh.try_for_each(|(_, chain)| f(chain))
    }

    /// Puts the keys added since the last fold into `keys`.
    pub(super) fn fold(&mut self) {
        self.fold_some(usize::MAX);
    }

    /// Puts at most `most` of the keys added since the last fold into
    /// `keys`, the last added first.
    pub(super) fn fold_some(&mut self, most: usize) {
        if self.fresh.is_empty() || most == 0 {
            return;
        }
        let fresh = if most >= self.fresh.len() {
            std::mem::take(&mut self.fresh)
        } else {
            self.fresh.split_off(self.fresh.len() - most)
        };
        // A batch's chains first, in a loop of their own, then their keys
        // (see `WALK_BATCH`).
        let mut new: Vec<(MapKey, Slot)> = Vec::with_capacity(fresh.len());
        let mut chains: Vec<&Chain> = Vec::with_capacity(WALK_BATCH);
        for batch in fresh.chunks(WALK_BATCH) {
            chains.clear();
            chains.extend(batch.iter().map(|h| &self.index[h]));
            new.extend(batch.iter().zip(&chains).map(|(&h, chain)| {
                let key = chain.newest().record.key();
                (MapKey::new(prefix(key), key), Slot::Hashed(h))
            }));
        }
        new.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if new.len() * APPEND_SHARE >= self.keys.len() {
            // Already sorted: the tree is built in one pass.
            let mut more: BTreeMap<MapKey, Slot> = new.into_iter().collect();
            self.keys.append(&mut more);
        } else {
            for (key, at) in new {
                self.keys.insert(key, at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::table::EntryKind;

    fn version(k: &[u8], lsn: u64) -> Version {
        Version {
            lsn,
            record: Record::new(k, b"v"),
            kind: EntryKind::Put,
        }
    }

    /// Two keys of one hash: the index holds the first, the tree finds the
    /// second, and a third key of that hash is found in neither.
    #[test]
    fn keys_of_one_hash_are_told_apart() {
        let mut t = Tree::default();
        let key = |c: Option<&Chain>| c.map(|c| c.newest().record.key().to_vec());
        assert!(t.find(7, b"a").is_none());
        t.add(7, version(b"a", 1));
        t.add(7, version(b"b", 2));
        assert_eq!(key(t.find(7, b"a")), Some(b"a".to_vec()));
        assert_eq!(key(t.find(7, b"b")), Some(b"b".to_vec()));
        assert!(t.find(7, b"c").is_none());
        assert!(t.find(8, b"a").is_none());
        t.find_mut(7, b"b").unwrap().insert(version(b"b", 3));
        assert_eq!(t.find(7, b"b").unwrap().newest().lsn, 3);
        assert_eq!(t.find(7, b"a").unwrap().newest().lsn, 1);
        assert!(t.find_mut(7, b"c").is_none());
        // The second went into the tree at once; the first waits.
        assert!(!t.is_folded());
        let order: Vec<Slot> = t.keys.values().copied().collect();
        assert_eq!(order, [Slot::Other(0)]);
        t.fold();
        let order: Vec<Slot> = t.keys.values().copied().collect();
        assert_eq!(order, [Slot::Hashed(7), Slot::Other(0)]);
        assert_eq!(key(t.find(7, b"a")), Some(b"a".to_vec()));
        assert_eq!(t.versions, 2);
    }

    #[test]
    fn a_range_no_key_can_be_in_is_told_without_a_fold() {
        let mut t = Tree::default();
        assert!(!t.may_hold(b"", None));
        t.add(1, version(b"key:1", 1));
        t.add(2, version(b"\0", 2));
        assert!(t.may_hold(b"", None));
        assert!(t.may_hold(b"key", Some(b"kez")));
        assert!(t.may_hold(b"k", Some(b"l")));
        assert!(!t.may_hold(b"kf", Some(b"kz")));
        assert!(!t.may_hold(b"\0\x02", Some(b"\0\x03")));
        // "\0" counts as "\0\0", the first of its pair's keys.
        assert!(t.may_hold(b"\0", Some(b"\0\x01")));
        assert!(!t.may_hold(b"\0\x01", Some(b"\0\x02")));
    }

    /// Keys added in any order are found at once and walked in key order
    /// after a fold, whether the fold appends a tree or inserts one by one.
    #[test]
    fn a_fold_puts_keys_in_order_both_ways() {
        let mut t = Tree::default();
        let key = |i: u64| format!("key:{:012}", (i * 7919) % 1000).into_bytes();
        let hash = |k: &[u8]| crate::hash::neighbor_hash(k);
        for round in 0..4u64 {
            // 100 fresh keys, then 400 (appended: a large share), then 1
            // at a time (inserted).
            let (from, to) = [(0, 100), (100, 500), (500, 501), (501, 1000)][round as usize];
            for i in from..to {
                let k = key(i);
                assert!(t.find(hash(&k), &k).is_none());
                t.add(hash(&k), version(&k, i + 1));
                assert!(t.find(hash(&k), &k).is_some());
            }
            t.fold();
            assert!(t.is_folded());
            let walked: Vec<Vec<u8>> = t
                .keys
                .values()
                .map(|&slot| t.chain(slot).newest().record.key().to_vec())
                .collect();
            let mut want: Vec<Vec<u8>> = (0..to).map(key).collect();
            want.sort();
            assert_eq!(walked, want, "after round {round}");
        }
    }
}
