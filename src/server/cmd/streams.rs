//! Streams: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XSETID and
//! XINFO STREAM (consumer groups are in `stream_groups.rs`).
//!
//! A stream is metadata ([`StreamState`]: length, first and last IDs,
//! entries ever added, groups) and one sub-key per entry, by its ID in
//! big-endian (milliseconds, then sequence), so ranges and trims read
//! only what they touch. An entry's value is the node it belongs to (for
//! `~` trimming, which as in Redis removes only whole nodes of
//! `stream-node-max-entries`) and its fields and values.

pub use super::stream_entry::{
    decode_entry, encode_entry, entries_reply, entry_reply, format_id, id_bytes, id_of, next_id,
    parse_id, prev_id, range_bound, Entry,
};
use super::{integer, not_integer, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{self, ENTRY};
use crate::server::meta::{Body, Id, Meta, StreamState, Type};
use crate::server::notify::STREAM;
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

/// How XADD and XTRIM trim: MAXLEN or MINID, exact or `~`, LIMIT.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trim {
    MaxLen(u64),
    MinId(Id),
}

#[derive(Clone, Copy, Debug)]
pub struct TrimSpec {
    pub trim: Trim,
    pub approx: bool,
    pub limit: Option<u64>,
}

/// Reads `MAXLEN|MINID [=|~] threshold [LIMIT n]` at `args[*i]`.
fn parse_trim(args: &[Vec<u8>], i: &mut usize) -> Res<TrimSpec> {
    let kind = args[*i].to_ascii_lowercase();
    *i += 1;
    let mut approx = false;
    match args.get(*i).map(Vec::as_slice) {
        Some(b"~") => {
            approx = true;
            *i += 1;
        }
        Some(b"=") => *i += 1,
        _ => {}
    }
    let threshold = args.get(*i).ok_or_else(syntax_error)?;
    *i += 1;
    let trim = if kind == b"maxlen" {
        match integer(threshold) {
            Some(n) if n >= 0 => Trim::MaxLen(n as u64),
            Some(_) => return Err(Reply::err("The MAXLEN argument must be >= 0.")),
            None => return Err(not_integer()),
        }
    } else {
        Trim::MinId(parse_id(threshold, 0)?)
    };
    let mut limit = None;
    if args
        .get(*i)
        .is_some_and(|a| a.eq_ignore_ascii_case(b"limit"))
    {
        let n = args.get(*i + 1).ok_or_else(syntax_error)?;
        match integer(n) {
            Some(n) if n >= 0 => limit = Some(n as u64),
            Some(_) => return Err(Reply::err("The LIMIT argument must be >= 0.")),
            None => return Err(not_integer()),
        }
        *i += 2;
        if !approx {
            return Err(Reply::err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    }
    Ok(TrimSpec {
        trim,
        approx,
        limit,
    })
}

/// An entry with the node it is in.
type Noded = (Id, u64, Vec<Vec<u8>>);

impl<'a> Conn<'a> {
    pub(super) fn streams(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "xadd" => self.xadd(args),
            "xlen" => self
                .stream_meta(&args[1])
                .map(|m| Reply::Int(m.map_or(0, |m| m.stream().length) as i64)),
            "xrange" => self.xrange(args, false),
            "xrevrange" => self.xrange(args, true),
            "xdel" => self.xdel(&args[1], &args[2..]),
            "xtrim" => self.xtrim(args),
            "xread" => self.xread(args).map(|r| r.unwrap_or(Reply::NilArray)),
            "xsetid" => self.xsetid(args),
            _ => return self.stream_groups(name, args),
        })
    }

    pub(super) fn stream_meta(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        self.typed(key, Type::Stream)
    }

    /// Writes stream metadata `st` of `m` for `key`.
    pub(super) fn put_stream(&self, key: &[u8], m: &Meta, st: StreamState, w: &mut Writes) {
        let mut m = m.clone();
        m.body = Body::Stream(Box::new(st));
        self.put(key, &m, None, w);
    }

    pub(super) fn entry_key(key: &[u8], m: &Meta, id: Id) -> Vec<u8> {
        keys::element(key, m.version, ENTRY, &id_bytes(id))
    }

    /// Entries with IDs in `from..=to`, in order, up to `limit`: each
    /// ID with its node and its fields and values.
    fn entry_range(
        &mut self,
        key: &[u8],
        m: &Meta,
        from: Id,
        to: Id,
        limit: usize,
    ) -> Res<Vec<Noded>> {
        let mut out = Vec::new();
        if from > to {
            return Ok(out);
        }
        let end = match next_id(to) {
            Some(n) => Self::entry_key(key, m, n),
            None => keys::sub_end(key, m.version, ENTRY),
        };
        let mut at = Self::entry_key(key, m, from);
        let prefix = keys::sub(key, m.version, ENTRY, 0).len();
        while out.len() < limit {
            let want = (limit - out.len()).min(CHUNK);
            let got = self.scan_raw(&at, Some(&end), want)?;
            let n = got.len();
            for (k, v) in got {
                let id = id_of(&k[prefix..]).ok_or_else(|| corrupt(key))?;
                let (node, fields) = decode_entry(&v).ok_or_else(|| corrupt(key))?;
                at = k;
                out.push((id, node, fields));
            }
            at.push(0);
            if n < want {
                break;
            }
        }
        Ok(out)
    }

    /// Entries with IDs in `from..=to`, in order, up to `limit`.
    pub(super) fn entries(
        &mut self,
        key: &[u8],
        m: &Meta,
        from: Id,
        to: Id,
        limit: usize,
    ) -> Res<Vec<Entry>> {
        let found = self.entry_range(key, m, from, to, limit)?;
        Ok(found.into_iter().map(|(id, _, f)| (id, f)).collect())
    }

    /// The last `limit` entries in `from..=to`, newest first.
    fn entries_rev(
        &mut self,
        key: &[u8],
        m: &Meta,
        from: Id,
        to: Id,
        limit: usize,
    ) -> Res<Vec<Entry>> {
        // Block files are read forward: a reverse range reads the range
        // and keeps its end.
        let mut all = self.entries(key, m, from, to, usize::MAX)?;
        let keep = all.len().saturating_sub(limit);
        all.drain(..keep);
        all.reverse();
        Ok(all)
    }

    fn xadd(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        let mut i = 2;
        let (mut nomk, mut trim) = (false, None);
        loop {
            let a = args.get(i).ok_or_else(syntax_error)?.to_ascii_lowercase();
            match a.as_slice() {
                b"nomkstream" => {
                    nomk = true;
                    i += 1;
                }
                b"maxlen" | b"minid" => trim = Some(parse_trim(args, &mut i)?),
                _ => break,
            }
        }
        let id_arg = args.get(i).ok_or_else(syntax_error)?;
        let fields = &args[i + 1..];
        if fields.is_empty() || fields.len() % 2 != 0 {
            return Err(Reply::err("wrong number of arguments for 'xadd' command"));
        }
        // The ID is checked before the key is looked at.
        let explicit = match id_arg.as_slice() {
            b"*" => None,
            a => match a.strip_suffix(b"-*") {
                Some(ms) => Some((parse_id(ms, 0)?.0, None)),
                None => {
                    let id = parse_id(a, 0)?;
                    Some((id.0, Some(id.1)))
                }
            },
        };
        if explicit == Some((0, Some(0))) {
            return Err(Reply::err(
                "The ID specified in XADD must be greater than 0-0",
            ));
        }
        for f in fields {
            self.check_value(f.len())?;
        }
        let old = self.stream_meta(key)?;
        let m = match &old {
            Some(m) => m.clone(),
            None if nomk => return Ok(Reply::Nil),
            None => Meta::collection(Type::Stream, self.new_version()?),
        };
        let mut st = m.stream();
        let too_small = || {
            Reply::err(
                "The ID specified in XADD is equal or smaller than the target stream top item",
            )
        };
        let id = match explicit {
            None => {
                let now = self.now();
                if now > st.last.0 {
                    (now, 0)
                } else {
                    next_id(st.last).ok_or_else(too_small)?
                }
            }
            Some((ms, None)) => {
                if ms > st.last.0 {
                    (ms, 0)
                } else if ms == st.last.0 && st.last.1 < u64::MAX {
                    (ms, st.last.1 + 1)
                } else {
                    return Err(too_small());
                }
            }
            Some((ms, Some(seq))) => {
                if (ms, seq) <= st.last {
                    return Err(too_small());
                }
                (ms, seq)
            }
        };
        let mut writes: Writes = Vec::new();
        // Nodes as Redis fills them, for `~` trimming.
        let bytes: u64 = fields.iter().map(|f| f.len() as u64 + 2).sum::<u64>() + 8;
        let node_entries = self.node_max_entries();
        if st.node_entries >= node_entries || (st.node_entries > 0 && st.node_bytes + bytes > 4096)
        {
            st.node += 1;
            st.node_entries = 0;
            st.node_bytes = 0;
        }
        st.node_entries += 1;
        st.node_bytes += bytes;
        writes.push((
            Self::entry_key(key, &m, id),
            Some(encode_entry(st.node, fields)),
        ));
        if st.length == 0 {
            st.first = id;
        }
        st.length += 1;
        st.last = id;
        st.added += 1;
        let trimmed = match trim {
            Some(t) => self.trim(key, &m, &mut st, t, &mut writes, Some(id))?,
            None => 0,
        };
        self.put_stream(key, &m, st, &mut writes);
        self.write(writes);
        self.notify(STREAM, "xadd", key);
        if trimmed > 0 {
            self.notify(STREAM, "xtrim", key);
        }
        Ok(Reply::bulk(format_id(id)))
    }

    fn node_max_entries(&self) -> u64 {
        match self.shared.settings.stream_node_max_entries() {
            n if n > 0 => n as u64,
            _ => u64::MAX,
        }
    }

    /// Trims `st` of `key` as `t` says; `added` is the entry this XADD
    /// adds (in `writes`, not yet readable). Exact trimming removes
    /// entries one by one; `~` only whole nodes, never the node the new
    /// entry is in, at most LIMIT entries (100 nodes' worth by default):
    /// how many entries go.
    fn trim(
        &mut self,
        key: &[u8],
        m: &Meta,
        st: &mut StreamState,
        t: TrimSpec,
        writes: &mut Writes,
        added: Option<Id>,
    ) -> Res<u64> {
        let node_max = self.node_max_entries();
        let limit = match (t.approx, t.limit) {
            (true, Some(0)) | (false, _) => u64::MAX,
            (true, Some(l)) => l,
            (true, None) => node_max.saturating_mul(100),
        };
        // The oldest entries that could go, and (for `~`) the rest of the
        // node the last of them is in.
        let (want, upto) = match t.trim {
            Trim::MaxLen(n) => (st.length.saturating_sub(n), None),
            Trim::MinId(min) => match prev_id(min) {
                Some(p) => (u64::MAX, Some(p)),
                None => (0, None),
            },
        };
        if want == 0 {
            return Ok(0);
        }
        let read = if t.approx {
            want.saturating_add(node_max)
        } else {
            want
        };
        let cands = self.entries_with_nodes(key, m, upto, read.min(usize::MAX as u64) as usize)?;
        let mut removed = 0u64;
        let mut j = 0;
        while j < cands.len() {
            let node = cands[j].1;
            let mut g = 1;
            if t.approx {
                while j + g < cands.len() && cands[j + g].1 == node {
                    g += 1;
                }
                // A node that may go on past what was read, or that holds
                // the new entry, stays whole.
                let cut = j + g == cands.len() && (cands.len() as u64 == read || upto.is_some());
                if cut || (added.is_some() && node == st.node) {
                    break;
                }
            }
            let fits = match t.trim {
                Trim::MaxLen(n) => st.length - g as u64 >= n,
                Trim::MinId(min) => cands[j + g - 1].0 < min,
            };
            if !fits || removed + g as u64 > limit {
                break;
            }
            for &(id, _) in &cands[j..j + g] {
                writes.push((Self::entry_key(key, m, id), None));
            }
            st.length -= g as u64;
            removed += g as u64;
            j += g;
        }
        // Exact trimming that reaches the new entry takes it too.
        if let Some(a) = added {
            let reaches = match t.trim {
                Trim::MaxLen(n) => st.length > n,
                Trim::MinId(min) => a < min,
            };
            if !t.approx && j == cands.len() && reaches {
                let k = Self::entry_key(key, m, a);
                writes.retain(|(w, _)| *w != k);
                st.length -= 1;
                removed += 1;
            }
        }
        if removed > 0 {
            st.first = if st.length == 0 {
                (0, 0)
            } else {
                self.first_after(key, m, writes)?
                    .or(added)
                    .unwrap_or(st.last)
            };
        }
        Ok(removed)
    }

    /// IDs and nodes of the oldest entries (up to ID `to`), up to `limit`.
    fn entries_with_nodes(
        &mut self,
        key: &[u8],
        m: &Meta,
        to: Option<Id>,
        limit: usize,
    ) -> Res<Vec<(Id, u64)>> {
        let to = to.unwrap_or((u64::MAX, u64::MAX));
        let found = self.entry_range(key, m, (0, 0), to, limit)?;
        Ok(found.into_iter().map(|(id, node, _)| (id, node)).collect())
    }

    /// The first entry not deleted by `writes`.
    fn first_after(&mut self, key: &[u8], m: &Meta, writes: &Writes) -> Res<Option<Id>> {
        let deleted = writes.iter().filter(|(_, v)| v.is_none()).count();
        let cands = self.entries_with_nodes(key, m, None, deleted + 1)?;
        Ok(cands.into_iter().map(|(id, _)| id).find(|&id| {
            let k = Self::entry_key(key, m, id);
            !writes.iter().any(|(w, v)| *w == k && v.is_none())
        }))
    }

    fn xtrim(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        let mut i = 2;
        match args.get(i).map(|a| a.to_ascii_lowercase()) {
            Some(a) if a == b"maxlen" || a == b"minid" => {}
            _ => return Err(syntax_error()),
        }
        let t = parse_trim(args, &mut i)?;
        if i != args.len() {
            return Err(syntax_error());
        }
        let Some(m) = self.stream_meta(key)? else {
            return Ok(Reply::Int(0));
        };
        let mut st = m.stream();
        let mut writes = Vec::new();
        let n = self.trim(key, &m, &mut st, t, &mut writes, None)?;
        if n > 0 {
            self.put_stream(key, &m, st, &mut writes);
            self.write(writes);
            self.notify(STREAM, "xtrim", key);
        }
        Ok(Reply::Int(n as i64))
    }

    fn xrange(&mut self, args: &[Vec<u8>], rev: bool) -> Res<Reply> {
        let key = &args[1];
        let (lo, hi) = if rev {
            (&args[3], &args[2])
        } else {
            (&args[2], &args[3])
        };
        let from = range_bound(lo, true)?;
        let to = range_bound(hi, false)?;
        let count = match &args[4..] {
            [] => usize::MAX,
            [opt, n] if opt.eq_ignore_ascii_case(b"count") => match integer(n) {
                Some(n) if n < 0 => 0,
                Some(n) => n as usize,
                None => return Err(not_integer()),
            },
            _ => return Err(syntax_error()),
        };
        let Some(m) = self.stream_meta(key)? else {
            return Ok(Reply::Array(vec![]));
        };
        let (Some(from), Some(to)) = (from, to) else {
            return Ok(Reply::Array(vec![]));
        };
        if count == 0 {
            return Ok(Reply::Array(vec![]));
        }
        let es = if rev {
            self.entries_rev(key, &m, from, to, count)?
        } else {
            self.entries(key, &m, from, to, count)?
        };
        Ok(entries_reply(es))
    }

    fn xdel(&mut self, key: &[u8], ids: &[Vec<u8>]) -> Res<Reply> {
        let ids: Vec<Id> = ids.iter().map(|a| parse_id(a, 0)).collect::<Res<_>>()?;
        let Some(m) = self.stream_meta(key)? else {
            return Ok(Reply::Int(0));
        };
        let mut st = m.stream();
        let mut writes: Writes = Vec::new();
        let mut n = 0;
        for id in ids {
            let k = Self::entry_key(key, &m, id);
            if writes.iter().any(|(w, _)| *w == k) {
                continue;
            }
            if self.get_raw(&k)?.is_some() {
                writes.push((k, None));
                n += 1;
                st.max_deleted = st.max_deleted.max(id);
            }
        }
        if n > 0 {
            st.length -= n;
            st.first = if st.length == 0 {
                (0, 0)
            } else {
                self.first_after(key, &m, &writes)?.unwrap_or(st.last)
            };
            self.put_stream(key, &m, st, &mut writes);
            self.write(writes);
            self.notify(STREAM, "xdel", key);
        }
        Ok(Reply::Int(n as i64))
    }

    fn xsetid(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        let id = parse_id(&args[2], 0)?;
        let (mut added, mut max_deleted) = (None, None);
        let mut i = 3;
        while i < args.len() {
            let v = args.get(i + 1).ok_or_else(syntax_error)?;
            match args[i].to_ascii_lowercase().as_slice() {
                b"entriesadded" => match integer(v) {
                    Some(n) if n >= 0 => added = Some(n as u64),
                    Some(_) => return Err(Reply::err("entries_added must be positive")),
                    None => return Err(not_integer()),
                },
                b"maxdeletedid" => max_deleted = Some(parse_id(v, 0)?),
                _ => return Err(syntax_error()),
            }
            i += 2;
        }
        let Some(m) = self.stream_meta(key)? else {
            return Err(Reply::err("no such key"));
        };
        let mut st = m.stream();
        if let Some(a) = added {
            if a < st.length {
                return Err(Reply::err(
                    "The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
            st.added = a;
        }
        if let Some(d) = max_deleted {
            if id < d {
                return Err(Reply::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            st.max_deleted = d;
        }
        if st.length > 0 && id < st.last {
            return Err(Reply::err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        st.last = id;
        let mut writes = Vec::new();
        self.put_stream(key, &m, st, &mut writes);
        self.write(writes);
        self.notify(STREAM, "xsetid", key);
        Ok(Reply::ok())
    }

    /// XREAD: its reply, `None` when no stream has anything (it may
    /// block). `$` must be resolved before it blocks (`resolve_dollar`).
    pub(super) fn xread(&mut self, args: &[Vec<u8>]) -> Res<Option<Reply>> {
        let (count, _, streams) = read_options(&args[1..], false)?;
        let (keys, ids) = streams;
        let mut out = Vec::new();
        for (key, id) in keys.iter().zip(ids) {
            let Some(m) = self.stream_meta(key)? else {
                continue;
            };
            let st = m.stream();
            let after = match id.as_slice() {
                b"$" => st.last,
                b"+" => {
                    if st.length == 0 {
                        continue;
                    }
                    prev_id(st.last).unwrap_or((0, 0))
                }
                a => parse_id(a, 0)?,
            };
            let Some(from) = next_id(after) else { continue };
            let es = self.entries(key, &m, from, (u64::MAX, u64::MAX), count)?;
            if !es.is_empty() {
                out.push((Reply::Bulk(key.clone()), entries_reply(es)));
            }
        }
        Ok((!out.is_empty()).then(|| streams_reply(out, self.proto)))
    }

    /// XREAD's `$` IDs as the streams' last IDs now, so that a blocked
    /// XREAD waits for what comes after this moment.
    pub(super) fn resolve_dollar(&mut self, args: &mut [Vec<u8>], group: bool) -> Res<()> {
        let at = stream_args_at(args, group)?;
        let n = (args.len() - at) / 2;
        for i in 0..n {
            if args[at + n + i] == b"$" {
                let last = self
                    .stream_meta(&args[at + i].clone())?
                    .map_or((0, 0), |m| m.stream().last);
                args[at + n + i] = format_id(last).into_bytes();
            }
        }
        Ok(())
    }

    /// XINFO STREAM key [FULL [COUNT n]].
    pub(super) fn xinfo_stream(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[2];
        let full = match &args[3..] {
            [] => None,
            [f] if f.eq_ignore_ascii_case(b"full") => Some(10),
            [f, c, n] if f.eq_ignore_ascii_case(b"full") && c.eq_ignore_ascii_case(b"count") => {
                match integer(n) {
                    Some(0) => Some(usize::MAX),
                    Some(n) if n > 0 => Some(n as usize),
                    _ => return Err(not_integer()),
                }
            }
            _ => return Err(syntax_error()),
        };
        let Some(m) = self.stream_meta(key)? else {
            return Err(Reply::err("no such key"));
        };
        let st = m.stream();
        let first = self.entries(key, &m, (0, 0), (u64::MAX, u64::MAX), 1)?;
        let last = if st.length > 0 {
            self.entries(key, &m, st.last, st.last, 1)?
        } else {
            vec![]
        };
        let mut out = vec![
            (Reply::bulk("length"), Reply::Int(st.length as i64)),
            (
                Reply::bulk("radix-tree-keys"),
                Reply::Int((st.length.div_ceil(100)) as i64),
            ),
            (
                Reply::bulk("radix-tree-nodes"),
                Reply::Int((st.length.div_ceil(100) + 1) as i64),
            ),
            (
                Reply::bulk("last-generated-id"),
                Reply::bulk(format_id(st.last)),
            ),
            (
                Reply::bulk("max-deleted-entry-id"),
                Reply::bulk(format_id(st.max_deleted)),
            ),
            (Reply::bulk("entries-added"), Reply::Int(st.added as i64)),
            (
                Reply::bulk("recorded-first-entry-id"),
                Reply::bulk(format_id(st.first)),
            ),
        ];
        match full {
            None => {
                out.push((Reply::bulk("groups"), Reply::Int(st.groups as i64)));
                let one = |v: Vec<Entry>| v.into_iter().next().map_or(Reply::Nil, entry_reply);
                out.push((Reply::bulk("first-entry"), one(first)));
                out.push((Reply::bulk("last-entry"), one(last)));
            }
            Some(count) => {
                let es = self.entries(key, &m, (0, 0), (u64::MAX, u64::MAX), count)?;
                out.push((Reply::bulk("entries"), entries_reply(es)));
                let groups = self.xinfo_groups_full(key, &m, count)?;
                out.push((Reply::bulk("groups"), groups));
            }
        }
        Ok(Reply::Map(out))
    }
}

/// XREAD's and XREADGROUP's reply: each stream with its entries, as a
/// map in RESP3 and an array of pairs in RESP2.
pub fn streams_reply(out: Vec<(Reply, Reply)>, proto: u8) -> Reply {
    if proto >= 3 {
        Reply::Map(out)
    } else {
        Reply::Array(
            out.into_iter()
                .map(|(k, v)| Reply::Array(vec![k, v]))
                .collect(),
        )
    }
}

fn corrupt(key: &[u8]) -> Reply {
    Reply::err(format!(
        "stream '{}' holds an entry this server never writes",
        String::from_utf8_lossy(key)
    ))
}

/// Where `STREAMS` starts in XREAD's or XREADGROUP's arguments (the name
/// included): the index of its first key.
fn stream_args_at(args: &[Vec<u8>], group: bool) -> Res<usize> {
    let start = if group { 4 } else { 1 };
    let at = args[start..]
        .iter()
        .position(|a| a.eq_ignore_ascii_case(b"streams"))
        .ok_or_else(syntax_error)?
        + start
        + 1;
    let n = args.len() - at;
    if n == 0 || n % 2 != 0 {
        return Err(Reply::err(
            "Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.",
        ));
    }
    Ok(at)
}

/// Keys and IDs after STREAMS.
pub type Streams<'x> = (&'x [Vec<u8>], &'x [Vec<u8>]);

/// XREAD's and XREADGROUP's options (after the command name, and after
/// `GROUP g c` for XREADGROUP): COUNT, BLOCK (milliseconds), NOACK, and
/// the keys and IDs.
pub fn read_options(args: &[Vec<u8>], group: bool) -> Res<(usize, Option<u64>, Streams<'_>)> {
    let (mut count, mut block) = (usize::MAX, None);
    let mut i = 0;
    while i < args.len() {
        match args[i].to_ascii_lowercase().as_slice() {
            b"count" => {
                let n = args.get(i + 1).ok_or_else(syntax_error)?;
                count = match integer(n) {
                    Some(n) if n > 0 => n as usize,
                    Some(_) => usize::MAX,
                    None => return Err(not_integer()),
                };
                i += 2;
            }
            b"block" => {
                let n = args.get(i + 1).ok_or_else(syntax_error)?;
                block = match integer(n) {
                    Some(n) if n >= 0 => Some(n as u64),
                    Some(_) => return Err(Reply::err("timeout is negative")),
                    None => return Err(Reply::err("timeout is not an integer or out of range")),
                };
                i += 2;
            }
            b"noack" if group => i += 1,
            b"streams" => {
                let rest = &args[i + 1..];
                if rest.is_empty() || rest.len() % 2 != 0 {
                    let name = if group { "xreadgroup" } else { "xread" };
                    return Err(Reply::err(format!(
                        "Unbalanced '{name}' list of streams: for each stream key an ID or '{}' must be specified.",
                        if group { ">" } else { "$" }
                    )));
                }
                let n = rest.len() / 2;
                return Ok((count, block, (&rest[..n], &rest[n..])));
            }
            _ => return Err(syntax_error()),
        }
    }
    Err(syntax_error())
}
