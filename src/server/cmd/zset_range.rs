//! ZRANGE in all its forms (by rank, score or lex, REV, LIMIT,
//! WITHSCORES), ZRANGESTORE, the older ZRANGEBYSCORE family, ZCOUNT and
//! ZLEXCOUNT: a query parsed once, then read from the order that answers
//! it, only as far as it returns.

use std::ops::Bound;

use super::zset::{lex_bound, score_bound, scored_reply, Scored};
use super::{integer, not_integer, syntax_error, Res};
use crate::server::conn::Conn;
use crate::server::meta::Meta;
use crate::server::resp::Reply;

/// What a range asks: by rank, score or lex, which way, LIMIT.
pub(super) enum Range {
    Rank(i64, i64),
    Score(Bound<f64>, Bound<f64>),
    /// Lex bounds, and whether the range is empty by its ends alone
    /// ("+" as the lower end or "-" as the upper).
    Lex(Bound<Vec<u8>>, Bound<Vec<u8>>, bool),
}

pub(super) struct RangeQuery {
    pub(super) range: Range,
    pub(super) rev: bool,
    /// Offset and count (negative: all).
    pub(super) limit: Option<(i64, i64)>,
    pub(super) scores: bool,
}

impl<'a> Conn<'a> {
    /// The members a range query selects, in the order asked.
    pub(super) fn select(&mut self, key: &[u8], m: &Meta, q: &RangeQuery) -> Res<Scored> {
        let (offset, count) = q.limit.unwrap_or((0, -1));
        if offset < 0 || count == 0 {
            return Ok(vec![]);
        }
        let len = m.count() as i64;
        let mut got = match &q.range {
            Range::Rank(start, stop) => {
                let (mut a, mut b) = (*start, *stop);
                if a < 0 {
                    a += len;
                }
                if b < 0 {
                    b += len;
                }
                a = a.max(0);
                if a > b || a >= len {
                    return Ok(vec![]);
                }
                b = b.min(len - 1);
                if q.rev {
                    let mut r =
                        self.rank_range(key, m, (len - 1 - b) as u64, (len - 1 - a) as u64)?;
                    r.reverse();
                    return Ok(r);
                }
                return self.rank_range(key, m, a as u64, b as u64);
            }
            Range::Score(lo, hi) => {
                let want = if q.rev || count < 0 {
                    usize::MAX
                } else {
                    (offset + count) as usize
                };
                self.score_range(key, m, &(*lo, *hi), want)?
            }
            Range::Lex(lo, hi, ..) => {
                let want = if q.rev || count < 0 {
                    usize::MAX
                } else {
                    (offset + count) as usize
                };
                self.lex_range(key, m, lo, hi, want)?
            }
        };
        if q.rev {
            got.reverse();
        }
        let mut got = got.split_off((offset as usize).min(got.len()));
        if count >= 0 {
            got.truncate(count as usize);
        }
        Ok(got)
    }

    /// ZRANGE's arguments from `args[2..]` (start stop [BYSCORE|BYLEX]
    /// [REV] [LIMIT o c] [WITHSCORES]).
    fn parse_range(args: &[Vec<u8>], store: bool) -> Res<RangeQuery> {
        let (start, stop) = (&args[0], &args[1]);
        let (mut by, mut rev, mut limit, mut scores) = (0u8, false, None, false);
        let mut i = 2;
        while i < args.len() {
            match args[i].to_ascii_lowercase().as_slice() {
                b"byscore" => by = 1,
                b"bylex" => by = 2,
                b"rev" => rev = true,
                b"withscores" if !store => scores = true,
                b"limit" if i + 2 < args.len() => {
                    let (Some(o), Some(c)) = (integer(&args[i + 1]), integer(&args[i + 2])) else {
                        return Err(not_integer());
                    };
                    limit = Some((o, c));
                    i += 2;
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        if limit.is_some() && by == 0 {
            return Err(Reply::err(
                "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
            ));
        }
        if scores && by == 2 {
            return Err(Reply::err(
                "syntax error, WITHSCORES not supported in combination with BYLEX",
            ));
        }
        // With REV the arguments are max then min.
        let (lo, hi) = if rev { (stop, start) } else { (start, stop) };
        let range = match by {
            0 => {
                let (Some(a), Some(b)) = (integer(start), integer(stop)) else {
                    return Err(not_integer());
                };
                Range::Rank(a, b)
            }
            1 => Range::Score(score_bound(lo)?, score_bound(hi)?),
            _ => {
                let (l, h) = (lex_bound(lo)?, lex_bound(hi)?);
                // "-" as the upper end or "+" as the lower: nothing.
                let empty = lo.as_slice() == b"+" || hi.as_slice() == b"-";
                Range::Lex(l, h, empty)
            }
        };
        Ok(RangeQuery {
            range,
            rev,
            limit,
            scores,
        })
    }

    pub(super) fn run_range(&mut self, key: &[u8], q: &RangeQuery) -> Res<Scored> {
        if let Range::Lex(_, _, true) = q.range {
            self.zset(key)?;
            return Ok(vec![]);
        }
        let Some(m) = self.zset(key)? else {
            return Ok(vec![]);
        };
        self.select(key, &m, q)
    }

    pub(super) fn zrange_command(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let q = Self::parse_range(&args[2..], false)?;
        let got = self.run_range(&args[1], &q)?;
        Ok(scored_reply(got, q.scores, self.proto))
    }

    pub(super) fn zrangestore(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (dst, src) = (&args[1], &args[2]);
        let q = Self::parse_range(&args[3..], true)?;
        let got = self.run_range(src, &q)?;
        self.store_scored(dst, got, "zrangestore")
    }

    /// ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX and
    /// ZREVRANGE, as forms of ZRANGE.
    pub(super) fn zrange_old(&mut self, name: &str, args: &[Vec<u8>]) -> Res<Reply> {
        let mut a: Vec<Vec<u8>> = args[2..4].to_vec();
        match name {
            "zrangebyscore" => a.push(b"byscore".to_vec()),
            "zrevrangebyscore" => a.extend([b"byscore".to_vec(), b"rev".to_vec()]),
            "zrangebylex" => a.push(b"bylex".to_vec()),
            "zrevrangebylex" => a.extend([b"bylex".to_vec(), b"rev".to_vec()]),
            _ => a.push(b"rev".to_vec()),
        }
        let rest = &args[4..];
        let mut i = 0;
        while i < rest.len() {
            let opt = rest[i].to_ascii_lowercase();
            match opt.as_slice() {
                b"withscores" if !name.ends_with("lex") => a.push(opt),
                b"limit" if name != "zrevrange" && i + 2 < rest.len() => {
                    a.extend([opt, rest[i + 1].clone(), rest[i + 2].clone()]);
                    i += 2;
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        let q = Self::parse_range(&a, false)?;
        let got = self.run_range(&args[1], &q)?;
        Ok(scored_reply(got, q.scores, self.proto))
    }

    pub(super) fn zcount(&mut self, key: &[u8], min: &[u8], max: &[u8], lex: bool) -> Res<Reply> {
        let q = if lex {
            let empty = min == b"+" || max == b"-";
            RangeQuery {
                range: Range::Lex(lex_bound(min)?, lex_bound(max)?, empty),
                rev: false,
                limit: None,
                scores: false,
            }
        } else {
            RangeQuery {
                range: Range::Score(score_bound(min)?, score_bound(max)?),
                rev: false,
                limit: None,
                scores: false,
            }
        };
        Ok(Reply::Int(self.run_range(key, &q)?.len() as i64))
    }
}
