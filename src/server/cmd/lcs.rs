//! LCS: the longest common subsequence of two strings, by the dynamic
//! programme Redis uses, with its replies (the string, LEN, or IDX with
//! the matching ranges from the end, MINMATCHLEN, WITHMATCHLEN).

use super::{integer, not_integer, syntax_error, Res};
use crate::server::conn::Conn;
use crate::server::meta::{Meta, Type};
use crate::server::resp::Reply;

impl<'a> Conn<'a> {
    pub(super) fn lcs(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let mut values = Vec::with_capacity(2);
        for k in &args[1..3] {
            match self.lookup(k)? {
                Some(m) if m.kind != Type::String => {
                    return Err(Reply::err("The specified keys must contain string values"))
                }
                m => values.push(
                    m.as_ref()
                        .and_then(Meta::value)
                        .unwrap_or_default()
                        .to_vec(),
                ),
            }
        }
        let (mut getlen, mut getidx, mut withlen, mut minlen) = (false, false, false, 0i64);
        let mut i = 3;
        while i < args.len() {
            match args[i].to_ascii_lowercase().as_slice() {
                b"idx" => getidx = true,
                b"len" => getlen = true,
                b"withmatchlen" => withlen = true,
                b"minmatchlen" if i + 1 < args.len() => {
                    minlen = integer(&args[i + 1]).ok_or_else(not_integer)?.max(0);
                    i += 1;
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        if getlen && getidx {
            return Err(Reply::err(
                "If you want both the length and indexes, please just use IDX.",
            ));
        }
        let (a, b) = (&values[0], &values[1]);
        let cells = (a.len() + 1) * (b.len() + 1);
        if cells * 4 > self.shared.opts.limits.max_bulk {
            return Err(Reply::err(
                "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            ));
        }
        let w = b.len() + 1;
        let mut t = vec![0u32; cells];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                t[i * w + j] = if a[i - 1] == b[j - 1] {
                    t[(i - 1) * w + j - 1] + 1
                } else {
                    t[(i - 1) * w + j].max(t[i * w + j - 1])
                };
            }
        }
        let total = t[a.len() * w + b.len()];
        if getlen {
            return Ok(Reply::Int(total as i64));
        }
        let mut result = vec![0u8; total as usize];
        let mut idx = total as usize;
        let mut matches = Vec::new();
        // The range being grown backwards: a start, a end, b start, b end.
        let mut range: Option<(usize, usize, usize, usize)> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                result[idx - 1] = a[i - 1];
                match &mut range {
                    None => range = Some((i - 1, i - 1, j - 1, j - 1)),
                    Some(r) if r.0 == i && r.2 == j => {
                        r.0 -= 1;
                        r.2 -= 1;
                    }
                    Some(_) => emit = true,
                }
                if range.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if t[(i - 1) * w + j] > t[i * w + j - 1] {
                    i -= 1;
                } else {
                    j -= 1;
                }
                if range.is_some() {
                    emit = true;
                }
            }
            if emit {
                if let Some((a0, a1, b0, b1)) = range.take() {
                    let len = (a1 - a0 + 1) as i64;
                    if minlen == 0 || len >= minlen {
                        let mut m = vec![
                            Reply::Array(vec![Reply::Int(a0 as i64), Reply::Int(a1 as i64)]),
                            Reply::Array(vec![Reply::Int(b0 as i64), Reply::Int(b1 as i64)]),
                        ];
                        if withlen {
                            m.push(Reply::Int(len));
                        }
                        matches.push(Reply::Array(m));
                    }
                }
            }
        }
        if !getidx {
            return Ok(Reply::Bulk(result));
        }
        Ok(Reply::Map(vec![
            (Reply::bulk("matches"), Reply::Array(matches)),
            (Reply::bulk("len"), Reply::Int(total as i64)),
        ]))
    }
}
