//! Hashes: a field is a sub-key under the hash's version, its count in
//! the metadata, so HLEN is one lookup and deleting a hash of any size
//! one write.

use super::{
    absent, float, format_float, integer, not_float, not_integer, random_pick, Res, Writes,
};
use crate::server::conn::Conn;
use crate::server::keys::{self, FIELD};
use crate::server::meta::{Meta, Type};
use crate::server::notify::{GENERIC, HASH};
use crate::server::resp::Reply;

impl<'a> Conn<'a> {
    pub(super) fn hashes(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "hset" | "hmset" => self.hset(name, &args[1], &args[2..]),
            "hsetnx" => self.hsetnx(&args[1], &args[2], &args[3]),
            "hget" => self.hget(&args[1], &args[2]),
            "hmget" => self.hmget(&args[1], &args[2..]),
            "hdel" => self.hdel(&args[1], &args[2..]),
            "hgetall" => self.hgetall(&args[1], true, true),
            "hkeys" => self.hgetall(&args[1], true, false),
            "hvals" => self.hgetall(&args[1], false, true),
            "hexists" => self.hexists(&args[1], &args[2]),
            "hlen" => self.hlen(&args[1]),
            "hstrlen" => self.hstrlen(&args[1], &args[2]),
            "hincrby" => self.hincrby(&args[1], &args[2], &args[3]),
            "hincrbyfloat" => self.hincrbyfloat(&args[1], &args[2], &args[3]),
            "hscan" => self.element_scan(&args[1], Type::Hash, &args[2..]),
            "hrandfield" => self.hrandfield(&args[1], &args[2..]),
            _ => return None,
        })
    }

    fn hash(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        self.typed(key, Type::Hash)
    }

    /// Hash `key`'s metadata, a new empty hash if it does not exist.
    fn hash_or_new(&mut self, key: &[u8]) -> Res<(Meta, Option<Meta>)> {
        let old = self.hash(key)?;
        let m = match &old {
            Some(m) => m.clone(),
            None => Meta::hash(self.new_version()?),
        };
        Ok((m, old))
    }

    pub(super) fn field(&mut self, key: &[u8], m: &Meta, field: &[u8]) -> Res<Option<Vec<u8>>> {
        self.get_raw(&keys::element(key, m.version, FIELD, field))
    }

    /// Writes fields `pairs` into hash `key`: how many were new.
    fn set_fields(&mut self, key: &[u8], pairs: &[(&[u8], &[u8])]) -> Res<i64> {
        for (f, v) in pairs {
            self.check_element(key, f, "field")?;
            self.check_value(v.len())?;
        }
        let (mut m, old) = self.hash_or_new(key)?;
        let mut writes: Writes = Vec::with_capacity(pairs.len() + 2);
        let mut added = 0;
        let mut seen: Vec<&[u8]> = Vec::new();
        for (f, v) in pairs {
            let fkey = keys::element(key, m.version, FIELD, f);
            let new = old.is_none() || self.get_raw(&fkey)?.is_none();
            if new && !seen.contains(f) {
                added += 1;
            }
            seen.push(f);
            writes.push((fkey, Some(v.to_vec())));
        }
        m.set_count(m.count() + added as u64);
        // The metadata goes last: a crash part way through a HSET too
        // large for one log batch leaves fields no metadata counts (dead,
        // for a new hash), never a count without its fields. Fields
        // overwritten, none added: the count is as it was.
        self.put_changed(key, &m, old.as_ref(), &mut writes);
        self.write(writes);
        Ok(added)
    }

    fn hset(&mut self, name: &str, key: &[u8], pairs: &[Vec<u8>]) -> Res<Reply> {
        if pairs.is_empty() || pairs.len() % 2 != 0 {
            return Err(Reply::err(format!(
                "wrong number of arguments for '{name}' command"
            )));
        }
        let pairs: Vec<(&[u8], &[u8])> = pairs
            .chunks(2)
            .map(|p| (p[0].as_slice(), p[1].as_slice()))
            .collect();
        let added = self.set_fields(key, &pairs)?;
        self.notify(HASH, "hset", key);
        Ok(if name == "hmset" {
            Reply::ok()
        } else {
            Reply::Int(added)
        })
    }

    fn hsetnx(&mut self, key: &[u8], field: &[u8], value: &[u8]) -> Res<Reply> {
        if let Some(m) = self.hash(key)? {
            if self.field(key, &m, field)?.is_some() {
                return Ok(Reply::Int(0));
            }
        }
        self.set_fields(key, &[(field, value)])?;
        self.notify(HASH, "hset", key);
        Ok(Reply::Int(1))
    }

    fn hget(&mut self, key: &[u8], field: &[u8]) -> Res<Reply> {
        let Some(m) = self.hash(key)? else {
            return Ok(Reply::Nil);
        };
        Ok(self.field(key, &m, field)?.map_or(Reply::Nil, Reply::Bulk))
    }

    fn hmget(&mut self, key: &[u8], fields: &[Vec<u8>]) -> Res<Reply> {
        let m = self.hash(key)?;
        let mut out = Vec::with_capacity(fields.len());
        for f in fields {
            out.push(match &m {
                Some(m) => self.field(key, m, f)?.map_or(Reply::Nil, Reply::Bulk),
                None => Reply::Nil,
            });
        }
        Ok(Reply::Array(out))
    }

    fn hdel(&mut self, key: &[u8], fields: &[Vec<u8>]) -> Res<Reply> {
        let Some(mut m) = self.hash(key)? else {
            return Ok(Reply::Int(0));
        };
        let mut writes = Vec::new();
        let mut seen: Vec<&[u8]> = Vec::new();
        for f in fields {
            if seen.contains(&f.as_slice()) {
                continue;
            }
            seen.push(f);
            let fkey = keys::element(key, m.version, FIELD, f);
            if self.get_raw(&fkey)?.is_some() {
                writes.push((fkey, None));
            }
        }
        let removed = writes.len() as u64;
        if removed == 0 {
            return Ok(Reply::Int(0));
        }
        let left = m.count().saturating_sub(removed);
        if left == 0 {
            // The last field: the hash is gone, and with it every field.
            writes.push((self.meta_key(key), None));
        } else {
            m.set_count(left);
            writes.push((self.meta_key(key), Some(m.encode())));
        }
        self.write(writes);
        self.notify(HASH, "hdel", key);
        if left == 0 {
            self.notify(GENERIC, "del", key);
        }
        Ok(Reply::Int(removed as i64))
    }

    fn hgetall(&mut self, key: &[u8], names: bool, values: bool) -> Res<Reply> {
        let Some(m) = self.hash(key)? else {
            return Ok(if names && values {
                Reply::Map(vec![])
            } else {
                Reply::Array(vec![])
            });
        };
        let all = self.elements(key, m.version, FIELD, usize::MAX)?;
        Ok(match (names, values) {
            (true, true) => Reply::Map(
                all.into_iter()
                    .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                    .collect(),
            ),
            (true, false) => Reply::Array(all.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()),
            _ => Reply::Array(all.into_iter().map(|(_, v)| Reply::Bulk(v)).collect()),
        })
    }

    fn hexists(&mut self, key: &[u8], field: &[u8]) -> Res<Reply> {
        let Some(m) = self.hash(key)? else {
            return Ok(Reply::Int(0));
        };
        Ok(Reply::Int(self.field(key, &m, field)?.is_some() as i64))
    }

    fn hlen(&mut self, key: &[u8]) -> Res<Reply> {
        Ok(Reply::Int(self.hash(key)?.map_or(0, |m| m.count() as i64)))
    }

    fn hstrlen(&mut self, key: &[u8], field: &[u8]) -> Res<Reply> {
        let Some(m) = self.hash(key)? else {
            return Ok(Reply::Int(0));
        };
        Ok(Reply::Int(
            self.field(key, &m, field)?.map_or(0, |v| v.len() as i64),
        ))
    }

    fn hincrby(&mut self, key: &[u8], field: &[u8], by: &[u8]) -> Res<Reply> {
        let by = integer(by).ok_or_else(not_integer)?;
        let now = match self.hash(key)? {
            Some(m) => match self.field(key, &m, field)? {
                Some(v) => integer(&v).ok_or_else(|| Reply::err("hash value is not an integer"))?,
                None => 0,
            },
            None => 0,
        };
        let next = now
            .checked_add(by)
            .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        self.set_fields(key, &[(field, next.to_string().as_bytes())])?;
        self.notify(HASH, "hincrby", key);
        Ok(Reply::Int(next))
    }

    fn hincrbyfloat(&mut self, key: &[u8], field: &[u8], by: &[u8]) -> Res<Reply> {
        let by = float(by).ok_or_else(not_float)?;
        if !by.is_finite() {
            return Err(Reply::err("value is NaN or Infinity"));
        }
        let now = match self.hash(key)? {
            Some(m) => match self.field(key, &m, field)? {
                Some(v) => float(&v).ok_or_else(|| Reply::err("hash value is not a float"))?,
                None => 0.0,
            },
            None => 0.0,
        };
        let next = now + by;
        if !next.is_finite() {
            return Err(Reply::err("increment would produce NaN or Infinity"));
        }
        let text = format_float(next);
        self.set_fields(key, &[(field, text.as_bytes())])?;
        self.notify(HASH, "hincrbyfloat", key);
        Ok(Reply::bulk(text))
    }

    /// HRANDFIELD: distinct fields for a count from 0 up, repeats allowed
    /// for a negative count.
    fn hrandfield(&mut self, key: &[u8], rest: &[Vec<u8>]) -> Res<Reply> {
        let (count, values) = match rest {
            [] => (None, false),
            [c] => (Some(integer(c).ok_or_else(not_integer)?), false),
            [c, w] if w.eq_ignore_ascii_case(b"withvalues") => {
                (Some(integer(c).ok_or_else(not_integer)?), true)
            }
            _ => return Err(crate::server::cmd::syntax_error()),
        };
        if count.is_some_and(|c| c.unsigned_abs() > i64::MAX as u64 / 2) {
            return Err(Reply::err("value is out of range"));
        }
        let Some(m) = self.hash(key)? else {
            return Ok(absent(count.is_some()));
        };
        let all = self.elements(key, m.version, FIELD, usize::MAX)?;
        let picked = random_pick(all, count);
        if count.is_none() {
            return Ok(picked
                .into_iter()
                .next()
                .map_or(Reply::Nil, |(f, _)| Reply::Bulk(f)));
        }
        let mut out = Vec::new();
        for (f, v) in picked {
            if values && self.proto >= 3 {
                out.push(Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)]));
            } else {
                out.push(Reply::Bulk(f));
                if values {
                    out.push(Reply::Bulk(v));
                }
            }
        }
        Ok(Reply::Array(out))
    }
}
