//! A stream's IDs and entries: how IDs are read from arguments, ordered
//! (big-endian in sub-keys) and stepped, and how an entry's node and
//! fields are stored and replied.

use super::Res;
use crate::server::meta::Id;
use crate::server::resp::Reply;

/// An entry: its ID and its fields and values.
pub type Entry = (Id, Vec<Vec<u8>>);

pub fn format_id(id: Id) -> String {
    format!("{}-{}", id.0, id.1)
}

pub fn id_bytes(id: Id) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.0.to_be_bytes());
    b[8..].copy_from_slice(&id.1.to_be_bytes());
    b
}

pub fn id_of(b: &[u8]) -> Option<Id> {
    Some((
        u64::from_be_bytes(b.get(..8)?.try_into().ok()?),
        u64::from_be_bytes(b.get(8..16)?.try_into().ok()?),
    ))
}

pub fn invalid_id() -> Reply {
    Reply::err("Invalid stream ID specified as stream command argument")
}

/// An ID argument: `ms-seq`, or `ms` with `missing` as its sequence;
/// `-` and `+` for the least and the greatest.
pub fn parse_id(arg: &[u8], missing: u64) -> Res<Id> {
    match arg {
        b"-" => return Ok((0, 0)),
        b"+" => return Ok((u64::MAX, u64::MAX)),
        _ => {}
    }
    let s = std::str::from_utf8(arg).map_err(|_| invalid_id())?;
    let num = |p: &str| -> Res<u64> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid_id());
        }
        p.parse().map_err(|_| invalid_id())
    };
    match s.split_once('-') {
        Some((ms, seq)) => Ok((num(ms)?, num(seq)?)),
        None => Ok((num(s)?, missing)),
    }
}

/// The ID after `id`, if any.
pub fn next_id(id: Id) -> Option<Id> {
    if id.1 < u64::MAX {
        Some((id.0, id.1 + 1))
    } else if id.0 < u64::MAX {
        Some((id.0 + 1, 0))
    } else {
        None
    }
}

/// The ID before `id`, if any.
pub fn prev_id(id: Id) -> Option<Id> {
    if id.1 > 0 {
        Some((id.0, id.1 - 1))
    } else if id.0 > 0 {
        Some((id.0 - 1, u64::MAX))
    } else {
        None
    }
}

/// A range bound of XRANGE: `(id` is exclusive.
pub fn range_bound(arg: &[u8], start: bool) -> Res<Option<Id>> {
    let missing = if start { 0 } else { u64::MAX };
    match arg.strip_prefix(b"(") {
        Some(rest) => {
            if rest == b"-" || rest == b"+" {
                return Err(invalid_id());
            }
            let id = parse_id(rest, missing)?;
            let moved = if start { next_id(id) } else { prev_id(id) };
            match moved {
                Some(m) => Ok(Some(m)),
                None if start => Err(Reply::err("invalid start ID for the interval")),
                None => Err(Reply::err("invalid end ID for the interval")),
            }
        }
        None => parse_id(arg, missing).map(Some),
    }
}

pub fn encode_entry(node: u64, fields: &[Vec<u8>]) -> Vec<u8> {
    let mut out = node.to_le_bytes().to_vec();
    out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// An entry's node and its fields and values.
pub fn decode_entry(v: &[u8]) -> Option<(u64, Vec<Vec<u8>>)> {
    let node = u64::from_le_bytes(v.get(..8)?.try_into().ok()?);
    let n = u32::from_le_bytes(v.get(8..12)?.try_into().ok()?) as usize;
    let mut at = 12;
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        let len = u32::from_le_bytes(v.get(at..at + 4)?.try_into().ok()?) as usize;
        fields.push(v.get(at + 4..at + 4 + len)?.to_vec());
        at += 4 + len;
    }
    Some((node, fields))
}

pub fn entry_reply(e: Entry) -> Reply {
    Reply::Array(vec![
        Reply::bulk(format_id(e.0)),
        Reply::Array(e.1.into_iter().map(Reply::Bulk).collect()),
    ])
}

pub fn entries_reply(es: Vec<Entry>) -> Reply {
    Reply::Array(es.into_iter().map(entry_reply).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_order_and_step_as_redis() {
        assert_eq!(parse_id(b"5-3", 0).unwrap(), (5, 3));
        assert_eq!(parse_id(b"5", u64::MAX).unwrap(), (5, u64::MAX));
        assert_eq!(parse_id(b"-", 9).unwrap(), (0, 0));
        assert!(parse_id(b"5-x", 0).is_err());
        assert!(parse_id(b"-5", 0).is_err());
        assert_eq!(next_id((1, u64::MAX)), Some((2, 0)));
        assert_eq!(prev_id((2, 0)), Some((1, u64::MAX)));
        assert_eq!(range_bound(b"(5-3", true).unwrap(), Some((5, 4)));
        assert_eq!(range_bound(b"(5-0", false).unwrap(), Some((4, u64::MAX)));
        assert!(id_bytes((1, 2)) < id_bytes((1, 3)));
        assert!(id_bytes((1, u64::MAX)) < id_bytes((2, 0)));
        let e = encode_entry(7, &[b"f".to_vec(), b"v".to_vec()]);
        assert_eq!(
            decode_entry(&e),
            Some((7, vec![b"f".to_vec(), b"v".to_vec()]))
        );
    }
}
