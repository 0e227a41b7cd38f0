//! The data commands: strings, hashes (rows of field keys), the keyspace.

use std::sync::atomic::Ordering;

use super::command::{integer, not_integer, syntax_error, wrong_type};
use super::conn::{Conn, Outcome};
use super::keys::{self, Kind};
use super::resp::Reply;
use super::{glob, ServerEngine};
use crate::config::Durability;

/// Engine keys deleted or written per batch when a command touches many
/// (a wide hash's fields): a batch must fit in one WAL batch.
const CHUNK: usize = 1024;

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

    fn get_raw(&self, engine_key: &[u8]) -> Res<Option<Vec<u8>>> {
        self.engine().get(engine_key).map_err(engine_err)
    }

    fn string_value(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        self.get_raw(&keys::string(key))
    }

    fn is_hash(&self, key: &[u8]) -> Res<bool> {
        if !self.shared.hashes.load(Ordering::SeqCst) {
            return Ok(false);
        }
        Ok(self.get_raw(&keys::marker(key))?.is_some())
    }

    /// Makes it durable that a hash may exist ([`keys::HASHES`]) before
    /// the first marker is written, whatever this connection's level: a
    /// restart that forgot it would take every hash for absent. The flag
    /// is set in memory only then, under the caller's stripe.
    fn note_hashes(&self) -> Res<()> {
        let shared = self.shared;
        if shared.hashes.load(Ordering::SeqCst) {
            return Ok(());
        }
        let _one = shared.hashes_lock.lock().unwrap_or_else(|p| p.into_inner());
        if shared.hashes.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.engine()
            .write_batch(&[(keys::HASHES, Some(&b"1"[..]))], Some(Durability::Sync))
            .map_err(engine_err)?;
        shared.hashes.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn write(&self, writes: &[(Vec<u8>, Option<Vec<u8>>)]) -> Res<()> {
        for chunk in writes.chunks(CHUNK) {
            let batch: Vec<(&[u8], Option<&[u8]>)> = chunk
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            self.engine()
                .write_batch(&batch, Some(self.durability))
                .map_err(engine_err)?;
        }
        Ok(())
    }

    /// The fields of hash `key` (names and values), up to `limit`.
    fn fields(&self, key: &[u8], limit: usize) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        let start = keys::fields_start(key);
        let end = keys::fields_end(key);
        let mut out = Vec::new();
        let mut from = start.clone();
        while out.len() < limit {
            let batch = self
                .engine()
                .scan(&from, Some(&end), (limit - out.len()).min(CHUNK))
                .map_err(engine_err)?;
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
    fn hash_deletes(&self, key: &[u8]) -> Res<Writes> {
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

    pub fn data(&mut self, name: &'static str, args: Vec<Vec<u8>>) -> Outcome<'a> {
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

    fn set(&mut self, args: Vec<Vec<u8>>) -> Outcome<'a> {
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
        let _x = self.shared.stripes.exclusive(&[key]);
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
            self.write(&writes)?;
            Ok(reply)
        })();
        Outcome::Reply(r.unwrap_or_else(|e| e))
    }

    /// SET without options: submitted, and its reply waits for the
    /// acknowledgement while the connection goes on with its pipeline. On
    /// an event loop it never waits for its stripe: a held stripe puts it
    /// off, and a SET over a hash goes to a worker.
    fn plain_set(&mut self, mut args: Vec<Vec<u8>>) -> Outcome<'a> {
        let shared = self.shared;
        let engine = &shared.engine;
        let level = self.durability;
        enum Why {
            Hash,
            Fail(Reply),
        }
        // Read under the stripe: an HSET of this key sets the flag before
        // it lets the stripe go.
        let not_hash = |key: &[u8]| {
            if !shared.hashes.load(Ordering::SeqCst) {
                return Ok(());
            }
            match engine.get(&keys::marker(key)) {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err(Why::Hash),
                Err(e) => Err(Why::Fail(engine_err(e))),
            }
        };
        if !self.on_worker() {
            // The stripe is marked now and the write submitted with the
            // rest of the turn's: a read-modify-write waits for the mark
            // either way.
            return match shared.stripes.try_plain(&args[1], || not_hash(&args[1])) {
                Ok(Some(((), mark))) => {
                    let value = std::mem::take(&mut args[2]);
                    let batch = self.queue_write(keys::string(&args[1]), value);
                    Outcome::Queued(batch, mark)
                }
                Ok(None) => Outcome::Defer(args),
                Err(Why::Fail(r)) => Outcome::Reply(r),
                Err(Why::Hash) => Outcome::Job("set", args),
            };
        }
        let (key, value) = (&args[1], &args[2]);
        let ekey = keys::string(key);
        // A worker has no writes of its own in flight to settle first.
        let submitted = shared.stripes.plain(
            key,
            || {},
            || {
                not_hash(key)?;
                engine
                    .submit(&[(&ekey, Some(value))], Some(level))
                    .map_err(|e| Why::Fail(engine_err(e)))
            },
        );
        match submitted {
            Ok((pending, mark)) => Outcome::Write {
                pending,
                mark,
                ok: Reply::ok(),
            },
            Err(Why::Fail(r)) => Outcome::Reply(r),
            Err(Why::Hash) => {
                // Over a hash: delete its row and write, both under the stripe.
                let _x = shared.stripes.exclusive(&[key]);
                let r = (|| {
                    let mut writes = if self.is_hash(key)? {
                        self.hash_deletes(key)?
                    } else {
                        vec![]
                    };
                    writes.push((ekey.clone(), Some(value.to_vec())));
                    self.write(&writes)?;
                    Ok(Reply::ok())
                })();
                Outcome::Reply(r.unwrap_or_else(|e: Reply| e))
            }
        }
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
        let _x = self.shared.stripes.exclusive(&[key]);
        match self.string_value(key)? {
            Some(v) => {
                self.write(&[(keys::string(key), None)])?;
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
        let _x = self.shared.stripes.exclusive(&names);
        let mut writes = Vec::with_capacity(names.len());
        for pair in args.chunks(2) {
            if self.is_hash(&pair[0])? {
                writes.extend(self.hash_deletes(&pair[0])?);
            }
            writes.push((keys::string(&pair[0]), Some(pair[1].clone())));
        }
        self.write(&writes)?;
        Ok(Reply::ok())
    }

    fn incr(&mut self, key: &[u8], by: Option<i64>) -> Res<Reply> {
        let by = by.ok_or_else(not_integer)?;
        let _x = self.shared.stripes.exclusive(&[key]);
        let now = match self.string_value(key)? {
            Some(v) => integer(&v).ok_or_else(not_integer)?,
            None if self.is_hash(key)? => return Err(wrong_type()),
            None => 0,
        };
        let next = now
            .checked_add(by)
            .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        self.write(&[(keys::string(key), Some(next.to_string().into_bytes()))])?;
        Ok(Reply::Int(next))
    }

    fn del(&mut self, names: &[Vec<u8>]) -> Res<Reply> {
        let _x = self.shared.stripes.exclusive(names);
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
        self.write(&writes)?;
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
    fn walk(&self, from: &[u8], count: usize) -> Res<Walked> {
        let mut found = Vec::new();
        let mut from = from.to_vec();
        while found.len() < count {
            let batch = self
                .engine()
                .scan(&from, None, (count - found.len()).clamp(16, CHUNK))
                .map_err(engine_err)?;
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
        let _x = self.shared.stripes.exclusive(&[key]);
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
        self.write(&writes)?;
        Ok(if hmset {
            Reply::ok()
        } else {
            Reply::Int(added)
        })
    }

    /// WRONGTYPE if `key` is a string.
    fn expect_hash(&self, key: &[u8]) -> Res<()> {
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
        let _x = self.shared.stripes.exclusive(&[key]);
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
        self.write(&writes)?;
        if self.fields(key, 1)?.is_empty() {
            self.write(&[(keys::marker(key), None)])?;
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
