//! A hasher for tables keyed by byte strings: the key's bytes hashed by
//! one call of xxh3, where `Xxh3Builder`'s streaming hasher copies them
//! into a buffer first, which for the short keys of a command costs
//! several times the hash.

use std::hash::{BuildHasher, Hasher};

use xxhash_rust::xxh3::xxh3_64_with_seed;

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
