//! DUMP and RESTORE. A dump is Stria's own form of a key, not Redis's
//! RDB form (a dump moves between Stria servers; RESTORE also takes a
//! Redis server's dump of a string or a stream, see `rdb_stream.rs`):
//! the key's metadata without its version or expiry, then every
//! sub-key of its elements (tag and element) with its value, then, as
//! Redis's dumps end, a 2-byte format version and an 8-byte checksum
//! (xxh3 of everything before). RESTORE checks the checksum and that the
//! metadata counts exactly the elements there are before it writes the
//! key, under a new version, in one write.

use crate::server::notify::GENERIC;
use xxhash_rust::xxh3::xxh3_64;

use super::{integer, not_integer, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{
    self, BY_SCORE, CONSUMER, ENTRY, FIELD, GROUP, ITEM, MEMBER, PENDING, SCORED,
};
use crate::server::meta::{Body, Meta, Type};
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

/// The version of the form [`Conn::dump`] writes.
const FORMAT: u16 = 1;

/// A key's element sub-keys: what follows the version (tag, element),
/// and the value.
pub type Elements = Vec<(Vec<u8>, Vec<u8>)>;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn take_bytes<'b>(input: &mut &'b [u8]) -> Option<&'b [u8]> {
    let len = u32::from_le_bytes(input.get(..4)?.try_into().ok()?) as usize;
    let b = input.get(4..4 + len)?;
    *input = &input[4 + len..];
    Some(b)
}

/// The dump of metadata `m` with `elements`.
fn encode(m: &Meta, elements: &Elements) -> Vec<u8> {
    let mut bare = m.clone();
    bare.version = 0;
    bare.expire_at = None;
    let mut out = Vec::new();
    put_bytes(&mut out, &bare.encode());
    out.extend_from_slice(&(elements.len() as u64).to_le_bytes());
    for (k, v) in elements {
        put_bytes(&mut out, k);
        put_bytes(&mut out, v);
    }
    out.extend_from_slice(&FORMAT.to_le_bytes());
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Why a payload is refused.
enum Bad {
    /// Not a dump of this form (checksum, version).
    Checksum,
    /// A dump whose contents do not agree with themselves.
    Format,
}

/// The metadata and elements of a dump, checked.
fn decode(payload: &[u8]) -> Result<(Meta, Elements), Bad> {
    let n = payload.len();
    if n < 10 {
        return Err(Bad::Checksum);
    }
    let (body, trailer) = payload.split_at(n - 8);
    let sum = u64::from_le_bytes(trailer.try_into().expect("8 bytes"));
    if xxh3_64(body) != sum || body[body.len() - 2..] != FORMAT.to_le_bytes() {
        // Not Stria's form: perhaps a Redis server's.
        return match super::rdb_stream::decode_redis(payload) {
            Some(Ok((m, elements))) if consistent(&m, &elements) => Ok((m, elements)),
            Some(_) => Err(Bad::Format),
            None => Err(Bad::Checksum),
        };
    }
    let mut input = &body[..body.len() - 2];
    let raw = take_bytes(&mut input).ok_or(Bad::Format)?;
    let m = Meta::decode(raw.to_vec()).ok_or(Bad::Format)?;
    let count = u64::from_le_bytes(
        input
            .get(..8)
            .ok_or(Bad::Format)?
            .try_into()
            .expect("8 bytes"),
    );
    input = &input[8..];
    let mut elements = Vec::new();
    for _ in 0..count {
        let k = take_bytes(&mut input).ok_or(Bad::Format)?;
        let v = take_bytes(&mut input).ok_or(Bad::Format)?;
        elements.push((k.to_vec(), v.to_vec()));
    }
    if !input.is_empty() || !consistent(&m, &elements) {
        return Err(Bad::Format);
    }
    Ok((m, elements))
}

/// Whether the metadata counts exactly the elements there are, each of
/// a tag its type has.
fn consistent(m: &Meta, elements: &Elements) -> bool {
    let tagged = |t: u8| {
        elements
            .iter()
            .filter(|(k, _)| k.first() == Some(&t))
            .count() as u64
    };
    let tags_ok = |ts: &[u8]| {
        elements
            .iter()
            .all(|(k, _)| k.len() > 1 && ts.contains(&k[0]))
    };
    match (m.kind, &m.body) {
        (Type::String, Body::Value(..)) => elements.is_empty(),
        (Type::Hash, Body::Count(n)) => tags_ok(&[FIELD]) && tagged(FIELD) == *n,
        (Type::Set, Body::Count(n)) => tags_ok(&[MEMBER]) && tagged(MEMBER) == *n,
        (Type::ZSet, Body::Count(n)) => {
            tags_ok(&[SCORED, BY_SCORE]) && tagged(SCORED) == *n && tagged(BY_SCORE) == *n
        }
        (Type::Stream, Body::Stream(st)) => {
            tags_ok(&[ENTRY, GROUP, CONSUMER, PENDING])
                && tagged(ENTRY) == st.length
                && tagged(GROUP) == st.groups
        }
        (Type::List, Body::Ends(head, tail)) => {
            let positions_ok = elements.iter().all(|(k, _)| {
                k.len() == 9 && {
                    let p = u64::from_be_bytes(k[1..].try_into().expect("8 bytes"));
                    (*head..*tail).contains(&p)
                }
            });
            tags_ok(&[ITEM]) && positions_ok && tagged(ITEM) == tail.saturating_sub(*head)
        }
        _ => false,
    }
}

impl<'a> Conn<'a> {
    /// Every element sub-key of `key` (metadata `m`) that reads may
    /// reach: what follows its version (the tag and the element), and
    /// its value.
    pub(super) fn sub_keys(&mut self, key: &[u8], m: &Meta) -> Res<Elements> {
        let mut out = Vec::new();
        if m.kind == Type::String {
            return Ok(out);
        }
        let (start, end) = Self::readable(key, m);
        // Where the tag starts: after `esc(key) 00 01`, `v` and the version.
        let prefix = keys::escaped_len(key) + keys::SUB_OVERHEAD - 1;
        let mut at = start;
        loop {
            let batch = self.scan_raw(&at, Some(&end), CHUNK)?;
            let Some((last, _)) = batch.last() else { break };
            at = last.clone();
            at.push(0);
            let n = batch.len();
            out.extend(batch.into_iter().map(|(k, v)| (k[prefix..].to_vec(), v)));
            if n < CHUNK {
                break;
            }
        }
        Ok(out)
    }

    pub(super) fn dump(&mut self, key: &[u8]) -> Res<Reply> {
        let Some(m) = self.lookup(key)? else {
            return Ok(Reply::Nil);
        };
        Ok(Reply::Bulk(self.dump_payload(key, &m)?))
    }

    /// The dump of `key`, whose metadata is `m`.
    pub(super) fn dump_payload(&mut self, key: &[u8], m: &Meta) -> Res<Vec<u8>> {
        let elements = self.sub_keys(key, m)?;
        Ok(encode(m, &elements))
    }

    /// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f].
    pub(super) fn restore(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, payload) = (&args[1], &args[3]);
        let ttl = integer(&args[2]).ok_or_else(not_integer)?;
        if ttl < 0 {
            return Err(Reply::err("Invalid TTL value, must be >= 0"));
        }
        let (mut replace, mut absolute, mut idle, mut freq) = (false, false, None, false);
        let mut i = 4;
        while i < args.len() {
            let more = i + 1 < args.len();
            match args[i].to_ascii_lowercase().as_slice() {
                b"replace" => replace = true,
                b"absttl" => absolute = true,
                b"idletime" if more && !freq => {
                    let secs = match integer(&args[i + 1]) {
                        Some(s) if s >= 0 => s as u64,
                        Some(_) => return Err(Reply::err("Invalid IDLETIME value, must be >= 0")),
                        None => return Err(not_integer()),
                    };
                    (idle, i) = (Some(secs), i + 1);
                }
                b"freq" if more && idle.is_none() => {
                    match integer(&args[i + 1]) {
                        Some(0..=255) => {}
                        Some(_) => {
                            return Err(Reply::err("Invalid FREQ value, must be >= 0 and <= 255"))
                        }
                        None => return Err(not_integer()),
                    }
                    (freq, i) = (true, i + 1);
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        // As in Redis, an existing key is refused before the payload is read.
        let old = self.lookup(key)?;
        if old.is_some() && !replace {
            return Err(Reply::Error(
                "BUSYKEY Target key name already exists.".into(),
            ));
        }
        let (mut m, elements) = decode(payload).map_err(|b| match b {
            Bad::Checksum => Reply::err("DUMP payload version or checksum are wrong"),
            Bad::Format => Reply::err("Bad data format"),
        })?;
        if let Some(v) = m.value() {
            self.check_string(v.len())?;
        }
        for (k, v) in &elements {
            self.check_element(key, &k[1..], "element")?;
            self.check_value(v.len())?;
        }
        let expire_at = match ttl {
            0 => None,
            t if absolute => Some(t as u64),
            t => Some(self.now().saturating_add(t as u64)),
        };
        let mut writes: Writes = Vec::new();
        if expire_at.is_some_and(|at| at <= self.now()) {
            // Already expired: nothing to make, what was there goes.
            if old.is_some() {
                super::index_expiry(
                    key,
                    None,
                    old.as_ref().and_then(|o| o.expire_at),
                    &mut writes,
                );
                writes.push((keys::meta(key), None));
            }
            self.write(writes);
            if old.is_some() {
                self.notify(GENERIC, "del", key);
            }
            return Ok(Reply::ok());
        }
        m.version = self.new_version()?;
        m.expire_at = expire_at;
        for (k, v) in elements {
            writes.push((keys::element(key, m.version, k[0], &k[1..]), Some(v)));
        }
        self.put(key, &m, old.as_ref(), &mut writes);
        if let Some(secs) = idle {
            self.shard.access().set_idle(key, secs.saturating_mul(1000));
        }
        self.write(writes);
        self.notify(GENERIC, "restore", key);
        Ok(Reply::ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_round_trips_and_a_changed_byte_is_refused() {
        let mut m = Meta::collection(Type::Set, 9);
        m.set_count(2);
        let elements: Elements = vec![
            ([&[MEMBER][..], b"1234a"].concat(), vec![]),
            ([&[MEMBER][..], b"1234b"].concat(), vec![]),
        ];
        let d = encode(&m, &elements);
        let (back, got) = decode(&d).ok().expect("decodes");
        assert_eq!((back.kind, back.body.clone()), (m.kind, m.body.clone()));
        assert_eq!(got, elements);
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 1;
            assert!(decode(&bad).is_err(), "byte {i} changed and accepted");
        }
        // A count that does not match the elements.
        m.set_count(3);
        assert!(matches!(decode(&encode(&m, &elements)), Err(Bad::Format)));
    }
}
