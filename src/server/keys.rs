//! How Redis keys become engine keys.
//!
//! Every Redis key has one metadata key ([`super::meta::Meta`]: its type,
//! version, expiry and size; a string's value is in it). A collection's
//! elements are sub-keys under (key, version), right after the metadata
//! in key order. Overwriting, deleting or expiring a key of any size is
//! one write of its metadata: sub-keys of any other version are dead.
//!
//! ```text
//! metadata of k           esc(k) 00 01 'm'                   -> Meta
//! field f of hash k       esc(k) 00 01 'v' ver:8 'f' f       -> value
//! expiry index            00 02 at:8 k                       -> ""
//! the server's own        00 00 "stria:" name                -> value
//! ```
//!
//! `esc` writes a 0x00 byte of the key as `00 ff`, so `00 01` ends the key
//! and keys keep their order: every engine key of `k` sorts before those of
//! any key that `k` is a proper prefix of. The engine key of a Redis key
//! starts with the key's own bytes, so regions split the Redis key space.
//! `ver` is big-endian, so a version's sub-keys are together. `esc` never
//! writes `00 00` or `00 02`: the server's keys and the expiry index
//! (`at` in milliseconds since the epoch, big-endian, so the index is in
//! the order keys fall due) are never a Redis key's.

/// Which part of a Redis key an engine key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part<'a> {
    Meta,
    /// A sub-key: the version it belongs to, and what follows it (the
    /// element's tag and bytes).
    Sub(u64, &'a [u8]),
}

/// The tags of sub-keys: a hash's field, a list's element (by its
/// position, big-endian), a set's member (after 4 bytes of its hash), a
/// sorted set's member (to its score) and its (score, member) order.
pub const FIELD: u8 = b'f';
pub const ITEM: u8 = b'l';
pub const MEMBER: u8 = b'm';
pub const SCORED: u8 = b'z';
pub const BY_SCORE: u8 = b's';
/// A stream's entry (by its ID, big-endian), consumer group (by name),
/// consumer (group, then name) and pending entry (group, then ID).
pub const ENTRY: u8 = b'e';
pub const GROUP: u8 = b'g';
pub const CONSUMER: u8 = b'c';
pub const PENDING: u8 = b'p';

const META: u8 = b'm';
const SUB: u8 = b'v';

/// The first engine key of the expiry index.
pub const EXPIRES: &[u8] = &[0, 2];

/// The encoding this server writes; a store without it is refused.
pub const ENCODING: &[u8] = b"\0\0stria:encoding";
/// The highest version reserved ([`super::clock::Versions`]).
pub const VERSIONS: &[u8] = b"\0\0stria:versions";
/// Metadata of a version below this is dead (FLUSHALL).
pub const FLOOR: &[u8] = b"\0\0stria:floor";
/// A time the server's clock has reached ([`super::clock::Clock`]).
pub const CLOCK: &[u8] = b"\0\0stria:clock";

/// The value of [`ENCODING`].
pub const ENCODING_VERSION: &[u8] = b"2";

/// Bytes an engine key of a Redis key adds to `esc(key)` at most before
/// an element: `00 01`, `v`, the version and the tag.
pub const SUB_OVERHEAD: usize = 12;

/// The length of `esc(key)`, without the `00 01` that ends it.
pub fn escaped_len(key: &[u8]) -> usize {
    // One vectorized pass: the iterator counts a vector at a time.
    key.len() + memchr::memchr_iter(0, key).count()
}

fn escaped(key: &[u8], extra: usize) -> Vec<u8> {
    // Zero bytes are found a vector at a time (memchr), not byte by
    // byte: every command escapes its keys, and the byte loops were a
    // twentieth of an INCR's user instructions. The key is copied a run
    // at a time; one with zero bytes (rare) grows the buffer as it goes.
    let mut out = Vec::with_capacity(key.len() + 3 + extra);
    let mut from = 0;
    for i in memchr::memchr_iter(0, key) {
        out.extend_from_slice(&key[from..=i]);
        out.push(0xff);
        from = i + 1;
    }
    out.extend_from_slice(&key[from..]);
    out.extend_from_slice(&[0, 1]);
    out
}

/// Where the engine keys of every Redis key that starts with `prefix`
/// start: `esc(prefix)`.
pub fn escaped_prefix(prefix: &[u8]) -> Vec<u8> {
    let mut k = escaped(prefix, 0);
    k.truncate(k.len() - 2);
    k
}

/// The metadata key of `key`.
pub fn meta(key: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, 1);
    k.push(META);
    k
}

/// Whether `engine_key` is [`meta`]`(key)`, for a `key` without zero
/// bytes (for one with them: false, and its key is made again).
pub fn is_meta_of(engine_key: &[u8], key: &[u8]) -> bool {
    engine_key.len() == key.len() + 3
        && engine_key.starts_with(key)
        && engine_key[key.len()..] == [0, 1, META]
        && memchr::memchr(0, key).is_none()
}

/// Where the sub-keys of `key` at `version` with `tag` start: the
/// sub-key of an element is this followed by the element's bytes.
pub fn sub(key: &[u8], version: u64, tag: u8, extra: usize) -> Vec<u8> {
    let mut k = escaped(key, 10 + extra);
    k.push(SUB);
    k.extend_from_slice(&version.to_be_bytes());
    k.push(tag);
    k
}

/// The length of [`sub`]`(key, ..)`: where the element's bytes start in
/// a sub-key of `key`.
pub fn sub_len(key: &[u8]) -> usize {
    escaped_len(key) + SUB_OVERHEAD
}

/// The sub-key of element `elem` of `key` at `version` with `tag`.
pub fn element(key: &[u8], version: u64, tag: u8, elem: &[u8]) -> Vec<u8> {
    let mut k = sub(key, version, tag, elem.len());
    k.extend_from_slice(elem);
    k
}

/// The first engine key after every sub-key of `key` at `version` with `tag`.
pub fn sub_end(key: &[u8], version: u64, tag: u8) -> Vec<u8> {
    let mut k = sub(key, version, tag, 0);
    *k.last_mut().expect("a tag") = tag + 1;
    k
}

/// Where every sub-key of `key` at `version` is: from, to (exclusive).
pub fn version_range(key: &[u8], version: u64) -> (Vec<u8>, Vec<u8>) {
    (sub(key, version, 0, 0), sub_end(key, version, 0xfe))
}

/// The first engine key after every engine key of `key`.
pub fn after(key: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, 0);
    *k.last_mut().expect("escaped keys end with 00 01") = 2;
    k
}

/// The index entry that says `key` may expire at `at`.
pub fn expiry(at: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(10 + key.len());
    k.extend_from_slice(EXPIRES);
    k.extend_from_slice(&at.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The first index entry of a key due after `at`.
pub fn expiry_after(at: u64) -> Vec<u8> {
    expiry(at.saturating_add(1), b"")
}

/// The time and key of an index entry.
pub fn decode_expiry(engine_key: &[u8]) -> Option<(u64, &[u8])> {
    let rest = engine_key.strip_prefix(EXPIRES)?;
    let at = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    Some((at, &rest[8..]))
}

/// Where `esc(key) 00 01` of an engine key ends and which part of its
/// Redis key the engine key is, without decoding the key; `None` for an
/// engine key this encoding never writes for a key.
pub fn split(engine_key: &[u8]) -> Option<(usize, Part<'_>)> {
    let mut i = 0;
    loop {
        let at = i + memchr::memchr(0, &engine_key[i..])?;
        match *engine_key.get(at + 1)? {
            0xff => i = at + 2,
            1 if at > 0 => {
                let end = at + 2;
                let rest = &engine_key[end + 1..];
                return match *engine_key.get(end)? {
                    META if rest.is_empty() => Some((end, Part::Meta)),
                    SUB if rest.len() > 8 => {
                        let v = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
                        Some((end, Part::Sub(v, &rest[8..])))
                    }
                    _ => None,
                };
            }
            _ => return None,
        }
    }
}

/// How commands read an engine key, which decides whether the row cache
/// keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// By point lookup, again and again: worth caching.
    Point,
    /// Only in ranges: the expiry index and a sorted set's (score,
    /// member) order.
    Ranged,
    /// Written once (a push, an XADD), then read in ranges or at most once
    /// by point lookup (the pop that removes it): a list's elements and a
    /// stream's entries.
    Once,
}

/// How commands read engine key `engine_key` (one decode of the key).
pub fn reads(engine_key: &[u8]) -> Reads {
    if engine_key.starts_with(EXPIRES) {
        return Reads::Ranged;
    }
    match split(engine_key) {
        Some((_, Part::Sub(_, [BY_SCORE, ..]))) => Reads::Ranged,
        Some((_, Part::Sub(_, [ITEM | ENTRY, ..]))) => Reads::Once,
        _ => Reads::Point,
    }
}

/// Whether commands only ever read engine key `engine_key` in ranges.
pub fn only_ranged(engine_key: &[u8]) -> bool {
    reads(engine_key) == Reads::Ranged
}

/// Whether engine key `engine_key` is read at most once by point.
pub fn read_once(engine_key: &[u8]) -> bool {
    reads(engine_key) == Reads::Once
}

/// The Redis key of an engine key and which part of it the engine key
/// is; `None` for an engine key this encoding never writes for a key.
pub fn decode(engine_key: &[u8]) -> Option<(Vec<u8>, Part<'_>)> {
    let mut key = Vec::with_capacity(engine_key.len());
    let mut i = 0;
    while i < engine_key.len() {
        let b = engine_key[i];
        if b != 0 {
            key.push(b);
            i += 1;
            continue;
        }
        match engine_key.get(i + 1)? {
            0xff => {
                key.push(0);
                i += 2;
            }
            1 if !key.is_empty() => {
                let rest = &engine_key[i + 3..];
                return match *engine_key.get(i + 2)? {
                    META if rest.is_empty() => Some((key, Part::Meta)),
                    SUB if rest.len() > 8 => {
                        let v = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
                        Some((key, Part::Sub(v, &rest[8..])))
                    }
                    _ => None,
                };
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metadata key is taken for a key's only when it is that key's:
    /// never for a key with zero bytes, whose escaping it could mimic.
    #[test]
    fn a_metadata_key_is_recognised_only_as_its_own_keys() {
        assert!(is_meta_of(&meta(b"user:1"), b"user:1"));
        assert!(!is_meta_of(&meta(b"user:1"), b"user:2"));
        assert!(!is_meta_of(&meta(b"user:1"), b"user:"));
        assert!(!is_meta_of(&meta(b"user"), b"user:1"));
        assert!(!is_meta_of(&sub(b"user:1", 1, ITEM, 0), b"user:1"));
        // `a\0b` escapes to `a\0\xffb`: its metadata key is not the one
        // of the key `a\0\xffb`, and one with a zero byte is made again.
        assert!(!is_meta_of(&meta(b"a\0b"), b"a\0\xffb"));
        assert!(!is_meta_of(&meta(b"a\0b"), b"a\0b"));
        assert!(is_meta_of(&meta(b""), b""));
    }

    #[test]
    fn the_expiry_index_and_score_order_are_ranged_and_items_and_entries_read_once() {
        let k = b"z\0s";
        assert!(only_ranged(&expiry(5, k)));
        assert!(only_ranged(&element(k, 3, BY_SCORE, b"\0\0\0\0\0\0\0\0m")));
        for tag in [FIELD, ITEM, MEMBER, SCORED, ENTRY, GROUP, CONSUMER, PENDING] {
            assert!(!only_ranged(&element(k, 3, tag, b"s")), "{tag}");
        }
        // A key whose own bytes hold the tag is no sub-key.
        assert!(!only_ranged(&meta(b"s")));
        assert!(!only_ranged(&meta(&[0, 1, b'v', b's'])));
        assert!(!only_ranged(VERSIONS));
        for tag in [ITEM, ENTRY] {
            assert!(
                read_once(&element(k, 3, tag, b"\0\0\0\0\0\0\0\x01")),
                "{tag}"
            );
        }
        for tag in [FIELD, MEMBER, SCORED, BY_SCORE, GROUP, CONSUMER, PENDING] {
            assert!(!read_once(&element(k, 3, tag, b"s")), "{tag}");
        }
        assert!(!read_once(&meta(b"l")));
        assert!(!read_once(&meta(&[0, 1, b'v', b'l'])));
    }

    #[test]
    fn keys_round_trip_and_keep_their_order() {
        let keys: Vec<&[u8]> = vec![
            b"\0",
            b"\0\0",
            b"\0a",
            b"a",
            b"a\0",
            b"a\0\xff",
            b"a\x01",
            b"a key longer than a vector\0 with\0\0 zeros\0 in it and after the first 32 bytes\0",
            b"ab",
            b"\xff",
        ];
        let mut engine = Vec::new();
        for k in &keys {
            assert_eq!(escaped_len(k), escaped_prefix(k).len(), "{k:?}");
            assert_eq!(decode(&meta(k)), Some((k.to_vec(), Part::Meta)));
            let f = element(k, 7, FIELD, b"f\0");
            assert_eq!(decode(&f), Some((k.to_vec(), Part::Sub(7, &b"ff\0"[..]))));
            let start = sub(k, 7, FIELD, 0);
            assert!(meta(k) < start && start <= f && f < sub_end(k, 7, FIELD));
            assert!(sub_end(k, u64::MAX, FIELD) < after(k));
            assert!(element(k, 6, FIELD, b"\xff") < start);
            engine.push((meta(k), k));
            engine.push((element(k, u64::MAX, FIELD, b"\xff\xff"), k));
        }
        let mut sorted = engine.clone();
        sorted.sort();
        // Sorting the engine keys sorts the Redis keys, each key's entries together.
        let order: Vec<&[u8]> = sorted.iter().map(|(_, k)| **k).collect();
        let mut expect: Vec<&[u8]> = keys.iter().flat_map(|k| [*k, *k]).collect();
        expect.sort();
        assert_eq!(order, expect);
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert!(after(a) <= meta(b) || b.starts_with(a), "{a:?} {b:?}");
            }
        }
        for own in [ENCODING, VERSIONS, FLOOR, CLOCK, EXPIRES] {
            assert_eq!(decode(own), None);
            assert!(keys.iter().all(|k| own < meta(k).as_slice()));
        }
        for k in &sorted {
            let (user, part) = decode(&k.0).unwrap();
            let (end, p) = split(&k.0).unwrap();
            assert_eq!((&k.0[..end], p), (&meta(&user)[..end], part));
        }
        assert_eq!(split(b"a\0\x02m"), None);
        assert_eq!(split(b"\0\x01m"), None);
        assert_eq!(decode(b"plain"), None);
        assert_eq!(decode(b"a\0\x01mx"), None);
        assert_eq!(decode(b"a\0\x01v1234567"), None);
        assert_eq!(decode(b"a\0\x02m"), None);
        assert_eq!(decode(b"\0\x01m"), None);
    }

    #[test]
    fn the_expiry_index_is_in_the_order_keys_fall_due() {
        let a = expiry(5, b"zz");
        let b = expiry(6, b"a");
        assert!(a < b && b < expiry_after(6) && expiry_after(5) <= b);
        assert_eq!(decode_expiry(&a), Some((5, &b"zz"[..])));
        assert_eq!(decode_expiry(b"\0\x02abc"), None);
        assert_eq!(decode(&a), None);
    }
}
