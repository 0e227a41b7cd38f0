//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted
//! as numbers or (ALPHA) as bytes, by themselves or by other keys (BY),
//! with other keys' values in their place (GET), a LIMIT, and STORE into
//! a list. As Redis: `BY` with no `*` (`nosort`) keeps the key's order,
//! a pattern `p*->f` reads field `f` of hash `p<element>`, `GET #` is the
//! element itself, and a missing BY key sorts as 0 (or first, ALPHA).

use crate::server::notify;
use std::cmp::Ordering;

use super::lists::End;
use super::{float, integer, syntax_error, wrong_type, Res};
use crate::server::conn::Conn;
use crate::server::keys;
use crate::server::meta::{Meta, Type};
use crate::server::resp::Reply;

/// What a SORT asks for.
#[derive(Default)]
struct Sort {
    by: Option<Vec<u8>>,
    limit: Option<(i64, i64)>,
    gets: Vec<Vec<u8>>,
    desc: bool,
    alpha: bool,
    store: Option<Vec<u8>>,
}

fn parse(args: &[Vec<u8>], read_only: bool) -> Res<Sort> {
    let mut s = Sort::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_ascii_lowercase();
        let rest = args.len() - i - 1;
        match a.as_slice() {
            b"asc" => s.desc = false,
            b"desc" => s.desc = true,
            b"alpha" => s.alpha = true,
            b"limit" if rest >= 2 => {
                let (Some(o), Some(c)) = (integer(&args[i + 1]), integer(&args[i + 2])) else {
                    return Err(super::not_integer());
                };
                s.limit = Some((o, c));
                i += 2;
            }
            b"store" if rest >= 1 && !read_only => {
                s.store = Some(args[i + 1].clone());
                i += 1;
            }
            b"by" if rest >= 1 => {
                s.by = Some(args[i + 1].clone());
                i += 1;
            }
            b"get" if rest >= 1 => {
                s.gets.push(args[i + 1].clone());
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok(s)
}

/// The key (and hash field) a pattern names for `elem`; `None` for a
/// pattern without `*`.
fn substitute(pattern: &[u8], elem: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let (post, field) = match after.windows(2).position(|w| w == b"->") {
        Some(f) if f + 2 < after.len() => (&after[..f], Some(after[f + 2..].to_vec())),
        _ => (after, None),
    };
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(post);
    Some((key, field))
}

/// An element and what it sorts by.
struct Item {
    elem: Vec<u8>,
    by: Option<Vec<u8>>,
    score: f64,
}

impl<'a> Conn<'a> {
    pub(super) fn sort(&mut self, args: &[Vec<u8>], read_only: bool) -> Res<Reply> {
        let key = &args[0];
        let s = parse(&args[1..], read_only)?;

        let m = self.lookup(key)?;
        let mut elems = match &m {
            None => Vec::new(),
            Some(m) => match m.kind {
                Type::List => {
                    let (head, tail) = m.ends();
                    self.items(key, m, head, tail)?
                }
                Type::Set => self.all_members(key, m)?,
                Type::ZSet => self
                    .all_scored(key, m)?
                    .into_iter()
                    .map(|(e, _)| e)
                    .collect(),
                _ => return Err(wrong_type()),
            },
        };
        let mut s = s;
        let mut nosort = s.by.as_ref().is_some_and(|p| !p.contains(&b'*'));
        // A list's and a sorted set's own order stand unless sorted; a
        // set's is arbitrary, so what is stored, or given to a script
        // (whose result must not depend on it), is sorted by bytes.
        if nosort
            && (s.store.is_some() || self.scripting)
            && m.as_ref().is_some_and(|m| m.kind == Type::Set)
        {
            (nosort, s.alpha, s.by) = (false, true, None);
        }
        if !nosort {
            let mut items = Vec::with_capacity(elems.len());
            for elem in elems {
                let by = match &s.by {
                    Some(p) => self.pattern_value(p, &elem)?,
                    None => Some(elem.clone()),
                };
                let score = if s.alpha {
                    0.0
                } else {
                    match &by {
                        Some(v) => float(v).ok_or_else(|| {
                            Reply::err("One or more scores can't be converted into double")
                        })?,
                        None => 0.0,
                    }
                };
                items.push(Item { elem, by, score });
            }
            items.sort_by(|a, b| {
                let c = if s.alpha {
                    a.by.cmp(&b.by)
                } else {
                    a.score
                        .partial_cmp(&b.score)
                        .unwrap_or(Ordering::Equal)
                        .then_with(|| a.elem.cmp(&b.elem))
                };
                if s.desc {
                    c.reverse()
                } else {
                    c
                }
            });
            elems = items.into_iter().map(|i| i.elem).collect();
        } else if s.desc && m.as_ref().is_some_and(|m| m.kind != Type::Set) {
            elems.reverse();
        }
        if let Some((offset, count)) = s.limit {
            let n = elems.len() as i64;
            let start = offset.clamp(0, n) as usize;
            let end = if count < 0 {
                n as usize
            } else {
                (start as i64).saturating_add(count).min(n) as usize
            };
            elems = elems[start..end.max(start)].to_vec();
        }
        let mut out: Vec<Option<Vec<u8>>> = Vec::new();
        if s.gets.is_empty() {
            out.extend(elems.into_iter().map(Some));
        } else {
            for elem in &elems {
                for g in &s.gets {
                    out.push(if g.as_slice() == b"#" {
                        Some(elem.clone())
                    } else {
                        self.pattern_value(g, elem)?
                    });
                }
            }
        }
        match &s.store {
            None => Ok(Reply::Array(
                out.into_iter()
                    .map(|v| v.map_or(Reply::Nil, Reply::Bulk))
                    .collect(),
            )),
            Some(dst) => self.store_list(dst, out),
        }
    }

    /// What pattern `p` names for `elem`: a string's value, a hash's
    /// field, or `None` (no such key or field, another type, no `*`).
    fn pattern_value(&mut self, p: &[u8], elem: &[u8]) -> Res<Option<Vec<u8>>> {
        let Some((key, field)) = substitute(p, elem) else {
            return Ok(None);
        };
        if self.check_key(&key).is_err() {
            return Ok(None);
        }
        let Some(m) = self.lookup(&key)? else {
            return Ok(None);
        };
        Ok(match (m.kind, field) {
            (Type::String, None) => m.value().map(<[u8]>::to_vec),
            (Type::Hash, Some(f)) => self.field(&key, &m, &f)?,
            _ => None,
        })
    }

    /// Replaces `dst` with a list of `values` (missing ones as empty
    /// strings); an empty result deletes it. The reply is the length.
    fn store_list(&mut self, dst: &[u8], values: Vec<Option<Vec<u8>>>) -> Res<Reply> {
        let old = self.lookup(dst)?;
        let mut writes = Vec::new();
        let n = values.len();
        if values.is_empty() {
            if old.is_some() {
                writes.push((keys::meta(dst), None));
            }
        } else {
            let values: Vec<Vec<u8>> = values.into_iter().map(Option::unwrap_or_default).collect();
            for v in &values {
                self.check_value(v.len())?;
            }
            let mut m = Meta::collection(Type::List, self.new_version()?);
            self.push_items(dst, &mut m, &values, End::Right, &mut writes);
            self.put(dst, &m, old.as_ref(), &mut writes);
        }
        self.write(writes);
        if n > 0 {
            self.notify(notify::LIST, "sortstore", dst);
        } else if old.is_some() {
            self.notify(notify::GENERIC, "del", dst);
        }
        Ok(Reply::Int(n as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::substitute;

    #[test]
    fn patterns_name_a_key_and_maybe_a_field() {
        assert_eq!(substitute(b"w_*", b"3"), Some((b"w_3".to_vec(), None)));
        assert_eq!(
            substitute(b"h_*->f", b"3"),
            Some((b"h_3".to_vec(), Some(b"f".to_vec())))
        );
        // `->` with nothing after it is part of the key.
        assert_eq!(substitute(b"h_*->", b"3"), Some((b"h_3->".to_vec(), None)));
        assert_eq!(substitute(b"nosort", b"3"), None);
    }
}
