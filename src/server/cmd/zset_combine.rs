//! ZUNION, ZINTER and ZDIFF, their STORE forms and ZINTERCARD: sorted
//! sets (and sets, whose members score 1) read whole and combined in
//! memory, as Redis does.

use std::collections::BTreeMap;

use super::zset::{scored_reply, Scored};
use super::{float, integer, not_integer, syntax_error, wrong_type, Res};
use crate::server::conn::Conn;
use crate::server::keys::MEMBER;
use crate::server::meta::Type;
use crate::server::resp::Reply;

/// How ZUNION, ZINTER and ZDIFF combine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Combine {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}
impl<'a> Conn<'a> {
    /// A sorted set or a set (scores of 1) named as an input of ZUNION and
    /// the rest; a missing key is empty.
    fn scored_input(&mut self, key: &[u8]) -> Res<Option<Scored>> {
        match self.lookup(key)? {
            None => Ok(None),
            Some(m) if m.kind == Type::ZSet => Ok(Some(self.all_scored(key, &m)?)),
            Some(m) if m.kind == Type::Set => Ok(Some(
                self.elements(key, m.version, MEMBER, usize::MAX)?
                    .into_iter()
                    .map(|(mem, _)| (super::sets::member_of(&mem).to_vec(), 1.0))
                    .collect(),
            )),
            Some(_) => Err(wrong_type()),
        }
    }

    pub(super) fn zcombine(
        &mut self,
        name: &str,
        store: Option<&Vec<u8>>,
        args: &[Vec<u8>],
    ) -> Res<Reply> {
        let op = match name.trim_end_matches("store") {
            "zunion" => Combine::Union,
            "zinter" => Combine::Inter,
            _ => Combine::Diff,
        };
        let n = match integer(&args[0]) {
            Some(n) if n > 0 => n as usize,
            Some(_) if store.is_some() => {
                return Err(Reply::err(format!(
                    "at least 1 input key is needed for '{name}' command"
                )))
            }
            Some(_) => {
                return Err(Reply::err(format!(
                    "at least 1 input key is needed for '{name}' command"
                )))
            }
            None => return Err(not_integer()),
        };
        if args.len() < n + 1 {
            return Err(syntax_error());
        }
        let names = &args[1..=n];
        let mut weights = vec![1.0; n];
        let mut agg = Aggregate::Sum;
        let mut scores = false;
        let mut i = n + 1;
        while i < args.len() {
            match args[i].to_ascii_lowercase().as_slice() {
                b"weights" if op != Combine::Diff && i + n < args.len() => {
                    for (j, w) in weights.iter_mut().enumerate() {
                        *w = float(&args[i + 1 + j])
                            .ok_or_else(|| Reply::err("weight value is not a float"))?;
                    }
                    i += n;
                }
                b"aggregate" if op != Combine::Diff && i + 1 < args.len() => {
                    agg = match args[i + 1].to_ascii_lowercase().as_slice() {
                        b"sum" => Aggregate::Sum,
                        b"min" => Aggregate::Min,
                        b"max" => Aggregate::Max,
                        _ => return Err(syntax_error()),
                    };
                    i += 1;
                }
                b"withscores" if store.is_none() => scores = true,
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        if let Some(d) = store {
            self.check_key(d)?;
        }
        for k in names {
            self.check_key(k)?;
        }
        let mut inputs = Vec::with_capacity(n);
        for k in names {
            inputs.push(self.scored_input(k)?);
        }
        let result = combine(op, agg, &weights, inputs);
        match store {
            Some(dst) => self.store_scored(dst, result, name),
            None => Ok(scored_reply(result, scores, self.proto)),
        }
    }

    pub(super) fn zintercard(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let n = match integer(&args[0]) {
            Some(n) if n > 0 => n as usize,
            Some(0) => {
                return Err(Reply::err(
                    "at least 1 input key is needed for 'zintercard' command",
                ))
            }
            _ => return Err(Reply::err("numkeys should be greater than 0")),
        };
        let (names, limit) = super::intercard_args(args, n)?;
        let mut inputs = Vec::with_capacity(n);
        for k in names {
            self.check_key(k)?;
            inputs.push(self.scored_input(k)?);
        }
        let mut c = combine(Combine::Inter, Aggregate::Sum, &vec![1.0; n], inputs).len();
        if limit > 0 {
            c = c.min(limit);
        }
        Ok(Reply::Int(c as i64))
    }
}

fn combine(op: Combine, agg: Aggregate, weights: &[f64], inputs: Vec<Option<Scored>>) -> Scored {
    let mut acc: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    let apply = |a: f64, b: f64| {
        let r = match agg {
            Aggregate::Sum => a + b,
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        };
        if r.is_nan() {
            0.0
        } else {
            r
        }
    };
    let weighted = |s: f64, w: f64| {
        let r = s * w;
        if r.is_nan() {
            0.0
        } else {
            r
        }
    };
    for (i, input) in inputs.into_iter().enumerate() {
        let items = input.unwrap_or_default();
        match op {
            Combine::Union => {
                for (mem, s) in items {
                    let s = weighted(s, weights[i]);
                    acc.entry(mem)
                        .and_modify(|a| *a = apply(*a, s))
                        .or_insert(s);
                }
            }
            Combine::Inter => {
                let next: BTreeMap<Vec<u8>, f64> = items
                    .into_iter()
                    .map(|(m, s)| (m, weighted(s, weights[i])))
                    .collect();
                if i == 0 {
                    acc = next;
                } else {
                    acc = acc
                        .into_iter()
                        .filter_map(|(m, a)| next.get(&m).map(|s| (m, apply(a, *s))))
                        .collect();
                }
            }
            Combine::Diff => {
                if i == 0 {
                    acc = items.into_iter().collect();
                } else {
                    for (m, _) in items {
                        acc.remove(&m);
                    }
                }
            }
        }
    }
    let mut out: Scored = acc.into_iter().collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    out
}
