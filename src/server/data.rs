//! The data commands: strings, hashes (rows of field keys), the keyspace.

use std::sync::atomic::Ordering;

use super::command::{integer, not_integer, syntax_error, wrong_type};
use super::conn::{Conn, Outcome};
use super::keys::{self, Kind};
use super::resp::Reply;
use super::shard::CHUNK;
use super::{glob, ServerEngine};
use crate::config::Durability;

/// A command's early exit: the reply to send.
type Res<T> = Result<T, Reply>;

/// Where some of a command's arguments are: from index, to (exclusive;
/// `None`: the last), every `step`-th.
#[derive(Clone, Copy)]
struct Span(usize, Option<usize>, usize);

const NONE: Span = Span(0, Some(0), 1);

impl Span {
    fn of(self, args: &[Vec<u8>]) -> impl Iterator<Item = &[u8]> {
        let end = self.1.unwrap_or(args.len()).min(args.len());
        args[self.0.min(end)..end]
            .iter()
            .step_by(self.2)
            .map(Vec::as_slice)
    }
}

/// The keys, values and hash fields among a data command's arguments.
fn spans(name: &str) -> (Span, Span, Span) {
    let keys = match name {
        "scan" | "dbsize" => NONE,
        "mset" => Span(1, None, 2),
        "del" | "exists" | "mget" => Span(1, None, 1),
        _ => Span(1, Some(2), 1),
    };
    let values = match name {
        "set" => Span(2, Some(3), 1),
        "mset" => Span(2, None, 2),
        "hset" | "hmset" => Span(3, None, 2),
        _ => NONE,
    };
    let fields = match name {
        "hset" | "hmset" => Span(2, None, 2),
        "hget" | "hmget" | "hdel" | "hexists" => Span(2, None, 1),
        _ => NONE,
    };
    (keys, values, fields)
}

/// Engine writes: a key, and its value or `None` for a delete.
type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Redis keys found by a walk, and the engine key to go on from.
type Walked = (Vec<(Vec<u8>, Kind)>, Option<Vec<u8>>);

fn engine_err(e: impl std::fmt::Display) -> Reply {
    Reply::err(e)
}

impl<'a> Conn<'a> {
    fn engine(&self) -> &'a ServerEngine {
        &self.shared.engine
    }

    /// Refuses a key whose engine key would pass `memstore.max-key`.
    fn check_key(&self, key: &[u8]) -> Res<()> {
        let max = self.shared.opts.max_key.saturating_sub(3);
        if keys::escaped_len(key) > max {
            return Err(Reply::err(format!(
                "key of {} bytes is over the limit of {max} bytes (memstore.max-key less 3 bytes of type tag)",
                key.len()
            )));
        }
        if key.is_empty() {
            return Err(Reply::err("Stria does not store the empty key"));
        }
        Ok(())
    }

    /// Refuses a hash field whose engine key (key, type tag and field)
    /// would pass `memstore.max-key`.
    fn check_fields<'f>(&self, key: &[u8], fields: impl Iterator<Item = &'f [u8]>) -> Res<()> {
        let max = self.shared.opts.max_key.saturating_sub(3);
        let k = keys::escaped_len(key);
        for f in fields {
            if k + f.len() > max {
                return Err(Reply::err(format!(
                    "a field of {} bytes in a hash key of {} bytes is over the limit of {max} bytes for both together (memstore.max-key less 3 bytes of type tag)",
                    f.len(),
                    key.len()
                )));
            }
        }
        Ok(())
    }

    /// Engine key `engine_key` as the shard sees it (its dirty writes
    /// first); the reply will wait for what it depends on.
    fn get_raw(&mut self, engine_key: &[u8]) -> Res<Option<Vec<u8>>> {
        self.shard
            .get(engine_key, &mut self.deps)
            .map_err(engine_err)
    }

    fn string_value(&mut self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        self.get_raw(&keys::string(key))
    }

    fn is_hash(&mut self, key: &[u8]) -> Res<bool> {
        if !self.shared.hashes.load(Ordering::SeqCst) {
            return Ok(false);
        }
        Ok(self.get_raw(&keys::marker(key))?.is_some())
    }

    /// Makes it durable that a hash may exist ([`keys::HASHES`]) before
    /// the first marker is written, whatever this connection's level: a
    /// restart that forgot it would take every hash for absent. Once in a
    /// server's life, it waits for that write on the shard's thread; the
    /// flag is set in memory only then.
    fn note_hashes(&self) -> Res<()> {
        let shared = self.shared;
        if shared.hashes.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.engine()
            .write_batch(&[(keys::HASHES, Some(&b"1"[..]))], Some(Durability::Sync))
            .map_err(engine_err)?;
        shared.hashes.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Applies one command's writes on the shard at once; they go to the
    /// WAL with the turn's, and the reply waits for them at the
    /// connection's level.
    fn write(&mut self, writes: Writes) -> Res<()> {
        self.shard.write(self.durability, writes, &mut self.deps);
        Ok(())
    }

    /// As the shard sees them: [`super::shard::Shard::scan`].
    fn scan_raw(
        &mut self,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        self.shard
            .scan(from, to, limit, &mut self.deps)
            .map_err(engine_err)
    }

    /// The fields of hash `key` (names and values), up to `limit`.
    fn fields(&mut self, key: &[u8], limit: usize) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        let start = keys::fields_start(key);
        let end = keys::fields_end(key);
        let mut out = Vec::new();
        let mut from = start.clone();
        while out.len() < limit {
            let batch = self.scan_raw(&from, Some(&end), (limit - out.len()).min(CHUNK))?;
            let Some((last, _)) = batch.last() else { break };
            from = last.clone();
            from.push(0);
            let n = batch.len();
            for (k, v) in batch {
                out.push((k[start.len()..].to_vec(), v));
            }
            if n < CHUNK.min(limit) {
                break;
            }
        }
        Ok(out)
    }

    /// The deletes that remove hash `key`, marker and fields.
    fn hash_deletes(&mut self, key: &[u8]) -> Res<Writes> {
        let mut out: Writes = self
            .fields(key, usize::MAX)?
            .into_iter()
            .map(|(f, _)| (keys::field(key, &f), None))
            .collect();
        // The marker goes last, so a crash part way leaves a hash that
        // still says it exists and can be deleted again.
        out.push((keys::marker(key), None));
        Ok(out)
    }

    pub fn data(&mut self, name: &'static str, args: Vec<Vec<u8>>) -> Outcome {
        // Checked before anything is read or written: a command whose
        // writes take several batches must not apply some of them.
        let (keys, values, fields) = spans(name);
        for k in keys.of(&args) {
            if let Err(r) = self.check_key(k) {
                return Outcome::Reply(r);
            }
        }
        let max = self.shared.opts.max_value;
        if let Some(v) = values.of(&args).find(|v| v.len() > max) {
            return Outcome::Reply(Reply::err(format!(
                "a value of {} bytes is over the limit of {max} bytes (memstore.max-value)",
                v.len()
            )));
        }
        if let Some(key) = args.get(1) {
            if let Err(r) = self.check_fields(key, fields.of(&args)) {
                return Outcome::Reply(r);
            }
        }
        if name == "set" {
            return self.set(args);
        }
        let r = match name {
            "get" => self.get(&args[1]),
            "getdel" => self.getdel(&args[1]),
            "mget" => self.mget(&args[1..]),
            "mset" => self.mset(&args[1..]),
            "incr" => self.incr(&args[1], Some(1)),
            "decr" => self.incr(&args[1], Some(-1)),
            "incrby" => self.incr(&args[1], integer(&args[2])),
            "decrby" => self.incr(&args[1], integer(&args[2]).and_then(i64::checked_neg)),
            "del" => self.del(&args[1..]),
            "exists" => self.exists(&args[1..]),
            "type" => self.key_type(&args[1]),
            "scan" => self.scan(&args[1..]),
            "dbsize" => self.dbsize(),
            "hset" | "hmset" => self.hset(&args[1], &args[2..], name == "hmset"),
            "hget" => self.hget(&args[1], &args[2]),
            "hmget" => self.hmget(&args[1], &args[2..]),
            "hdel" => self.hdel(&args[1], &args[2..]),
            "hgetall" => self.hgetall(&args[1]),
            "hexists" => self.hexists(&args[1], &args[2]),
            "hlen" => self.hlen(&args[1]),
            other => Err(Reply::err(format!("command '{other}' has no handler"))),
        };
        Outcome::Reply(r.unwrap_or_else(|e| e))
    }

    fn set(&mut self, args: Vec<Vec<u8>>) -> Outcome {
        let (mut nx, mut xx, mut get) = (false, false, false);
        for opt in &args[3..] {
            match opt.to_ascii_lowercase().as_slice() {
                b"nx" if !xx => nx = true,
                b"xx" if !nx => xx = true,
                b"get" => get = true,
                b"ex" | b"px" | b"exat" | b"pxat" | b"keepttl" | b"persist" => {
                    return Outcome::Reply(Reply::err(
                        "Stria keeps no expiry: EX, PX, EXAT, PXAT and KEEPTTL are not supported",
                    ))
                }
                _ => return Outcome::Reply(syntax_error()),
            }
        }
        if !(nx || xx || get) {
            return self.plain_set(args);
        }
        let (key, value) = (&args[1], &args[2]);
        let r = (|| {
            let old = self.string_value(key)?;
            let hash = old.is_none() && self.is_hash(key)?;
            if get && hash {
                return Err(wrong_type());
            }
            let exists = old.is_some() || hash;
            let reply = if get {
                old.map_or(Reply::Nil, Reply::Bulk)
            } else {
                Reply::ok()
            };
            if (nx && exists) || (xx && !exists) {
                return Ok(if get { reply } else { Reply::Nil });
            }
            let mut writes = if hash {
                self.hash_deletes(key)?
            } else {
                vec![]
            };
            writes.push((keys::string(key), Some(value.clone())));
            self.write(writes)?;
            Ok(reply)
        })();
        Outcome::Reply(r.unwrap_or_else(|e| e))
    }

    /// SET without options: applied and queued for the turn's batch with
    /// no read of the string, its reply waiting for the write. Over a hash
    /// (once any hash was written), the row is deleted first.
    fn plain_set(&mut self, mut args: Vec<Vec<u8>>) -> Outcome {
        let key = std::mem::take(&mut args[1]);
        let value = std::mem::take(&mut args[2]);
        let r = (|| {
            let mut writes = if self.is_hash(&key)? {
                self.hash_deletes(&key)?
            } else {
                vec![]
            };
            writes.push((keys::string(&key), Some(value)));
            self.write(writes)?;
            Ok(Reply::ok())
        })();
        Outcome::Reply(r.unwrap_or_else(|e: Reply| e))
    }

    fn get(&mut self, key: &[u8]) -> Res<Reply> {
        match self.string_value(key)? {
            Some(v) => {
                self.shared.hits.fetch_add(1, Ordering::Relaxed);
                Ok(Reply::Bulk(v))
            }
            None if self.is_hash(key)? => Err(wrong_type()),
            None => {
                self.shared.misses.fetch_add(1, Ordering::Relaxed);
                Ok(Reply::Nil)
            }
        }
    }

    fn getdel(&mut self, key: &[u8]) -> Res<Reply> {
        match self.string_value(key)? {
            Some(v) => {
                self.write(vec![(keys::string(key), None)])?;
                Ok(Reply::Bulk(v))
            }
            None if self.is_hash(key)? => Err(wrong_type()),
            None => Ok(Reply::Nil),
        }
    }

    fn mget(&mut self, keys: &[Vec<u8>]) -> Res<Reply> {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            out.push(self.string_value(k)?.map_or(Reply::Nil, Reply::Bulk));
        }
        Ok(Reply::Array(out))
    }

    fn mset(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        if args.len() % 2 != 0 {
            return Err(Reply::err("wrong number of arguments for 'mset' command"));
        }
        let names: Vec<&Vec<u8>> = args.iter().step_by(2).collect();
        let mut writes = Vec::with_capacity(names.len());
        for pair in args.chunks(2) {
            if self.is_hash(&pair[0])? {
                writes.extend(self.hash_deletes(&pair[0])?);
            }
            writes.push((keys::string(&pair[0]), Some(pair[1].clone())));
        }
        self.write(writes)?;
        Ok(Reply::ok())
    }

    fn incr(&mut self, key: &[u8], by: Option<i64>) -> Res<Reply> {
        let by = by.ok_or_else(not_integer)?;
        let now = match self.string_value(key)? {
            Some(v) => integer(&v).ok_or_else(not_integer)?,
            None if self.is_hash(key)? => return Err(wrong_type()),
            None => 0,
        };
        let next = now
            .checked_add(by)
            .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        self.write(vec![(
            keys::string(key),
            Some(next.to_string().into_bytes()),
        )])?;
        Ok(Reply::Int(next))
    }

    fn del(&mut self, names: &[Vec<u8>]) -> Res<Reply> {
        let mut writes = Vec::new();
        let mut count = 0;
        let mut seen: Vec<&[u8]> = Vec::new();
        for k in names {
            if seen.contains(&k.as_slice()) {
                continue;
            }
            seen.push(k);
            if self.string_value(k)?.is_some() {
                writes.push((keys::string(k), None));
                count += 1;
            } else if self.is_hash(k)? {
                writes.extend(self.hash_deletes(k)?);
                count += 1;
            }
        }
        self.write(writes)?;
        Ok(Reply::Int(count))
    }

    fn exists(&mut self, names: &[Vec<u8>]) -> Res<Reply> {
        let mut count = 0;
        for k in names {
            if self.string_value(k)?.is_some() || self.is_hash(k)? {
                count += 1;
            }
        }
        Ok(Reply::Int(count))
    }

    fn key_type(&mut self, key: &[u8]) -> Res<Reply> {
        Ok(Reply::Status(if self.string_value(key)?.is_some() {
            "string"
        } else if self.is_hash(key)? {
            "hash"
        } else {
            "none"
        }))
    }

    /// Up to `count` Redis keys from engine key `from` on, each with its
    /// type, and where to go on (`None`: the end).
    fn walk(&mut self, from: &[u8], count: usize) -> Res<Walked> {
        let mut found = Vec::new();
        let mut from = from.to_vec();
        while found.len() < count {
            let batch = self.scan_raw(&from, None, (count - found.len()).clamp(16, CHUNK))?;
            if batch.is_empty() {
                return Ok((found, None));
            }
            let mut next = None;
            for (k, _) in &batch {
                let Some((user, kind, _)) = keys::decode(k) else {
                    // Not ours: step over it.
                    let mut after = k.clone();
                    after.push(0);
                    next = Some(after);
                    continue;
                };
                next = Some(keys::after(&user));
                let hash = kind != Kind::String;
                found.push((user, if hash { Kind::HashMarker } else { Kind::String }));
                if hash || found.len() == count {
                    // A hash's fields follow its marker: skip them all.
                    break;
                }
            }
            from = next.expect("a batch has a last key");
        }
        Ok((found, Some(from)))
    }

    fn scan(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let from = match integer(&args[0]) {
            Some(0) => vec![0],
            Some(c) if c > 0 => self
                .shared
                .cursor(c as u64)
                .ok_or_else(|| Reply::err("invalid cursor (expired or unknown)"))?,
            _ => return Err(Reply::err("invalid cursor")),
        };
        let (mut pattern, mut count, mut kind) = (None, 10usize, None);
        let mut opts = args[1..].chunks(2);
        for pair in &mut opts {
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
                b"type" => {
                    kind = Some(match value.to_ascii_lowercase().as_slice() {
                        b"string" => Some(Kind::String),
                        b"hash" => Some(Kind::HashMarker),
                        _ => None,
                    })
                }
                _ => return Err(syntax_error()),
            }
        }
        let (found, next) = self.walk(&from, count)?;
        let cursor = match next {
            Some(k) => self.shared.save_cursor(k),
            None => 0,
        };
        let keys = found
            .into_iter()
            .filter(|(k, t)| {
                pattern.as_ref().is_none_or(|p| glob::matches(p, k))
                    && kind.is_none_or(|want| want == Some(*t))
            })
            .map(|(k, _)| Reply::Bulk(k))
            .collect();
        Ok(Reply::Array(vec![
            Reply::bulk(cursor.to_string()),
            Reply::Array(keys),
        ]))
    }

    fn dbsize(&mut self) -> Res<Reply> {
        let mut from = vec![0];
        let mut n = 0;
        loop {
            let (found, next) = self.walk(&from, CHUNK)?;
            n += found.len() as i64;
            match next {
                Some(k) => from = k,
                None => return Ok(Reply::Int(n)),
            }
        }
    }

    fn hset(&mut self, key: &[u8], pairs: &[Vec<u8>], hmset: bool) -> Res<Reply> {
        if pairs.is_empty() || pairs.len() % 2 != 0 {
            let name = if hmset { "hmset" } else { "hset" };
            return Err(Reply::err(format!(
                "wrong number of arguments for '{name}' command"
            )));
        }
        if self.string_value(key)?.is_some() {
            return Err(wrong_type());
        }
        self.note_hashes()?;
        let mut writes = vec![(keys::marker(key), Some(Vec::new()))];
        let mut added = 0;
        let mut seen: Vec<&[u8]> = Vec::new();
        for pair in pairs.chunks(2) {
            let fkey = keys::field(key, &pair[0]);
            if !seen.contains(&pair[0].as_slice()) && self.get_raw(&fkey)?.is_none() {
                added += 1;
            }
            seen.push(&pair[0]);
            writes.push((fkey, Some(pair[1].clone())));
        }
        // The marker goes first: a crash part way through a wide HSET
        // leaves a hash that exists, never fields without their hash.
        self.write(writes)?;
        Ok(if hmset {
            Reply::ok()
        } else {
            Reply::Int(added)
        })
    }

    /// WRONGTYPE if `key` is a string.
    fn expect_hash(&mut self, key: &[u8]) -> Res<()> {
        if self.string_value(key)?.is_some() {
            return Err(wrong_type());
        }
        Ok(())
    }

    fn hget(&mut self, key: &[u8], field: &[u8]) -> Res<Reply> {
        match self.get_raw(&keys::field(key, field))? {
            Some(v) => Ok(Reply::Bulk(v)),
            None => {
                self.expect_hash(key)?;
                Ok(Reply::Nil)
            }
        }
    }

    fn hmget(&mut self, key: &[u8], fields: &[Vec<u8>]) -> Res<Reply> {
        self.expect_hash(key)?;
        let mut out = Vec::with_capacity(fields.len());
        for f in fields {
            out.push(
                self.get_raw(&keys::field(key, f))?
                    .map_or(Reply::Nil, Reply::Bulk),
            );
        }
        Ok(Reply::Array(out))
    }

    fn hdel(&mut self, key: &[u8], fields: &[Vec<u8>]) -> Res<Reply> {
        self.expect_hash(key)?;
        let mut writes = Vec::new();
        let mut seen: Vec<&[u8]> = Vec::new();
        for f in fields {
            if seen.contains(&f.as_slice()) {
                continue;
            }
            seen.push(f);
            let fkey = keys::field(key, f);
            if self.get_raw(&fkey)?.is_some() {
                writes.push((fkey, None));
            }
        }
        let removed = writes.len() as i64;
        if removed == 0 {
            return Ok(Reply::Int(0));
        }
        self.write(writes)?;
        if self.fields(key, 1)?.is_empty() {
            self.write(vec![(keys::marker(key), None)])?;
        }
        Ok(Reply::Int(removed))
    }

    fn hgetall(&mut self, key: &[u8]) -> Res<Reply> {
        self.expect_hash(key)?;
        Ok(Reply::Map(
            self.fields(key, usize::MAX)?
                .into_iter()
                .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                .collect(),
        ))
    }

    fn hexists(&mut self, key: &[u8], field: &[u8]) -> Res<Reply> {
        if self.get_raw(&keys::field(key, field))?.is_some() {
            return Ok(Reply::Int(1));
        }
        self.expect_hash(key)?;
        Ok(Reply::Int(0))
    }

    fn hlen(&mut self, key: &[u8]) -> Res<Reply> {
        self.expect_hash(key)?;
        Ok(Reply::Int(self.fields(key, usize::MAX)?.len() as i64))
    }
}
