//! The data commands, one group a file, and what they share: a key's
//! metadata as commands see it (expired keys and keys below the FLUSHALL
//! floor are absent), the limits on keys and values, and the one write
//! each command makes.
//!
//! A command reads what it needs, then writes everything it changes in
//! one [`Conn::write`] (one WAL group, all-or-nothing after a crash) or
//! fails before writing anything.

mod bitfield;
mod bits;
mod blocking;
#[cfg(test)]
mod crash_tests;
mod dump;
mod expire;
mod geo;
mod geohash;
mod hashes;
mod keyspace;
mod lcs;
mod lists;
mod migrate;
mod rdb;
mod rdb_stream;
mod sets;
mod sort;
mod stream_claims;
mod stream_entry;
mod stream_groups;
mod stream_info;
mod streams;
mod strings;
#[cfg(test)]
pub(crate) mod tests;
mod zset;
mod zset_combine;
mod zset_range;

use std::sync::atomic::Ordering;

use super::command::show;
use super::conn::{Conn, Outcome};
use super::keys;
use super::meta::{Meta, Type, MAX_HEADER};
use super::notify;
use super::resp::Reply;
use super::shard::access;
use super::shard::CHUNK;
use super::table::Spec;
use super::ServerEngine;

/// A command's early exit: the reply to send.
pub type Res<T> = Result<T, Reply>;

/// Engine writes: a key, and its value or `None` for a delete.
pub type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

pub fn wrong_type() -> Reply {
    Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

pub fn syntax_error() -> Reply {
    Reply::err("syntax error")
}

pub fn not_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

pub fn not_float() -> Reply {
    Reply::err("value is not a valid float")
}

/// An integer argument as Redis reads one.
pub fn integer(arg: &[u8]) -> Option<i64> {
    // The same reading as a request's lengths (Redis's string2ll).
    crate::server::resp::number(arg)
}

/// A float argument as Redis reads one (`inf` and `-inf` too, never NaN).
pub fn float(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let f: f64 = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        l if l.contains("inf") || l.contains("nan") => return None,
        _ => s.parse().ok()?,
    };
    (!f.is_nan()).then_some(f)
}

pub use super::resp::format_double as format_float;
pub use blocking::Blocked;

/// The writes that keep the expiry index in step when `key`'s expiry goes
/// from `old` (as far as the command knows) to `new`: an entry for the
/// new time, the old one deleted. An entry a command did not know of
/// (a plain SET reads nothing) stays until it falls due, and is then
/// dropped: at most one such entry a key.
pub fn index_expiry(key: &[u8], new: Option<u64>, old: Option<u64>, writes: &mut Writes) {
    if new == old {
        return;
    }
    if let Some(o) = old {
        writes.push((keys::expiry(o, key), None));
    }
    if let Some(at) = new {
        writes.push((keys::expiry(at, key), Some(Vec::new())));
    }
}

/// The reply to a pop or random pick of a key that does not exist: an
/// empty array when a count was given, a nil when not.
pub fn absent(counted: bool) -> Reply {
    if counted {
        Reply::Array(vec![])
    } else {
        Reply::Nil
    }
}

/// Items picked at random as HRANDFIELD and ZRANDMEMBER pick them: one
/// for no count, distinct ones (at most all) for a count from 0 up, that
/// many with repeats for a negative count.
pub fn random_pick<T: Clone>(mut all: Vec<T>, count: Option<i64>) -> Vec<T> {
    use rand::seq::{IndexedRandom, SliceRandom};
    let mut rng = rand::rng();
    match count {
        None => all.choose(&mut rng).cloned().into_iter().collect(),
        Some(c) if c >= 0 => {
            all.shuffle(&mut rng);
            all.truncate(c as usize);
            all
        }
        Some(c) => (0..c.unsigned_abs())
            .filter_map(|_| all.choose(&mut rng).cloned())
            .collect(),
    }
}

/// What LMPOP and ZMPOP name: the keys, where to pop from, how many.
pub type Mpop<'x> = (&'x [Vec<u8>], &'x [u8], u64);

/// The keys and COUNT of LMPOP and ZMPOP (`numkeys key ... <where> [COUNT
/// n]`), and the argument naming where to pop from.
pub fn mpop_args(args: &[Vec<u8>]) -> Res<Mpop<'_>> {
    let n = match integer(&args[0]) {
        Some(n) if n > 0 => n as usize,
        _ => return Err(Reply::err("numkeys should be greater than 0")),
    };
    if args.len() < n + 2 {
        return Err(syntax_error());
    }
    let count = match &args[n + 2..] {
        [] => 1,
        [opt, v] if opt.eq_ignore_ascii_case(b"count") => match integer(v) {
            Some(c) if c > 0 => c as u64,
            _ => return Err(Reply::err("count should be greater than 0")),
        },
        _ => return Err(syntax_error()),
    };
    Ok((&args[1..=n], &args[n + 1], count))
}

/// SINTERCARD's and ZINTERCARD's arguments after `numkeys` (`n`, read
/// already): the keys, and LIMIT (0: none).
fn intercard_args(args: &[Vec<u8>], n: usize) -> Res<(&[Vec<u8>], usize)> {
    if args.len() < n + 1 {
        return Err(Reply::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let limit = match &args[n + 1..] {
        [] => 0,
        [opt, v] if opt.eq_ignore_ascii_case(b"limit") => match integer(v) {
            Some(l) if l >= 0 => l as usize,
            _ => return Err(Reply::err("LIMIT can't be negative")),
        },
        _ => return Err(syntax_error()),
    };
    Ok((&args[1..=n], limit))
}

/// SCAN's and SSCAN's `MATCH p` and `COUNT n` (10 by default), after the
/// cursor; `TYPE t` too where `kind` is given.
pub fn scan_options(
    args: &[Vec<u8>],
    mut kind: Option<&mut Option<Option<Type>>>,
) -> Res<(Option<Vec<u8>>, usize)> {
    let (mut pattern, mut count) = (None, 10usize);
    for pair in args.chunks(2) {
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
            b"type" if kind.is_some() => {
                if let Some(k) = kind.as_mut() {
                    **k = Some(Type::named(value));
                }
            }
            _ => return Err(syntax_error()),
        }
    }
    Ok((pattern, count))
}

fn corrupt(key: &[u8]) -> Reply {
    Reply::err(format!(
        "the metadata of key '{}' is not in a form this server writes",
        show(key)
    ))
}

impl<'a> Conn<'a> {
    /// The time the command judges expiry by, read from the clock the
    /// first time the command asks (most never do).
    fn now(&mut self) -> u64 {
        if self.now == 0 {
            self.now = self.shared.clock.now();
        }
        self.now
    }

    fn engine(&self) -> &'a ServerEngine {
        &self.shared.engine
    }

    /// Refuses a key whose metadata key would pass `memstore.max-key`
    /// (with room for the sub-keys of its elements).
    fn check_key(&self, key: &[u8]) -> Res<()> {
        let max = self.shared.opts.max_key.saturating_sub(keys::SUB_OVERHEAD);
        if keys::escaped_len(key) > max {
            return Err(Reply::err(format!(
                "key of {} bytes is over the limit of {max} bytes (memstore.max-key less {} bytes of encoding)",
                key.len(),
                keys::SUB_OVERHEAD
            )));
        }
        if key.is_empty() {
            return Err(Reply::err("Stria does not store the empty key"));
        }
        Ok(())
    }

    /// Refuses an element (`what`: a hash's field) whose sub-key would
    /// pass `memstore.max-key`.
    fn check_element(&self, key: &[u8], elem: &[u8], what: &str) -> Res<()> {
        let max = self.shared.opts.max_key.saturating_sub(keys::SUB_OVERHEAD);
        if keys::escaped_len(key) + elem.len() > max {
            return Err(Reply::err(format!(
                "a {what} of {} bytes in a key of {} bytes is over the limit of {max} bytes for both together (memstore.max-key less {} bytes of encoding)",
                elem.len(),
                key.len(),
                keys::SUB_OVERHEAD
            )));
        }
        Ok(())
    }

    /// Refuses an element's value over `memstore.max-value`.
    fn check_value(&self, len: usize) -> Res<()> {
        let max = self.shared.opts.max_value;
        if len > max {
            return Err(Reply::err(format!(
                "a value of {len} bytes is over the limit of {max} bytes (memstore.max-value)"
            )));
        }
        Ok(())
    }

    /// Refuses a string over `memstore.max-value` less its metadata.
    fn check_string(&self, len: usize) -> Res<()> {
        let max = self.shared.opts.max_value.saturating_sub(MAX_HEADER);
        if len > max {
            return Err(Reply::err(format!(
                "a value of {len} bytes is over the limit of {max} bytes (memstore.max-value less {MAX_HEADER} bytes of metadata)"
            )));
        }
        Ok(())
    }

    /// Engine key `engine_key` as the shard sees it (its dirty writes
    /// first); the reply will wait for what it depends on.
    fn get_raw(&mut self, engine_key: &[u8]) -> Res<Option<Vec<u8>>> {
        self.shard
            .get(engine_key, &mut self.deps)
            .map_err(Reply::err)
    }

    /// Whether metadata `m` is alive now; when it has expired, its key is
    /// deleted (the reply waits for the delete, so no crash brings back
    /// a key a client was told is gone).
    fn alive(&mut self, key: &[u8], m: &Meta) -> Res<bool> {
        if m.version < self.shared.floor.load(Ordering::SeqCst) {
            // Dead by a FLUSHALL: the reply depends on it.
            self.get_raw(keys::FLOOR)?;
            return Ok(false);
        }
        if m.expire_at.is_some() && m.expired(self.now()) {
            let mut writes = Vec::new();
            index_expiry(key, None, m.expire_at, &mut writes);
            writes.push((self.meta_key(key), None));
            self.write(writes);
            self.shared.metrics.key_expired();
            self.notify(notify::EXPIRED, "expired", key);
            return Ok(false);
        }
        Ok(true)
    }

    /// `key`'s metadata, `None` when the key does not exist.
    pub(super) fn lookup(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        self.looked_up(key);
        let meta_key = keys::meta(key);
        let raw = self.shard.get_shared(&meta_key, &mut self.deps);
        // A write of the key's metadata takes it (`meta_key`).
        self.meta_key.set(Some(meta_key));
        let raw = raw.map_err(Reply::err)?;
        let Some(raw) = raw else {
            self.missed(key);
            return Ok(None);
        };
        let m = Meta::decode_shared(raw).ok_or_else(|| corrupt(key))?;
        if self.alive(key, &m)? {
            if self.touching {
                self.shard.access().touch(key);
            }
            Ok(Some(m))
        } else {
            self.missed(key);
            Ok(None)
        }
    }

    /// `key`'s metadata key: the one its lookup made, if it was the last
    /// made, or a new one. A read-modify-write escapes its key once.
    fn meta_key(&self, key: &[u8]) -> Vec<u8> {
        match self.meta_key.take() {
            Some(k) if keys::is_meta_of(&k, key) => k,
            _ => keys::meta(key),
        }
    }

    /// A read command found `key` missing: its `keymiss` event.
    fn missed(&mut self, key: &[u8]) {
        if self.reading {
            self.notify(notify::KEY_MISS, "keymiss", key);
        }
    }

    /// A read command looks `key` up: a tracking connection remembers it.
    fn looked_up(&self, key: &[u8]) {
        if self.reading {
            self.track_read(key);
        }
    }

    /// `key`'s metadata if it is of type `want`; WRONGTYPE if of another.
    fn typed(&mut self, key: &[u8], want: Type) -> Res<Option<Meta>> {
        match self.lookup(key)? {
            Some(m) if m.kind != want => Err(wrong_type()),
            m => Ok(m),
        }
    }

    /// A version no key has had.
    fn new_version(&self) -> Res<u64> {
        self.shared.versions.next(self.engine()).map_err(Reply::err)
    }

    /// The writes that make `m` `key`'s metadata; `old` is its metadata
    /// before, if the command read it (see [`index_expiry`]).
    fn put(&self, key: &[u8], m: &Meta, old: Option<&Meta>, writes: &mut Writes) {
        // A write is an access, as a read is.
        self.shard.access().touch(key);
        index_expiry(key, m.expire_at, old.and_then(|o| o.expire_at), writes);
        writes.push((self.meta_key(key), Some(m.encode())));
    }

    /// [`Conn::put`] of metadata that may be `old` unchanged, after
    /// writes of the key's elements (fields or scores overwritten, none
    /// added): then those writes alone say the key was written (WATCH,
    /// blocked clients and tracking go by the Redis key of every engine
    /// key written), and the metadata is not written again.
    fn put_changed(&self, key: &[u8], m: &Meta, old: Option<&Meta>, writes: &mut Writes) {
        if old == Some(m) && !writes.is_empty() {
            self.shard.access().touch(key);
            return;
        }
        self.put(key, m, old, writes);
    }

    /// Applies one command's writes on the shard at once; they go to the
    /// WAL with the turn's, and the reply waits for them at the
    /// connection's level.
    fn write(&mut self, writes: Writes) {
        if writes.is_empty() {
            return;
        }
        self.shared.metrics.changed();
        let created = self.created(&writes);
        self.shard.note_writes(&writes);
        let tracked = self.shard.tracking().keys_of(&writes);
        self.shard.write(self.durability, writes, &mut self.deps);
        if !tracked.is_empty() {
            let writer = Some(self.token);
            self.shard
                .tracking()
                .invalidate(tracked, writer, &self.deps);
        }
        for key in created {
            self.notify(notify::NEW, "new", &key);
        }
    }

    /// The events of removing `n` elements of collection `m`: `event` of
    /// `class`, and `del` when none are left.
    fn notify_removed(&mut self, class: u32, key: &[u8], event: &str, m: &Meta, n: usize) {
        self.notify(class, event, key);
        if m.count() <= n as u64 {
            self.notify(notify::GENERIC, "del", key);
        }
    }

    /// Writes keys of the server's own (function libraries) at the
    /// connection's level; the reply waits for them.
    pub(crate) fn write_own(&mut self, writes: Writes) {
        self.write(writes);
    }

    /// Engine keys and values from `from` to `to`, up to `limit`, as the
    /// shard sees them.
    fn scan_raw(
        &mut self,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        self.shard
            .scan(from, to, limit, &mut self.deps)
            .map_err(Reply::err)
    }

    /// The elements of `key` at `version` with `tag` (without the prefix
    /// of their sub-keys) and their values, up to `limit`.
    fn elements(
        &mut self,
        key: &[u8],
        version: u64,
        tag: u8,
        limit: usize,
    ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
        let start = keys::sub(key, version, tag, 0);
        let end = keys::sub_end(key, version, tag);
        let mut out = Vec::new();
        let mut from = start.clone();
        while out.len() < limit {
            let want = (limit - out.len()).min(CHUNK);
            let batch = self.scan_raw(&from, Some(&end), want)?;
            let Some((last, _)) = batch.last() else { break };
            from = last.clone();
            from.push(0);
            let n = batch.len();
            for (k, v) in batch {
                out.push((k[start.len()..].to_vec(), v));
            }
            if n < want {
                break;
            }
        }
        Ok(out)
    }

    /// SSCAN, HSCAN and ZSCAN: the elements of `key` (of type `kind`) from
    /// a cursor, `COUNT` at a time (10 by default), those that match
    /// `MATCH` (members, fields).
    fn element_scan(&mut self, key: &[u8], kind: Type, args: &[Vec<u8>]) -> Res<Reply> {
        let (pattern, count) = scan_options(&args[1..], None)?;
        let cursor = match integer(&args[0]) {
            Some(c) if c >= 0 => c as u64,
            _ => return Err(Reply::err("invalid cursor")),
        };
        let Some(m) = self.typed(key, kind)? else {
            return Ok(Reply::Array(vec![Reply::bulk("0"), Reply::Array(vec![])]));
        };
        let tag = match kind {
            Type::Hash => keys::FIELD,
            Type::ZSet => keys::SCORED,
            _ => keys::MEMBER,
        };
        let start = keys::sub(key, m.version, tag, 0);
        let end = keys::sub_end(key, m.version, tag);
        let from = if cursor == 0 {
            start.clone()
        } else {
            match self.shared.cursor(cursor) {
                Some(k) if k.starts_with(&start) => k,
                _ => return Err(Reply::err("invalid cursor (expired or unknown)")),
            }
        };
        let got = self.scan_raw(&from, Some(&end), count)?;
        let next = match got.last() {
            Some((k, _)) if got.len() == count => {
                let mut after = k.clone();
                after.push(0);
                self.shared.save_cursor(after)
            }
            _ => 0,
        };
        let mut out = Vec::new();
        for (k, v) in got {
            let rest = &k[start.len()..];
            let elem = if kind == Type::Set {
                sets::member_of(rest)
            } else {
                rest
            }
            .to_vec();
            if pattern
                .as_ref()
                .is_some_and(|p| !super::glob::matches(p, &elem))
            {
                continue;
            }
            out.push(Reply::Bulk(elem));
            match kind {
                Type::Hash => out.push(Reply::Bulk(v)),
                Type::ZSet => out.push(Reply::Double(zset::score_of(&v))),
                _ => {}
            }
        }
        Ok(Reply::Array(vec![
            Reply::bulk(next.to_string()),
            Reply::Array(out),
        ]))
    }

    /// Runs a data command; its arity is checked, its keys are not.
    pub fn data(&mut self, spec: &'static Spec, args: Vec<Vec<u8>>) -> Outcome {
        let (first, last, step) = spec.keys;
        // MIGRATE's key is empty in its KEYS form, and it only looks its
        // keys up: a key over the limit cannot exist.
        if first > 0 && spec.name != "migrate" {
            let last = if last < 0 {
                args.len() as i32 + last
            } else {
                last
            };
            let mut i = first;
            while i <= last && (i as usize) < args.len() {
                if let Err(r) = self.check_key(&args[i as usize]) {
                    return Outcome::Reply(r);
                }
                i += step.max(1);
            }
        }
        self.now = 0;
        self.reading = spec.flags.contains(&"readonly");
        let name = spec.name;
        self.touching = !access::NO_TOUCH.contains(&name) && (!self.no_touch || name == "touch");
        if blocking::BLOCKING.contains(&name) || blocking::reads_blocked(name, &args) {
            return self.blocking(spec, args);
        }
        let r = match spec.group {
            "string" => self.strings(name, &args),
            "bitmap" => self.bits(name, &args),
            "hash" => self.hashes(name, &args),
            "list" => self.lists(name, &args),
            "set" => self.sets(name, &args),
            "sorted-set" => self.zsets(name, &args),
            "geo" => self.geo(name, &args),
            "stream" => self.streams(name, &args),
            _ => self
                .keyspace(name, &args)
                .or_else(|| self.expire(name, &args)),
        };
        Outcome::Reply(
            r.unwrap_or_else(|| Err(Reply::err(format!("command '{name}' has no handler"))))
                .unwrap_or_else(|e| e),
        )
    }
}
