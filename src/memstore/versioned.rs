//! The memstore's map key: a write's record and version, ordered by key
//! (its first sixteen bytes inline) and then newest version first; and
//! the borrowed probe a lookup searches the map with.

use std::cmp::Reverse;

use crate::record::Record;

/// Key of the map: versions of a key sort newest first.
///
/// `prefix` is the key's first [`INLINE`] bytes as big-endian words,
/// zero-padded, which orders keys as the bytes do up to the padding. Most
/// comparisons in a B-tree search end at it, without following the
/// pointer to the key's bytes: a cache miss fewer per comparison. Keys of
/// one application tend to share their first bytes (`user:000…`, every
/// Redis string key ends `00 01 m`, and the elements of a collection share
/// `key 00 01 v`, its version and a tag, 18 bytes after a short key), and a
/// written key's versions all share theirs: 40 bytes hold
/// `myhash 00 01 v <version> f element:000000012345` whole, so such keys,
/// and the versions of one key, are told apart by the prefix, the key's
/// length (kept in the record, not behind the pointer) and the version,
/// without reading the key's bytes (see [`tail_cmp`]). With 16 bytes, the
/// B-tree search of a collection's element read the key at every step
/// (memstore inserts were a quarter of HSET's server CPU, nearly all of it
/// in those reads). The key and the value are the write's
/// [`Record`], shared with the WAL append that logged it.
#[derive(Clone, Debug)]
pub(super) struct Versioned {
    pub(super) prefix: Prefix,
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
            .then_with(|| tail_cmp(self.key(), other.key()))
            .then(self.version.cmp(&other.version))
    }
}

/// What the map is ordered by, for a lookup that borrows its key: a
/// [`Versioned`] is one, and so is a [`KeyProbe`], which makes no copy of
/// the key (a probe [`Versioned`] copied it into a new shared buffer, two
/// allocations per lookup).
pub(super) trait Probe {
    fn prefix(&self) -> Prefix;
    fn probe_key(&self) -> &[u8];
    fn version(&self) -> u64;
}

impl Probe for Versioned {
    fn prefix(&self) -> Prefix {
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
    pub(super) prefix: Prefix,
    pub(super) key: &'k [u8],
    pub(super) version: u64,
}

impl Probe for KeyProbe<'_> {
    fn prefix(&self) -> Prefix {
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
            .then_with(|| tail_cmp(self.probe_key(), other.probe_key()))
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

/// How many of a key's first bytes [`Versioned`] keeps inline.
pub(super) const INLINE: usize = 40;

/// A key's first [`INLINE`] bytes, zero-padded, as big-endian words.
pub(super) type Prefix = [u64; INLINE / 8];

pub(super) fn prefix(key: &[u8]) -> Prefix {
    let mut b = [0u8; INLINE];
    let n = key.len().min(INLINE);
    b[..n].copy_from_slice(&key[..n]);
    let word = |i: usize| u64::from_be_bytes(b[i * 8..i * 8 + 8].try_into().expect("eight bytes"));
    std::array::from_fn(word)
}

/// The order of two keys whose prefixes are equal. If either is no longer
/// than the prefix, the shorter one is a prefix of the other (the bytes
/// past its end are the other's, and they equal its padding), so the
/// lengths decide without reading a byte; otherwise the bytes past the
/// prefix do.
pub(super) fn tail_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if a.len() <= INLINE || b.len() <= INLINE {
        a.len().cmp(&b.len())
    } else {
        a[INLINE..].cmp(&b[INLINE..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefix, then [`tail_cmp`], order keys exactly as their bytes,
    /// across the inline boundary and with zero bytes where the padding is.
    #[test]
    fn the_inline_order_is_the_order_of_the_bytes() {
        let mut keys: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0, 0], vec![1]];
        for len in [15, 16, 17, 23, 24, 25, 39, 40, 41, 47, 48, 49, 64] {
            for last in [0u8, 1, 0xff] {
                let mut k = vec![b'k'; len];
                k[len - 1] = last;
                keys.push(k.clone());
                k.push(0);
                keys.push(k);
            }
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = (rng % 64) as usize;
            keys.push(
                (0..len)
                    .map(|i| [0u8, 1, 0xff][((rng >> i) % 3) as usize])
                    .collect(),
            );
        }
        for a in &keys {
            for b in &keys {
                let inline = prefix(a).cmp(&prefix(b)).then_with(|| tail_cmp(a, b));
                assert_eq!(inline, a.cmp(b), "{a:?} against {b:?}");
            }
        }
    }
}
