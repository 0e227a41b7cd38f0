//! Streams' pending entries: XPENDING, XCLAIM and XAUTOCLAIM, over the
//! group's pending list (`stream_groups.rs` has its layout).

use super::stream_groups::{decode_pending, encode_group, encode_pending, ms_arg, Pending};
use super::streams::{entries_reply, format_id, next_id, parse_id};
use super::{integer, not_integer, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::notify::STREAM;
use crate::server::resp::Reply;

/// A claimed entry as XCLAIM and XAUTOCLAIM reply it.
fn claimed_reply(id: crate::server::meta::Id, e: super::streams::Entry, justid: bool) -> Reply {
    if justid {
        Reply::bulk(format_id(id))
    } else {
        entries_reply(vec![e]).into_first()
    }
}

impl<'a> Conn<'a> {
    /// Writes a claim's `writes` with the claiming consumer seen now (and
    /// active, if it claimed anything).
    fn claimed_by(
        &mut self,
        key: &[u8],
        m: &crate::server::meta::Meta,
        group: &[u8],
        consumer: &[u8],
        claimed: bool,
        mut writes: Writes,
    ) -> Res<()> {
        let now = self.now();
        let known = self.consumer(key, m, group, consumer)?;
        let active = known.map_or(0, |(_, a)| a);
        let active = if claimed { now } else { active };
        self.put_consumer(key, m, group, consumer, (now, active), &mut writes);
        self.write(writes);
        if known.is_none() {
            self.notify(STREAM, "xgroup-createconsumer", key);
        }
        Ok(())
    }

    pub(super) fn xpending(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, group) = (&args[1], &args[2]);
        let mut rest = &args[3..];
        let mut idle = None;
        if rest
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"idle"))
        {
            let v = rest.get(1).ok_or_else(syntax_error)?;
            idle = Some(ms_arg(v)?);
            rest = &rest[2..];
        }
        if !rest.is_empty() && !(3..=4).contains(&rest.len()) || idle.is_some() && rest.is_empty() {
            return Err(syntax_error());
        }
        let (m, _) = self.stream_and_group(key, group, "")?;
        let now = self.now();
        if rest.is_empty() {
            let all = self.pending(key, &m, group, (0, 0), usize::MAX)?;
            if all.is_empty() {
                return Ok(Reply::Array(vec![
                    Reply::Int(0),
                    Reply::Nil,
                    Reply::Nil,
                    Reply::NilArray,
                ]));
            }
            let mut per: Vec<(Vec<u8>, u64)> = Vec::new();
            for p in &all {
                match per.iter_mut().find(|(c, _)| *c == p.consumer) {
                    Some((_, n)) => *n += 1,
                    None => per.push((p.consumer.clone(), 1)),
                }
            }
            per.sort();
            return Ok(Reply::Array(vec![
                Reply::Int(all.len() as i64),
                Reply::bulk(format_id(all[0].id)),
                Reply::bulk(format_id(all[all.len() - 1].id)),
                Reply::Array(
                    per.into_iter()
                        .map(|(c, n)| {
                            Reply::Array(vec![Reply::Bulk(c), Reply::bulk(n.to_string())])
                        })
                        .collect(),
                ),
            ]));
        }
        let start = match rest[0].strip_prefix(b"(") {
            Some(r) => next_id(parse_id(r, 0)?),
            None => Some(parse_id(&rest[0], 0)?),
        };
        let end = match rest[1].strip_prefix(b"(") {
            Some(r) => {
                let e = parse_id(r, u64::MAX)?;
                if e == (0, 0) {
                    None
                } else {
                    Some(if e.1 > 0 {
                        (e.0, e.1 - 1)
                    } else {
                        (e.0 - 1, u64::MAX)
                    })
                }
            }
            None => Some(parse_id(&rest[1], u64::MAX)?),
        };
        let count = match integer(&rest[2]) {
            Some(n) if n >= 0 => n as usize,
            Some(_) => 0,
            None => return Err(not_integer()),
        };
        let consumer = rest.get(3);
        let (Some(start), Some(end)) = (start, end) else {
            return Ok(Reply::Array(vec![]));
        };
        let mut out = Vec::new();
        for p in self.pending(key, &m, group, start, usize::MAX)? {
            if out.len() >= count || p.id > end {
                break;
            }
            if consumer.is_some_and(|c| *c != p.consumer) {
                continue;
            }
            let idle_ms = now.saturating_sub(p.time);
            if idle.is_some_and(|min| idle_ms < min) {
                continue;
            }
            out.push(Reply::Array(vec![
                Reply::bulk(format_id(p.id)),
                Reply::Bulk(p.consumer),
                Reply::Int(idle_ms as i64),
                Reply::Int(p.count as i64),
            ]));
        }
        Ok(Reply::Array(out))
    }

    pub(super) fn xclaim(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, group, consumer) = (&args[1], &args[2], &args[3]);
        let min_idle = integer(&args[4])
            .ok_or_else(|| Reply::err("Invalid min-idle-time argument for XCLAIM"))?
            .max(0) as u64;
        let mut ids = Vec::new();
        let mut i = 5;
        while i < args.len() {
            match parse_id(&args[i], 0) {
                Ok(id) => ids.push(id),
                Err(_) => break,
            }
            i += 1;
        }
        let now = self.now();
        let (mut time, mut retry, mut force, mut justid, mut lastid) =
            (None, None, false, false, None);
        while i < args.len() {
            let v = args.get(i + 1);
            match args[i].to_ascii_lowercase().as_slice() {
                b"idle" => {
                    time = Some(now.saturating_sub(ms_arg(v.ok_or_else(syntax_error)?)?));
                    i += 1;
                }
                b"time" => {
                    time = Some(ms_arg(v.ok_or_else(syntax_error)?)?);
                    i += 1;
                }
                b"retrycount" => {
                    retry = Some(ms_arg(v.ok_or_else(syntax_error)?)?);
                    i += 1;
                }
                b"force" => force = true,
                b"justid" => justid = true,
                b"lastid" => {
                    lastid = Some(parse_id(v.ok_or_else(syntax_error)?, 0)?);
                    i += 1;
                }
                _ => {
                    return Err(Reply::err(format!(
                        "Unrecognized XCLAIM option '{}'",
                        String::from_utf8_lossy(&args[i])
                    )))
                }
            }
            i += 1;
        }
        let (m, mut g) = self.stream_and_group(key, group, "")?;
        let mut writes: Writes = Vec::new();
        if let Some(l) = lastid {
            if l > g.last {
                g.last = l;
                writes.push((Self::group_key(key, &m, group), Some(encode_group(g))));
            }
        }
        let mut out = Vec::new();
        for id in ids {
            let pk = Self::pending_key(key, &m, group, id);
            let entry = self.entries(key, &m, id, id, 1)?.into_iter().next();
            let p = match self.get_raw(&pk)?.and_then(|v| decode_pending(id, &v)) {
                Some(p) => p,
                None if force && entry.is_some() => Pending {
                    id,
                    time: 0,
                    count: 0,
                    consumer: consumer.clone(),
                },
                None => continue,
            };
            let Some(e) = entry else {
                // Deleted from the stream: it leaves the pending list.
                writes.push((pk, None));
                continue;
            };
            if now.saturating_sub(p.time) < min_idle && p.time != 0 {
                continue;
            }
            let claimed = Pending {
                id,
                time: time.unwrap_or(now),
                count: retry.unwrap_or(if justid { p.count } else { p.count + 1 }),
                consumer: consumer.clone(),
            };
            writes.push((pk, Some(encode_pending(&claimed))));
            out.push(claimed_reply(id, e, justid));
        }
        self.claimed_by(key, &m, group, consumer, !out.is_empty(), writes)?;
        Ok(Reply::Array(out))
    }

    pub(super) fn xautoclaim(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, group, consumer) = (&args[1], &args[2], &args[3]);
        let min_idle = integer(&args[4])
            .ok_or_else(|| Reply::err("Invalid min-idle-time argument for XAUTOCLAIM"))?
            .max(0) as u64;
        let start = parse_id(&args[5], 0)?;
        let (mut count, mut justid) = (100usize, false);
        let mut i = 6;
        while i < args.len() {
            match args[i].to_ascii_lowercase().as_slice() {
                b"count" => {
                    count = match args.get(i + 1).and_then(|v| integer(v)) {
                        Some(n) if n > 0 && n <= i64::MAX / 10 => n as usize,
                        _ => return Err(Reply::err("COUNT must be > 0")),
                    };
                    i += 1;
                }
                b"justid" => justid = true,
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        let (m, _) = self.stream_and_group(key, group, "")?;
        let now = self.now();
        let mut writes: Writes = Vec::new();
        let (mut out, mut deleted) = (Vec::new(), Vec::new());
        let mut attempts = count * 10;
        let scan = self.pending(key, &m, group, start, attempts + 1)?;
        let mut left = count;
        let mut next = (0, 0);
        let mut iter = scan.into_iter();
        for p in iter.by_ref() {
            if attempts == 0 || left == 0 {
                next = p.id;
                break;
            }
            attempts -= 1;
            if now.saturating_sub(p.time) < min_idle {
                continue;
            }
            let pk = Self::pending_key(key, &m, group, p.id);
            left -= 1;
            let Some(e) = self.entries(key, &m, p.id, p.id, 1)?.into_iter().next() else {
                writes.push((pk, None));
                deleted.push(Reply::bulk(format_id(p.id)));
                continue;
            };
            let claimed = Pending {
                id: p.id,
                time: now,
                count: if justid { p.count } else { p.count + 1 },
                consumer: consumer.clone(),
            };
            writes.push((pk, Some(encode_pending(&claimed))));
            out.push(claimed_reply(p.id, e, justid));
        }
        self.claimed_by(key, &m, group, consumer, !out.is_empty(), writes)?;
        Ok(Reply::Array(vec![
            Reply::bulk(format_id(next)),
            Reply::Array(out),
            Reply::Array(deleted),
        ]))
    }
}

trait First {
    fn into_first(self) -> Reply;
}

impl First for Reply {
    /// The first element of an array reply.
    fn into_first(self) -> Reply {
        match self {
            Reply::Array(mut a) if !a.is_empty() => a.swap_remove(0),
            other => other,
        }
    }
}
