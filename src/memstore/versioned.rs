//! The memstore's map key: a write's record and version, ordered by key
//! (its first sixteen bytes inline) and then newest version first; and
//! the borrowed probe a lookup searches the map with.

use std::cmp::Reverse;

use crate::record::Record;

/// Key of the map: versions of a key sort newest first.
///
/// `prefix` is the key's first sixteen bytes as two big-endian words,
/// zero-padded, which orders keys as the bytes do (a key that is shorter
/// sorts first on equal prefixes through the key's bytes). Most
/// comparisons in a B-tree search end at it, without following the pointer
/// to the key's bytes: a cache miss fewer per comparison. Sixteen bytes,
/// not eight, because keys of one application tend to share their first
/// bytes (`user:000…`, and every Redis string key ends `00 01 s`): with
/// eight, a search of `key:000000012345` compared the key bytes at every
/// step. The key and the value are
/// the write's [`Record`], shared with the WAL append that logged it.
#[derive(Clone, Debug)]
pub(super) struct Versioned {
    pub(super) prefix: [u64; 2],
    pub(super) record: Record,
    pub(super) version: Reverse<u64>,
}

impl Versioned {
    pub(super) fn new(record: Record, version: u64) -> Versioned {
        Versioned {
            prefix: prefix(record.key()),
            record,
            version: Reverse(version),
        }
    }

    pub(super) fn key(&self) -> &[u8] {
        self.record.key()
    }
}

impl PartialEq for Versioned {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Versioned {}

impl PartialOrd for Versioned {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Versioned {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.key().cmp(other.key()))
            .then(self.version.cmp(&other.version))
    }
}

/// What the map is ordered by, for a lookup that borrows its key: a
/// [`Versioned`] is one, and so is a [`KeyProbe`], which makes no copy of
/// the key (a probe [`Versioned`] copied it into a new shared buffer, two
/// allocations per lookup).
pub(super) trait Probe {
    fn prefix(&self) -> [u64; 2];
    fn probe_key(&self) -> &[u8];
    fn version(&self) -> u64;
}

impl Probe for Versioned {
    fn prefix(&self) -> [u64; 2] {
        self.prefix
    }
    fn probe_key(&self) -> &[u8] {
        self.key()
    }
    fn version(&self) -> u64 {
        self.version.0
    }
}

/// A key and version to look up, borrowed.
pub(super) struct KeyProbe<'k> {
    pub(super) prefix: [u64; 2],
    pub(super) key: &'k [u8],
    pub(super) version: u64,
}

impl Probe for KeyProbe<'_> {
    fn prefix(&self) -> [u64; 2] {
        self.prefix
    }
    fn probe_key(&self) -> &[u8] {
        self.key
    }
    fn version(&self) -> u64 {
        self.version
    }
}

impl<'a> std::borrow::Borrow<dyn Probe + 'a> for Versioned {
    fn borrow(&self) -> &(dyn Probe + 'a) {
        self
    }
}

/// The order of [`Versioned`]: key (prefix first), then newest version.
impl Ord for dyn Probe + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.prefix()
            .cmp(&other.prefix())
            .then_with(|| self.probe_key().cmp(other.probe_key()))
            .then(Reverse(self.version()).cmp(&Reverse(other.version())))
    }
}

impl PartialOrd for dyn Probe + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn Probe + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for dyn Probe + '_ {}

pub(super) fn prefix(key: &[u8]) -> [u64; 2] {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    b[..n].copy_from_slice(&key[..n]);
    let (hi, lo) = b.split_at(8);
    [
        u64::from_be_bytes(hi.try_into().expect("eight bytes")),
        u64::from_be_bytes(lo.try_into().expect("eight bytes")),
    ]
}
