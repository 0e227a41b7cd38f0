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
    format_id, id_bytes, id_of, next_id, parse_id, read_options, streams_reply, Entry,
};
use super::{integer, not_integer, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{self, CONSUMER, GROUP, PENDING};
use crate::server::meta::{Id, Meta, StreamState};
use crate::server::notify::STREAM;
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

use super::stream_info::{estimate_read, tombstones_from};

/// A group's state.
#[derive(Clone, Copy, Debug)]
pub(super) struct Group {
    pub(super) last: Id,
    /// Entries read by the group, -1 when unknown (as Redis's lag).
    pub(super) read: i64,
}

/// A pending entry.
#[derive(Clone, Debug)]
pub(super) struct Pending {
    pub(super) id: Id,
    pub(super) time: u64,
    pub(super) count: u64,
    pub(super) consumer: Vec<u8>,
}

pub(super) fn encode_group(g: Group) -> Vec<u8> {
    let mut v = id_bytes(g.last).to_vec();
    v.extend_from_slice(&g.read.to_le_bytes());
    v
}

pub(super) fn decode_group(v: &[u8]) -> Option<Group> {
    Some(Group {
        last: id_of(v)?,
        read: i64::from_le_bytes(v.get(16..24)?.try_into().ok()?),
    })
}

pub(super) fn scoped(group: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut k = (group.len() as u16).to_be_bytes().to_vec();
    k.extend_from_slice(group);
    k.extend_from_slice(rest);
    k
}

pub(super) fn encode_pending(p: &Pending) -> Vec<u8> {
    let mut v = p.time.to_le_bytes().to_vec();
    v.extend_from_slice(&p.count.to_le_bytes());
    v.extend_from_slice(&p.consumer);
    v
}

pub(super) fn decode_pending(id: Id, v: &[u8]) -> Option<Pending> {
    Some(Pending {
        id,
        time: u64::from_le_bytes(v.get(..8)?.try_into().ok()?),
        count: u64::from_le_bytes(v.get(8..16)?.try_into().ok()?),
        consumer: v.get(16..)?.to_vec(),
    })
}

pub(super) fn no_group(key: &[u8], group: &[u8], cmd: &str) -> Reply {
    Reply::Error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'{}",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group),
        cmd
    ))
}

pub(super) fn ms_arg(arg: &[u8]) -> Res<u64> {
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

    pub(super) fn group_key(key: &[u8], m: &Meta, group: &[u8]) -> Vec<u8> {
        keys::element(key, m.version, GROUP, group)
    }

    pub(super) fn consumer_key(key: &[u8], m: &Meta, group: &[u8], consumer: &[u8]) -> Vec<u8> {
        keys::element(key, m.version, CONSUMER, &scoped(group, consumer))
    }

    pub(super) fn pending_key(key: &[u8], m: &Meta, group: &[u8], id: Id) -> Vec<u8> {
        keys::element(key, m.version, PENDING, &scoped(group, &id_bytes(id)))
    }

    pub(super) fn group(&mut self, key: &[u8], m: &Meta, group: &[u8]) -> Res<Option<Group>> {
        Ok(self
            .get_raw(&Self::group_key(key, m, group))?
            .and_then(|v| decode_group(&v)))
    }

    /// The stream and group `key`/`group`, or NOGROUP.
    pub(super) fn stream_and_group(
        &mut self,
        key: &[u8],
        group: &[u8],
        cmd: &str,
    ) -> Res<(Meta, Group)> {
        let m = self
            .stream_meta(key)?
            .ok_or_else(|| no_group(key, group, cmd))?;
        let g = self
            .group(key, &m, group)?
            .ok_or_else(|| no_group(key, group, cmd))?;
        Ok((m, g))
    }

    /// The group's pending entries from `from`, in ID order, up to `limit`.
    pub(super) fn pending(
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
    pub(super) fn consumers(
        &mut self,
        key: &[u8],
        m: &Meta,
        group: &[u8],
    ) -> Res<Vec<(Vec<u8>, u64, u64)>> {
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

    pub(super) fn put_consumer(
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
    pub(super) fn consumer(
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
            return Ok(crate::server::help::help(
                "XGROUP",
                &[
                    "CREATE <key> <groupname> <id|$> [option]",
                    "CREATECONSUMER <key> <groupname> <consumer>",
                    "DELCONSUMER <key> <groupname> <consumer>",
                    "DESTROY <key> <groupname>",
                    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                ],
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
                let event = if sub == b"create" {
                    "xgroup-create"
                } else {
                    "xgroup-setid"
                };
                self.notify(STREAM, event, key);
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
                self.notify(STREAM, "xgroup-destroy", key);
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
                    self.notify(STREAM, "xgroup-createconsumer", key);
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
                self.notify(STREAM, "xgroup-delconsumer", key);
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
            if known.is_none() {
                self.notify(STREAM, "xgroup-createconsumer", key);
            }
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
        Ok((!out.is_empty() || any_new).then(|| streams_reply(out, self.proto)))
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
}
