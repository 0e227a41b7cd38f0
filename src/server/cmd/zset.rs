//! Sorted sets in two orders, both sub-keys under the set's version:
//! member to score (`SCORED`: ZSCORE is one lookup, and lex ranges over
//! members of one score read in member order), and (score, member)
//! (`BY_SCORE`, the score in an order-preserving encoding of the double:
//! ranges by score read only what they return). The count is in the
//! metadata. Ranks are counted by reading the score order up to them.

use crate::server::notify::{GENERIC, ZSET};
use std::collections::BTreeMap;
use std::ops::Bound;

use super::zset_range::{Range, RangeQuery};
use super::{
    absent, float, integer, mpop_args, not_float, not_integer, random_pick, syntax_error, Res,
    Writes,
};
use crate::server::conn::Conn;
use crate::server::keys::{self, BY_SCORE, SCORED};
use crate::server::meta::{Meta, Type};
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

/// The 8 bytes that order doubles as numbers: the sign bit flipped for
/// positives, every bit for negatives; -0 is 0.
pub fn ordered(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let o = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    o.to_be_bytes()
}

fn from_ordered(b: &[u8]) -> f64 {
    let o = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    let bits = if o >> 63 == 1 { o ^ (1 << 63) } else { !o };
    f64::from_bits(bits)
}

/// A score as the member-to-score sub-key holds it.
pub fn score_of(v: &[u8]) -> f64 {
    v.get(..8)
        .map_or(0.0, |b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
}

pub(super) fn score_bound(arg: &[u8]) -> Res<Bound<f64>> {
    let bad = || Reply::err("min or max is not a float");
    match arg.first() {
        Some(b'(') => Ok(Bound::Excluded(float(&arg[1..]).ok_or_else(bad)?)),
        _ => Ok(Bound::Included(float(arg).ok_or_else(bad)?)),
    }
}

pub(super) fn lex_bound(arg: &[u8]) -> Res<Bound<Vec<u8>>> {
    match arg {
        b"-" | b"+" => Ok(Bound::Unbounded),
        [b'[', rest @ ..] => Ok(Bound::Included(rest.to_vec())),
        [b'(', rest @ ..] => Ok(Bound::Excluded(rest.to_vec())),
        _ => Err(Reply::err("min or max not valid string range item")),
    }
}

pub(super) type Scored = Vec<(Vec<u8>, f64)>;

/// ZADD's scores and members.
type Pairs = Vec<(f64, Vec<u8>)>;

pub(super) fn scored_reply(items: Scored, scores: bool, proto: u8) -> Reply {
    let mut out = Vec::with_capacity(items.len() * (1 + scores as usize));
    for (m, s) in items {
        if scores && proto >= 3 {
            out.push(Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]));
        } else {
            out.push(Reply::Bulk(m));
            if scores {
                out.push(Reply::Double(s));
            }
        }
    }
    Reply::Array(out)
}

/// ZADD's options.
#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

impl<'a> Conn<'a> {
    pub(super) fn zsets(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "zadd" => self.zadd(args),
            "zincrby" => self.zincrby(&args[1], &args[2], &args[3]),
            "zrem" => self.zrem(&args[1], &args[2..]),
            "zcard" => self.zcard(&args[1]),
            "zscore" => self.zscore(&args[1], &args[2]),
            "zmscore" => self.zmscore(&args[1], &args[2..]),
            "zrank" | "zrevrank" => self.zrank(args, name == "zrevrank"),
            "zrange" => self.zrange_command(args),
            "zrangestore" => self.zrangestore(args),
            "zrangebyscore" | "zrevrangebyscore" | "zrangebylex" | "zrevrangebylex"
            | "zrevrange" => self.zrange_old(name, args),
            "zcount" => self.zcount(&args[1], &args[2], &args[3], false),
            "zlexcount" => self.zcount(&args[1], &args[2], &args[3], true),
            "zpopmin" | "zpopmax" => self.zpop_command(args, name == "zpopmax"),
            "zmpop" => self.zmpop(&args[1..]),
            "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex" => {
                self.zremrange(name, &args[1], &args[2], &args[3])
            }
            "zunion" | "zinter" | "zdiff" => self.zcombine(name, None, &args[1..]),
            "zunionstore" | "zinterstore" | "zdiffstore" => {
                self.zcombine(name, Some(&args[1]), &args[2..])
            }
            "zintercard" => self.zintercard(&args[1..]),
            "zrandmember" => self.zrandmember(args),
            "zscan" => self.element_scan(&args[1], Type::ZSet, &args[2..]),
            _ => return None,
        })
    }

    pub(super) fn zset(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        self.typed(key, Type::ZSet)
    }

    pub(super) fn score(&mut self, key: &[u8], m: &Meta, member: &[u8]) -> Res<Option<f64>> {
        Ok(self
            .get_raw(&keys::element(key, m.version, SCORED, member))?
            .map(|v| score_of(&v)))
    }

    /// The writes that give `member` `score` (`old`: its score before).
    fn set_score(
        &self,
        key: &[u8],
        m: &Meta,
        member: &[u8],
        score: f64,
        old: Option<f64>,
        w: &mut Writes,
    ) {
        if let Some(o) = old {
            let mut k = keys::sub(key, m.version, BY_SCORE, 8 + member.len());
            k.extend_from_slice(&ordered(o));
            k.extend_from_slice(member);
            w.push((k, None));
        }
        let mut k = keys::sub(key, m.version, BY_SCORE, 8 + member.len());
        k.extend_from_slice(&ordered(score));
        k.extend_from_slice(member);
        w.push((k, Some(Vec::new())));
        w.push((
            keys::element(key, m.version, SCORED, member),
            Some(score.to_le_bytes().to_vec()),
        ));
    }

    /// The writes that remove `members` (with their scores) from `m`,
    /// its metadata included.
    fn remove_scored(&self, key: &[u8], m: &Meta, members: &[(Vec<u8>, f64)], w: &mut Writes) {
        let left = m.count().saturating_sub(members.len() as u64);
        if left == 0 {
            w.push((self.meta_key(key), None));
            return;
        }
        for (mem, s) in members {
            let mut k = keys::sub(key, m.version, BY_SCORE, 8 + mem.len());
            k.extend_from_slice(&ordered(*s));
            k.extend_from_slice(mem);
            w.push((k, None));
            w.push((keys::element(key, m.version, SCORED, mem), None));
        }
        let mut next = m.clone();
        next.set_count(left);
        w.push((self.meta_key(key), Some(next.encode())));
    }

    /// Members in score order from `from` (a sub-key of the score order)
    /// to `upto` (exclusive; none: to the last), up to `limit`.
    fn by_score_from(
        &mut self,
        key: &[u8],
        m: &Meta,
        (from, upto): (Vec<u8>, Option<Vec<u8>>),
        limit: usize,
    ) -> Res<Scored> {
        let start = keys::sub(key, m.version, BY_SCORE, 0);
        // The scan ends where the range does: a scan to the end of the
        // index read up to a chunk of members past it (and the deletes
        // among them) to return the few in it.
        let end = upto.unwrap_or_else(|| keys::sub_end(key, m.version, BY_SCORE));
        let mut out = Vec::with_capacity(limit.min(CHUNK));
        let mut at = from;
        while out.len() < limit {
            let want = (limit - out.len()).min(CHUNK);
            let got = self.scan_raw(&at, Some(&end), want)?;
            // Where the next chunk starts, when this one was cut at `want`.
            let next = match got.last() {
                Some((k, _)) if got.len() == want => {
                    let mut next = k.clone();
                    next.push(0);
                    Some(next)
                }
                _ => None,
            };
            for (mut k, _) in got {
                let score = from_ordered(&k[start.len()..]);
                // The member is the key's tail: the key's own vector, its
                // head dropped, not a copy.
                k.drain(..start.len() + 8);
                out.push((k, score));
            }
            match next {
                Some(next) if next < end => at = next,
                _ => break,
            }
        }
        Ok(out)
    }

    /// Every member of `m` with its score, in score order.
    pub(super) fn all_scored(&mut self, key: &[u8], m: &Meta) -> Res<Scored> {
        let from = keys::sub(key, m.version, BY_SCORE, 0);
        self.by_score_from(key, m, (from, None), usize::MAX)
    }

    /// Members with a score in `bounds`, in score order, up to `limit`.
    pub(super) fn score_range(
        &mut self,
        key: &[u8],
        m: &Meta,
        bounds: &(Bound<f64>, Bound<f64>),
        limit: usize,
    ) -> Res<Scored> {
        let base = keys::sub(key, m.version, BY_SCORE, 8);
        // The key of every member of score `s`, or of the next score.
        let at = |s: f64, next: bool| {
            let o = u64::from_be_bytes(ordered(s));
            let o = if next { o.checked_add(1)? } else { o };
            let mut k = base.clone();
            k.extend_from_slice(&o.to_be_bytes());
            Some(k)
        };
        let from = match bounds.0 {
            Bound::Included(s) => at(s, false),
            // Past every member of that score.
            Bound::Excluded(s) => match at(s, true) {
                Some(k) => Some(k),
                None => return Ok(vec![]),
            },
            Bound::Unbounded => None,
        }
        .unwrap_or_else(|| base.clone());
        let upto = match bounds.1 {
            Bound::Included(s) => at(s, true),
            Bound::Excluded(s) => at(s, false),
            Bound::Unbounded => None,
        };
        if upto.as_ref().is_some_and(|u| *u <= from) {
            return Ok(vec![]);
        }
        self.by_score_from(key, m, (from, upto), limit)
    }

    /// Members of one score between lex `bounds`, in member order, up to
    /// `limit` (Redis's lex ranges assume every member has one score).
    pub(super) fn lex_range(
        &mut self,
        key: &[u8],
        m: &Meta,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        limit: usize,
    ) -> Res<Scored> {
        let start = keys::sub(key, m.version, SCORED, 0);
        let mut at = start.clone();
        if let Bound::Included(b) | Bound::Excluded(b) = lo {
            at.extend_from_slice(b);
        }
        // The scan ends where the range does (a scan to the end of the
        // set read up to a chunk of members past it).
        let end = match hi {
            Bound::Included(b) | Bound::Excluded(b) => {
                let mut e = start.clone();
                e.extend_from_slice(b);
                if matches!(hi, Bound::Included(_)) {
                    e.push(0);
                }
                e
            }
            Bound::Unbounded => keys::sub_end(key, m.version, SCORED),
        };
        if at >= end {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        while out.len() < limit {
            let want = (limit - out.len()).min(CHUNK);
            let got = self.scan_raw(&at, Some(&end), want)?;
            let n = got.len();
            for (k, v) in &got {
                let member = &k[start.len()..];
                if matches!(lo, Bound::Excluded(b) if member == b.as_slice()) {
                    continue;
                }
                let past = match hi {
                    Bound::Included(b) => member > b.as_slice(),
                    Bound::Excluded(b) => member >= b.as_slice(),
                    Bound::Unbounded => false,
                };
                if past {
                    return Ok(out);
                }
                out.push((member.to_vec(), score_of(v)));
                if out.len() == limit {
                    return Ok(out);
                }
            }
            match got.last() {
                Some((k, _)) if n == want => {
                    at = k.clone();
                    at.push(0);
                    if at >= end {
                        break;
                    }
                }
                _ => break,
            }
        }
        Ok(out)
    }

    /// Members at ranks `a..=b` (from the lowest score).
    pub(super) fn rank_range(&mut self, key: &[u8], m: &Meta, a: u64, b: u64) -> Res<Scored> {
        let from = keys::sub(key, m.version, BY_SCORE, 0);
        let mut got = self.by_score_from(key, m, (from, None), (b + 1) as usize)?;
        Ok(got.split_off((a as usize).min(got.len())))
    }

    fn parse_add(args: &[Vec<u8>]) -> Res<(AddFlags, Pairs)> {
        let mut f = AddFlags::default();
        let mut i = 2;
        while i < args.len() {
            match args[i].to_ascii_lowercase().as_slice() {
                b"nx" => f.nx = true,
                b"xx" => f.xx = true,
                b"gt" => f.gt = true,
                b"lt" => f.lt = true,
                b"ch" => f.ch = true,
                b"incr" => f.incr = true,
                _ => break,
            }
            i += 1;
        }
        let rest = &args[i..];
        if rest.is_empty() || rest.len() % 2 != 0 {
            return Err(syntax_error());
        }
        if f.nx && f.xx {
            return Err(Reply::err(
                "XX and NX options at the same time are not compatible",
            ));
        }
        if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
            return Err(Reply::err(
                "GT, LT, and/or NX options at the same time are not compatible",
            ));
        }
        if f.incr && rest.len() > 2 {
            return Err(Reply::err(
                "INCR option supports a single increment-element pair",
            ));
        }
        let mut pairs = Vec::with_capacity(rest.len() / 2);
        for p in rest.chunks(2) {
            pairs.push((float(&p[0]).ok_or_else(not_float)?, p[1].clone()));
        }
        Ok((f, pairs))
    }

    pub(super) fn zadd(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        let (f, pairs) = Self::parse_add(args)?;
        for (_, mem) in &pairs {
            self.check_element(key, mem, "member")?;
        }
        let old = self.zset(key)?;
        if old.is_none() && f.xx {
            return Ok(if f.incr { Reply::Nil } else { Reply::Int(0) });
        }
        let mut m = match &old {
            Some(m) => m.clone(),
            None => Meta::collection(Type::ZSet, self.new_version()?),
        };
        let mut writes = Vec::new();
        let (mut added, mut changed) = (0u64, 0u64);
        let mut done: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        let mut last = None;
        for (score, mem) in pairs {
            let before = match done.get(&mem) {
                Some(s) => Some(*s),
                None if old.is_some() => self.score(key, &m, &mem)?,
                None => None,
            };
            let mut next = score;
            if f.incr {
                next = before.unwrap_or(0.0) + score;
                if next.is_nan() {
                    return Err(Reply::err("resulting score is not a number (NaN)"));
                }
            }
            let skip = match before {
                Some(b) => f.nx || (f.gt && next <= b) || (f.lt && next >= b),
                None => f.xx,
            };
            if skip {
                last = None;
                continue;
            }
            last = Some(next);
            match before {
                Some(b) if b == next => continue,
                Some(_) => changed += 1,
                None => added += 1,
            }
            self.set_score(key, &m, &mem, next, before, &mut writes);
            done.insert(mem, next);
        }
        if added + changed > 0 {
            m.set_count(m.count() + added);
            self.put_changed(key, &m, old.as_ref(), &mut writes);
            self.write(writes);
            self.notify(ZSET, if f.incr { "zincr" } else { "zadd" }, key);
        }
        Ok(if f.incr {
            last.map_or(Reply::Nil, Reply::Double)
        } else if f.ch {
            Reply::Int((added + changed) as i64)
        } else {
            Reply::Int(added as i64)
        })
    }

    fn zincrby(&mut self, key: &[u8], by: &[u8], member: &[u8]) -> Res<Reply> {
        let args = vec![
            b"zadd".to_vec(),
            key.to_vec(),
            b"incr".to_vec(),
            by.to_vec(),
            member.to_vec(),
        ];
        self.zadd(&args)
    }

    fn zrem(&mut self, key: &[u8], members: &[Vec<u8>]) -> Res<Reply> {
        let Some(m) = self.zset(key)? else {
            return Ok(Reply::Int(0));
        };
        let mut gone: Scored = Vec::new();
        for mem in members {
            if gone.iter().any(|(g, _)| g == mem) {
                continue;
            }
            if let Some(s) = self.score(key, &m, mem)? {
                gone.push((mem.clone(), s));
            }
        }
        if gone.is_empty() {
            return Ok(Reply::Int(0));
        }
        let mut writes = Vec::new();
        self.remove_scored(key, &m, &gone, &mut writes);
        self.write(writes);
        self.notify_removed(ZSET, key, "zrem", &m, gone.len());
        Ok(Reply::Int(gone.len() as i64))
    }

    fn zcard(&mut self, key: &[u8]) -> Res<Reply> {
        Ok(Reply::Int(self.zset(key)?.map_or(0, |m| m.count() as i64)))
    }

    fn zscore(&mut self, key: &[u8], member: &[u8]) -> Res<Reply> {
        let Some(m) = self.zset(key)? else {
            return Ok(Reply::Nil);
        };
        Ok(self
            .score(key, &m, member)?
            .map_or(Reply::Nil, Reply::Double))
    }

    fn zmscore(&mut self, key: &[u8], members: &[Vec<u8>]) -> Res<Reply> {
        let m = self.zset(key)?;
        let mut out = Vec::with_capacity(members.len());
        for mem in members {
            out.push(match &m {
                Some(m) => self.score(key, m, mem)?.map_or(Reply::Nil, Reply::Double),
                None => Reply::Nil,
            });
        }
        Ok(Reply::Array(out))
    }

    fn zrank(&mut self, args: &[Vec<u8>], rev: bool) -> Res<Reply> {
        let (key, member) = (&args[1], &args[2]);
        let withscore = match &args[3..] {
            [] => false,
            [w] if w.eq_ignore_ascii_case(b"withscore") => true,
            _ => return Err(syntax_error()),
        };
        let none = if withscore {
            Reply::NilArray
        } else {
            Reply::Nil
        };
        let Some(m) = self.zset(key)? else {
            return Ok(none);
        };
        let Some(score) = self.score(key, &m, member)? else {
            return Ok(none);
        };
        // Members before it in score order.
        let from = keys::sub(key, m.version, BY_SCORE, 0);
        // Up to the member's own key.
        let mut upto = keys::sub(key, m.version, BY_SCORE, 8 + member.len());
        upto.extend_from_slice(&ordered(score));
        upto.extend_from_slice(member);
        let before = self
            .by_score_from(key, &m, (from, Some(upto)), usize::MAX)?
            .len() as i64;
        let rank = if rev {
            m.count() as i64 - 1 - before
        } else {
            before
        };
        Ok(if withscore {
            Reply::Array(vec![Reply::Int(rank), Reply::Double(score)])
        } else {
            Reply::Int(rank)
        })
    }

    /// Replaces `dst` (of any type) with sorted set `items`, told as
    /// `event`; the count.
    pub(super) fn store_scored(&mut self, dst: &[u8], items: Scored, event: &str) -> Res<Reply> {
        let old = self.lookup(dst)?;
        let mut writes = Vec::new();
        let n = items.len();
        if items.is_empty() {
            if old.is_some() {
                writes.push((keys::meta(dst), None));
            }
        } else {
            let mut m = Meta::collection(Type::ZSet, self.new_version()?);
            for (mem, s) in &items {
                self.check_element(dst, mem, "member")?;
                self.set_score(dst, &m, mem, *s, None, &mut writes);
            }
            m.set_count(n as u64);
            self.put(dst, &m, None, &mut writes);
        }
        self.write(writes);
        if n > 0 {
            self.notify(ZSET, event, dst);
        } else if old.is_some() {
            self.notify(GENERIC, "del", dst);
        }
        Ok(Reply::Int(n as i64))
    }

    /// Pops up to `count` members with the lowest (or highest) scores.
    fn zpop(&mut self, key: &[u8], m: &Meta, count: u64, max: bool) -> Res<(Scored, Writes)> {
        let len = m.count();
        let n = count.min(len);
        let got = if max {
            let mut r = self.rank_range(key, m, len - n, len - 1)?;
            r.reverse();
            r
        } else {
            self.rank_range(key, m, 0, n.saturating_sub(1))?
        };
        let mut writes = Vec::new();
        self.remove_scored(key, m, &got, &mut writes);
        Ok((got, writes))
    }

    fn notify_popped(&mut self, key: &[u8], max: bool, m: &Meta, n: usize) {
        if n > 0 {
            self.notify_removed(ZSET, key, if max { "zpopmax" } else { "zpopmin" }, m, n);
        }
    }

    fn zpop_command(&mut self, args: &[Vec<u8>], max: bool) -> Res<Reply> {
        let key = &args[1];
        let count = match args.len() {
            2 => None,
            3 => match integer(&args[2]) {
                Some(n) if n >= 0 => Some(n as u64),
                Some(_) => return Err(Reply::err("value is out of range, must be positive")),
                None => return Err(not_integer()),
            },
            _ => return Err(syntax_error()),
        };
        let Some(m) = self.zset(key)? else {
            return Ok(Reply::Array(vec![]));
        };
        if count == Some(0) {
            return Ok(Reply::Array(vec![]));
        }
        let (got, writes) = self.zpop(key, &m, count.unwrap_or(1), max)?;
        self.write(writes);
        self.notify_popped(key, max, &m, got.len());
        Ok(scored_reply(
            got,
            true,
            if count.is_some() { self.proto } else { 2 },
        ))
    }

    pub(super) fn zmpop(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (names, at, count) = mpop_args(args)?;
        let max = match at.to_ascii_lowercase().as_slice() {
            b"min" => false,
            b"max" => true,
            _ => return Err(syntax_error()),
        };
        for k in names {
            self.check_key(k)?;
        }
        for k in names {
            if let Some(m) = self.zset(k)? {
                let (got, writes) = self.zpop(k, &m, count, max)?;
                self.write(writes);
                self.notify_popped(k, max, &m, got.len());
                let items = got
                    .into_iter()
                    .map(|(mem, s)| Reply::Array(vec![Reply::Bulk(mem), Reply::Double(s)]))
                    .collect();
                return Ok(Reply::Array(vec![
                    Reply::Bulk(k.clone()),
                    Reply::Array(items),
                ]));
            }
        }
        Ok(Reply::NilArray)
    }

    fn zremrange(&mut self, name: &str, key: &[u8], a: &[u8], b: &[u8]) -> Res<Reply> {
        let range = match name {
            "zremrangebyrank" => {
                let (Some(x), Some(y)) = (integer(a), integer(b)) else {
                    return Err(not_integer());
                };
                Range::Rank(x, y)
            }
            "zremrangebyscore" => Range::Score(score_bound(a)?, score_bound(b)?),
            _ => Range::Lex(lex_bound(a)?, lex_bound(b)?, a == b"+" || b == b"-"),
        };
        let q = RangeQuery {
            range,
            rev: false,
            limit: None,
            scores: false,
        };
        let Some(m) = self.zset(key)? else {
            return Ok(Reply::Int(0));
        };
        let got = self.run_range(key, &q)?;
        if got.is_empty() {
            return Ok(Reply::Int(0));
        }
        let mut writes = Vec::new();
        self.remove_scored(key, &m, &got, &mut writes);
        self.write(writes);
        self.notify_removed(ZSET, key, name, &m, got.len());
        Ok(Reply::Int(got.len() as i64))
    }

    fn zrandmember(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let key = &args[1];
        let (count, scores) = match &args[2..] {
            [] => (None, false),
            [c] => (Some(integer(c).ok_or_else(not_integer)?), false),
            [c, w] if w.eq_ignore_ascii_case(b"withscores") => {
                (Some(integer(c).ok_or_else(not_integer)?), true)
            }
            _ => return Err(syntax_error()),
        };
        if count == Some(i64::MIN) || count.is_some_and(|c| c.unsigned_abs() > i64::MAX as u64 / 2)
        {
            return Err(Reply::err("value is out of range"));
        }
        let Some(m) = self.zset(key)? else {
            return Ok(absent(count.is_some()));
        };
        let all = self.all_scored(key, &m)?;
        let picked = random_pick(all, count);
        if count.is_none() {
            return Ok(picked
                .into_iter()
                .next()
                .map_or(Reply::Nil, |(mem, _)| Reply::Bulk(mem)));
        }
        Ok(scored_reply(picked, scores, self.proto))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_encoding_keeps_the_order_of_doubles() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(ordered(w[0]) < ordered(w[1]), "{} {}", w[0], w[1]);
        }
        for s in scores {
            assert_eq!(from_ordered(&ordered(s)), s);
        }
        assert_eq!(ordered(-0.0), ordered(0.0));
    }
}
