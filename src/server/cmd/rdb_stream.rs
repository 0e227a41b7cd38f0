//! A Redis DUMP payload of a string or a stream made into Stria's form
//! of the key (metadata and element sub-keys), for RESTORE. Streams come
//! in RDB types 15, 19 and 21 (Redis 5-6.2, 7.0, 7.2): listpacks of
//! entries, each listpack a node; then the stream's IDs and counters
//! (7.0 on; before, `entries-added` is the length, and each group's
//! read counter is estimated as Redis does on loading); then the
//! consumer groups with their pending entries and consumers (7.2 adds
//! the consumers' active time; before, it is their seen time).

use super::dump::Elements;
use super::rdb::{listpack, redis_body, Corrupt, Element, Rdb, Reader};
use super::stream_entry::{encode_entry, id_bytes, id_of};
use super::stream_groups::{encode_group, encode_pending, scoped, Group, Pending};
use super::stream_info::estimate_read;
use crate::server::keys::{CONSUMER, ENTRY, GROUP, PENDING};
use crate::server::meta::{Body, Id, Meta, StreamState, Type};

const RDB_TYPE_STRING: u8 = 0;
const RDB_TYPE_STREAM_LISTPACKS: u8 = 15;
const RDB_TYPE_STREAM_LISTPACKS_2: u8 = 19;
const RDB_TYPE_STREAM_LISTPACKS_3: u8 = 21;

/// An entry's flags in a stream listpack.
const DELETED: i64 = 1;
const SAME_FIELDS: i64 = 2;

/// What a Redis payload holds: `None` when it is not one (its footer is
/// not Redis's), `Err` when it is one this server cannot read (another
/// type, or corrupt).
pub fn decode_redis(payload: &[u8]) -> Option<Rdb<(Meta, Elements)>> {
    let body = redis_body(payload)?;
    let mut r = Reader::new(body);
    Some((|| {
        let kind = r.byte()?;
        let out = match kind {
            RDB_TYPE_STRING => (Meta::string(0, r.string()?, None), Vec::new()),
            RDB_TYPE_STREAM_LISTPACKS
            | RDB_TYPE_STREAM_LISTPACKS_2
            | RDB_TYPE_STREAM_LISTPACKS_3 => stream(&mut r, kind)?,
            _ => return Err(Corrupt),
        };
        if !r.is_empty() {
            return Err(Corrupt);
        }
        Ok(out)
    })())
}

fn id(r: &mut Reader) -> Rdb<Id> {
    Ok((r.length()?, r.length()?))
}

/// A raw 16-byte ID (big-endian words).
fn raw_id(r: &mut Reader) -> Rdb<Id> {
    id_of(r.bytes(16)?).ok_or(Corrupt)
}

/// The live entries of one stream listpack whose master ID is `master`.
fn node_entries(master: Id, lp: Vec<Element>) -> Rdb<Vec<(Id, Vec<Vec<u8>>)>> {
    let mut it = lp.into_iter();
    let mut next = || it.next().ok_or(Corrupt);
    let count = next()?.int()?;
    let deleted = next()?.int()?;
    let nfields = usize::try_from(next()?.int()?).map_err(|_| Corrupt)?;
    let mut master_fields = Vec::new();
    for _ in 0..nfields {
        master_fields.push(next()?.bytes());
    }
    if next()?.int()? != 0 {
        return Err(Corrupt);
    }
    let mut out = Vec::new();
    for _ in 0..count.checked_add(deleted).ok_or(Corrupt)? {
        let flags = next()?.int()?;
        let ms = master.0.checked_add(next()?.int()? as u64).ok_or(Corrupt)?;
        let seq = master.1.wrapping_add(next()?.int()? as u64);
        let mut fields = Vec::new();
        if flags & SAME_FIELDS != 0 {
            for f in &master_fields {
                fields.push(f.clone());
                fields.push(next()?.bytes());
            }
        } else {
            let n = usize::try_from(next()?.int()?).map_err(|_| Corrupt)?;
            for _ in 0..2 * n {
                fields.push(next()?.bytes());
            }
        }
        next()?; // lp-count
        if flags & DELETED == 0 {
            out.push(((ms, seq), fields));
        }
    }
    if it.next().is_some() || out.len() as i64 != count {
        return Err(Corrupt);
    }
    Ok(out)
}

fn stream(r: &mut Reader, kind: u8) -> Rdb<(Meta, Elements)> {
    let mut elements: Elements = Vec::new();
    let mut st = StreamState::default();
    let mut live: Vec<Id> = Vec::new();
    let nodes = r.count()?;
    for node in 0..nodes {
        let key = r.string()?;
        let master = if key.len() == 16 {
            id_of(&key).ok_or(Corrupt)?
        } else {
            return Err(Corrupt);
        };
        let entries = node_entries(master, listpack(&r.string()?)?)?;
        if node + 1 == nodes {
            st.node = node as u64;
            st.node_entries = entries.len() as u64;
            st.node_bytes = entries
                .iter()
                .map(|(_, f)| f.iter().map(|x| x.len() as u64 + 2).sum::<u64>() + 8)
                .sum();
        }
        for (id, fields) in entries {
            if live.last().is_some_and(|&l| l >= id) {
                return Err(Corrupt);
            }
            live.push(id);
            let mut k = vec![ENTRY];
            k.extend_from_slice(&id_bytes(id));
            elements.push((k, encode_entry(node as u64, &fields)));
        }
    }
    st.length = r.length()?;
    st.last = id(r)?;
    if kind >= RDB_TYPE_STREAM_LISTPACKS_2 {
        st.first = id(r)?;
        st.max_deleted = id(r)?;
        st.added = r.length()?;
    } else {
        st.added = st.length;
        st.first = live.first().copied().unwrap_or((0, 0));
    }
    if st.length != live.len() as u64 || live.last().is_some_and(|&l| l > st.last) {
        return Err(Corrupt);
    }
    let groups = r.count()?;
    let mut names: Vec<Vec<u8>> = Vec::new();
    for _ in 0..groups {
        let name = r.string()?;
        if names.contains(&name) {
            return Err(Corrupt);
        }
        let last = id(r)?;
        let read = if kind >= RDB_TYPE_STREAM_LISTPACKS_2 {
            // Redis writes an unknown counter as the largest value.
            i64::try_from(r.length()?).unwrap_or(-1)
        } else {
            estimate_read(&st, last)
        };
        let mut pending: Vec<(Id, u64, u64, Option<Vec<u8>>)> = Vec::new();
        for _ in 0..r.count()? {
            let pid = raw_id(r)?;
            let time = r.millis()?;
            let count = r.length()?;
            pending.push((pid, time, count, None));
        }
        for _ in 0..r.count()? {
            let consumer = r.string()?;
            let seen = r.millis()?;
            let active = if kind >= RDB_TYPE_STREAM_LISTPACKS_3 {
                // Redis's -1 (never active) is Stria's 0.
                match r.millis()? {
                    u64::MAX => 0,
                    t => t,
                }
            } else {
                seen
            };
            for _ in 0..r.count()? {
                let pid = raw_id(r)?;
                let p = pending.iter_mut().find(|p| p.0 == pid).ok_or(Corrupt)?;
                if p.3.is_some() {
                    return Err(Corrupt);
                }
                p.3 = Some(consumer.clone());
            }
            let mut k = vec![CONSUMER];
            k.extend_from_slice(&scoped(&name, &consumer));
            let mut v = seen.to_le_bytes().to_vec();
            v.extend_from_slice(&active.to_le_bytes());
            elements.push((k, v));
        }
        for (pid, time, count, consumer) in pending {
            let consumer = consumer.ok_or(Corrupt)?;
            let mut k = vec![PENDING];
            k.extend_from_slice(&scoped(&name, &id_bytes(pid)));
            let p = Pending {
                id: pid,
                time,
                count,
                consumer,
            };
            elements.push((k, encode_pending(&p)));
        }
        let mut k = vec![GROUP];
        k.extend_from_slice(&name);
        elements.push((k, encode_group(Group { last, read })));
        names.push(name);
    }
    st.groups = groups as u64;
    let m = Meta {
        body: Body::Stream(Box::new(st)),
        ..Meta::collection(Type::Stream, 0)
    };
    Ok((m, elements))
}

#[cfg(test)]
mod tests {
    use super::super::rdb::crc64;
    use super::*;
    use crate::server::cmd::stream_groups::decode_group;

    /// A listpack of small integers (0-127) and short strings.
    fn lp(items: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        for it in items {
            match std::str::from_utf8(it)
                .ok()
                .and_then(|s| s.parse::<u8>().ok())
            {
                Some(n) if n < 128 => body.extend_from_slice(&[n, 1]),
                _ => {
                    body.push(0x80 | it.len() as u8);
                    body.extend_from_slice(it);
                    body.push(1 + it.len() as u8);
                }
            }
        }
        let mut out = ((body.len() + 7) as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&(items.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(0xff);
        out
    }

    fn string(out: &mut Vec<u8>, s: &[u8]) {
        assert!(s.len() < 1 << 14);
        out.extend_from_slice(&[0x40 | (s.len() >> 8) as u8, s.len() as u8]);
        out.extend_from_slice(s);
    }

    #[test]
    fn a_redis_6_stream_gets_its_counters_estimated_as_redis_loads_it() {
        // RDB type 15: entries 5-0 and 6-0 (the master's fields), one
        // deleted entry between them, and group g at 5-0.
        let node = lp(&[
            b"2", b"1", b"1", b"f", b"0", // count, deleted, the master's field
            b"2", b"0", b"0", b"a", b"4", // 5-0 f a (same fields)
            b"3", b"0", b"1", b"x", b"4", // 5-1, deleted
            b"2", b"1", b"0", b"b", b"4", // 6-0 f b
        ]);
        let mut p = vec![RDB_TYPE_STREAM_LISTPACKS, 1];
        let mut master = 5u64.to_be_bytes().to_vec();
        master.extend_from_slice(&0u64.to_be_bytes());
        string(&mut p, &master);
        string(&mut p, &node);
        p.extend_from_slice(&[2, 6, 0, 1]); // length, last ID, one group
        string(&mut p, b"g");
        p.extend_from_slice(&[5, 0, 0, 0]); // its last ID, no PEL, no consumers
        p.extend_from_slice(&9u16.to_le_bytes());
        let crc = crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());

        let (m, elements) = decode_redis(&p)
            .expect("a Redis payload")
            .expect("readable");
        let st = m.stream();
        assert_eq!(
            (st.length, st.added, st.first, st.last),
            (2, 2, (5, 0), (6, 0))
        );
        assert_eq!(st.max_deleted, (0, 0));
        let group = elements
            .iter()
            .find(|(k, _)| k[0] == GROUP)
            .and_then(|(_, v)| decode_group(v))
            .expect("the group");
        assert_eq!((group.last, group.read), ((5, 0), 1));
        assert_eq!(elements.iter().filter(|(k, _)| k[0] == ENTRY).count(), 2);

        // A corrupt body behind a good checksum is refused.
        let mut bad = p[..p.len() - 10].to_vec();
        bad[3] ^= 0x01;
        bad.extend_from_slice(&9u16.to_le_bytes());
        let crc = crc64(&bad);
        bad.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_redis(&bad).map(|r| r.is_err()), Some(true));
        assert!(decode_redis(b"not a dump at all").is_none());
    }
}
