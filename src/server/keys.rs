//! How Redis keys become engine keys.
//!
//! A string is one engine key; a hash is a row: a marker key that says the
//! row exists, then one engine key per field, all next to each other in key
//! order, so a wide row costs what its fields cost and a field is read
//! without reading the row.
//!
//! ```text
//! string k        esc(k) 00 01 's'             -> value
//! hash k (marker) esc(k) 00 01 'h'             -> ""
//! hash k, field f esc(k) 00 01 'i' f           -> value
//! ```
//!
//! `esc` writes a 0x00 byte of the key as `00 ff`, so `00 01` ends the key
//! and keys keep their order: every engine key of `k` sorts before those of
//! any key that `k` is a proper prefix of. The engine key of a Redis key
//! starts with the key's own bytes, so regions split the Redis key space.

/// What an engine key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String,
    HashMarker,
    HashField,
}

/// An engine key no Redis key maps to (`esc` never writes `00 00`): `1`
/// once a hash may have been written, `0` while none has. Without it a
/// plain SET would have to look for a hash marker under its key every
/// time.
pub const HASHES: &[u8] = b"\0\0stria:hashes";

const STRING: u8 = b's';
const MARKER: u8 = b'h';
const FIELD: u8 = b'i';

/// The length of `esc(key)`, without the `00 01` that ends it.
pub fn escaped_len(key: &[u8]) -> usize {
    key.len() + key.iter().filter(|&&b| b == 0).count()
}

fn escaped(key: &[u8], extra: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(escaped_len(key) + 3 + extra);
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 1]);
    out
}

/// The engine key of string `key`.
pub fn string(key: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, 0);
    k.push(STRING);
    k
}

/// The marker of hash `key`.
pub fn marker(key: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, 0);
    k.push(MARKER);
    k
}

/// The engine key of `field` in hash `key`.
pub fn field(key: &[u8], field: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, field.len());
    k.push(FIELD);
    k.extend_from_slice(field);
    k
}

/// Where the fields of hash `key` start (every field key is at or after it).
pub fn fields_start(key: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, 0);
    k.push(FIELD);
    k
}

/// The first engine key after every engine key of `key`.
pub fn after(key: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, 0);
    *k.last_mut().expect("escaped keys end with 00 01") = 2;
    k
}

/// The first engine key after every field of hash `key`.
pub fn fields_end(key: &[u8]) -> Vec<u8> {
    let mut k = escaped(key, 0);
    k.push(FIELD + 1);
    k
}

/// The Redis key, the kind, and (for a field) the field name of an engine
/// key; `None` for an engine key this encoding never writes.
pub fn decode(engine_key: &[u8]) -> Option<(Vec<u8>, Kind, &[u8])> {
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
            1 => {
                let kind = match *engine_key.get(i + 2)? {
                    STRING => Kind::String,
                    MARKER => Kind::HashMarker,
                    FIELD => Kind::HashField,
                    _ => return None,
                };
                let rest = &engine_key[i + 3..];
                if kind != Kind::HashField && !rest.is_empty() {
                    return None;
                }
                return Some((key, kind, rest));
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_keep_their_order() {
        let keys: Vec<&[u8]> = vec![
            b"", b"\0", b"\0\0", b"\0a", b"a", b"a\0", b"a\0\xff", b"a\x01", b"ab", b"\xff",
        ];
        let mut engine = Vec::new();
        for k in &keys {
            assert_eq!(
                decode(&string(k)),
                Some((k.to_vec(), Kind::String, &b""[..]))
            );
            assert_eq!(
                decode(&marker(k)),
                Some((k.to_vec(), Kind::HashMarker, &b""[..]))
            );
            let f = field(k, b"f\0");
            assert_eq!(decode(&f), Some((k.to_vec(), Kind::HashField, &b"f\0"[..])));
            assert!(marker(k) < fields_start(k) && fields_start(k) <= f && f < fields_end(k));
            assert!(fields_end(k) <= string(k) && string(k) < after(k));
            engine.push((string(k), k));
            engine.push((field(k, b"\xff\xff"), k));
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
                assert!(after(a) <= marker(b) || b.starts_with(a), "{a:?} {b:?}");
            }
        }
        assert_eq!(decode(b"plain"), None);
        assert_eq!(decode(HASHES), None);
        assert!(keys.iter().all(|k| HASHES < marker(k).as_slice()));
        assert_eq!(decode(b"a\0\x01sx"), None);
        assert_eq!(decode(b"a\0\x02s"), None);
    }
}
