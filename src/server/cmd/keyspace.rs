//! The keyspace: DEL, EXISTS, TYPE, RENAME, SCAN, KEYS, RANDOMKEY, DBSIZE,
//! FLUSHALL. Deleting a key of any type is one write of its metadata.

use crate::server::notify::GENERIC;
use std::sync::atomic::Ordering;

use super::{integer, not_integer, scan_options, syntax_error, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{self, Part};
use crate::server::meta::{Meta, Type};
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

/// A key a walk found: its name, type and whether it has an expiry.
type Found = (Vec<u8>, Type, bool);

/// Redis keys a walk found, and the engine key to go on from (`None`:
/// the end).
type Walked = (Vec<Found>, Option<Vec<u8>>);

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
/// Keys RANDOMKEY picks among.
const RANDOM_AMONG: usize = 16;

impl<'a> Conn<'a> {
    pub(super) fn keyspace(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "del" | "unlink" => self.del(&args[1..]),
            "exists" | "touch" => self.exists(&args[1..]),
            "type" => self.key_type(&args[1]),
            "rename" | "renamenx" => self.rename(name, &args[1], &args[2]),
            "copy" => self.copy(args),
            "object" => self.object(args),
            "memory" => self.memory(args),
            "scan" => self.scan(&args[1..]),
            "keys" => self.keys(&args[1]),
            "randomkey" => self.randomkey(),
            "dbsize" => self.dbsize(),
            "flushall" | "flushdb" => self.flushall(&args[1..]),
            "sort" => self.sort(&args[1..], false),
            "dump" => self.dump(&args[1]),
            "restore" => self.restore(args),
            "migrate" => self.migrate(args),
            "sort_ro" => self.sort(&args[1..], true),
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
        let gone: Vec<Vec<u8>> = writes
            .iter()
            .filter_map(|(k, _)| keys::decode(k).map(|(key, _)| key))
            .collect();
        self.write(writes);
        for k in gone {
            self.notify(GENERIC, "del", &k);
        }
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
        let mut writes = self.copy_elements(from, &m, to, next.version)?;
        self.put(to, &next, None, &mut writes);
        writes.push((keys::meta(from), None));
        self.write(writes);
        self.notify(GENERIC, "rename_from", from);
        self.notify(GENERIC, "rename_to", to);
        Ok(if nx { Reply::Int(1) } else { Reply::ok() })
    }

    /// The writes that copy the elements of `from` (`m`) to `to` at
    /// `version`.
    fn copy_elements(&mut self, from: &[u8], m: &Meta, to: &[u8], version: u64) -> Res<Writes> {
        let mut writes: Writes = Vec::new();
        for (rest, v) in self.sub_keys(from, m)? {
            // The tag and the element, under the new name and version.
            self.check_element(to, &rest[1..], "element")?;
            writes.push((keys::element(to, version, rest[0], &rest[1..]), Some(v)));
        }
        Ok(writes)
    }

    /// COPY: a new version under the new name, the expiry kept.
    fn copy(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (from, to) = (&args[1], &args[2]);
        let mut replace = false;
        let mut i = 3;
        while i < args.len() {
            match args[i].to_ascii_lowercase().as_slice() {
                b"replace" => replace = true,
                b"db" if i + 1 < args.len() => {
                    match integer(&args[i + 1]) {
                        Some(0) => {}
                        Some(_) => return Err(Reply::err("DB index is out of range")),
                        None => return Err(not_integer()),
                    }
                    i += 1;
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        if from == to {
            return Err(Reply::err("source and destination objects are the same"));
        }
        let Some(m) = self.lookup(from)? else {
            return Ok(Reply::Int(0));
        };
        if !replace && self.lookup(to)?.is_some() {
            return Ok(Reply::Int(0));
        }
        let mut next = m.clone();
        next.version = self.new_version()?;
        let mut writes = self.copy_elements(from, &m, to, next.version)?;
        self.put(to, &next, None, &mut writes);
        self.write(writes);
        self.notify(GENERIC, "copy_to", to);
        Ok(Reply::Int(1))
    }

    /// OBJECT: Stria's encoding names; IDLETIME from the shard's access
    /// times (see `shard::access`); no frequencies are kept, so FREQ is 0.
    fn object(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let sub = args[1].to_ascii_lowercase();
        if sub == b"help" {
            return Ok(Reply::Array(
                [
                    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "ENCODING <key>",
                    "    Return the kind of internal representation used in order to store the value",
                    "    associated with a <key>.",
                    "FREQ <key>",
                    "    Return the access frequency index of the <key> (Stria keeps none: 0).",
                    "IDLETIME <key>",
                    "    Return the seconds since the <key> was last read or written (at",
                    "    most since the server started).",
                    "REFCOUNT <key>",
                    "    Return the number of references of the value associated with the specified",
                    "    <key> (1).",
                    "HELP",
                    "    Print this help.",
                ]
                .iter()
                .map(|l| Reply::Status(l))
                .collect(),
            ));
        }
        let [_, _, key] = args else {
            return Err(Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try OBJECT HELP.",
                String::from_utf8_lossy(&args[1])
            )));
        };
        self.check_key(key)?;
        let Some(m) = self.lookup(key)? else {
            return Ok(Reply::Nil);
        };
        Ok(match sub.as_slice() {
            b"encoding" => Reply::bulk(match m.kind {
                Type::String => "inline",
                Type::Hash => "fields",
                Type::List => "positions",
                Type::Set => "members",
                Type::ZSet => "scored",
                Type::Stream => "entries",
            }),
            b"freq" => Reply::Int(0),
            b"idletime" => Reply::Int((self.shard.access().idle_ms(key) / 1000) as i64),
            b"refcount" => Reply::Int(1),
            _ => {
                return Err(Reply::err(format!(
                    "unknown subcommand '{}'. Try OBJECT HELP.",
                    String::from_utf8_lossy(&args[1])
                )))
            }
        })
    }

    /// MEMORY USAGE: the bytes a key's engine entries take, its elements
    /// estimated from a sample (5 by default, as Redis; `SAMPLES 0`: all).
    fn memory(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let sub = args[1].to_ascii_lowercase();
        if sub == b"help" {
            return Ok(Reply::Array(vec![
                Reply::Status("MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
                Reply::Status("USAGE <key> [SAMPLES <count>]"),
                Reply::Status("    Return memory in bytes used by <key> and its value."),
                Reply::Status("HELP"),
                Reply::Status("    Print this help."),
            ]));
        }
        if sub != b"usage" || args.len() < 3 {
            return Err(Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try MEMORY HELP.",
                String::from_utf8_lossy(&args[1])
            )));
        }
        let key = &args[2];
        let samples = match &args[3..] {
            [] => 5,
            [o, n] if o.eq_ignore_ascii_case(b"samples") => match integer(n) {
                Some(0) => usize::MAX,
                Some(n) if n > 0 => n as usize,
                _ => return Err(not_integer()),
            },
            _ => return Err(syntax_error()),
        };
        self.check_key(key)?;
        let Some(m) = self.lookup(key)? else {
            return Ok(Reply::Nil);
        };
        let head = keys::meta(key).len() + m.encode().len();
        if m.kind == Type::String {
            return Ok(Reply::Int(head as i64));
        }
        let (start, end) = Self::readable(key, &m);
        let got = self.scan_raw(&start, Some(&end), samples.min(CHUNK))?;
        let per = if got.is_empty() {
            0
        } else {
            got.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() / got.len()
        };
        // Sorted sets keep each member twice.
        let copies = if m.kind == Type::ZSet { 2 } else { 1 };
        Ok(Reply::Int(
            (head + per * copies * m.count() as usize) as i64,
        ))
    }

    /// Whether metadata `raw` is of a live key: its type and whether it
    /// has an expiry.
    fn live(&mut self, raw: Vec<u8>) -> Res<Option<(Type, bool)>> {
        let Some(m) = Meta::decode(raw) else {
            return Ok(None);
        };
        if m.version < self.shared.floor.load(Ordering::SeqCst) {
            self.get_raw(keys::FLOOR)?;
            return Ok(None);
        }
        let expired = m.expire_at.is_some() && m.expired(self.now());
        Ok((!expired).then_some((m.kind, m.expire_at.is_some())))
    }

    /// Up to `count` live Redis keys from engine key `from` on, with their
    /// types, stopping at the first key without `prefix`.
    ///
    /// A key's elements follow its metadata. Within a batch they are
    /// stepped over; a batch that ends in them is followed by one seek
    /// past the key. Each seek is a new scan of every memstore and block
    /// file, so seeking past every collection (or every dead key's
    /// elements) made DBSIZE of 92,000 keys take 3.6 s, and 13 s once
    /// FLUSHALL had left them all dead.
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
            // The Redis key whose metadata (or dead elements) were seen.
            let mut seen: Option<Vec<u8>> = None;
            for (k, v) in batch {
                let Some((user, part)) = keys::decode(&k) else {
                    // Not a Redis key's: step over it.
                    let mut after = k;
                    after.push(0);
                    next = Some(after);
                    continue;
                };
                if seen.as_deref() == Some(&user[..]) {
                    // One of its elements.
                    continue;
                }
                if !user.starts_with(prefix) {
                    return Ok((found, None));
                }
                next = Some(keys::after(&user));
                if part == Part::Meta {
                    if let Some((t, expires)) = self.live(v)? {
                        found.push((user.clone(), t, expires));
                    }
                }
                // Otherwise elements of a dead version: step over the key.
                seen = Some(user);
                if found.len() == count {
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
        let mut kind = None;
        let (pattern, count) = scan_options(&args[1..], Some(&mut kind))?;
        let (found, next) = self.walk(&from, count, b"")?;
        let cursor = match next {
            Some(k) => self.shared.save_cursor(k),
            None => 0,
        };
        let keys = found
            .into_iter()
            .filter(|(k, t, _)| {
                pattern
                    .as_ref()
                    .is_none_or(|p| crate::server::glob::matches(p, k))
                    && kind.is_none_or(|want| want == Some(*t))
            })
            .map(|(k, ..)| Reply::Bulk(k))
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
                    .filter(|(k, ..)| crate::server::glob::matches(pattern, k))
                    .map(|(k, ..)| Reply::Bulk(k)),
            );
            match next {
                Some(k) => from = k,
                None => return Ok(Reply::Array(out)),
            }
        }
    }

    /// A key from a random place in the key space: keys after a wide gap
    /// come up more often than others.
    /// A key at random: one of the [`RANDOM_AMONG`] keys from a random
    /// point on (wrapping to the first), so that of a few keys each is
    /// about as likely, not only the one after the widest gap.
    fn randomkey(&mut self) -> Res<Reply> {
        let start: [u8; 4] = rand::random();
        let (mut keys, _) = self.walk(&start, RANDOM_AMONG, b"")?;
        if keys.len() < RANDOM_AMONG {
            let (more, _) = self.walk(FIRST, RANDOM_AMONG - keys.len(), b"")?;
            for k in more {
                if !keys.iter().any(|h| h.0 == k.0) {
                    keys.push(k);
                }
            }
        }
        if keys.is_empty() {
            return Ok(Reply::Nil);
        }
        let i = rand::random_range(0..keys.len());
        Ok(Reply::Bulk(keys.swap_remove(i).0))
    }

    /// The live keys, and how many of them have an expiry: a walk of
    /// the whole key space.
    fn count_keys(&mut self) -> Res<(u64, u64)> {
        let mut from = FIRST.to_vec();
        let (mut n, mut expires) = (0, 0);
        loop {
            let (found, next) = self.walk(&from, CHUNK, b"")?;
            n += found.len() as u64;
            expires += found.iter().filter(|f| f.2).count() as u64;
            match next {
                Some(k) => from = k,
                None => return Ok((n, expires)),
            }
        }
    }

    fn dbsize(&mut self) -> Res<Reply> {
        Ok(Reply::Int(self.count_keys()?.0 as i64))
    }

    /// INFO's keyspace section (it reads every key, as DBSIZE).
    pub fn keyspace_section(&mut self) -> String {
        self.now = 0;
        let mut out = format!(
            "# Keyspace\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n",
            self.shared.hits.load(Ordering::Relaxed),
            self.shared.misses.load(Ordering::Relaxed)
        );
        match self.count_keys() {
            Ok((0, _)) => {}
            Ok((keys, expires)) => {
                out.push_str(&format!("db0:keys={keys},expires={expires},avg_ttl=0\r\n"))
            }
            Err(e) => tracing::warn!("INFO keyspace: {e:?}"),
        }
        out
    }

    /// FLUSHALL and FLUSHDB, SYNC or ASYNC: one write of a version floor,
    /// below which every key is dead.
    fn flushall(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        match args {
            [] => {}
            [mode] if matches!(mode.to_ascii_lowercase().as_slice(), b"sync" | b"async") => {}
            _ => return Err(syntax_error()),
        }
        self.touch_watched_existing()?;
        let floor = self.new_version()?;
        self.write(vec![(
            keys::FLOOR.to_vec(),
            Some(floor.to_string().into_bytes()),
        )]);
        self.shared.floor.store(floor, Ordering::SeqCst);
        self.shard.blocking().ready_all();
        self.shard.tracking().flush(&self.deps);
        Ok(Reply::ok())
    }
}
