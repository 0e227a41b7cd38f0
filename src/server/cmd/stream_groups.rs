//! Streams' consumer groups: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM, XINFO GROUPS and CONSUMERS. A group, each of its
//! consumers and each entry of its pending entries list is a sub-key of
//! the stream (under the group's name), so the last-delivered ID and the
//! pending entries are durable like every write: a group resumes after a
//! crash exactly where its acknowledged replies left it.
//!
//! ```text
//! group       'g' name                       -> last:16 entries-read:8
//! consumer    'c' len:2 group name           -> seen:8 active:8
//! pending     'p' len:2 group id:16          -> time:8 count:8 consumer
//! ```

use super::streams::{
    entries_reply, format_id, id_bytes, id_of, next_id, parse_id, read_options, Entry,
};
use super::{integer, not_integer, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{self, CONSUMER, GROUP, PENDING};
use crate::server::meta::{Id, Meta, StreamState};
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

/// A group's state.
#[derive(Clone, Copy, Debug)]
struct Group {
    last: Id,
    /// Entries read by the group, -1 when unknown (as Redis's lag).
    read: i64,
}

/// A pending entry.
#[derive(Clone, Debug)]
struct Pending {
    id: Id,
    time: u64,
    count: u64,
    consumer: Vec<u8>,
}

fn encode_group(g: Group) -> Vec<u8> {
    let mut v = id_bytes(g.last).to_vec();
    v.extend_from_slice(&g.read.to_le_bytes());
    v
}

fn decode_group(v: &[u8]) -> Option<Group> {
    Some(Group {
        last: id_of(v)?,
        read: i64::from_le_bytes(v.get(16..24)?.try_into().ok()?),
    })
}

fn scoped(group: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut k = (group.len() as u16).to_be_bytes().to_vec();
    k.extend_from_slice(group);
    k.extend_from_slice(rest);
    k
}

fn encode_pending(p: &Pending) -> Vec<u8> {
    let mut v = p.time.to_le_bytes().to_vec();
    v.extend_from_slice(&p.count.to_le_bytes());
    v.extend_from_slice(&p.consumer);
    v
}

fn decode_pending(id: Id, v: &[u8]) -> Option<Pending> {
    Some(Pending {
        id,
        time: u64::from_le_bytes(v.get(..8)?.try_into().ok()?),
        count: u64::from_le_bytes(v.get(8..16)?.try_into().ok()?),
        consumer: v.get(16..)?.to_vec(),
    })
}

fn no_group(key: &[u8], group: &[u8], cmd: &str) -> Reply {
    Reply::Error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'{}",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group),
        cmd
    ))
}

fn ms_arg(arg: &[u8]) -> Res<u64> {
    match integer(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        Some(_) => Ok(0),
        None => Err(not_integer()),
    }
}

impl<'a> Conn<'a> {
    pub(super) fn stream_groups(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "xgroup" => self.xgroup(args),
            "xreadgroup" => self.xreadgroup(args).map(|r| r.unwrap_or(Reply::NilArray)),
            "xack" => self.xack(args),
            "xpending" => self.xpending(args),
            "xclaim" => self.xclaim(args),
            "xautoclaim" => self.xautoclaim(args),
            "xinfo" => self.xinfo(args),
            _ => return None,
        })
    }

    fn group_key(key: &[u8], m: &Meta, group: &[u8]) -> Vec<u8> {
        keys::element(key, m.version, GROUP, group)
    }

    fn consumer_key(key: &[u8], m: &Meta, group: &[u8], consumer: &[u8]) -> Vec<u8> {
        keys::element(key, m.version, CONSUMER, &scoped(group, consumer))
    }

    fn pending_key(key: &[u8], m: &Meta, group: &[u8], id: Id) -> Vec<u8> {
        keys::element(key, m.version, PENDING, &scoped(group, &id_bytes(id)))
    }

    fn group(&mut self, key: &[u8], m: &Meta, group: &[u8]) -> Res<Option<Group>> {
        Ok(self
            .get_raw(&Self::group_key(key, m, group))?
            .and_then(|v| decode_group(&v)))
    }

    /// The stream and group `key`/`group`, or NOGROUP.
    fn stream_and_group(&mut self, key: &[u8], group: &[u8], cmd: &str) -> Res<(Meta, Group)> {
        let m = self
            .stream_meta(key)?
            .ok_or_else(|| no_group(key, group, cmd))?;
        let g = self
            .group(key, &m, group)?
            .ok_or_else(|| no_group(key, group, cmd))?;
        Ok((m, g))
    }

    /// The group's pending entries from `from`, in ID order, up to `limit`.
    fn pending(
        &mut self,
        key: &[u8],
        m: &Meta,
        group: &[u8],
        from: Id,
        limit: usize,
    ) -> Res<Vec<Pending>> {
        let prefix = keys::element(key, m.version, PENDING, &scoped(group, &[]));
        let mut end = prefix.clone();
        end.extend_from_slice(&[0xff; 17]);
        let mut at = Self::pending_key(key, m, group, from);
        let mut out = Vec::new();
        while out.len() < limit {
            let want = (limit - out.len()).min(CHUNK);
            let got = self.scan_raw(&at, Some(&end), want)?;
            let n = got.len();
            for (k, v) in got {
                if let Some(p) = id_of(&k[prefix.len()..]).and_then(|id| decode_pending(id, &v)) {
                    out.push(p);
                }
                at = k;
            }
            at.push(0);
            if n < want {
                break;
            }
        }
        Ok(out)
    }

    /// The consumers of a group: name, seen and active times.
    fn consumers(&mut self, key: &[u8], m: &Meta, group: &[u8]) -> Res<Vec<(Vec<u8>, u64, u64)>> {
        let prefix = keys::element(key, m.version, CONSUMER, &scoped(group, &[]));
        let mut end = prefix.clone();
        end.push(0xff);
        let mut out = Vec::new();
        let mut at = prefix.clone();
        loop {
            let got = self.scan_raw(&at, Some(&end), CHUNK)?;
            let n = got.len();
            for (k, v) in got {
                let seen = v
                    .get(..8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")));
                let active = v
                    .get(8..16)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")));
                out.push((k[prefix.len()..].to_vec(), seen, active));
                at = k;
            }
            at.push(0);
            if n < CHUNK {
                return Ok(out);
            }
        }
    }

    fn put_consumer(
        &self,
        key: &[u8],
        m: &Meta,
        group: &[u8],
        c: &[u8],
        (seen, active): (u64, u64),
        w: &mut Writes,
    ) {
        let mut v = seen.to_le_bytes().to_vec();
        v.extend_from_slice(&active.to_le_bytes());
        w.push((Self::consumer_key(key, m, group, c), Some(v)));
    }

    /// A consumer's times, if it exists.
    fn consumer(
        &mut self,
        key: &[u8],
        m: &Meta,
        group: &[u8],
        c: &[u8],
    ) -> Res<Option<(u64, u64)>> {
        Ok(self
            .get_raw(&Self::consumer_key(key, m, group, c))?
            .map(|v| {
                let w = |i: usize| {
                    v.get(i..i + 8)
                        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")))
                };
                (w(0), w(8))
            }))
    }

    fn xgroup(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let sub = args[1].to_ascii_lowercase();
        if sub == b"help" && args.len() > 2 {
            return Err(Reply::err(
                "wrong number of arguments for 'xgroup|help' command",
            ));
        }
        if sub == b"help" {
            return Ok(Reply::Array(
                [
                    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "CREATE <key> <groupname> <id|$> [option]",
                    "CREATECONSUMER <key> <groupname> <consumer>",
                    "DELCONSUMER <key> <groupname> <consumer>",
                    "DESTROY <key> <groupname>",
                    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                    "HELP",
                ]
                .into_iter()
                .map(Reply::bulk)
                .collect(),
            ));
        }
        let wrong = || {
            Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try XGROUP HELP.",
                String::from_utf8_lossy(&args[1])
            ))
        };
        let (Some(key), Some(group)) = (args.get(2), args.get(3)) else {
            return Err(wrong());
        };
        match sub.as_slice() {
            b"create" | b"setid" => {
                let id_arg = args.get(4).ok_or_else(wrong)?;
                let (mut mkstream, mut read) = (false, None);
                let mut i = 5;
                while i < args.len() {
                    match args[i].to_ascii_lowercase().as_slice() {
                        b"mkstream" if sub == b"create" => mkstream = true,
                        b"entriesread" => {
                            let n = args.get(i + 1).ok_or_else(syntax_error)?;
                            match integer(n) {
                                Some(n) if n >= -1 => read = Some(n),
                                _ => {
                                    return Err(Reply::err(
                                        "value for ENTRIESREAD must be positive or -1",
                                    ))
                                }
                            }
                            i += 1;
                        }
                        _ => return Err(syntax_error()),
                    }
                    i += 1;
                }
                let mut writes: Writes = Vec::new();
                let m = match self.stream_meta(key)? {
                    Some(m) => m,
                    None if mkstream => {
                        let m = Meta::collection(crate::server::meta::Type::Stream, self.new_version()?);
                        self.put_stream(key, &m, StreamState::default(), &mut writes);
                        m
                    }
                    None => return Err(Reply::err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")),
                };
                let mut st = m.stream();
                let last = if id_arg.as_slice() == b"$" {
                    st.last
                } else {
                    parse_id(id_arg, 0)?
                };
                let existing = self.group(key, &m, group)?;
                if sub == b"create" && existing.is_some() {
                    return Err(Reply::Error(
                        "BUSYGROUP Consumer Group name already exists".into(),
                    ));
                }
                if sub == b"setid" && existing.is_none() {
                    return Err(no_group(key, group, ""));
                }
                let read = read.unwrap_or(-1);
                writes.push((
                    Self::group_key(key, &m, group),
                    Some(encode_group(Group { last, read })),
                ));
                if sub == b"create" {
                    st.groups += 1;
                    self.put_stream(key, &m, st, &mut writes);
                }
                self.write(writes);
                Ok(Reply::ok())
            }
            b"destroy" if args.len() == 4 => {
                let Some(m) = self.stream_meta(key)? else {
                    return Err(Reply::err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
                };
                if self.group(key, &m, group)?.is_none() {
                    return Ok(Reply::Int(0));
                }
                let mut writes: Writes = vec![(Self::group_key(key, &m, group), None)];
                for (c, ..) in self.consumers(key, &m, group)? {
                    writes.push((Self::consumer_key(key, &m, group, &c), None));
                }
                for p in self.pending(key, &m, group, (0, 0), usize::MAX)? {
                    writes.push((Self::pending_key(key, &m, group, p.id), None));
                }
                let mut st = m.stream();
                st.groups -= 1;
                self.put_stream(key, &m, st, &mut writes);
                self.write(writes);
                Ok(Reply::Int(1))
            }
            b"createconsumer" | b"delconsumer" if args.len() == 5 => {
                let cmd_name = String::from_utf8_lossy(&sub).to_uppercase();
                let consumer = &args[4];
                let (m, _) = self.stream_and_group(key, group, &format!(" for {cmd_name}"))?;
                let known = self.consumer(key, &m, group, consumer)?;
                let mut writes = Vec::new();
                if sub == b"createconsumer" {
                    if known.is_some() {
                        return Ok(Reply::Int(0));
                    }
                    let now = self.now();
                    self.put_consumer(key, &m, group, consumer, (now, 0), &mut writes);
                    self.write(writes);
                    return Ok(Reply::Int(1));
                }
                if known.is_none() {
                    return Ok(Reply::Int(0));
                }
                let mut n = 0;
                for p in self.pending(key, &m, group, (0, 0), usize::MAX)? {
                    if p.consumer == *consumer {
                        writes.push((Self::pending_key(key, &m, group, p.id), None));
                        n += 1;
                    }
                }
                writes.push((Self::consumer_key(key, &m, group, consumer), None));
                self.write(writes);
                Ok(Reply::Int(n))
            }
            _ => Err(wrong()),
        }
    }

    /// XREADGROUP: its reply, `None` when nothing new (it may block).
    pub(super) fn xreadgroup(&mut self, args: &[Vec<u8>]) -> Res<Option<Reply>> {
        if !args[1].eq_ignore_ascii_case(b"group") || args.len() < 4 {
            return Err(Reply::err("Missing GROUP option for XREADGROUP"));
        }
        let (group, consumer) = (&args[2], &args[3]);
        let noack = args[4..].iter().any(|a| a.eq_ignore_ascii_case(b"noack"));
        let (count, _, (keys_, ids)) = read_options(&args[4..], true)?;
        let now = self.now();
        let mut out = Vec::new();
        let mut any_new = false;
        for (key, id) in keys_.iter().zip(ids) {
            let (m, mut g) =
                self.stream_and_group(key, group, " in XREADGROUP with GROUP option")?;
            let mut writes: Writes = Vec::new();
            let known = self.consumer(key, &m, group, consumer)?;
            let seen = known.map_or(now, |(s, _)| s);
            let entries: Vec<(Id, Option<Vec<Vec<u8>>>)> = if id.as_slice() == b">" {
                let from = next_id(g.last);
                let es: Vec<Entry> = match from {
                    Some(f) => self.entries(key, &m, f, (u64::MAX, u64::MAX), count)?,
                    None => vec![],
                };
                if !es.is_empty() {
                    let st = m.stream();
                    for (eid, _) in &es {
                        if g.read >= 0 && !tombstones_from(&st, *eid) {
                            g.read += 1;
                        } else if st.added > 0 {
                            g.read = estimate_read(&st, *eid);
                        }
                        g.last = *eid;
                    }
                    writes.push((Self::group_key(key, &m, group), Some(encode_group(g))));
                    if !noack {
                        for (eid, _) in &es {
                            let p = Pending {
                                id: *eid,
                                time: now,
                                count: 1,
                                consumer: consumer.clone(),
                            };
                            writes.push((
                                Self::pending_key(key, &m, group, *eid),
                                Some(encode_pending(&p)),
                            ));
                        }
                    }
                }
                es.into_iter().map(|(i, f)| (i, Some(f))).collect()
            } else {
                let after = parse_id(id, 0)?;
                let mut hist = Vec::new();
                if let Some(from) = next_id(after) {
                    for p in self.pending(key, &m, group, from, usize::MAX)? {
                        if p.consumer != *consumer {
                            continue;
                        }
                        let e = self.entries(key, &m, p.id, p.id, 1)?;
                        hist.push((p.id, e.into_iter().next().map(|(_, f)| f)));
                        if hist.len() == count {
                            break;
                        }
                    }
                }
                hist
            };
            let _ = seen;
            let active = if entries.is_empty() {
                known.map_or(0, |(_, a)| a)
            } else {
                now
            };
            self.put_consumer(key, &m, group, consumer, (now, active), &mut writes);
            self.write(writes);
            let new = id.as_slice() == b">";
            if new && entries.is_empty() {
                continue;
            }
            any_new |= new || !entries.is_empty();
            let reply = Reply::Array(
                entries
                    .into_iter()
                    .map(|(i, f)| {
                        Reply::Array(vec![
                            Reply::bulk(format_id(i)),
                            f.map_or(Reply::Nil, |f| {
                                Reply::Array(f.into_iter().map(Reply::Bulk).collect())
                            }),
                        ])
                    })
                    .collect(),
            );
            out.push((Reply::Bulk(key.clone()), reply));
        }
        Ok(if out.is_empty() && !any_new {
            None
        } else if self.proto >= 3 {
            Some(Reply::Map(out))
        } else {
            Some(Reply::Array(
                out.into_iter()
                    .map(|(k, v)| Reply::Array(vec![k, v]))
                    .collect(),
            ))
        })
    }

    fn xack(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, group) = (&args[1], &args[2]);
        let ids: Vec<Id> = args[3..]
            .iter()
            .map(|a| parse_id(a, 0))
            .collect::<Res<_>>()?;
        let Some(m) = self.stream_meta(key)? else {
            return Ok(Reply::Int(0));
        };
        if self.group(key, &m, group)?.is_none() {
            return Ok(Reply::Int(0));
        }
        let mut writes: Writes = Vec::new();
        for id in ids {
            let k = Self::pending_key(key, &m, group, id);
            if !writes.iter().any(|(w, _)| *w == k) && self.get_raw(&k)?.is_some() {
                writes.push((k, None));
            }
        }
        let n = writes.len() as i64;
        self.write(writes);
        Ok(Reply::Int(n))
    }

    fn xpending(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
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

    fn xclaim(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
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
            out.push(if justid {
                Reply::bulk(format_id(id))
            } else {
                entries_reply(vec![e]).into_first()
            });
        }
        let seen = self
            .consumer(key, &m, group, consumer)?
            .map_or(0, |(_, a)| a);
        self.put_consumer(
            key,
            &m,
            group,
            consumer,
            (now, if out.is_empty() { seen } else { now }),
            &mut writes,
        );
        self.write(writes);
        Ok(Reply::Array(out))
    }

    fn xautoclaim(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
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
            out.push(if justid {
                Reply::bulk(format_id(p.id))
            } else {
                entries_reply(vec![e]).into_first()
            });
        }
        let active = self
            .consumer(key, &m, group, consumer)?
            .map_or(0, |(_, a)| a);
        self.put_consumer(
            key,
            &m,
            group,
            consumer,
            (now, if out.is_empty() { active } else { now }),
            &mut writes,
        );
        self.write(writes);
        Ok(Reply::Array(vec![
            Reply::bulk(format_id(next)),
            Reply::Array(out),
            Reply::Array(deleted),
        ]))
    }

    fn xinfo(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let sub = args[1].to_ascii_lowercase();
        match (sub.as_slice(), args.len()) {
            (b"stream", n) if n >= 3 => self.xinfo_stream(args),
            (b"groups", 3) => {
                let key = &args[2];
                let m = self
                    .stream_meta(key)?
                    .ok_or_else(|| Reply::err("no such key"))?;
                let groups = self.group_list(key, &m)?;
                let st = m.stream();
                let now = self.now();
                let mut out = Vec::new();
                for (name, g) in groups {
                    let consumers = self.consumers(key, &m, &name)?.len();
                    let pending = self.pending(key, &m, &name, (0, 0), usize::MAX)?.len();
                    let _ = now;
                    out.push(Reply::Map(vec![
                        (Reply::bulk("name"), Reply::Bulk(name)),
                        (Reply::bulk("consumers"), Reply::Int(consumers as i64)),
                        (Reply::bulk("pending"), Reply::Int(pending as i64)),
                        (
                            Reply::bulk("last-delivered-id"),
                            Reply::bulk(format_id(g.last)),
                        ),
                        (
                            Reply::bulk("entries-read"),
                            if g.read >= 0 {
                                Reply::Int(g.read)
                            } else {
                                Reply::Nil
                            },
                        ),
                        (Reply::bulk("lag"), lag(&st, g)),
                    ]));
                }
                Ok(Reply::Array(out))
            }
            (b"consumers", 4) => {
                let (key, group) = (&args[2], &args[3]);
                let (m, _) = self.stream_and_group(key, group, "")?;
                let now = self.now();
                let pend = self.pending(key, &m, group, (0, 0), usize::MAX)?;
                let mut out = Vec::new();
                for (c, seen, active) in self.consumers(key, &m, group)? {
                    let n = pend.iter().filter(|p| p.consumer == c).count();
                    out.push(Reply::Map(vec![
                        (Reply::bulk("name"), Reply::Bulk(c)),
                        (Reply::bulk("pending"), Reply::Int(n as i64)),
                        (
                            Reply::bulk("idle"),
                            Reply::Int(now.saturating_sub(seen) as i64),
                        ),
                        (
                            Reply::bulk("inactive"),
                            Reply::Int(if active == 0 {
                                -1
                            } else {
                                now.saturating_sub(active) as i64
                            }),
                        ),
                    ]));
                }
                Ok(Reply::Array(out))
            }
            (b"help", n) if n > 2 => Err(Reply::err(
                "wrong number of arguments for 'xinfo|help' command",
            )),
            (b"help", 2) => Ok(Reply::Array(
                [
                    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "CONSUMERS <key> <groupname>",
                    "GROUPS <key>",
                    "STREAM <key> [FULL [COUNT <count>]]",
                    "HELP",
                ]
                .into_iter()
                .map(Reply::bulk)
                .collect(),
            )),
            _ => Err(Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
                String::from_utf8_lossy(&args[1])
            ))),
        }
    }

    /// The groups of a stream, by name.
    fn group_list(&mut self, key: &[u8], m: &Meta) -> Res<Vec<(Vec<u8>, Group)>> {
        let prefix = keys::sub(key, m.version, GROUP, 0);
        let end = keys::sub_end(key, m.version, GROUP);
        let got = self.scan_raw(&prefix, Some(&end), usize::MAX)?;
        Ok(got
            .into_iter()
            .filter_map(|(k, v)| Some((k[prefix.len()..].to_vec(), decode_group(&v)?)))
            .collect())
    }

    /// XINFO STREAM FULL's groups.
    pub(super) fn xinfo_groups_full(&mut self, key: &[u8], m: &Meta, count: usize) -> Res<Reply> {
        let st = m.stream();
        let now = self.now();
        let mut out = Vec::new();
        for (name, g) in self.group_list(key, m)? {
            let pend = self.pending(key, m, &name, (0, 0), usize::MAX)?;
            let pel: Vec<Reply> = pend
                .iter()
                .take(count)
                .map(|p| {
                    Reply::Array(vec![
                        Reply::bulk(format_id(p.id)),
                        Reply::Bulk(p.consumer.clone()),
                        Reply::Int(p.time as i64),
                        Reply::Int(p.count as i64),
                    ])
                })
                .collect();
            let mut consumers = Vec::new();
            for (c, seen, active) in self.consumers(key, m, &name)? {
                let mine: Vec<Reply> = pend
                    .iter()
                    .filter(|p| p.consumer == c)
                    .take(count)
                    .map(|p| {
                        Reply::Array(vec![
                            Reply::bulk(format_id(p.id)),
                            Reply::Int(p.time as i64),
                            Reply::Int(p.count as i64),
                        ])
                    })
                    .collect();
                let _ = now;
                consumers.push(Reply::Map(vec![
                    (Reply::bulk("name"), Reply::Bulk(c.clone())),
                    (Reply::bulk("seen-time"), Reply::Int(seen as i64)),
                    (Reply::bulk("active-time"), Reply::Int(active as i64)),
                    (
                        Reply::bulk("pel-count"),
                        Reply::Int(pend.iter().filter(|p| p.consumer == c).count() as i64),
                    ),
                    (Reply::bulk("pending"), Reply::Array(mine)),
                ]));
            }
            out.push(Reply::Map(vec![
                (Reply::bulk("name"), Reply::Bulk(name)),
                (
                    Reply::bulk("last-delivered-id"),
                    Reply::bulk(format_id(g.last)),
                ),
                (
                    Reply::bulk("entries-read"),
                    if g.read >= 0 {
                        Reply::Int(g.read)
                    } else {
                        Reply::Nil
                    },
                ),
                (Reply::bulk("lag"), lag(&st, g)),
                (Reply::bulk("pel-count"), Reply::Int(pend.len() as i64)),
                (Reply::bulk("pending"), Reply::Array(pel)),
                (Reply::bulk("consumers"), Reply::Array(consumers)),
            ]));
        }
        Ok(Reply::Array(out))
    }
}

/// Whether an entry from `start` on was deleted (as Redis asks).
fn tombstones_from(st: &StreamState, start: Id) -> bool {
    st.length > 0 && st.max_deleted != (0, 0) && start <= st.max_deleted
}

/// How many entries were added up to `id`, when it can be known without
/// counting (Redis's estimate of a group's read counter); -1 when not.
fn estimate_read(st: &StreamState, id: Id) -> i64 {
    if st.added == 0 {
        return 0;
    }
    if st.length == 0 && id <= st.last {
        return st.added as i64;
    }
    if id == st.last {
        return st.added as i64;
    }
    if id > st.last {
        return -1;
    }
    if st.max_deleted == (0, 0) || st.max_deleted < st.first {
        if id < st.first {
            return (st.added - st.length) as i64;
        }
        if id == st.first {
            return (st.added - st.length + 1) as i64;
        }
    }
    -1
}

/// A group's lag: entries added that it has not read, when known.
fn lag(st: &StreamState, g: Group) -> Reply {
    if st.added == 0 {
        return Reply::Int(0);
    }
    if g.read >= 0 && !tombstones_from(st, g.last) {
        return Reply::Int(st.added as i64 - g.read);
    }
    match estimate_read(st, g.last) {
        -1 => Reply::Nil,
        read => Reply::Int(st.added as i64 - read),
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
