//! Ranges of engine keys the shard knows hold no live key: where a
//! sorted set popped from its front (ZPOPMIN), a set popped at random
//! points (SPOP) or the expiry index after an expiry cycle left deletes
//! that every scan from there would otherwise pass again, one by one,
//! until compaction drops them. Redis frees a popped member at once; an
//! LSM keeps its delete, so a queue that pops from its front would cost
//! O(popped) per pop. A scan that passed many deletes remembers the range
//! before its first live key ([`Gaps::learn`]); the next scan from inside
//! it starts at its end ([`Gaps::skip`]), and a scan that meets a range
//! on its way jumps it ([`Gaps::next_start`]). When the key a scan found
//! is deleted next (a pop), the range grows over it ([`Gaps::deleted`]),
//! so the next pop from there passes no delete at all.
//!
//! The shard owns every key, and every live write goes through
//! [`super::Shard::write`], which cuts the write's key out of the range
//! that holds it ([`Gaps::written`]): a range is never wrong, only
//! forgotten (on overflow, and at restart). Only bounded scans learn (the
//! elements of one key, the expiry index), never a scan to the end of the
//! key space, so keys the server writes to the engine directly (its
//! version counter) are never in a range, and neither is a key's
//! metadata, which sorts before all of its sub-keys: a write of it (every
//! pop writes one) need not look.
//!
//! A range is empty partly because of deletes that may not be durable
//! yet: it keeps what those depend on, and a scan that skips it depends
//! on that too, as if it had passed the deletes (a reply never reveals a
//! write a crash could lose).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use super::Deps;
use crate::server::keys;

/// Deletes a scan passes before its first live key for it to remember
/// the range: below this, passing them costs less than remembering.
pub const LEARN_AFTER: usize = 4;

/// Bytes of range bounds kept at most; past it the lowest ranges go.
const MAX_BYTES: usize = 8 << 20;

/// Bytes one range costs besides its bounds.
const OVERHEAD: usize = 64;

struct Gap<'a> {
    /// The first key after the range (exclusive).
    end: Vec<u8>,
    /// What the deletes that made the range empty depend on, until they
    /// are acknowledged.
    deps: Deps<'a>,
}

/// Disjoint, non-adjacent empty ranges, by their first key.
#[derive(Default)]
pub struct Gaps<'a> {
    ranges: BTreeMap<Vec<u8>, Gap<'a>>,
    bytes: usize,
    /// The last bounded scan that found live keys ([`Found`]): deleting
    /// the first of them (SPOP's pick, ZPOPMIN's first) makes the whole
    /// of the scan up to it a range ([`Gaps::deleted`]), so the next scan
    /// from there does not pass the delete again.
    found: Option<Found<'a>>,
}

/// What a bounded scan found: where it started, the first live keys it
/// found, in order (with nothing live between them), and what the
/// emptiness of the ranges between them depends on. Deleting the first
/// key makes everything before the next one empty; a live write into
/// the span (from `from` to the last key found) forgets it.
struct Found<'a> {
    from: Vec<u8>,
    /// The keys found not yet deleted.
    keys: VecDeque<Vec<u8>>,
    /// The last key found, deleted or not: where the span ends.
    last: Vec<u8>,
    deps: Deps<'a>,
    /// Where the range known empty from `from` ends, once the first key
    /// was deleted: it becomes a range when no key is left to pop or the
    /// scan is forgotten (one search of the ranges per run of pops, not
    /// one per pop).
    upto: Option<Vec<u8>>,
}

impl Found<'_> {
    /// Where `key` is among the keys found not yet deleted (in order).
    fn at(&self, key: &[u8]) -> Option<usize> {
        self.keys.binary_search_by(|k| k.as_slice().cmp(key)).ok()
    }
}

fn cost(start: &[u8], end: &[u8]) -> usize {
    start.len() + end.len() + OVERHEAD
}

impl<'a> Gaps<'a> {
    /// The range that holds `key`: its first key.
    fn holding(&self, key: &[u8]) -> Option<&Vec<u8>> {
        self.ranges
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .filter(|(_, g)| key < g.end.as_slice())
            .map(|(s, _)| s)
    }

    /// Where a scan from `key` finds its first live key at the earliest:
    /// the end of the range that holds `key`, if one does, with what the
    /// range's emptiness depends on.
    pub fn skip(&mut self, key: &[u8]) -> Option<(Vec<u8>, Deps<'a>)> {
        let (_, g) = self
            .ranges
            .range_mut::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        if key >= g.end.as_slice() {
            return None;
        }
        g.deps = g.deps.unsettled();
        Some((g.end.clone(), g.deps.clone()))
    }

    /// The first key of the first range after `key`, if a range starts
    /// after it: a scan from `key` can stop there and go on from the
    /// range's end ([`Gaps::skip`]).
    pub fn next_start(&self, key: &[u8]) -> Option<&[u8]> {
        self.ranges
            .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(s, _)| s.as_slice())
    }

    /// A bounded scan from `from` found `keys` as its first live keys, in
    /// order, with nothing live before or between them given `deps`.
    pub fn found(&mut self, from: &[u8], keys: VecDeque<Vec<u8>>, deps: &Deps<'a>) {
        self.forget_found();
        self.found = keys.back().cloned().map(|last| Found {
            from: from.to_vec(),
            keys,
            last,
            deps: deps.unsettled(),
            upto: None,
        });
    }

    /// Lets go of what the last scan found, learning the range its pops
    /// emptied.
    fn forget_found(&mut self) {
        if let Some(Found {
            from,
            upto: Some(upto),
            deps,
            ..
        }) = self.found.take()
        {
            self.learn(&from, &upto, &deps);
        }
    }

    /// Whether `key` is one of the keys the last scan ahead found and no
    /// write has reached since: then it is live, as the scan found it
    /// (a pop of a run of members read ahead need not read it again).
    /// False says nothing.
    pub fn found_live(&self, key: &[u8]) -> bool {
        self.found.as_ref().is_some_and(|f| f.at(key).is_some())
    }

    /// `key` was deleted by a write that `deps` stands for: if it is the
    /// first key left of what the last scan found, nothing is live from
    /// that scan's start up to the next key left (past the last key
    /// found, when none is), and a pop of that one grows the range again
    /// (SPOP's run of members read ahead, in any order); if it is
    /// another, it is dead like the keys around it.
    pub fn deleted(&mut self, key: &[u8], deps: &Deps<'a>) {
        let Some(f) = &mut self.found else { return };
        let Some(at) = f.at(key) else {
            return;
        };
        f.deps.merge(deps);
        f.keys.remove(at);
        if at > 0 {
            return;
        }
        match f.keys.front() {
            Some(next) => f.upto = Some(next.clone()),
            None => {
                let mut end = f.last.clone();
                end.push(0);
                f.upto = Some(end);
                self.forget_found();
            }
        }
    }

    /// No live key is in `[from, to)`, given `deps`.
    pub fn learn(&mut self, from: &[u8], to: &[u8], deps: &Deps<'a>) {
        if from >= to {
            return;
        }
        // Most often (a pop after a scan from a range's end) the range
        // that holds or ends at `from` grows in place, with no range
        // starting before `to` to join.
        if self
            .ranges
            .range::<[u8], _>((Bound::Excluded(from), Bound::Included(to)))
            .next()
            .is_none()
        {
            if let Some((_, g)) = self
                .ranges
                .range_mut::<[u8], _>((Bound::Unbounded, Bound::Included(from)))
                .next_back()
                .filter(|(_, g)| g.end.as_slice() >= from)
            {
                g.deps.merge(&deps.unsettled());
                if g.end.as_slice() < to {
                    self.bytes = self.bytes + to.len() - g.end.len();
                    g.end.clear();
                    g.end.extend_from_slice(to);
                }
                return;
            }
        }
        let mut start = from.to_vec();
        let mut end = to.to_vec();
        let mut deps = deps.unsettled();
        // Every range that overlaps or touches [from, to) joins it.
        while let Some((s, g)) = self
            .ranges
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(end.as_slice())))
            .next_back()
        {
            if g.end < start {
                break;
            }
            let s = s.clone();
            let g = self.ranges.remove(&s).expect("found");
            self.bytes -= cost(&s, &g.end);
            deps.merge(&g.deps);
            if s < start {
                start = s;
            }
            if g.end > end {
                end = g.end;
            }
        }
        self.bytes += cost(&start, &end);
        self.ranges.insert(start, Gap { end, deps });
        while self.bytes > MAX_BYTES {
            let Some((s, g)) = self.ranges.pop_first() else {
                break;
            };
            self.bytes -= cost(&s, &g.end);
        }
    }

    /// `key` was written a live value: the range that held it no longer
    /// holds it.
    pub fn written(&mut self, key: &[u8]) {
        // A write out of the span of what the last scan found (a pop's
        // update of its collection's metadata) leaves it as it was.
        if self
            .found
            .as_ref()
            .is_some_and(|f| f.from.as_slice() <= key && key <= f.last.as_slice())
        {
            self.forget_found();
        }
        // A key's metadata is in no range (it sorts before its key's
        // sub-keys): one pass over the key, where a search of the ranges
        // would compare it with a dozen.
        if self.ranges.is_empty() || matches!(keys::split(key), Some((_, keys::Part::Meta))) {
            return;
        }
        let Some(start) = self.holding(key).cloned() else {
            return;
        };
        let g = self.ranges.remove(&start).expect("held");
        self.bytes -= cost(&start, &g.end);
        if start.as_slice() < key {
            self.bytes += cost(&start, key);
            self.ranges.insert(
                start,
                Gap {
                    end: key.to_vec(),
                    deps: g.deps.clone(),
                },
            );
        }
        // The key's successor: the key and a zero byte.
        let mut after = Vec::with_capacity(key.len() + 1);
        after.extend_from_slice(key);
        after.push(0);
        if after < g.end {
            self.bytes += cost(&after, &g.end);
            self.ranges.insert(after, g);
        }
    }

    /// Ranges kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(g: &Gaps) -> Vec<(String, String)> {
        g.ranges
            .iter()
            .map(|(s, g)| {
                (
                    String::from_utf8_lossy(s).into_owned(),
                    String::from_utf8_lossy(&g.end).into_owned(),
                )
            })
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_scan_from_inside_a_range_starts_at_its_end() {
        let mut g = Gaps::default();
        let none = Deps::default();
        g.learn(b"b", b"f", &none);
        assert_eq!(g.skip(b"a").map(|s| s.0), None);
        assert_eq!(g.skip(b"b").map(|s| s.0), Some(b"f".to_vec()));
        assert_eq!(g.skip(b"e\xff").map(|s| s.0), Some(b"f".to_vec()));
        assert_eq!(g.skip(b"f").map(|s| s.0), None);
    }

    #[test]
    fn overlapping_and_touching_ranges_join() {
        let mut g = Gaps::default();
        let none = Deps::default();
        g.learn(b"b", b"d", &none);
        g.learn(b"f", b"h", &none);
        g.learn(b"x", b"y", &none);
        assert_eq!(g.len(), 3);
        g.learn(b"d", b"f", &none);
        assert_eq!(ranges(&g), pairs(&[("b", "h"), ("x", "y")]));
        g.learn(b"a", b"c", &none);
        g.learn(b"g", b"k", &none);
        assert_eq!(ranges(&g), pairs(&[("a", "k"), ("x", "y")]));
        g.learn(b"c", b"c", &none);
        g.learn(b"z", b"y", &none);
        assert_eq!(ranges(&g), pairs(&[("a", "k"), ("x", "y")]));
    }

    #[test]
    fn a_live_write_is_cut_out_of_its_range() {
        let mut g = Gaps::default();
        let none = Deps::default();
        g.learn(b"b", b"f", &none);
        g.written(b"a");
        g.written(b"f");
        assert_eq!(ranges(&g), pairs(&[("b", "f")]));
        g.written(b"c");
        assert_eq!(ranges(&g), pairs(&[("b", "c"), ("c\0", "f")]));
        assert_eq!(g.skip(b"c").map(|s| s.0), None);
        g.written(b"b");
        assert_eq!(ranges(&g), pairs(&[("b\0", "c"), ("c\0", "f")]));
        g.written(b"b\0");
        assert_eq!(ranges(&g), pairs(&[("b\0\0", "c"), ("c\0", "f")]));
        // A key whose successor is the end leaves nothing after it.
        g.learn(b"x", b"y\0", &none);
        g.written(b"y");
        assert_eq!(
            ranges(&g),
            pairs(&[("b\0\0", "c"), ("c\0", "f"), ("x", "y")])
        );
        assert_eq!(
            g.bytes,
            cost(b"b\0\0", b"c") + cost(b"c\0", b"f") + cost(b"x", b"y")
        );
    }

    #[test]
    fn deleting_what_a_scan_found_joins_it_to_the_range_before() {
        let mut g = Gaps::default();
        let none = Deps::default();
        g.learn(b"b", b"d", &none);
        // A scan from the range's end found "f"; deleting another key
        // changes nothing, deleting "f" makes [d, f] empty.
        g.found(b"d", [b"f".to_vec()].into(), &none);
        g.deleted(b"e", &none);
        assert_eq!(ranges(&g), pairs(&[("b", "d")]));
        g.deleted(b"f", &none);
        assert_eq!(ranges(&g), pairs(&[("b", "f\0")]));
        assert_eq!(g.next_start(b"a"), Some(&b"b"[..]));
        assert_eq!(g.next_start(b"b"), None);
        // Once only, and a live write in between forgets the scan.
        g.deleted(b"f", &none);
        g.found(b"f\0", [b"h".to_vec()].into(), &none);
        g.written(b"g");
        g.deleted(b"h", &none);
        assert_eq!(ranges(&g), pairs(&[("b", "f\0")]));
    }

    #[test]
    fn popping_a_run_of_found_keys_in_order_grows_one_range() {
        let mut g = Gaps::default();
        let none = Deps::default();
        let keys = |k: &[&str]| k.iter().map(|k| k.as_bytes().to_vec()).collect();
        g.found(b"c", keys(&["d", "f", "h", "k"]), &none);
        // A write out of the span (a set's metadata) keeps the run.
        g.written(b"a");
        g.written(b"m");
        g.deleted(b"d", &none);
        // A key of the run deleted out of order (SREM) is not live
        // either: the range grows over it once the keys before it go.
        g.deleted(b"h", &none);
        g.deleted(b"f", &none);
        // The range is learned once, when the run is used up.
        assert_eq!(ranges(&g), pairs(&[]));
        g.deleted(b"k", &none);
        assert_eq!(ranges(&g), pairs(&[("c", "k\0")]));
        // A live write inside the span learns what the pops emptied and
        // forgets the rest of the run.
        g.found(b"k\0", keys(&["n", "q"]), &none);
        g.deleted(b"n", &none);
        g.written(b"l");
        g.deleted(b"q", &none);
        assert_eq!(ranges(&g), pairs(&[("c", "l"), ("l\0", "q")]));
        // So does the next scan's.
        g.found(b"r", keys(&["s", "t"]), &none);
        g.deleted(b"s", &none);
        g.found(b"x", keys(&["y"]), &none);
        assert_eq!(ranges(&g), pairs(&[("c", "l"), ("l\0", "q"), ("r", "t")]));
        // Popped out of order, the run empties the same span.
        g.found(b"u", keys(&["v", "w", "x"]), &none);
        g.deleted(b"x", &none);
        g.deleted(b"v", &none);
        // A write past the last key left but inside the span forgets it.
        g.written(b"w\0");
        g.deleted(b"w", &none);
        assert_eq!(ranges(&g).last(), Some(&("u".into(), "w".into())));
        g.found(b"u", keys(&["v", "w", "x"]), &none);
        g.deleted(b"w", &none);
        g.deleted(b"x", &none);
        g.deleted(b"v", &none);
        assert_eq!(ranges(&g).last(), Some(&("u".into(), "x\0".into())));
    }

    #[test]
    fn past_its_bound_it_forgets_the_lowest_ranges() {
        let mut g = Gaps::default();
        let none = Deps::default();
        let width = 1000;
        let n = MAX_BYTES / (2 * width + OVERHEAD) + 10;
        for i in 0..n {
            let mut s = format!("{i:08}").into_bytes();
            s.resize(width, b'a');
            let mut e = s.clone();
            *e.last_mut().unwrap() = b'b';
            g.learn(&s, &e, &none);
        }
        assert!(g.bytes <= MAX_BYTES);
        assert!(g.len() < n);
        let mut last = format!("{:08}", n - 1).into_bytes();
        last.resize(width, b'a');
        assert!(g.skip(&last).is_some());
        let mut first = format!("{:08}", 0).into_bytes();
        first.resize(width, b'a');
        assert!(g.skip(&first).is_none());
    }
}
