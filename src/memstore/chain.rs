//! The versions one key has in a memstore: its value in the map, oldest
//! first. A key written once (most of them) holds one version inline; a
//! key written again at `sync` holds one too, since its durable write
//! replaces the older versions where they are, with no second search of
//! the map.

use crate::record::Record;
use crate::table::EntryKind;

/// One version of a key: the write's LSN (for an unlogged write, the one
/// it shares), its record and whether it is a value or a tombstone.
#[derive(Clone, Debug)]
pub(super) struct Version {
    pub(super) lsn: u64,
    pub(super) record: Record,
    pub(super) kind: EntryKind,
}

/// A key's versions, oldest first. Never empty.
#[derive(Debug)]
pub(super) enum Chain {
    One(Version),
    Many(Vec<Version>),
}

impl Chain {
    pub(super) fn versions(&self) -> &[Version] {
        match self {
            Chain::One(v) => std::slice::from_ref(v),
            Chain::Many(vs) => vs,
        }
    }

    pub(super) fn newest(&self) -> &Version {
        self.versions().last().expect("a chain is never empty")
    }

    /// The newest version at or below `lsn`.
    pub(super) fn newest_upto(&self, lsn: u64) -> Option<&Version> {
        self.versions().iter().rev().find(|v| v.lsn <= lsn)
    }

    /// Puts `v` in LSN order. An unlogged write (`logged` false) replaces
    /// a version of the same LSN, record and all, as a logged one does
    /// (two logged writes never share one). Returns how many versions
    /// the chain gained (0 or 1).
    pub(super) fn insert(&mut self, v: Version) -> u64 {
        if let Chain::One(only) = self {
            if only.lsn == v.lsn {
                *only = v;
                return 0;
            }
        }
        let vs = self.many();
        // Writes mostly come in LSN order: the place is near the end.
        let at = vs.iter().rposition(|o| o.lsn <= v.lsn);
        match at {
            Some(i) if vs[i].lsn == v.lsn => {
                vs[i] = v;
                0
            }
            Some(i) => {
                vs.insert(i + 1, v);
                1
            }
            None => {
                vs.insert(0, v);
                1
            }
        }
    }

    /// The versions as a vector, a chain of one made into one (its
    /// version moved, not copied).
    fn many(&mut self) -> &mut Vec<Version> {
        if let Chain::One(_) = self {
            if let Chain::One(only) = std::mem::replace(self, Chain::Many(Vec::new())) {
                *self = Chain::Many(vec![only]);
            }
        }
        match self {
            Chain::Many(vs) => vs,
            Chain::One(_) => unreachable!("a chain of one became many"),
        }
    }

    /// Puts `v` in, as a durable write: the versions older than it go.
    /// Returns how many versions the chain gained (-dropped + 1, or 0 when
    /// one was replaced) and what the dropped ones were charged. A key's
    /// only version, older, is replaced where it is.
    pub(super) fn insert_durable(
        &mut self,
        v: Version,
        charge: impl Fn(&Version) -> u64,
    ) -> (i64, u64) {
        if let Chain::One(only) = self {
            if only.lsn <= v.lsn {
                let freed = if only.lsn < v.lsn { charge(only) } else { 0 };
                *only = v;
                return (0, freed);
            }
        }
        let lsn = v.lsn;
        let gained = self.insert(v);
        let (dropped, freed) = self.drop_older(lsn, charge);
        (gained as i64 - dropped as i64, freed)
    }

    /// Drops the versions older than `lsn` (never the newest), and returns
    /// how many and what they were charged.
    pub(super) fn drop_older(&mut self, lsn: u64, charge: impl Fn(&Version) -> u64) -> (u64, u64) {
        let Chain::Many(vs) = self else {
            return (0, 0);
        };
        let older = vs
            .iter()
            .take_while(|v| v.lsn < lsn)
            .count()
            .min(vs.len() - 1);
        if older == 0 {
            return (0, 0);
        }
        let freed = vs[..older].iter().map(&charge).sum();
        vs.drain(..older);
        if vs.len() == 1 {
            *self = Chain::One(vs.pop().expect("one version"));
        }
        (older as u64, freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(lsn: u64, value: &str) -> Version {
        Version {
            lsn,
            record: Record::new(b"k", value.as_bytes()),
            kind: EntryKind::Put,
        }
    }

    fn lsns(c: &Chain) -> Vec<u64> {
        c.versions().iter().map(|v| v.lsn).collect()
    }

    #[test]
    fn versions_stay_in_lsn_order_and_one_of_the_same_lsn_is_replaced() {
        let mut c = Chain::One(v(5, "a"));
        assert_eq!(c.insert(v(9, "b")), 1);
        assert_eq!(c.insert(v(2, "c")), 1);
        assert_eq!(c.insert(v(7, "d")), 1);
        assert_eq!(lsns(&c), [2, 5, 7, 9]);
        assert_eq!(c.insert(v(7, "e")), 0);
        assert_eq!(c.newest_upto(8).unwrap().record.value(), b"e");
        assert_eq!(c.newest().lsn, 9);
        assert!(c.newest_upto(1).is_none());
        let mut one = Chain::One(v(4, "x"));
        assert_eq!(one.insert(v(4, "y")), 0);
        assert_eq!(one.newest().record.value(), b"y");
        assert!(matches!(one, Chain::One(_)));
    }

    #[test]
    fn dropping_older_versions_keeps_the_newer_ones_and_counts_the_rest() {
        let mut c = Chain::One(v(3, "a"));
        for lsn in [4, 6, 8] {
            c.insert(v(lsn, "b"));
        }
        assert_eq!(c.drop_older(6, |_| 10), (2, 20));
        assert_eq!(lsns(&c), [6, 8]);
        assert_eq!(c.drop_older(6, |_| 10), (0, 0));
        assert_eq!(c.drop_older(9, |_| 10), (1, 10));
        assert!(matches!(c, Chain::One(ref o) if o.lsn == 8));
        assert_eq!(c.drop_older(100, |_| 10), (0, 0));
        c.insert(v(9, "c"));
        assert_eq!(c.drop_older(100, |_| 10), (1, 10));
        assert_eq!(lsns(&c), [9]);
    }

    #[test]
    fn a_durable_version_replaces_the_older_ones() {
        let mut c = Chain::One(v(3, "a"));
        assert_eq!(c.insert_durable(v(5, "b"), |_| 10), (0, 10));
        assert!(matches!(c, Chain::One(ref o) if o.lsn == 5));
        assert_eq!(c.insert_durable(v(5, "c"), |_| 10), (0, 0));
        assert_eq!(c.newest().record.value(), b"c");
        // Below the only version: both stay.
        assert_eq!(c.insert_durable(v(4, "d"), |_| 10), (1, 0));
        assert_eq!(lsns(&c), [4, 5]);
        c.insert(v(7, "e"));
        assert_eq!(c.insert_durable(v(6, "f"), |_| 10), (-1, 20));
        assert_eq!(lsns(&c), [6, 7]);
    }
}
