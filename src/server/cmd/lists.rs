//! Lists: an element is a sub-key at a position, the list's metadata
//! holds its head and tail positions (elements at head..tail), so a push
//! or a pop at either end is one element write and one metadata write,
//! LINDEX one lookup and LRANGE reads only what it returns. An insert or
//! removal inside the list moves the elements on its shorter side.

use super::{integer, mpop_args, not_integer, syntax_error, wrong_type, Res, Writes};
use crate::server::conn::Conn;
use crate::server::keys::{self, ITEM};
use crate::server::meta::{Body, Meta, Type};
use crate::server::notify::{GENERIC, LIST};
use crate::server::resp::Reply;
use crate::server::shard::CHUNK;

/// Which end of a list.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Left,
    Right,
}

fn end_named(arg: &[u8]) -> Option<End> {
    match arg.to_ascii_lowercase().as_slice() {
        b"left" => Some(End::Left),
        b"right" => Some(End::Right),
        _ => None,
    }
}

/// Positions a pop reads ahead of it, at its end of the list.
const POP_AHEAD: u64 = 64;

fn item(key: &[u8], m: &Meta, pos: u64) -> Vec<u8> {
    keys::element(key, m.version, ITEM, &pos.to_be_bytes())
}

/// The engine keys of one list's elements, for a command that makes
/// several: the key is escaped once, into their common prefix.
struct Items(Vec<u8>);

impl Items {
    fn of(key: &[u8], m: &Meta) -> Items {
        Items(keys::sub(key, m.version, ITEM, 8))
    }

    /// [`item`] at `pos`.
    fn at(&self, pos: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.0.len() + 8);
        k.extend_from_slice(&self.0);
        k.extend_from_slice(&pos.to_be_bytes());
        k
    }
}

/// Redis's range of `start..=stop` over a list of `len`, as positions
/// from the head: `None` when empty.
fn range(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start as u64, stop.min(len - 1) as u64))
}

fn positive_count(arg: &[u8]) -> Res<i64> {
    match integer(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(Reply::err("value is out of range, must be positive")),
    }
}

impl<'a> Conn<'a> {
    pub(super) fn lists(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "lpush" => self.push_list(&args[1], &args[2..], End::Left, false),
            "rpush" => self.push_list(&args[1], &args[2..], End::Right, false),
            "lpushx" => self.push_list(&args[1], &args[2..], End::Left, true),
            "rpushx" => self.push_list(&args[1], &args[2..], End::Right, true),
            "lpop" => self.pop_command(args, End::Left),
            "rpop" => self.pop_command(args, End::Right),
            "llen" => self.llen(&args[1]),
            "lrange" => self.lrange(&args[1], &args[2], &args[3]),
            "lindex" => self.lindex(&args[1], &args[2]),
            "lset" => self.lset(&args[1], &args[2], &args[3]),
            "linsert" => self.linsert(args),
            "lrem" => self.lrem(&args[1], &args[2], &args[3]),
            "ltrim" => self.ltrim(&args[1], &args[2], &args[3]),
            "lpos" => self.lpos(args),
            "lmove" => self.lmove_command(&args[1..]),
            "rpoplpush" => self.lmove(&args[1], &args[2], End::Right, End::Left),
            "lmpop" => self.lmpop(&args[1..]),
            _ => return None,
        })
    }

    /// LMOVE's `source destination LEFT|RIGHT LEFT|RIGHT`.
    pub(super) fn lmove_command(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        match (end_named(&args[2]), end_named(&args[3])) {
            (Some(from), Some(to)) => self.lmove(&args[0], &args[1], from, to),
            _ => Err(syntax_error()),
        }
    }

    /// Where the sub-keys of `key` (metadata `m`) that reads may reach
    /// are, from and to (exclusive): a list's between its ends (see
    /// `Body::Ends`), any other type's under its version.
    pub(super) fn readable(key: &[u8], m: &Meta) -> (Vec<u8>, Vec<u8>) {
        match m.body {
            Body::Ends(head, tail) => (item(key, m, head), item(key, m, tail)),
            _ => keys::version_range(key, m.version),
        }
    }

    fn list(&mut self, key: &[u8]) -> Res<Option<Meta>> {
        self.typed(key, Type::List)
    }

    /// Elements of list `m` at positions `from..to`: a few (a pop, an
    /// LINDEX-like range) by point lookups, which cost less than a scan's
    /// merge of every source; more by scans of at most `CHUNK`.
    pub(super) fn items(&mut self, key: &[u8], m: &Meta, from: u64, to: u64) -> Res<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity((to - from).min(CHUNK as u64) as usize);
        if to - from <= 4 {
            for p in from..to {
                match self.get_raw(&item(key, m, p))? {
                    Some(v) => out.push(v),
                    None => break,
                }
            }
            return self.all_there(key, out, to - from);
        }
        let end = item(key, m, to);
        let mut at = from;
        while at < to {
            let want = ((to - at) as usize).min(CHUNK);
            let got = self.scan_raw(&item(key, m, at), Some(&end), want)?;
            if got.is_empty() {
                break;
            }
            at += got.len() as u64;
            out.extend(got.into_iter().map(|(_, v)| v));
        }
        self.all_there(key, out, to - from)
    }

    /// The elements at `from..to` that a pop at `end` takes, by point
    /// reads that read ahead the elements the next pops at that end will
    /// take, should they be in the block files.
    fn popped_items(
        &mut self,
        key: &[u8],
        m: &Meta,
        (from, to): (u64, u64),
        end: End,
    ) -> Res<Vec<Vec<u8>>> {
        let (head, tail) = m.ends();
        let (near_from, near_to) = match end {
            End::Left => (from, to.max(from.saturating_add(POP_AHEAD).min(tail))),
            End::Right => (from.min(to.saturating_sub(POP_AHEAD).max(head)), to),
        };
        let mut out = Vec::with_capacity((to - from) as usize);
        for p in from..to {
            // Made whole at once: a pop of one element (most pops) makes
            // one key, not a prefix and then the key.
            let at = item(key, m, p);
            let row = self
                .shard
                .get_ahead(
                    &at,
                    || (item(key, m, near_from), item(key, m, near_to)),
                    &mut self.deps,
                )
                .map_err(Reply::err)?;
            match row {
                Some(v) => out.push(v),
                None => break,
            }
        }
        self.all_there(key, out, to - from)
    }

    /// `got`, if it holds the `want` elements the metadata counts.
    fn all_there(&self, key: &[u8], got: Vec<Vec<u8>>, want: u64) -> Res<Vec<Vec<u8>>> {
        if got.len() as u64 != want {
            return Err(Reply::err(format!(
                "list '{}' is missing elements its metadata counts",
                String::from_utf8_lossy(key)
            )));
        }
        Ok(got)
    }

    /// Writes list metadata `m` (deleting the key once it is empty).
    fn put_list(&self, key: &[u8], m: &Meta, old: Option<&Meta>, writes: &mut Writes) {
        if m.count() == 0 {
            writes.push((self.meta_key(key), None));
        } else {
            self.put(key, m, old, writes);
        }
    }

    /// Appends the writes that push `elems` at `end` of list `m`.
    pub(super) fn push_items(
        &self,
        key: &[u8],
        m: &mut Meta,
        elems: &[Vec<u8>],
        end: End,
        w: &mut Writes,
    ) {
        let (mut head, mut tail) = m.ends();
        let items = Items::of(key, m);
        for e in elems {
            let pos = match end {
                End::Left => {
                    head -= 1;
                    head
                }
                End::Right => {
                    tail += 1;
                    tail - 1
                }
            };
            w.push((items.at(pos), Some(e.clone())));
        }
        m.body = Body::Ends(head, tail);
    }

    fn push_list(&mut self, key: &[u8], elems: &[Vec<u8>], end: End, only_if: bool) -> Res<Reply> {
        for e in elems {
            self.check_value(e.len())?;
        }
        let old = self.list(key)?;
        let mut m = match &old {
            Some(m) => m.clone(),
            None if only_if => return Ok(Reply::Int(0)),
            None => Meta::collection(Type::List, self.new_version()?),
        };
        let mut writes = Vec::with_capacity(elems.len() + 1);
        self.push_items(key, &mut m, elems, end, &mut writes);
        let len = m.count();
        self.put(key, &m, old.as_ref(), &mut writes);
        self.write(writes);
        self.notify_push(key, end);
        Ok(Reply::Int(len as i64))
    }

    /// A push's event: `lpush` or `rpush`.
    pub(super) fn notify_push(&mut self, key: &[u8], end: End) {
        let event = if end == End::Left { "lpush" } else { "rpush" };
        self.notify(LIST, event, key);
    }

    /// A pop's events: `lpop` or `rpop`, and `del` when it emptied the list.
    pub(super) fn notify_pop(&mut self, key: &[u8], end: End, emptied: bool) {
        let event = if end == End::Left { "lpop" } else { "rpop" };
        self.notify(LIST, event, key);
        if emptied {
            self.notify(GENERIC, "del", key);
        }
    }

    /// Pops up to `count` elements at `end` of list `m`: the elements and
    /// the writes (the metadata's last).
    fn pop_items(
        &mut self,
        key: &[u8],
        m: &mut Meta,
        count: u64,
        end: End,
    ) -> Res<(Vec<Vec<u8>>, Writes)> {
        let (head, tail) = m.ends();
        let n = count.min(tail - head);
        let (from, to) = match end {
            End::Left => (head, head + n),
            End::Right => (tail - n, tail),
        };
        // The metadata alone: the popped elements are outside the ends
        // now, where no read looks (see `Body::Ends`).
        let mut writes: Writes = Vec::with_capacity(1);
        let mut got = if n <= 4 {
            self.popped_items(key, m, (from, to), end)?
        } else {
            self.items(key, m, from, to)?
        };
        if end == End::Right {
            got.reverse();
        }
        let old = m.clone();
        m.body = match end {
            End::Left => Body::Ends(head + n, tail),
            End::Right => Body::Ends(head, tail - n),
        };
        self.put_list(key, m, Some(&old), &mut writes);
        Ok((got, writes))
    }

    fn pop_command(&mut self, args: &[Vec<u8>], end: End) -> Res<Reply> {
        let key = &args[1];
        let count = match args.len() {
            2 => None,
            3 => Some(positive_count(&args[2])?),
            _ => {
                let name = if end == End::Left { "lpop" } else { "rpop" };
                return Err(Reply::err(format!(
                    "wrong number of arguments for '{name}' command"
                )));
            }
        };
        let Some(mut m) = self.list(key)? else {
            return Ok(if count.is_some() {
                Reply::NilArray
            } else {
                Reply::Nil
            });
        };
        if count == Some(0) {
            return Ok(Reply::Array(vec![]));
        }
        let (got, writes) = self.pop_items(key, &mut m, count.unwrap_or(1) as u64, end)?;
        self.write(writes);
        self.notify_pop(key, end, m.count() == 0);
        Ok(match count {
            None => got.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
            Some(_) => Reply::Array(got.into_iter().map(Reply::Bulk).collect()),
        })
    }

    fn llen(&mut self, key: &[u8]) -> Res<Reply> {
        Ok(Reply::Int(self.list(key)?.map_or(0, |m| m.count() as i64)))
    }

    fn lrange(&mut self, key: &[u8], start: &[u8], stop: &[u8]) -> Res<Reply> {
        let (Some(start), Some(stop)) = (integer(start), integer(stop)) else {
            return Err(not_integer());
        };
        let Some(m) = self.list(key)? else {
            return Ok(Reply::Array(vec![]));
        };
        let Some((a, b)) = range(start, stop, m.count()) else {
            return Ok(Reply::Array(vec![]));
        };
        let head = m.ends().0;
        let got = self.items(key, &m, head + a, head + b + 1)?;
        Ok(Reply::Array(got.into_iter().map(Reply::Bulk).collect()))
    }

    /// The position of index `i` (negative: from the tail) in list `m`.
    fn position(m: &Meta, i: i64) -> Option<u64> {
        let (head, tail) = m.ends();
        let len = (tail - head) as i64;
        let i = if i < 0 { len + i } else { i };
        (0..len).contains(&i).then(|| head + i as u64)
    }

    fn lindex(&mut self, key: &[u8], index: &[u8]) -> Res<Reply> {
        let i = integer(index).ok_or_else(not_integer)?;
        let Some(m) = self.list(key)? else {
            return Ok(Reply::Nil);
        };
        let Some(pos) = Self::position(&m, i) else {
            return Ok(Reply::Nil);
        };
        Ok(self
            .get_raw(&item(key, &m, pos))?
            .map_or(Reply::Nil, Reply::Bulk))
    }

    fn lset(&mut self, key: &[u8], index: &[u8], elem: &[u8]) -> Res<Reply> {
        let i = integer(index).ok_or_else(not_integer)?;
        self.check_value(elem.len())?;
        let Some(m) = self.list(key)? else {
            return Err(Reply::err("no such key"));
        };
        let Some(pos) = Self::position(&m, i) else {
            return Err(Reply::err("index out of range"));
        };
        self.write(vec![(item(key, &m, pos), Some(elem.to_vec()))]);
        self.notify(LIST, "lset", key);
        Ok(Reply::ok())
    }

    /// Rewrites list `m` from index `at` on (towards the tail) as `rest`:
    /// the writes of an insert or a removal inside the list. The positions
    /// left over are outside the new tail, where no read looks.
    fn rewrite_tail(
        &self,
        key: &[u8],
        m: &mut Meta,
        at: u64,
        rest: &[Vec<u8>],
        writes: &mut Writes,
    ) {
        let (head, _) = m.ends();
        let start = head + at;
        for (i, e) in rest.iter().enumerate() {
            writes.push((item(key, m, start + i as u64), Some(e.clone())));
        }
        m.body = Body::Ends(head, start + rest.len() as u64);
    }

    /// The same towards the head: `rest` are the elements before index
    /// `at` (exclusive), in order.
    fn rewrite_head(
        &self,
        key: &[u8],
        m: &mut Meta,
        at: u64,
        rest: &[Vec<u8>],
        writes: &mut Writes,
    ) {
        let (head, tail) = m.ends();
        let end = head + at;
        let new_head = end - rest.len() as u64;
        for (i, e) in rest.iter().enumerate() {
            writes.push((item(key, m, new_head + i as u64), Some(e.clone())));
        }
        m.body = Body::Ends(new_head, tail);
    }

    fn linsert(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, pivot, elem) = (&args[1], &args[3], &args[4]);
        let after = match args[2].to_ascii_lowercase().as_slice() {
            b"before" => false,
            b"after" => true,
            _ => return Err(syntax_error()),
        };
        self.check_value(elem.len())?;
        let Some(mut m) = self.list(key)? else {
            return Ok(Reply::Int(0));
        };
        let (head, tail) = m.ends();
        let all = self.items(key, &m, head, tail)?;
        let Some(i) = all.iter().position(|e| e == pivot) else {
            return Ok(Reply::Int(-1));
        };
        let at = i + after as usize;
        let old = m.clone();
        let mut writes = Vec::new();
        if at >= all.len() / 2 {
            let mut rest = vec![elem.clone()];
            rest.extend_from_slice(&all[at..]);
            self.rewrite_tail(key, &mut m, at as u64, &rest, &mut writes);
        } else {
            let mut rest = all[..at].to_vec();
            rest.push(elem.clone());
            self.rewrite_head(key, &mut m, at as u64, &rest, &mut writes);
        }
        let len = m.count();
        self.put(key, &m, Some(&old), &mut writes);
        self.write(writes);
        self.notify(LIST, "linsert", key);
        Ok(Reply::Int(len as i64))
    }

    fn lrem(&mut self, key: &[u8], count: &[u8], elem: &[u8]) -> Res<Reply> {
        let count = integer(count).ok_or_else(not_integer)?;
        let Some(mut m) = self.list(key)? else {
            return Ok(Reply::Int(0));
        };
        let (head, tail) = m.ends();
        let all = self.items(key, &m, head, tail)?;
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut gone = vec![false; all.len()];
        let mut removed = 0;
        let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
            Box::new((0..all.len()).rev())
        } else {
            Box::new(0..all.len())
        };
        for i in order {
            if removed == limit {
                break;
            }
            if all[i] == elem {
                gone[i] = true;
                removed += 1;
            }
        }
        if removed == 0 {
            return Ok(Reply::Int(0));
        }
        let old = m.clone();
        let mut writes = Vec::new();
        if removed == all.len() {
            writes.push((self.meta_key(key), None));
        } else {
            let first = gone.iter().position(|&g| g).expect("one is gone");
            let last = gone.iter().rposition(|&g| g).expect("one is gone");
            if all.len() - first <= last + 1 {
                let rest: Vec<Vec<u8>> = (first..all.len())
                    .filter(|&i| !gone[i])
                    .map(|i| all[i].clone())
                    .collect();
                self.rewrite_tail(key, &mut m, first as u64, &rest, &mut writes);
            } else {
                let rest: Vec<Vec<u8>> = (0..=last)
                    .filter(|&i| !gone[i])
                    .map(|i| all[i].clone())
                    .collect();
                self.rewrite_head(key, &mut m, last as u64 + 1, &rest, &mut writes);
            }
            self.put(key, &m, Some(&old), &mut writes);
        }
        self.write(writes);
        self.notify(LIST, "lrem", key);
        if removed == all.len() {
            self.notify(GENERIC, "del", key);
        }
        Ok(Reply::Int(removed as i64))
    }

    fn ltrim(&mut self, key: &[u8], start: &[u8], stop: &[u8]) -> Res<Reply> {
        let (Some(start), Some(stop)) = (integer(start), integer(stop)) else {
            return Err(not_integer());
        };
        let Some(mut m) = self.list(key)? else {
            return Ok(Reply::ok());
        };
        let (head, tail) = m.ends();
        let mut writes = Vec::new();
        let emptied = range(start, stop, m.count()).is_none();
        match range(start, stop, m.count()) {
            None => writes.push((self.meta_key(key), None)),
            Some((a, b)) => {
                let (new_head, new_tail) = (head + a, head + b + 1);
                if (new_head, new_tail) == (head, tail) {
                    return Ok(Reply::ok());
                }
                let old = m.clone();
                m.body = Body::Ends(new_head, new_tail);
                self.put(key, &m, Some(&old), &mut writes);
            }
        }
        self.write(writes);
        self.notify(LIST, "ltrim", key);
        if emptied {
            self.notify(GENERIC, "del", key);
        }
        Ok(Reply::ok())
    }

    fn lpos(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (key, elem) = (&args[1], &args[2]);
        let (mut rank, mut count, mut maxlen) = (1i64, None, 0i64);
        let mut opts = args[3..].chunks(2);
        for pair in &mut opts {
            let [opt, value] = pair else {
                return Err(syntax_error());
            };
            let n = integer(value).ok_or_else(not_integer)?;
            match opt.to_ascii_lowercase().as_slice() {
                b"rank" if n == 0 => return Err(Reply::err("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")),
                b"rank" if n == i64::MIN => return Err(Reply::err("value is out of range")),
                b"rank" => rank = n,
                b"count" if n < 0 => return Err(Reply::err("COUNT can't be negative")),
                b"count" => count = Some(n),
                b"maxlen" if n < 0 => return Err(Reply::err("MAXLEN can't be negative")),
                b"maxlen" => maxlen = n,
                _ => return Err(syntax_error()),
            }
        }
        let none = if count.is_some() {
            Reply::Array(vec![])
        } else {
            Reply::Nil
        };
        let Some(m) = self.list(key)? else {
            return Ok(none);
        };
        let (head, tail) = m.ends();
        let all = self.items(key, &m, head, tail)?;
        let len = all.len();
        let scan = if maxlen == 0 {
            len
        } else {
            (maxlen as usize).min(len)
        };
        let want = match count {
            Some(0) => usize::MAX,
            Some(n) => n as usize,
            None => 1,
        };
        let mut skip = rank.unsigned_abs() - 1;
        let mut found = Vec::new();
        for step in 0..scan {
            let i = if rank > 0 { step } else { len - 1 - step };
            if all[i] == elem.as_slice() {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                found.push(Reply::Int(i as i64));
                if found.len() == want {
                    break;
                }
            }
        }
        Ok(match count {
            Some(_) => Reply::Array(found),
            None => found.into_iter().next().unwrap_or(none),
        })
    }

    fn lmove(&mut self, from: &[u8], to: &[u8], out: End, into: End) -> Res<Reply> {
        let Some(mut src) = self.list(from)? else {
            return Ok(Reply::Nil);
        };
        let dst = if from == to {
            None
        } else {
            match self.lookup(to)? {
                Some(d) if d.kind != Type::List => return Err(wrong_type()),
                d => Some(d),
            }
        };
        if dst.is_none() && src.count() == 1 {
            // Rotating a list of one element leaves it as it is.
            let (head, _) = src.ends();
            let got = self.items(from, &src, head, head + 1)?;
            self.notify_push(to, into);
            self.notify_pop(from, out, false);
            return Ok(Reply::Bulk(got.into_iter().next().expect("one element")));
        }
        let before = src.clone();
        let (got, mut writes) = self.pop_items(from, &mut src, 1, out)?;
        let elem = got.into_iter().next().expect("a list has an element");
        let src_left = src.count();
        let (mut m, old) = match dst.clone() {
            // The same list: push onto what the pop left (its metadata is
            // written once, after).
            None => {
                writes.pop();
                (src, Some(before))
            }
            Some(Some(d)) => (d.clone(), Some(d)),
            Some(None) => (Meta::collection(Type::List, self.new_version()?), None),
        };
        self.push_items(to, &mut m, std::slice::from_ref(&elem), into, &mut writes);
        self.put(to, &m, old.as_ref(), &mut writes);
        self.write(writes);
        self.notify_push(to, into);
        self.notify_pop(from, out, dst.is_some() && src_left == 0);
        Ok(Reply::Bulk(elem))
    }

    pub(super) fn lmpop(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let (names, at, count) = mpop_args(args)?;
        let end = end_named(at).ok_or_else(syntax_error)?;
        for k in names {
            self.check_key(k)?;
        }
        for k in names {
            if let Some(mut m) = self.list(k)? {
                let (got, writes) = self.pop_items(k, &mut m, count, end)?;
                self.write(writes);
                self.notify_pop(k, end, m.count() == 0);
                return Ok(Reply::Array(vec![
                    Reply::Bulk(k.clone()),
                    Reply::Array(got.into_iter().map(Reply::Bulk).collect()),
                ]));
            }
        }
        Ok(Reply::NilArray)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::meta::LIST_MIDDLE;

    #[test]
    fn a_prefix_made_once_gives_every_element_key() {
        for key in [&b"q"[..], b"", b"a\0b\0\0", b"\xff\x00"] {
            for version in [0, 1, 1 << 40, u64::MAX] {
                let m = Meta::collection(Type::List, version);
                let items = Items::of(key, &m);
                for pos in [0, 1, 255, 256, LIST_MIDDLE, u64::MAX] {
                    assert_eq!(items.at(pos), item(key, &m, pos));
                }
            }
        }
    }
}
