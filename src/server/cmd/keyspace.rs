//! The keyspace: DEL, EXISTS, TYPE, RENAME, SCAN, KEYS, RANDOMKEY, DBSIZE,
//! FLUSHALL. Deleting a key of any type is one write of its metadata.

use std::sync::atomic::Ordering;

use super::{integer, not_integer, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{self, Part};
use crate::server::meta::{Meta, Type};
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

/// Redis keys a walk found with their types, and the engine key to go
/// on from (`None`: the end).
type Walked = (Vec<(Vec<u8>, Type)>, Option<Vec<u8>>);

/// Where the metadata of the first Redis key can be: after the server's
/// own keys and the expiry index.
const FIRST: &[u8] = &[0, 0xff];

/// The bytes of a glob pattern before its first special character.
fn literal_prefix(pattern: &[u8]) -> &[u8] {
    let end = pattern
        .iter()
        .position(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
        .unwrap_or(pattern.len());
    &pattern[..end]
}

impl<'a> Conn<'a> {
    pub(super) fn keyspace(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "del" | "unlink" => self.del(&args[1..]),
            "exists" | "touch" => self.exists(&args[1..]),
            "type" => self.key_type(&args[1]),
            "rename" | "renamenx" => self.rename(name, &args[1], &args[2]),
            "scan" => self.scan(&args[1..]),
            "keys" => self.keys(&args[1]),
            "randomkey" => self.randomkey(),
            "dbsize" => self.dbsize(),
            "flushall" | "flushdb" => self.flushall(&args[1..]),
            _ => return None,
        })
    }

    fn del(&mut self, names: &[Vec<u8>]) -> Res<Reply> {
        let mut writes = Vec::new();
        let mut seen: Vec<&[u8]> = Vec::new();
        for k in names {
            if seen.contains(&k.as_slice()) {
                continue;
            }
            seen.push(k);
            if self.lookup(k)?.is_some() {
                writes.push((keys::meta(k), None));
            }
        }
        let n = writes.len() as i64;
        self.write(writes);
        Ok(Reply::Int(n))
    }

    fn exists(&mut self, names: &[Vec<u8>]) -> Res<Reply> {
        let mut n = 0;
        for k in names {
            if self.lookup(k)?.is_some() {
                n += 1;
            }
        }
        Ok(Reply::Int(n))
    }

    fn key_type(&mut self, key: &[u8]) -> Res<Reply> {
        Ok(Reply::Status(
            self.lookup(key)?.map_or("none", |m| m.kind.name()),
        ))
    }

    /// RENAME keeps the expiry. A collection's elements are copied under
    /// a new version: O(elements), as Redis's MOVE to another database.
    fn rename(&mut self, name: &str, from: &[u8], to: &[u8]) -> Res<Reply> {
        let Some(m) = self.lookup(from)? else {
            return Err(Reply::err("no such key"));
        };
        let nx = name == "renamenx";
        if from == to {
            return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
        }
        if nx && self.lookup(to)?.is_some() {
            return Ok(Reply::Int(0));
        }
        let mut next = m.clone();
        next.version = self.new_version()?;
        let mut writes: Writes = Vec::new();
        if m.kind != Type::String {
            let (start, end) = keys::version_range(from, m.version);
            let mut at = start.clone();
            loop {
                let batch = self.scan_raw(&at, Some(&end), CHUNK)?;
                let Some((last, _)) = batch.last() else { break };
                at = last.clone();
                at.push(0);
                let n = batch.len();
                for (k, v) in batch {
                    // The tag and the element, under the new name and version.
                    let rest = &k[start.len() - 1..];
                    self.check_element(to, &rest[1..], "element")?;
                    writes.push((
                        keys::element(to, next.version, rest[0], &rest[1..]),
                        Some(v),
                    ));
                }
                if n < CHUNK {
                    break;
                }
            }
        }
        self.put(to, &next, None, &mut writes);
        writes.push((keys::meta(from), None));
        self.write(writes);
        Ok(if nx { Reply::Int(1) } else { Reply::ok() })
    }

    /// Whether metadata `raw` of `key` is of a live key, and its type.
    fn live(&mut self, raw: Vec<u8>) -> Res<Option<Type>> {
        let Some(m) = Meta::decode(raw) else {
            return Ok(None);
        };
        if m.version < self.shared.floor.load(Ordering::SeqCst) {
            self.get_raw(keys::FLOOR)?;
            return Ok(None);
        }
        Ok((!m.expired(self.now)).then_some(m.kind))
    }

    /// Up to `count` live Redis keys from engine key `from` on, with their
    /// types, stopping at the first key without `prefix`.
    fn walk(&mut self, from: &[u8], count: usize, prefix: &[u8]) -> Res<Walked> {
        let mut found = Vec::new();
        let mut from = from.max(FIRST).to_vec();
        while found.len() < count {
            let want = (count - found.len()).clamp(16, CHUNK);
            let batch = self.scan_raw(&from, None, want)?;
            if batch.is_empty() {
                return Ok((found, None));
            }
            let mut next = None;
            for (k, v) in batch {
                let Some((user, part)) = keys::decode(&k) else {
                    // Not a Redis key's: step over it.
                    let mut after = k;
                    after.push(0);
                    next = Some(after);
                    continue;
                };
                if !user.starts_with(prefix) {
                    return Ok((found, None));
                }
                next = Some(keys::after(&user));
                if part != Part::Meta {
                    // Elements of a dead version: step over the key.
                    break;
                }
                let kind = self.live(v)?;
                if let Some(t) = kind {
                    found.push((user, t));
                }
                // A collection's elements follow its metadata: one seek
                // steps over them all.
                if kind != Some(Type::String) || found.len() == count {
                    break;
                }
            }
            from = next.expect("a batch has a last key");
        }
        Ok((found, Some(from)))
    }

    fn scan(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let from = match integer(&args[0]) {
            Some(0) => FIRST.to_vec(),
            Some(c) if c > 0 => self
                .shared
                .cursor(c as u64)
                .ok_or_else(|| Reply::err("invalid cursor (expired or unknown)"))?,
            _ => return Err(Reply::err("invalid cursor")),
        };
        let (mut pattern, mut count, mut kind) = (None, 10usize, None);
        for pair in args[1..].chunks(2) {
            let [opt, value] = pair else {
                return Err(syntax_error());
            };
            match opt.to_ascii_lowercase().as_slice() {
                b"match" => pattern = Some(value.clone()),
                b"count" => {
                    count = match integer(value) {
                        Some(n) if n >= 1 => (n as usize).min(100_000),
                        Some(_) => return Err(syntax_error()),
                        None => return Err(not_integer()),
                    }
                }
                b"type" => kind = Some(Type::named(value)),
                _ => return Err(syntax_error()),
            }
        }
        let (found, next) = self.walk(&from, count, b"")?;
        let cursor = match next {
            Some(k) => self.shared.save_cursor(k),
            None => 0,
        };
        let keys = found
            .into_iter()
            .filter(|(k, t)| {
                pattern
                    .as_ref()
                    .is_none_or(|p| crate::server::glob::matches(p, k))
                    && kind.is_none_or(|want| want == Some(*t))
            })
            .map(|(k, _)| Reply::Bulk(k))
            .collect();
        Ok(Reply::Array(vec![
            Reply::bulk(cursor.to_string()),
            Reply::Array(keys),
        ]))
    }

    /// KEYS reads only the keys that start with the pattern's literal
    /// prefix.
    fn keys(&mut self, pattern: &[u8]) -> Res<Reply> {
        let prefix = literal_prefix(pattern);
        let mut from = keys::escaped_prefix(prefix);
        let mut out = Vec::new();
        loop {
            let (found, next) = self.walk(&from, CHUNK, prefix)?;
            out.extend(
                found
                    .into_iter()
                    .filter(|(k, _)| crate::server::glob::matches(pattern, k))
                    .map(|(k, _)| Reply::Bulk(k)),
            );
            match next {
                Some(k) => from = k,
                None => return Ok(Reply::Array(out)),
            }
        }
    }

    /// A key from a random place in the key space: keys after a wide gap
    /// come up more often than others.
    fn randomkey(&mut self) -> Res<Reply> {
        let start: [u8; 4] = rand::random();
        for from in [&start[..], FIRST] {
            let (found, _) = self.walk(from, 1, b"")?;
            if let Some((k, _)) = found.into_iter().next() {
                return Ok(Reply::Bulk(k));
            }
        }
        Ok(Reply::Nil)
    }

    fn dbsize(&mut self) -> Res<Reply> {
        let mut from = FIRST.to_vec();
        let mut n = 0;
        loop {
            let (found, next) = self.walk(&from, CHUNK, b"")?;
            n += found.len() as i64;
            match next {
                Some(k) => from = k,
                None => return Ok(Reply::Int(n)),
            }
        }
    }

    /// FLUSHALL and FLUSHDB, SYNC or ASYNC: one write of a version floor,
    /// below which every key is dead.
    fn flushall(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        match args {
            [] => {}
            [mode] if matches!(mode.to_ascii_lowercase().as_slice(), b"sync" | b"async") => {}
            _ => return Err(syntax_error()),
        }
        let floor = self.new_version()?;
        self.write(vec![(
            keys::FLOOR.to_vec(),
            Some(floor.to_string().into_bytes()),
        )]);
        self.shared.floor.store(floor, Ordering::SeqCst);
        Ok(Reply::ok())
    }
}
