//! The shard's table of dirty keys: by key for the point reads and
//! writes every command makes, in key order only for the scans that ask.
//!
//! Commands look a key up, write it, and their batch's retirement removes
//! it: three searches per written key, which a B-tree of byte strings
//! made a dozen comparisons each. Here they are one probe of a hash
//! table each. The key order scans need is kept beside it, lazily, as
//! the memstore keeps its own: a new key is listed in `fresh` (with the
//! serial its entry was made with), and only a scan sorts the fresh keys
//! into `order`. A removed key stays listed until a scan or the bound on
//! the lists drops it, so a removal never searches the order either.
//!
//! The order has two levels: keys sorted since a while in a B-tree, and
//! the keys of the last scans in a short sorted vector, into which a
//! scan merges the few keys written since the one before, moving the
//! others in runs. Most keys (a pop's delete, listed per pop, with a scan
//! per run of pops) are removed before the vector fills and is pruned,
//! and never go into the tree, whose insertions made a dozen comparisons
//! a key (an eighth of a SPOP's instructions).

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::iter::Peekable;
use std::ops::Bound;
use std::rc::Rc;

use crate::hash::BytesHash;

/// Keys the vector level of the order holds at most: past it, they go
/// into the tree (a scan moves them all).
const RECENT: usize = 4096;

/// An entry's value, and the serial it was made with: a key removed and
/// written again is listed again, and its older listings are stale.
struct Listed<T> {
    serial: u64,
    value: T,
}

pub struct DirtyTable<T> {
    map: HashMap<Rc<[u8]>, Listed<T>, BytesHash>,
    /// Keys in order, of entries present or since removed.
    order: BTreeSet<Rc<[u8]>>,
    /// More keys in order, each once, listed since `order` last took
    /// them in (a key may be in both).
    recent: Vec<Rc<[u8]>>,
    /// Keys whose entries were made since the last scan, with the
    /// entries' serials.
    fresh: Vec<(Rc<[u8]>, u64)>,
    /// `fresh` and `order` were let go (writes outran scans): the next
    /// scan orders the table's keys afresh, and until then a new entry is
    /// listed nowhere.
    unlisted: bool,
    serial: u64,
}

impl<T> Default for DirtyTable<T> {
    fn default() -> Self {
        DirtyTable {
            map: HashMap::default(),
            order: BTreeSet::new(),
            recent: Vec::new(),
            fresh: Vec::new(),
            unlisted: false,
            serial: 0,
        }
    }
}

impl<T> DirtyTable<T> {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, key: &[u8]) -> Option<&T> {
        self.map.get(key).map(|l| &l.value)
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.map.contains_key(key)
    }

    /// Puts the value `make` returns for `key` (given the value there,
    /// if any) and returns the value it replaced.
    pub fn put(&mut self, key: Rc<[u8]>, make: impl FnOnce(Option<&T>) -> T) -> Option<T> {
        // One hash of the key, whether its entry is new or not.
        let e = match self.map.entry(key) {
            Entry::Occupied(mut e) => {
                let value = make(Some(&e.get().value));
                return Some(std::mem::replace(&mut e.get_mut().value, value));
            }
            Entry::Vacant(e) => e,
        };
        let value = make(None);
        self.serial += 1;
        let serial = self.serial;
        if !self.unlisted {
            self.fresh.push((e.key().clone(), serial));
        }
        e.insert(Listed { serial, value });
        // Once the listings outnumber the entries (most of them of
        // entries since removed: a write load that scans seldom, as the
        // active expiry cycle does ten times a second), both lists are
        // let go, and the next scan orders the entries there are then:
        // cheaper than sorting the listings, and the writes until then
        // list nothing.
        if self.fresh.len() > 2 * self.map.len() + 1024 {
            self.fresh = Vec::new();
            self.order.clear();
            self.recent = Vec::new();
            self.unlisted = true;
        }
        None
    }

    /// Removes `key`'s entry if `ours` says so of its value, with one
    /// hash of the key: `Ok` with the value removed, `Err(true)` when the
    /// entry stays, `Err(false)` when there is none.
    pub fn take_if(&mut self, key: Rc<[u8]>, ours: impl FnOnce(&T) -> bool) -> Result<T, bool> {
        match self.map.entry(key) {
            Entry::Occupied(e) if ours(&e.get().value) => Ok(e.remove().value),
            Entry::Occupied(_) => Err(true),
            Entry::Vacant(_) => Err(false),
        }
    }

    /// The entries from `from` (inclusive) up to `upto` (exclusive, or no
    /// end), in key order.
    pub fn range<'t>(
        &'t mut self,
        from: &[u8],
        upto: Option<&[u8]>,
    ) -> impl Iterator<Item = (&'t Rc<[u8]>, &'t T)> + 't {
        self.sort_fresh();
        let map = &self.map;
        let older = self.order.range::<[u8], _>((
            Bound::Included(from),
            upto.map_or(Bound::Unbounded, Bound::Excluded),
        ));
        let first = self.recent.partition_point(|k| &**k < from);
        let recent = &self.recent[first..];
        let end = upto.map_or(recent.len(), |u| recent.partition_point(|k| &**k < u));
        Union {
            a: older.peekable(),
            b: recent[..end].iter().peekable(),
        }
        .filter_map(move |k| map.get_key_value(&**k).map(|(k, l)| (k, &l.value)))
    }

    /// Whether a level of the order that lists `listed` keys lists more
    /// removed keys than present ones, and is to be pruned.
    fn stale(&self, listed: usize) -> bool {
        listed > 2 * self.map.len() + 64
    }

    /// Puts the fresh keys in order, and drops the removed keys from the
    /// order once they outnumber the present ones.
    fn sort_fresh(&mut self) {
        if self.unlisted {
            self.order = self.map.keys().cloned().collect();
            self.recent.clear();
            self.unlisted = false;
            return;
        }
        if self.fresh.is_empty() {
            return;
        }
        let map = &self.map;
        let mut fresh = std::mem::take(&mut self.fresh);
        fresh.retain(|(k, serial)| map.get(&**k).is_some_and(|l| l.serial == *serial));
        fresh.sort_unstable();
        // Where each fresh key goes among the recent ones (a binary
        // search from the last), then one pass that moves those between
        // them in runs; a key there already (removed and written again)
        // is not listed twice.
        let old = std::mem::take(&mut self.recent);
        let mut recent = Vec::with_capacity(old.len() + fresh.len());
        let mut old = old.into_iter();
        for (k, _) in fresh {
            let n = old.as_slice().partition_point(|o| *o < k);
            recent.extend(old.by_ref().take(n));
            if old.as_slice().first() != Some(&k) {
                recent.push(k);
            }
        }
        recent.extend(old);
        // Pruned as `order` is, once its removed keys outnumber the
        // present ones; into the tree when that leaves too many to move
        // at every scan.
        if self.stale(recent.len()) {
            recent.retain(|k| map.contains_key(&**k));
        }
        if recent.len() > RECENT {
            self.order.extend(recent.drain(..));
        }
        self.recent = recent;
        if self.stale(self.order.len()) {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(&**k));
        }
    }
}

/// Two iterators of keys in order, as one in order, each key once.
struct Union<'t, A: Iterator<Item = &'t Rc<[u8]>>, B: Iterator<Item = &'t Rc<[u8]>>> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<'t, A, B> Iterator for Union<'t, A, B>
where
    A: Iterator<Item = &'t Rc<[u8]>>,
    B: Iterator<Item = &'t Rc<[u8]>>,
{
    type Item = &'t Rc<[u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        match (self.a.peek(), self.b.peek()) {
            (Some(a), Some(b)) => match a.cmp(b) {
                std::cmp::Ordering::Less => self.a.next(),
                std::cmp::Ordering::Greater => self.b.next(),
                std::cmp::Ordering::Equal => {
                    self.a.next();
                    self.b.next()
                }
            },
            (Some(_), None) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(t: &mut DirtyTable<u32>, from: &[u8], upto: Option<&[u8]>) -> Vec<(String, u32)> {
        t.range(from, upto)
            .map(|(k, &v)| (String::from_utf8(k.to_vec()).unwrap(), v))
            .collect()
    }

    #[test]
    fn entries_are_found_by_key_and_ranged_in_order() {
        let mut t = DirtyTable::default();
        for (i, k) in ["d", "b", "a", "c"].iter().enumerate() {
            assert!(t.put(k.as_bytes().into(), |_| i as u32).is_none());
        }
        assert_eq!(t.get(b"b"), Some(&1));
        assert_eq!(t.put(b"b"[..].into(), |old| old.unwrap() + 10), Some(1));
        assert_eq!(
            keys(&mut t, b"b", Some(b"d")),
            [("b".into(), 11), ("c".into(), 3)]
        );
        // Removed, then written again before and after a scan.
        assert_eq!(t.take_if(b"c"[..].into(), |&v| v == 4), Err(true));
        assert_eq!(t.take_if(b"c"[..].into(), |&v| v == 3), Ok(3));
        assert_eq!(t.take_if(b"c"[..].into(), |_| true), Err(false));
        assert_eq!(keys(&mut t, b"", None).len(), 3);
        t.put(b"c"[..].into(), |_| 30);
        assert_eq!(t.take_if(b"a"[..].into(), |_| true), Ok(2));
        t.put(b"a"[..].into(), |_| 40);
        t.put(b"e"[..].into(), |_| 50);
        assert_eq!(
            keys(&mut t, b"", None),
            [
                ("a".into(), 40),
                ("b".into(), 11),
                ("c".into(), 30),
                ("d".into(), 0),
                ("e".into(), 50)
            ]
        );
        assert_eq!(t.len(), 5);
        assert!(!t.contains_key(b"f"));
    }

    #[test]
    fn the_lists_stay_in_proportion_to_the_entries() {
        let mut t = DirtyTable::default();
        // One key written and removed over and over, with no scan.
        for i in 0..100_000u32 {
            t.put(b"hot"[..].into(), |_| i);
            assert_eq!(t.take_if(b"hot"[..].into(), |_| true), Ok(i));
        }
        assert!(t.fresh.len() <= 1024 + 2, "{}", t.fresh.len());
        assert!(t.unlisted, "the listings were let go");
        // Written and removed keys, then a scan: the entries there are.
        t.put(b"kept"[..].into(), |_| 7);
        assert_eq!(keys(&mut t, b"", None), [("kept".into(), 7)]);
        assert!(!t.unlisted);
        assert_eq!(t.take_if(b"kept"[..].into(), |_| true), Ok(7));
        // Many keys scanned, then removed.
        for i in 0..10_000u32 {
            t.put(format!("k{i:05}").as_bytes().into(), |_| i);
        }
        assert_eq!(keys(&mut t, b"k", None).len(), 10_000);
        for i in 0..10_000u32 {
            assert_eq!(
                t.take_if(format!("k{i:05}").as_bytes().into(), |_| true),
                Ok(i)
            );
        }
        t.put(b"k"[..].into(), |_| 1);
        assert_eq!(keys(&mut t, b"", None), [("k".into(), 1)]);
        assert!(t.order.len() <= 64 + 2, "{}", t.order.len());
    }

    #[test]
    fn ranges_agree_with_an_ordered_map_under_any_mix_of_writes_removals_and_scans() {
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeMap;
        for seed in 0..8u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut t = DirtyTable::default();
            let mut model: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
            // Enough keys and writes between scans that both levels of
            // the order fill, prune and hand over.
            let span = [50u32, 3_000, 20_000][seed as usize % 3];
            for i in 0..60_000u32 {
                let k = format!("k{:05}", rng.random_range(0..span)).into_bytes();
                match rng.random_range(0..10) {
                    0..=4 => {
                        t.put(k.as_slice().into(), |_| i);
                        model.insert(k, i);
                    }
                    5..=7 => {
                        let gone = t.take_if(k.as_slice().into(), |_| true).ok();
                        assert_eq!(gone, model.remove(&k), "seed {seed}");
                    }
                    _ if rng.random_range(0..[1, 8, 64][seed as usize % 3]) == 0 => {
                        let a = format!("k{:05}", rng.random_range(0..span)).into_bytes();
                        let b = format!("k{:05}", rng.random_range(0..span)).into_bytes();
                        let (from, upto) = if a <= b { (a, b) } else { (b, a) };
                        let upto = (rng.random_range(0..4) > 0).then_some(upto);
                        let got: Vec<(Vec<u8>, u32)> = t
                            .range(&from, upto.as_deref())
                            .map(|(k, &v)| (k.to_vec(), v))
                            .collect();
                        let want: Vec<(Vec<u8>, u32)> = model
                            .range::<Vec<u8>, _>((
                                Bound::Included(&from),
                                upto.as_ref().map_or(Bound::Unbounded, Bound::Excluded),
                            ))
                            .map(|(k, &v)| (k.clone(), v))
                            .collect();
                        assert_eq!(got, want, "seed {seed}, step {i}");
                        assert!(t.recent.len() <= RECENT, "{}", t.recent.len());
                        assert!(t.order.len() <= 2 * t.map.len() + 64 + RECENT);
                    }
                    _ => {}
                }
            }
        }
    }
}
