//! A hasher for tables keyed by byte strings: the key's bytes hashed by
//! one call of xxh3, where `Xxh3Builder`'s streaming hasher copies them
//! into a buffer first, which for the short keys of a command costs
//! several times the hash.

use std::hash::{BuildHasher, Hasher};

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A key's hash in which keys that differ only in the low four bits of
/// their last byte (the next elements of a list, whose positions end its
/// sub-keys in big-endian) hash to neighbouring values: the xxh3 of the
/// rest, plus those four bits. A table that picks buckets by the low bits
/// of the hash (hashbrown does) then keeps up to 16 such keys in
/// neighbouring buckets, so popping or pushing a list's elements in order
/// touches a cache line of buckets per 16 elements instead of one per
/// element. Runs are at most 16 long, one probe group, so they do not
/// lengthen other keys' probes.
pub fn neighbor_hash(key: &[u8]) -> u64 {
    match key.split_last() {
        // A seed no last byte gives, so that "" and "\0" differ.
        None => xxh3_64_with_seed(key, 16),
        Some((&last, rest)) => {
            xxh3_64_with_seed(rest, u64::from(last >> 4)).wrapping_add(u64::from(last & 0x0f))
        }
    }
}

/// Builds [`BytesHasher`]s.
#[derive(Clone, Copy, Default, Debug)]
pub struct BytesHash;

impl BuildHasher for BytesHash {
    type Hasher = BytesHasher;

    fn build_hasher(&self) -> BytesHasher {
        BytesHasher(0)
    }
}

/// Hashes each run of bytes it is given with xxh3 seeded by what came
/// before. A slice's length (which `Hash` writes before its bytes) only
/// seeds it.
#[derive(Clone, Copy, Debug)]
pub struct BytesHasher(u64);

impl Hasher for BytesHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxh3_64_with_seed(bytes, self.0);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        // Mixed so that lengths seed unrelated hashes.
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn neighbours_in_the_last_nibble_hash_to_neighbours() {
        let base = neighbor_hash(b"list\x00\x10");
        for low in 0..16u8 {
            let key = [b'l', b'i', b's', b't', 0, 0x10 | low];
            assert_eq!(neighbor_hash(&key), base.wrapping_add(u64::from(low)));
        }
        // The next run, and keys that differ elsewhere, start anywhere.
        let next = neighbor_hash(b"list\x00\x20");
        assert!(next.wrapping_sub(base) > 1 << 32 && base.wrapping_sub(next) > 1 << 32);
        assert_ne!(neighbor_hash(b"list\x01\x10"), base);
        assert_ne!(neighbor_hash(b""), neighbor_hash(b"\0"));
        assert_ne!(neighbor_hash(b"a"), neighbor_hash(b"\x00a"));
    }

    #[test]
    fn equal_keys_hash_alike_and_a_table_finds_them() {
        let h = |b: &[u8]| BytesHash.hash_one(b);
        assert_eq!(h(b"key:1"), h(b"key:1"));
        assert_ne!(h(b"key:1"), h(b"key:2"));
        assert_ne!(h(b""), h(b"\0"));
        let mut m: HashMap<Vec<u8>, u32, BytesHash> = HashMap::default();
        for i in 0..1000u32 {
            m.insert(i.to_string().into_bytes(), i);
        }
        assert!((0..1000u32).all(|i| m.get(i.to_string().as_bytes()) == Some(&i)));
        // A str hashes as its bytes and a terminator.
        let mut s: HashMap<&str, u32, BytesHash> = HashMap::default();
        s.insert("get", 1);
        assert_eq!(s.get("get"), Some(&1));
    }
}
