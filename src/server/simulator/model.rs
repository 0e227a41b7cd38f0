//! The simulator's model client: what the keyspace holds, the commands it
//! draws, and the reply each must get.
//!
//! The keyspace is a fixed universe of keys, a few per type, each type
//! under its own prefix so no command meets the wrong type: strings
//! `s:`, counters `c:`, hashes `h:`, lists `l:`, sets `t:`, sorted sets
//! `z:`, and `n:` for strings written only at `none` (not logged, so
//! outside the prefix property). The prefixes put keys in all three of
//! the engine's regions (split at `g` and `p`).
//!
//! Every command is applied to the model as the shard runs it, so each
//! reply is known exactly: one client runs one command at a time, and
//! the shard's reads see its own writes before they are durable.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::server::resp::Reply;

/// Keys of each type.
pub const PER_TYPE: usize = 6;
/// The logged types' prefixes, then `n:`.
pub const PREFIXES: [&str; 7] = ["s", "c", "h", "l", "t", "z", "n"];

/// A key's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Str(Vec<u8>),
    Hash(BTreeMap<String, String>),
    List(VecDeque<String>),
    Set(BTreeSet<String>),
    Zset(BTreeMap<String, i64>),
}

/// A reply as the model compares it: unordered collections sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum R {
    Nil,
    Int(i64),
    Ok,
    Queued,
    Bulk(Vec<u8>),
    Arr(Vec<R>),
    Err(String),
}

impl R {
    fn bulk(s: &str) -> R {
        R::Bulk(s.as_bytes().to_vec())
    }

    fn bulks<'s>(items: impl IntoIterator<Item = &'s String>) -> R {
        R::Arr(items.into_iter().map(|s| R::bulk(s)).collect())
    }
}

/// How a reply reads, with arrays of pairs or members sorted when the
/// command's order is not defined (`sorted`).
pub fn normalize(r: &Reply, sorted: Sorted) -> R {
    match r {
        Reply::Status("QUEUED") => R::Queued,
        Reply::Status(_) | Reply::Simple(_) => R::Ok,
        Reply::Error(e) => R::Err(e.clone()),
        Reply::Int(n) => R::Int(*n),
        Reply::Bulk(b) => R::Bulk(b.clone()),
        Reply::BulkFrom(b, at) => R::Bulk(b[*at..].to_vec()),
        Reply::Nil | Reply::NilArray => R::Nil,
        Reply::Double(d) => R::Bulk(d.to_string().into_bytes()),
        Reply::Bool(b) => R::Int(i64::from(*b)),
        Reply::Map(pairs) => {
            let flat: Vec<R> = pairs
                .iter()
                .flat_map(|(k, v)| [normalize(k, Sorted::No), normalize(v, Sorted::No)])
                .collect();
            sort(R::Arr(flat), sorted)
        }
        Reply::Array(items) | Reply::Push(items) | Reply::Seq(items) => sort(
            R::Arr(items.iter().map(|i| normalize(i, Sorted::No)).collect()),
            sorted,
        ),
        Reply::Verbatim(s) => R::Bulk(s.clone().into_bytes()),
        r @ Reply::SharedPush(..) => normalize(&r.unshared(), sorted),
    }
}

/// Which order a reply's array is compared in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sorted {
    No,
    /// Members: sorted.
    Members,
    /// Field, value pairs: sorted by field.
    Pairs,
}

/// The order of a sorted reply's items: bulk strings by their bytes.
fn order(r: &R) -> Vec<u8> {
    match r {
        R::Bulk(b) => b.clone(),
        other => format!("{other:?}").into_bytes(),
    }
}

/// `r` with its array in the order `sorted` says.
pub fn sort(r: R, sorted: Sorted) -> R {
    let R::Arr(mut items) = r else { return r };
    match sorted {
        Sorted::No => {}
        Sorted::Members => items.sort_by_key(order),
        Sorted::Pairs => {
            let mut pairs: Vec<(R, R)> = items
                .chunks(2)
                .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or(R::Nil)))
                .collect();
            pairs.sort_by_key(|p| order(&p.0));
            items = pairs.into_iter().flat_map(|(a, b)| [a, b]).collect();
        }
    }
    R::Arr(items)
}

/// One command the model client sends.
#[derive(Clone, Debug)]
pub struct Cmd {
    pub args: Vec<String>,
    /// The reply it must get.
    pub want: R,
    pub sorted: Sorted,
    /// The keys it wrote and what they hold after it (`None`: deleted).
    pub effect: Vec<(String, Option<Val>)>,
}

/// The keyspace as the model knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub keys: BTreeMap<String, Val>,
}

fn key(rng: &mut ChaCha8Rng, prefix: &str) -> String {
    format!("{prefix}:{}", rng.random_range(0..PER_TYPE))
}

fn word(rng: &mut ChaCha8Rng, n: u32) -> String {
    format!("w{}", rng.random_range(0..n))
}

fn payload(rng: &mut ChaCha8Rng) -> String {
    let len = if rng.random_range(0..10) == 0 {
        rng.random_range(500..3000)
    } else {
        rng.random_range(1..120)
    };
    let c = rng.random_range(b'a'..=b'z') as char;
    let tag: u32 = rng.random();
    let mut s = format!("{tag:08x}");
    s.extend(std::iter::repeat_n(c, len));
    s
}

impl Model {
    /// The universe of keys the client may touch.
    pub fn universe() -> Vec<String> {
        PREFIXES
            .iter()
            .flat_map(|p| (0..PER_TYPE).map(move |i| format!("{p}:{i}")))
            .collect()
    }

    /// Draws a logged command (`none == false`) or one for an `n:` key
    /// (`none == true`), applies it, and says what it must reply.
    pub fn draw(&mut self, rng: &mut ChaCha8Rng, none: bool) -> Cmd {
        if none {
            let k = key(rng, "n");
            return match rng.random_range(0..3) {
                0 => self.get(k),
                1 => self.del(vec![k]),
                _ => {
                    let v = payload(rng);
                    self.set(k, v)
                }
            };
        }
        match rng.random_range(0..24) {
            0..=2 => {
                let k = key(rng, "s");
                let v = payload(rng);
                self.set(k, v)
            }
            3 => {
                let k = key(rng, "s");
                self.get(k)
            }
            4 => {
                let k = key(rng, "s");
                let v = payload(rng);
                self.append(k, v)
            }
            5 => {
                let pairs = (0..rng.random_range(2..4))
                    .map(|_| (key(rng, "s"), payload(rng)))
                    .collect();
                self.mset(pairs)
            }
            6 | 7 => {
                let k = key(rng, "c");
                let by = rng.random_range(-5..100);
                self.incrby(k, by)
            }
            8 => {
                let keys = (0..rng.random_range(1..4))
                    .map(|_| {
                        let p = PREFIXES[rng.random_range(0..6)];
                        key(rng, p)
                    })
                    .collect();
                self.del(keys)
            }
            9 | 10 => {
                let k = key(rng, "h");
                let f = word(rng, 12);
                let v = payload(rng);
                self.hset(k, f, v)
            }
            11 => {
                let k = key(rng, "h");
                let f = word(rng, 12);
                self.hdel(k, f)
            }
            12 => {
                let k = key(rng, "h");
                self.hgetall(k)
            }
            13 | 14 => {
                let k = key(rng, "l");
                let items = (0..rng.random_range(1..4)).map(|_| payload(rng)).collect();
                self.rpush(k, items)
            }
            15 => {
                let k = key(rng, "l");
                self.lpop(k)
            }
            16 => {
                let k = key(rng, "l");
                self.lrange(k)
            }
            17 => {
                let k = key(rng, "t");
                let m = word(rng, 20);
                self.sadd(k, m)
            }
            18 => {
                let k = key(rng, "t");
                let m = word(rng, 20);
                self.srem(k, m)
            }
            19 => {
                let k = key(rng, "t");
                self.smembers(k)
            }
            20 => {
                let k = key(rng, "z");
                let m = word(rng, 20);
                let score = rng.random_range(-50..50);
                self.zadd(k, score, m)
            }
            21 => {
                let k = key(rng, "z");
                let m = word(rng, 20);
                self.zrem(k, m)
            }
            _ => {
                let k = key(rng, "z");
                self.zrange(k)
            }
        }
    }

    /// The command that reads `key` whole, and what it must reply.
    pub fn read(&self, key: &str) -> Cmd {
        let k = key.to_string();
        match &key[..1] {
            "s" | "c" | "n" => self.get(k),
            "h" => self.hgetall(k),
            "l" => self.lrange(k),
            "t" => self.smembers(k),
            _ => self.zrange(k),
        }
    }

    /// What `read(key)`'s reply says the key holds, if it is the reply of
    /// a read (not an error).
    pub fn parse(key: &str, r: &R) -> Option<Option<Val>> {
        let strings = |items: &[R]| -> Option<Vec<String>> {
            items
                .iter()
                .map(|i| match i {
                    R::Bulk(b) => String::from_utf8(b.clone()).ok(),
                    _ => None,
                })
                .collect()
        };
        let v = match (&key[..1], r) {
            (_, R::Nil) => return Some(None),
            ("s" | "c" | "n", R::Bulk(b)) => Val::Str(b.clone()),
            (_, R::Arr(items)) if items.is_empty() => return Some(None),
            ("h", R::Arr(items)) => {
                let s = strings(items)?;
                Val::Hash(
                    s.chunks(2)
                        .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
                        .collect(),
                )
            }
            ("l", R::Arr(items)) => Val::List(strings(items)?.into()),
            ("t", R::Arr(items)) => Val::Set(strings(items)?.into_iter().collect()),
            ("z", R::Arr(items)) => {
                let s = strings(items)?;
                let mut z = BTreeMap::new();
                for c in s.chunks(2) {
                    z.insert(c[0].clone(), c.get(1)?.parse().ok()?);
                }
                Val::Zset(z)
            }
            _ => return None,
        };
        Some(Some(v))
    }

    /// Sets `key` to `v` (`None`: deletes it) and notes it in `effect`.
    fn put(&mut self, effect: &mut Vec<(String, Option<Val>)>, key: &str, v: Option<Val>) {
        match &v {
            Some(v) => self.keys.insert(key.to_string(), v.clone()),
            None => self.keys.remove(key),
        };
        effect.retain(|(k, _)| k != key);
        effect.push((key.to_string(), v));
    }

    fn cmd(args: &[&str], want: R, effect: Vec<(String, Option<Val>)>) -> Cmd {
        Cmd {
            args: args.iter().map(|a| a.to_string()).collect(),
            want,
            sorted: Sorted::No,
            effect,
        }
    }

    fn set(&mut self, k: String, v: String) -> Cmd {
        let mut e = Vec::new();
        self.put(&mut e, &k, Some(Val::Str(v.clone().into_bytes())));
        Self::cmd(&["SET", &k, &v], R::Ok, e)
    }

    fn get(&self, k: String) -> Cmd {
        let want = match self.keys.get(&k) {
            Some(Val::Str(b)) => R::Bulk(b.clone()),
            _ => R::Nil,
        };
        Self::cmd(&["GET", &k], want, Vec::new())
    }

    fn append(&mut self, k: String, v: String) -> Cmd {
        let mut now = match self.keys.get(&k) {
            Some(Val::Str(b)) => b.clone(),
            _ => Vec::new(),
        };
        if now.len() + v.len() > 8000 {
            // Values stay well under the server's limit.
            return self.set(k, v);
        }
        now.extend_from_slice(v.as_bytes());
        let len = now.len() as i64;
        let mut e = Vec::new();
        self.put(&mut e, &k, Some(Val::Str(now)));
        Self::cmd(&["APPEND", &k, &v], R::Int(len), e)
    }

    fn mset(&mut self, pairs: Vec<(String, String)>) -> Cmd {
        let mut e = Vec::new();
        let mut args = vec!["MSET".to_string()];
        for (k, v) in pairs {
            self.put(&mut e, &k, Some(Val::Str(v.clone().into_bytes())));
            args.push(k);
            args.push(v);
        }
        Cmd {
            args,
            want: R::Ok,
            sorted: Sorted::No,
            effect: e,
        }
    }

    fn incrby(&mut self, k: String, by: i64) -> Cmd {
        let now: i64 = match self.keys.get(&k) {
            Some(Val::Str(b)) => std::str::from_utf8(b).unwrap().parse().unwrap(),
            _ => 0,
        };
        let next = now + by;
        let mut e = Vec::new();
        self.put(&mut e, &k, Some(Val::Str(next.to_string().into_bytes())));
        Self::cmd(&["INCRBY", &k, &by.to_string()], R::Int(next), e)
    }

    fn del(&mut self, keys: Vec<String>) -> Cmd {
        let mut e = Vec::new();
        let mut n = 0;
        for k in &keys {
            if self.keys.contains_key(k) {
                n += 1;
                self.put(&mut e, k, None);
            }
        }
        let mut args = vec!["DEL".to_string()];
        args.extend(keys);
        Cmd {
            args,
            want: R::Int(n),
            sorted: Sorted::No,
            effect: e,
        }
    }

    fn hset(&mut self, k: String, f: String, v: String) -> Cmd {
        let mut h = match self.keys.get(&k) {
            Some(Val::Hash(h)) => h.clone(),
            _ => BTreeMap::new(),
        };
        let added = i64::from(h.insert(f.clone(), v.clone()).is_none());
        let mut e = Vec::new();
        self.put(&mut e, &k, Some(Val::Hash(h)));
        Self::cmd(&["HSET", &k, &f, &v], R::Int(added), e)
    }

    fn hdel(&mut self, k: String, f: String) -> Cmd {
        let mut e = Vec::new();
        let mut n = 0;
        if let Some(Val::Hash(h)) = self.keys.get(&k) {
            let mut h = h.clone();
            if h.remove(&f).is_some() {
                n = 1;
                let v = (!h.is_empty()).then_some(Val::Hash(h));
                self.put(&mut e, &k, v);
            }
        }
        Self::cmd(&["HDEL", &k, &f], R::Int(n), e)
    }

    fn hgetall(&self, k: String) -> Cmd {
        let want = match self.keys.get(&k) {
            Some(Val::Hash(h)) => R::Arr(
                h.iter()
                    .flat_map(|(f, v)| [R::bulk(f), R::bulk(v)])
                    .collect(),
            ),
            _ => R::Arr(Vec::new()),
        };
        let mut c = Self::cmd(&["HGETALL", &k], want, Vec::new());
        c.sorted = Sorted::Pairs;
        c
    }

    fn rpush(&mut self, k: String, items: Vec<String>) -> Cmd {
        let mut l = match self.keys.get(&k) {
            Some(Val::List(l)) => l.clone(),
            _ => VecDeque::new(),
        };
        l.extend(items.iter().cloned());
        let len = l.len() as i64;
        let mut e = Vec::new();
        self.put(&mut e, &k, Some(Val::List(l)));
        let mut args = vec!["RPUSH".to_string(), k];
        args.extend(items);
        Cmd {
            args,
            want: R::Int(len),
            sorted: Sorted::No,
            effect: e,
        }
    }

    fn lpop(&mut self, k: String) -> Cmd {
        let mut e = Vec::new();
        let mut want = R::Nil;
        if let Some(Val::List(l)) = self.keys.get(&k) {
            let mut l = l.clone();
            if let Some(first) = l.pop_front() {
                want = R::bulk(&first);
                let v = (!l.is_empty()).then_some(Val::List(l));
                self.put(&mut e, &k, v);
            }
        }
        Self::cmd(&["LPOP", &k], want, e)
    }

    fn lrange(&self, k: String) -> Cmd {
        let want = match self.keys.get(&k) {
            Some(Val::List(l)) => R::bulks(l),
            _ => R::Arr(Vec::new()),
        };
        Self::cmd(&["LRANGE", &k, "0", "-1"], want, Vec::new())
    }

    fn sadd(&mut self, k: String, m: String) -> Cmd {
        let mut s = match self.keys.get(&k) {
            Some(Val::Set(s)) => s.clone(),
            _ => BTreeSet::new(),
        };
        let added = i64::from(s.insert(m.clone()));
        let mut e = Vec::new();
        if added == 1 {
            self.put(&mut e, &k, Some(Val::Set(s)));
        }
        Self::cmd(&["SADD", &k, &m], R::Int(added), e)
    }

    fn srem(&mut self, k: String, m: String) -> Cmd {
        let mut e = Vec::new();
        let mut n = 0;
        if let Some(Val::Set(s)) = self.keys.get(&k) {
            let mut s = s.clone();
            if s.remove(&m) {
                n = 1;
                let v = (!s.is_empty()).then_some(Val::Set(s));
                self.put(&mut e, &k, v);
            }
        }
        Self::cmd(&["SREM", &k, &m], R::Int(n), e)
    }

    fn smembers(&self, k: String) -> Cmd {
        let want = match self.keys.get(&k) {
            Some(Val::Set(s)) => R::bulks(s),
            _ => R::Arr(Vec::new()),
        };
        let mut c = Self::cmd(&["SMEMBERS", &k], want, Vec::new());
        c.sorted = Sorted::Members;
        c
    }

    fn zadd(&mut self, k: String, score: i64, m: String) -> Cmd {
        let mut z = match self.keys.get(&k) {
            Some(Val::Zset(z)) => z.clone(),
            _ => BTreeMap::new(),
        };
        let old = z.insert(m.clone(), score);
        let mut e = Vec::new();
        if old != Some(score) {
            self.put(&mut e, &k, Some(Val::Zset(z)));
        }
        let added = i64::from(old.is_none());
        Self::cmd(&["ZADD", &k, &score.to_string(), &m], R::Int(added), e)
    }

    fn zrem(&mut self, k: String, m: String) -> Cmd {
        let mut e = Vec::new();
        let mut n = 0;
        if let Some(Val::Zset(z)) = self.keys.get(&k) {
            let mut z = z.clone();
            if z.remove(&m).is_some() {
                n = 1;
                let v = (!z.is_empty()).then_some(Val::Zset(z));
                self.put(&mut e, &k, v);
            }
        }
        Self::cmd(&["ZREM", &k, &m], R::Int(n), e)
    }

    fn zrange(&self, k: String) -> Cmd {
        let want = match self.keys.get(&k) {
            Some(Val::Zset(z)) => {
                let mut by_score: Vec<(&i64, &String)> = z.iter().map(|(m, s)| (s, m)).collect();
                by_score.sort();
                R::Arr(
                    by_score
                        .into_iter()
                        .flat_map(|(s, m)| [R::bulk(m), R::bulk(&s.to_string())])
                        .collect(),
                )
            }
            _ => R::Arr(Vec::new()),
        };
        Self::cmd(&["ZRANGE", &k, "0", "-1", "WITHSCORES"], want, Vec::new())
    }

    /// A transaction of `cmds` (already applied): MULTI, each command
    /// queued, and EXEC replying every reply.
    pub fn transaction(cmds: Vec<Cmd>) -> Vec<Cmd> {
        let mut out = vec![Self::cmd(&["MULTI"], R::Ok, Vec::new())];
        let mut replies = Vec::new();
        let mut effect: Vec<(String, Option<Val>)> = Vec::new();
        for c in cmds {
            replies.push(c.want.clone());
            for (k, v) in c.effect {
                effect.retain(|(e, _)| *e != k);
                effect.push((k, v));
            }
            out.push(Cmd {
                args: c.args,
                want: R::Queued,
                sorted: Sorted::No,
                effect: Vec::new(),
            });
        }
        out.push(Self::cmd(&["EXEC"], R::Arr(replies), effect));
        out
    }
}
