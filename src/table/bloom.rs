//! The bloom filter block: false means the key is certainly not in the file.

use xxhash_rust::xxh3::xxh3_64;

use super::codec::{check_crc, seal_crc, Decoder, Place};
use super::Result;

/// Most probes per key.
const MAX_PROBES: u32 = 30;

/// Fewest filter bytes when there is a filter (so that tiny files still get
/// a useful one).
const MIN_BYTES: u64 = 8;

/// Bytes of the bloom block besides the filter: k and the CRC.
pub(crate) const BLOOM_FIXED: u64 = 8;

/// A key's 64-bit hash, from which all its probes are derived.
pub fn hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// Filter bytes for `keys` keys at `bits_per_key` (0: no filter).
pub(crate) fn filter_bytes(keys: u64, bits_per_key: u32) -> u64 {
    if bits_per_key == 0 {
        return 0;
    }
    keys.saturating_mul(u64::from(bits_per_key))
        .div_ceil(8)
        .max(MIN_BYTES)
}

/// Probes per key for `bits_per_key`: about ln 2 times it, which minimizes
/// false positives.
fn probes(bits_per_key: u32) -> u32 {
    if bits_per_key == 0 {
        return 0;
    }
    ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32).clamp(1, MAX_PROBES)
}

/// The bit positions of a key's probes in a filter of `nbits` bits.
fn positions(h: u64, k: u32, nbits: u64) -> impl Iterator<Item = u64> {
    let delta = h.rotate_left(32) | 1;
    (0..u64::from(k)).map(move |i| h.wrapping_add(i.wrapping_mul(delta)) % nbits)
}

/// Encodes the bloom block for keys with these `hashes`.
pub(crate) fn build(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    let bytes = filter_bytes(hashes.len() as u64, bits_per_key) as usize;
    let k = if bytes == 0 { 0 } else { probes(bits_per_key) };
    let mut out = Vec::with_capacity(bytes + BLOOM_FIXED as usize);
    out.extend_from_slice(&k.to_le_bytes());
    out.resize(4 + bytes, 0);
    let nbits = bytes as u64 * 8;
    {
        let bits = &mut out[4..];
        for &h in hashes {
            for p in positions(h, k, nbits) {
                bits[(p / 8) as usize] |= 1 << (p % 8);
            }
        }
    }
    seal_crc(&mut out, 0);
    out
}

/// A decoded bloom filter.
#[derive(Clone)]
pub(crate) struct Bloom {
    k: u32,
    bits: Vec<u8>,
}

impl std::fmt::Debug for Bloom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bloom {{ k: {}, bytes: {} }}", self.k, self.bits.len())
    }
}

impl Bloom {
    /// Decodes and checks the bloom block at file offset `offset`.
    pub(crate) fn decode(block: &[u8], offset: u64, place: Place) -> Result<Bloom> {
        let body = check_crc(block, "bloom block", offset, place)?;
        let mut d = Decoder::new(body, offset, &"bloom block");
        let k = d.u32("probe count")?;
        let bits = d.bytes(d.remaining() as u64, "bits")?.to_vec();
        if k > MAX_PROBES || (k == 0) != bits.is_empty() {
            return Err(d.corrupt_at(0, format!("{k} probes over {} bytes", bits.len())));
        }
        Ok(Bloom { k, bits })
    }

    /// False if the key with hash `h` is certainly absent.
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        if self.k == 0 {
            return true;
        }
        let nbits = self.bits.len() as u64 * 8;
        positions(h, self.k, nbits).all(|p| self.bits[(p / 8) as usize] & (1 << (p % 8)) != 0)
    }
}
