//! Which region a key belongs to.

/// The region boundaries: region `i` holds the keys from split key `i - 1`
/// (inclusive; the empty key for region 0) to split key `i` (exclusive; no
/// end for the last region).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Regions {
    splits: Vec<Vec<u8>>,
    /// Each split key's first 8 bytes as a big-endian integer (zeros
    /// after a shorter key), which decide most comparisons in one step.
    heads: Vec<u64>,
}

/// `key`'s first 8 bytes, zero-padded, as a big-endian integer: of two
/// keys whose heads differ, the one with the smaller head sorts first.
fn head(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl Regions {
    /// Regions split at `splits`, which must be strictly increasing.
    pub fn new(splits: Vec<Vec<u8>>) -> Regions {
        debug_assert!(splits.windows(2).all(|w| w[0] < w[1]));
        let heads = splits.iter().map(|s| head(s)).collect();
        Regions { splits, heads }
    }

    pub fn count(&self) -> usize {
        self.splits.len() + 1
    }

    pub fn splits(&self) -> &[Vec<u8>] {
        &self.splits
    }

    /// The region of `key`.
    pub fn of(&self, key: &[u8]) -> usize {
        let h = head(key);
        // The first split above `key`: by head, and by bytes on a tie.
        let below = self.heads.partition_point(|&s| s < h);
        below
            + self.splits[below..]
                .iter()
                .zip(&self.heads[below..])
                .take_while(|&(s, &sh)| sh == h && s.as_slice() <= key)
                .count()
    }

    /// The first key of region `r`.
    pub fn start(&self, r: usize) -> &[u8] {
        if r == 0 {
            &[]
        } else {
            &self.splits[r - 1]
        }
    }

    /// The key after region `r` (`None` for the last region).
    pub fn end(&self, r: usize) -> Option<&[u8]> {
        self.splits.get(r).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fall_in_the_region_their_split_keys_say() {
        let r = Regions::new(vec![b"g".to_vec(), b"p".to_vec()]);
        assert_eq!(r.count(), 3);
        assert_eq!(r.of(b""), 0);
        assert_eq!(r.of(b"f\xff"), 0);
        assert_eq!(r.of(b"g"), 1);
        assert_eq!(r.of(b"p"), 2);
        assert_eq!(r.of(b"zzz"), 2);
        assert_eq!(r.start(1), b"g");
        assert_eq!(r.end(1), Some(&b"p"[..]));
        assert_eq!(r.end(2), None);
        assert_eq!(Regions::new(Vec::new()).of(b"x"), 0);
        // Heads that tie: the bytes decide.
        let r = Regions::new(vec![
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefghi".to_vec(),
        ]);
        let keys: [&[u8]; 8] = [
            b"",
            b"a",
            b"a\0",
            b"a\0\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghh",
            b"b",
        ];
        for k in keys {
            let slow = r.splits().partition_point(|s| s.as_slice() <= k);
            assert_eq!(r.of(k), slow, "{k:?}");
        }
    }
}
