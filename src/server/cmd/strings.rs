//! Strings: the value is in the key's metadata, so a read is one lookup
//! and a plain SET one write, with no read.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use super::expire::{option_expiry, Unit};
use super::{
    float, format_float, index_expiry, integer, not_float, not_integer, syntax_error, wrong_type,
    Res, Writes,
};
use crate::server::conn::Conn;
use crate::server::keys;
use crate::server::meta::{self, Meta, Type};
use crate::server::notify::{GENERIC, STRING};
use crate::server::resp::Reply;

/// The most bytes SETRANGE and APPEND make a string, as Redis's
/// `proto-max-bulk-len` default.
const MAX_STRING: u64 = 512 << 20;

/// What SET's options ask.
#[derive(Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    /// The expiry argument and how to read it.
    expiry: Option<(Unit, bool, usize)>,
}

/// SET's options as Redis parses them (each at most once, EX/PX/EXAT/PXAT/
/// KEEPTTL one of them, NX or XX): anything else is a syntax error.
fn set_options(args: &[Vec<u8>]) -> Res<SetOptions> {
    let mut o = SetOptions::default();
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_lowercase();
        let has_next = i + 1 < args.len();
        let timed = o.expiry.is_some() || o.keepttl;
        match opt.as_slice() {
            b"nx" if !o.xx => o.nx = true,
            b"xx" if !o.nx => o.xx = true,
            b"get" => o.get = true,
            b"keepttl" if o.expiry.is_none() => o.keepttl = true,
            b"ex" | b"px" | b"exat" | b"pxat" if !timed && has_next => {
                let unit = if opt[0] == b'e' {
                    Unit::Seconds
                } else {
                    Unit::Millis
                };
                o.expiry = Some((unit, opt.len() == 2, i + 1));
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok(o)
}

impl<'a> Conn<'a> {
    pub(super) fn strings(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "get" => self.get(&args[1]),
            "set" => self.set(args),
            "setnx" => self.setnx(&args[1], &args[2]),
            "setex" | "psetex" => self.setex(name, args),
            "getset" => self.getset(&args[1], &args[2]),
            "getex" => self.getex(args),
            "getdel" => self.getdel(&args[1]),
            "mget" => self.mget(&args[1..]),
            "mset" | "msetnx" => self.mset(name, &args[1..]),
            "incr" => self.incr(&args[1], Some(1)),
            "decr" => self.incr(&args[1], Some(-1)),
            "incrby" => self.incr(&args[1], integer(&args[2])),
            "decrby" => self.incr(&args[1], integer(&args[2]).and_then(i64::checked_neg)),
            "incrbyfloat" => self.incrbyfloat(&args[1], &args[2]),
            "append" => self.append(&args[1], &args[2]),
            "strlen" => self.strlen(&args[1]),
            "getrange" | "substr" => self.getrange(&args[1], &args[2], &args[3]),
            "setrange" => self.setrange(&args[1], &args[2], &args[3]),
            "lcs" => self.lcs(args),
            _ => return None,
        })
    }

    /// `key`'s string metadata; WRONGTYPE if it holds another type.
    fn string(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        self.typed(key, Type::String)
    }

    /// String `key`'s metadata and a copy of its value to change (empty
    /// if the key does not exist); WRONGTYPE if it holds another type.
    pub(super) fn string_bytes(&mut self, key: &[u8]) -> Res<(Option<Meta>, Vec<u8>)> {
        let m = self.string(key)?;
        let v = m
            .as_ref()
            .and_then(Meta::value)
            .unwrap_or_default()
            .to_vec();
        Ok((m, v))
    }

    /// Writes `value` as string `key` with a new version.
    fn put_string(
        &mut self,
        key: &[u8],
        value: &[u8],
        expire_at: Option<u64>,
        old: Option<&Meta>,
        writes: &mut Writes,
    ) -> Res<()> {
        self.check_string(value.len())?;
        let version = self.new_version()?;
        let before = old.and_then(|o| o.expire_at);
        if expire_at.is_some_and(|at| at <= self.now()) {
            // Already expired: the key is gone.
            index_expiry(key, None, before, writes);
            writes.push((self.meta_key(key), None));
            return Ok(());
        }
        index_expiry(key, expire_at, before, writes);
        writes.push((
            keys::meta(key),
            Some(meta::encode_string(version, expire_at, value)),
        ));
        Ok(())
    }

    /// Writes a new value into string `m` of `key`, keeping its version
    /// and expiry (INCR, APPEND, SETRANGE).
    pub(super) fn update_string(&mut self, key: &[u8], m: Option<Meta>, value: Vec<u8>) -> Res<()> {
        self.check_string(value.len())?;
        let m = match m {
            Some(mut m) => {
                m.body = meta::Body::Value(Rc::new(value), 0);
                m
            }
            None => Meta::string(self.new_version()?, value, None),
        };
        self.write(vec![(self.meta_key(key), Some(m.encode()))]);
        Ok(())
    }

    fn get(&mut self, key: &[u8]) -> Res<Reply> {
        match self.string(key)? {
            Some(m) => {
                self.shared.hits.fetch_add(1, Ordering::Relaxed);
                Ok(into_bulk(m))
            }
            None => {
                self.shared.misses.fetch_add(1, Ordering::Relaxed);
                Ok(Reply::Nil)
            }
        }
    }

    fn set(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, value) = (&args[1], &args[2]);
        let o = set_options(args)?;
        let expire_at = match o.expiry {
            Some((unit, relative, at)) => {
                Some(option_expiry(&args[at], unit, relative, self.now(), "set")?)
            }
            None => None,
        };
        let mut writes = Vec::new();
        if !(o.nx || o.xx || o.get || o.keepttl) {
            // A plain SET reads nothing: a new version over whatever the
            // key held. With an expiry it reads the old one, so that
            // refreshing a key's TTL over and over leaves one index entry.
            let old = match expire_at {
                Some(_) => self.get_raw(&keys::meta(key))?.and_then(Meta::decode),
                None => None,
            };
            self.put_string(key, value, expire_at, old.as_ref(), &mut writes)?;
            self.write(writes);
            self.notify_set(key, expire_at.is_some());
            return Ok(Reply::ok());
        }
        let old = self.lookup(key)?;
        if o.get && old.as_ref().is_some_and(|m| m.kind != Type::String) {
            return Err(wrong_type());
        }
        let reply = if o.get {
            old.clone().map_or(Reply::Nil, into_bulk)
        } else {
            Reply::ok()
        };
        if (o.nx && old.is_some()) || (o.xx && old.is_none()) {
            return Ok(if o.get { reply } else { Reply::Nil });
        }
        let expire_at = if o.keepttl {
            old.as_ref().and_then(|m| m.expire_at)
        } else {
            expire_at
        };
        self.put_string(key, value, expire_at, old.as_ref(), &mut writes)?;
        self.write(writes);
        self.notify_set(key, expire_at.is_some() && !o.keepttl);
        Ok(reply)
    }

    /// SET's events: `set`, and `expire` when it gave an expiry.
    fn notify_set(&mut self, key: &[u8], expiry: bool) {
        self.notify(STRING, "set", key);
        if expiry {
            self.notify(GENERIC, "expire", key);
        }
    }

    fn setnx(&mut self, key: &[u8], value: &[u8]) -> Res<Reply> {
        if self.lookup(key)?.is_some() {
            return Ok(Reply::Int(0));
        }
        let mut writes = Vec::new();
        self.put_string(key, value, None, None, &mut writes)?;
        self.write(writes);
        self.notify(STRING, "set", key);
        Ok(Reply::Int(1))
    }

    fn setex(&mut self, name: &str, args: &[Vec<u8>]) -> Res<Reply> {
        let unit = if name == "setex" {
            Unit::Seconds
        } else {
            Unit::Millis
        };
        let at = option_expiry(&args[2], unit, true, self.now(), name)?;
        let old = self.get_raw(&keys::meta(&args[1]))?.and_then(Meta::decode);
        let mut writes = Vec::new();
        self.put_string(&args[1], &args[3], Some(at), old.as_ref(), &mut writes)?;
        self.write(writes);
        self.notify_set(&args[1], true);
        Ok(Reply::ok())
    }

    fn getset(&mut self, key: &[u8], value: &[u8]) -> Res<Reply> {
        let old = self.string(key)?;
        let mut writes = Vec::new();
        self.put_string(key, value, None, None, &mut writes)?;
        self.write(writes);
        self.notify(STRING, "set", key);
        Ok(old.map_or(Reply::Nil, into_bulk))
    }

    fn getex(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        // None: leave the expiry; Some(None): PERSIST.
        let mut change: Option<Option<u64>> = None;
        let mut i = 2;
        while i < args.len() {
            let opt = args[i].to_ascii_lowercase();
            match opt.as_slice() {
                b"persist" if change.is_none() => change = Some(None),
                b"ex" | b"px" | b"exat" | b"pxat" if change.is_none() && i + 1 < args.len() => {
                    let unit = if opt[0] == b'e' {
                        Unit::Seconds
                    } else {
                        Unit::Millis
                    };
                    let at =
                        option_expiry(&args[i + 1], unit, opt.len() == 2, self.now(), "getex")?;
                    change = Some(Some(at));
                    i += 1;
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        let Some(m) = self.string(key)? else {
            return Ok(Reply::Nil);
        };
        let reply = Reply::Bulk(m.value().unwrap_or_default().to_vec());
        match change {
            None => {}
            Some(Some(at)) if at <= self.now() => {
                let mut writes = Vec::new();
                index_expiry(key, None, m.expire_at, &mut writes);
                writes.push((self.meta_key(key), None));
                self.write(writes);
                self.notify(GENERIC, "del", key);
            }
            Some(at) if at != m.expire_at => {
                let mut next = m.clone();
                next.expire_at = at;
                let mut writes = Vec::new();
                self.put(key, &next, Some(&m), &mut writes);
                self.write(writes);
                let event = if at.is_some() { "expire" } else { "persist" };
                self.notify(GENERIC, event, key);
            }
            Some(_) => {}
        }
        Ok(reply)
    }

    fn getdel(&mut self, key: &[u8]) -> Res<Reply> {
        match self.string(key)? {
            Some(m) => {
                self.write(vec![(keys::meta(key), None)]);
                self.notify(GENERIC, "del", key);
                Ok(into_bulk(m))
            }
            None => Ok(Reply::Nil),
        }
    }

    fn mget(&mut self, names: &[Vec<u8>]) -> Res<Reply> {
        let mut out = Vec::with_capacity(names.len());
        for k in names {
            out.push(match self.lookup(k)? {
                Some(m) if m.kind == Type::String => into_bulk(m),
                _ => Reply::Nil,
            });
        }
        Ok(Reply::Array(out))
    }

    fn mset(&mut self, name: &str, args: &[Vec<u8>]) -> Res<Reply> {
        if args.len() % 2 != 0 {
            return Err(Reply::err(format!(
                "wrong number of arguments for '{name}' command"
            )));
        }
        let nx = name == "msetnx";
        if nx {
            for pair in args.chunks(2) {
                if self.lookup(&pair[0])?.is_some() {
                    return Ok(Reply::Int(0));
                }
            }
        }
        let mut writes = Vec::with_capacity(args.len() / 2);
        for pair in args.chunks(2) {
            self.put_string(&pair[0], &pair[1], None, None, &mut writes)?;
        }
        self.write(writes);
        for pair in args.chunks(2) {
            self.notify(STRING, "set", &pair[0]);
        }
        Ok(if nx { Reply::Int(1) } else { Reply::ok() })
    }

    fn incr(&mut self, key: &[u8], by: Option<i64>) -> Res<Reply> {
        let by = by.ok_or_else(not_integer)?;
        let m = self.string(key)?;
        let now = match &m {
            Some(m) => integer(m.value().unwrap_or_default()).ok_or_else(not_integer)?,
            None => 0,
        };
        let next = now
            .checked_add(by)
            .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        self.update_string(key, m, next.to_string().into_bytes())?;
        self.notify(STRING, "incrby", key);
        Ok(Reply::Int(next))
    }

    fn incrbyfloat(&mut self, key: &[u8], by: &[u8]) -> Res<Reply> {
        let by = float(by).ok_or_else(not_float)?;
        let m = self.string(key)?;
        let now = match &m {
            Some(m) => float(m.value().unwrap_or_default()).ok_or_else(not_float)?,
            None => 0.0,
        };
        let next = now + by;
        if !next.is_finite() {
            return Err(Reply::err("increment would produce NaN or Infinity"));
        }
        let text = format_float(next).into_bytes();
        self.update_string(key, m, text.clone())?;
        self.notify(STRING, "incrbyfloat", key);
        Ok(Reply::Bulk(text))
    }

    fn append(&mut self, key: &[u8], tail: &[u8]) -> Res<Reply> {
        let (m, mut value) = self.string_bytes(key)?;
        check_size(value.len() as u64 + tail.len() as u64)?;
        value.extend_from_slice(tail);
        let len = value.len();
        self.update_string(key, m, value)?;
        self.notify(STRING, "append", key);
        Ok(Reply::Int(len as i64))
    }

    fn strlen(&mut self, key: &[u8]) -> Res<Reply> {
        Ok(Reply::Int(
            self.string(key)?
                .map_or(0, |m| m.value().map_or(0, <[u8]>::len) as i64),
        ))
    }

    fn getrange(&mut self, key: &[u8], start: &[u8], end: &[u8]) -> Res<Reply> {
        let (Some(mut start), Some(mut end)) = (integer(start), integer(end)) else {
            return Err(not_integer());
        };
        let Some(m) = self.string(key)? else {
            return Ok(Reply::bulk(""));
        };
        let v = m.value().unwrap_or_default();
        let len = v.len() as i64;
        if start < 0 && end < 0 && start > end {
            return Ok(Reply::bulk(""));
        }
        if start < 0 {
            start = (len + start).max(0);
        }
        if end < 0 {
            end = (len + end).max(0);
        }
        end = end.min(len - 1);
        if len == 0 || start > end {
            return Ok(Reply::bulk(""));
        }
        Ok(Reply::Bulk(v[start as usize..=end as usize].to_vec()))
    }

    fn setrange(&mut self, key: &[u8], offset: &[u8], part: &[u8]) -> Res<Reply> {
        let offset = integer(offset).ok_or_else(not_integer)?;
        if offset < 0 {
            return Err(Reply::err("offset is out of range"));
        }
        let (m, mut value) = self.string_bytes(key)?;
        if part.is_empty() {
            return Ok(Reply::Int(value.len() as i64));
        }
        let end = offset as u64 + part.len() as u64;
        check_size(end)?;
        let end = end as usize;
        if value.len() < end {
            value.resize(end, 0);
        }
        value[offset as usize..end].copy_from_slice(part);
        let len = value.len();
        self.update_string(key, m, value)?;
        self.notify(STRING, "setrange", key);
        Ok(Reply::Int(len as i64))
    }
}

fn check_size(len: u64) -> Res<()> {
    if len > MAX_STRING {
        return Err(Reply::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    Ok(())
}

/// A string's value as a reply, without a copy.
fn into_bulk(m: Meta) -> Reply {
    match m.body {
        meta::Body::Value(v, at) => Reply::BulkFrom(v, at),
        meta::Body::Count(_) | meta::Body::Ends(..) | meta::Body::Stream(_) => Reply::Nil,
    }
}
