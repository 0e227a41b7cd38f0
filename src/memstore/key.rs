//! The memstore's map key: a key's bytes, ordered as the bytes are, with
//! its first forty bytes inline; and the borrowed probe a lookup searches
//! the map with. A key's versions are its value in the map ([`super::chain`]).

/// Key of the map.
///
/// `prefix` is the key's first [`INLINE`] bytes as big-endian words,
/// zero-padded, which orders keys as the bytes do up to the padding. Most
/// comparisons in a B-tree search end at it, without following a pointer
/// to the key's bytes: a cache miss fewer per comparison. Keys of one
/// application tend to share their first bytes (`user:000…`, every Redis
/// string key ends `00 01 m`, and the elements of a collection share
/// `key 00 01 v`, its version and a tag, 18 bytes after a short key), and
/// 40 bytes hold `myhash 00 01 v <version> f element:000000012345` whole,
/// so such keys are told apart by the prefix and the key's length, without
/// reading more (see [`tail_cmp`]). With 16 bytes, the B-tree search of a
/// collection's element read the key at every step (memstore inserts were
/// a quarter of HSET's server CPU, nearly all of it in those reads).
///
/// The bytes past the prefix are a copy of their own, not the record of
/// the key's first write: that record would keep its whole group's buffer
/// alive after a newer version replaced it.
#[derive(Debug)]
pub(super) struct MapKey {
    prefix: Prefix,
    len: u32,
    /// The key's bytes past [`INLINE`] (empty when it is no longer).
    tail: Box<[u8]>,
}

impl MapKey {
    pub(super) fn new(prefix: Prefix, key: &[u8]) -> MapKey {
        MapKey {
            prefix,
            len: u32::try_from(key.len()).expect("a key below 4 GiB"),
            tail: tail(key).into(),
        }
    }

    /// The key's bytes, from the map key alone (no look at a record).
    pub(super) fn bytes(&self) -> Vec<u8> {
        let len = self.len as usize;
        // The prefix's words laid out first: a key shorter than the prefix
        // must not outgrow its vector (a scan copies keys by the dozen).
        let mut head = [0u8; INLINE];
        for (bytes, w) in head.chunks_exact_mut(8).zip(self.prefix) {
            bytes.copy_from_slice(&w.to_be_bytes());
        }
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&head[..len.min(INLINE)]);
        out.extend_from_slice(&self.tail);
        out
    }
}

/// What the map is ordered by, for a lookup that borrows its key: a
/// [`MapKey`] is one, and so is a [`KeyProbe`], which makes no copy of the
/// key.
pub(super) trait Probe {
    fn prefix(&self) -> &Prefix;
    fn len(&self) -> usize;
    /// The key's bytes past [`INLINE`].
    fn tail(&self) -> &[u8];
}

impl Probe for MapKey {
    fn prefix(&self) -> &Prefix {
        &self.prefix
    }
    fn len(&self) -> usize {
        self.len as usize
    }
    fn tail(&self) -> &[u8] {
        &self.tail
    }
}

/// A key to look up, borrowed.
pub(super) struct KeyProbe<'k> {
    pub(super) prefix: Prefix,
    pub(super) key: &'k [u8],
}

impl<'k> KeyProbe<'k> {
    pub(super) fn new(key: &'k [u8]) -> KeyProbe<'k> {
        KeyProbe {
            prefix: prefix(key),
            key,
        }
    }
}

impl Probe for KeyProbe<'_> {
    fn prefix(&self) -> &Prefix {
        &self.prefix
    }
    fn len(&self) -> usize {
        self.key.len()
    }
    fn tail(&self) -> &[u8] {
        tail(self.key)
    }
}

impl<'a> std::borrow::Borrow<dyn Probe + 'a> for MapKey {
    fn borrow(&self) -> &(dyn Probe + 'a) {
        self
    }
}

/// The order of keys: the prefix, then [`tail_cmp`].
impl Ord for dyn Probe + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        prefix_cmp(self.prefix(), other.prefix())
            .then_with(|| tail_cmp(self.len(), self.tail(), other.len(), other.tail()))
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

impl Ord for MapKey {
    /// As `dyn Probe`'s, without its calls through the vtable: a fold
    /// inserts keys into the B-tree with these.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        prefix_cmp(&self.prefix, &other.prefix).then_with(|| {
            tail_cmp(
                self.len as usize,
                &self.tail,
                other.len as usize,
                &other.tail,
            )
        })
    }
}

impl PartialOrd for MapKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for MapKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for MapKey {}

/// How many of a key's first bytes [`MapKey`] keeps inline.
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

/// The order of two prefixes: word by word, most keys of one
/// application telling apart in the first or second.
fn prefix_cmp(a: &Prefix, b: &Prefix) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x.cmp(y);
        }
    }
    std::cmp::Ordering::Equal
}

/// The order of two keys whose prefixes are equal, from their lengths and
/// their bytes past the prefix. If either is no longer than the prefix,
/// the shorter one is a prefix of the other (the bytes past its end are
/// the other's, and they equal its padding), so the lengths decide without
/// reading a byte; otherwise the bytes past the prefix do.
pub(super) fn tail_cmp(a_len: usize, a: &[u8], b_len: usize, b: &[u8]) -> std::cmp::Ordering {
    if a_len <= INLINE || b_len <= INLINE {
        a_len.cmp(&b_len)
    } else {
        a.cmp(b)
    }
}

/// A key's bytes past [`INLINE`].
fn tail(key: &[u8]) -> &[u8] {
    key.get(INLINE..).unwrap_or_default()
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
                let inline = (&KeyProbe::new(a) as &dyn Probe).cmp(&KeyProbe::new(b));
                assert_eq!(inline, a.cmp(b), "{a:?} against {b:?}");
                let owned = MapKey::new(prefix(a), a).cmp(&MapKey::new(prefix(b), b));
                assert_eq!(owned, a.cmp(b), "{a:?} against {b:?}");
            }
            assert_eq!(&MapKey::new(prefix(a), a).bytes(), a);
        }
    }
}
