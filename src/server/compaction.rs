//! The server's compaction filter: elements of a collection go once the
//! collection is deleted or replaced.
//!
//! A merge meets a key's metadata before its sub-keys (see [`keys`]). A
//! sub-key of version `v` is dead when the key's newest metadata in the
//! merge is newer than it (a higher LSN) and is a delete or of another
//! version: a version is never given again, and a write keeps a key's
//! version only over live metadata of that version, so nothing brings it
//! back. An element written before its metadata (a command too large for
//! one log batch is logged in pieces, metadata last) is kept until its
//! metadata is merged too.
//!
//! A list's element is dead the same way when it is at a position outside
//! the newer metadata's ends: a pop or a trim moves an end and writes
//! nothing else, and a position back inside the ends was written again
//! after the end moved (a push writes the positions it takes), so no read
//! can reach an older write of it.

use super::keys::{self, Part};
use super::meta::Meta;
use crate::engine::{CompactionFilter, FilterFactory};
use crate::table::{Entry, EntryKind};

#[derive(Default)]
struct VersionFilter {
    /// `esc(key) 00 01` of the last metadata met, its LSN, and its
    /// version (`None`: deleted). Metadata this server cannot read keeps
    /// every element.
    last: Option<(Vec<u8>, u64, Option<u64>)>,
    /// The last metadata's ends, if it is a list's.
    ends: Option<(u64, u64)>,
}

impl CompactionFilter for VersionFilter {
    fn keep(&mut self, e: &Entry) -> bool {
        let Some((end, part)) = keys::split(&e.key) else {
            return true;
        };
        let prefix = &e.key[..end];
        match part {
            Part::Meta => {
                self.last = match e.kind {
                    EntryKind::Put => {
                        Meta::version_of(&e.value).map(|v| (prefix.to_vec(), e.lsn, Some(v)))
                    }
                    EntryKind::Delete => Some((prefix.to_vec(), e.lsn, None)),
                };
                self.ends = match e.kind {
                    EntryKind::Put => Meta::list_ends_of(&e.value),
                    EntryKind::Delete => None,
                };
                true
            }
            Part::Sub(v, rest) => match &self.last {
                Some((p, lsn, version)) if p == prefix && *lsn > e.lsn => {
                    *version == Some(v) && self.within_ends(rest)
                }
                _ => true,
            },
        }
    }
}

impl VersionFilter {
    /// Whether a live version's element (its tag and bytes) may still be
    /// read: any but a list's element outside the list's ends.
    fn within_ends(&self, rest: &[u8]) -> bool {
        match (self.ends, rest) {
            (Some((head, tail)), [keys::ITEM, pos @ ..]) if pos.len() == 8 => {
                let pos = u64::from_be_bytes(pos.try_into().expect("8 bytes"));
                (head..tail).contains(&pos)
            }
            _ => true,
        }
    }
}

pub fn filter() -> FilterFactory {
    std::sync::Arc::new(|| Box::new(VersionFilter::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: Vec<u8>, lsn: u64, value: Option<Vec<u8>>) -> Entry {
        Entry {
            key,
            lsn,
            kind: if value.is_some() {
                EntryKind::Put
            } else {
                EntryKind::Delete
            },
            value: value.unwrap_or_default(),
        }
    }

    #[test]
    fn elements_go_only_under_newer_metadata_of_another_version() {
        let f = |k: &[u8], v: u64| keys::element(k, v, keys::FIELD, b"f");
        let hash = |v: u64| Some(Meta::hash(v).encode());
        let cases = [
            // Replaced by version 9: the version-7 element goes, a version-9 one stays.
            (
                entry(keys::meta(b"a"), 10, hash(9)),
                vec![(f(b"a", 7), 5, false), (f(b"a", 9), 10, true)],
            ),
            // Deleted after: gone.
            (
                entry(keys::meta(b"b"), 10, None),
                vec![(f(b"b", 7), 5, false)],
            ),
            // Metadata older than the element (logged in pieces): kept.
            (
                entry(keys::meta(b"c"), 3, hash(1)),
                vec![(f(b"c", 7), 5, true)],
            ),
            // Live at its version.
            (
                entry(keys::meta(b"d"), 10, hash(7)),
                vec![(f(b"d", 7), 5, true)],
            ),
        ];
        let mut filter = filter()();
        for (meta, subs) in cases {
            assert!(filter.keep(&meta) || meta.kind == EntryKind::Delete);
            for (k, lsn, want) in subs {
                assert_eq!(filter.keep(&entry(k, lsn, Some(b"x".to_vec()))), want);
            }
        }
        // Another key's elements with no metadata of their own: kept.
        assert!(filter.keep(&entry(f(b"e", 1), 1, Some(vec![]))));
        assert!(filter.keep(&entry(keys::CLOCK.to_vec(), 1, Some(vec![]))));
    }

    #[test]
    fn a_lists_elements_outside_its_ends_go_under_newer_metadata() {
        let mut filter = filter()();
        let list = |v: u64, h: u64, t: u64| {
            let mut m = Meta::collection(crate::server::meta::Type::List, v);
            m.body = crate::server::meta::Body::Ends(h, t);
            Some(m.encode())
        };
        let at = |k: &[u8], v: u64, pos: u64| keys::element(k, v, keys::ITEM, &pos.to_be_bytes());
        assert!(filter.keep(&entry(keys::meta(b"l"), 10, list(7, 5, 8))));
        for (pos, lsn, want) in [
            (4, 5, false),
            (5, 5, true),
            (7, 9, true),
            (8, 5, false),
            (u64::MAX, 5, false),
            // Written after the metadata (a push whose metadata is in a
            // newer file, or logged in pieces): kept.
            (3, 11, true),
        ] {
            assert_eq!(
                filter.keep(&entry(at(b"l", 7, pos), lsn, Some(b"x".to_vec()))),
                want,
                "position {pos} at LSN {lsn}"
            );
        }
        assert!(!filter.keep(&entry(at(b"l", 6, 6), 5, Some(vec![]))));
        let hash = Some(Meta::hash(7).encode());
        assert!(filter.keep(&entry(keys::meta(b"m"), 10, hash)));
        assert!(filter.keep(&entry(at(b"m", 7, 1), 5, Some(vec![]))));
    }
}
