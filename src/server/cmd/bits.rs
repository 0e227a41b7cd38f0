//! Bit operations on strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP.
//! Bit 0 is the most significant bit of the first byte, as in Redis.

use super::{integer, not_integer, syntax_error, wrong_type, Res};
use crate::server::conn::Conn;
use crate::server::keys;
use crate::server::meta::{Meta, Type};
use crate::server::notify::{GENERIC, STRING};
use crate::server::resp::Reply;

/// The largest bit offset, as Redis's 512 MiB strings allow.
const MAX_BIT: i64 = (512 << 23) - 1;

fn bit_offset(arg: &[u8]) -> Res<u64> {
    match integer(arg) {
        Some(n) if (0..=MAX_BIT).contains(&n) => Ok(n as u64),
        _ => Err(Reply::err("bit offset is not an integer or out of range")),
    }
}

/// Redis's range of `start..=end` (negative from the end) over `len`
/// units: `None` when empty.
fn clamp(start: i64, end: i64, len: i64) -> Option<(i64, i64)> {
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { (len + end).max(0) } else { end }.min(len - 1);
    (len > 0 && start <= end).then_some((start, end))
}

/// Whether the `start end [BYTE|BIT]` arguments count bits.
fn unit_is_bit(arg: Option<&Vec<u8>>) -> Res<bool> {
    match arg.map(|a| a.to_ascii_lowercase()) {
        None => Ok(false),
        Some(a) if a == b"byte" => Ok(false),
        Some(a) if a == b"bit" => Ok(true),
        Some(_) => Err(syntax_error()),
    }
}

fn bit_at(v: &[u8], i: u64) -> bool {
    v.get((i / 8) as usize)
        .is_some_and(|b| b & (0x80 >> (i % 8)) != 0)
}

impl<'a> Conn<'a> {
    pub(super) fn bits(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "setbit" => self.setbit(&args[1], &args[2], &args[3]),
            "getbit" => self.getbit(&args[1], &args[2]),
            "bitcount" => self.bitcount(&args[1], &args[2..]),
            "bitpos" => self.bitpos(&args[1], &args[2..]),
            "bitop" => self.bitop(&args[1..]),
            "bitfield" => self.bitfield(args, false),
            "bitfield_ro" => self.bitfield(args, true),
            _ => return None,
        })
    }

    fn setbit(&mut self, key: &[u8], offset: &[u8], bit: &[u8]) -> Res<Reply> {
        let offset = bit_offset(offset)?;
        let on = match bit {
            b"0" => false,
            b"1" => true,
            _ => return Err(Reply::err("bit is not an integer or out of range")),
        };
        let (m, mut v) = self.string_bytes(key)?;
        let byte = (offset / 8) as usize;
        // A new key or a longer string is a change, whatever the bit.
        let grows = m.is_none() || v.len() <= byte;
        if v.len() <= byte {
            v.resize(byte + 1, 0);
        }
        let mask = 0x80u8 >> (offset % 8);
        let was = v[byte] & mask != 0;
        if !grows && was == on {
            // Nothing changes: no write, no event, as in Redis.
            return Ok(Reply::Int(was as i64));
        }
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        self.update_string(key, m, v)?;
        self.notify(STRING, "setbit", key);
        Ok(Reply::Int(was as i64))
    }

    fn getbit(&mut self, key: &[u8], offset: &[u8]) -> Res<Reply> {
        let offset = bit_offset(offset)?;
        let (_, v) = self.string_bytes(key)?;
        Ok(Reply::Int(bit_at(&v, offset) as i64))
    }

    fn bitcount(&mut self, key: &[u8], rest: &[Vec<u8>]) -> Res<Reply> {
        let range = match rest {
            [] => None,
            [s, e] | [s, e, _] => {
                let (Some(s), Some(e)) = (integer(s), integer(e)) else {
                    return Err(not_integer());
                };
                Some((s, e, unit_is_bit(rest.get(2))?))
            }
            _ => return Err(syntax_error()),
        };
        let (_, v) = self.string_bytes(key)?;
        let n = match range {
            // Both from the end and crossed: empty, before clamping makes
            // them meet at the first byte (as Redis 7.2 checks).
            Some((s, e, _)) if s < 0 && e < 0 && s > e => 0,
            None => v.iter().map(|b| b.count_ones() as u64).sum(),
            Some((s, e, false)) => match clamp(s, e, v.len() as i64) {
                Some((a, b)) => v[a as usize..=b as usize]
                    .iter()
                    .map(|b| b.count_ones() as u64)
                    .sum(),
                None => 0,
            },
            Some((s, e, true)) => match clamp(s, e, v.len() as i64 * 8) {
                Some((a, b)) => (a as u64..=b as u64).filter(|&i| bit_at(&v, i)).count() as u64,
                None => 0,
            },
        };
        Ok(Reply::Int(n as i64))
    }

    fn bitpos(&mut self, key: &[u8], rest: &[Vec<u8>]) -> Res<Reply> {
        let want = match rest[0].as_slice() {
            b"0" => false,
            b"1" => true,
            _ => return Err(Reply::err("The bit argument must be 1 or 0.")),
        };
        let num = |a: &Vec<u8>| integer(a).ok_or_else(not_integer);
        let (start, end, bit_unit) = match &rest[1..] {
            [] => (0, None, false),
            [s] => (num(s)?, None, false),
            [s, e] => (num(s)?, Some(num(e)?), false),
            [s, e, u] => (num(s)?, Some(num(e)?), unit_is_bit(Some(u))?),
            _ => return Err(syntax_error()),
        };
        let (m, v) = self.string_bytes(key)?;
        if m.is_none() {
            return Ok(Reply::Int(if want { -1 } else { 0 }));
        }
        let units = if bit_unit {
            v.len() as i64 * 8
        } else {
            v.len() as i64
        };
        let Some((a, b)) = clamp(start, end.unwrap_or(-1), units) else {
            return Ok(Reply::Int(-1));
        };
        let (from, to) = if bit_unit {
            (a as u64, b as u64)
        } else {
            (a as u64 * 8, b as u64 * 8 + 7)
        };
        if let Some(i) = (from..=to).find(|&i| bit_at(&v, i) == want) {
            return Ok(Reply::Int(i as i64));
        }
        // Looking for a clear bit with no end given: the string is taken
        // as padded with zeros, so the first one is just past it.
        Ok(Reply::Int(if !want && end.is_none() && !bit_unit {
            (to + 1) as i64
        } else {
            -1
        }))
    }

    fn bitop(&mut self, args: &[Vec<u8>]) -> Res<Reply> {
        let op = args[0].to_ascii_lowercase();
        let (dst, srcs) = (&args[1], &args[2..]);
        if srcs.is_empty() {
            return Err(Reply::err("wrong number of arguments for 'bitop' command"));
        }
        if !matches!(op.as_slice(), b"and" | b"or" | b"xor" | b"not") {
            return Err(syntax_error());
        }
        if op == b"not" && srcs.len() != 1 {
            return Err(Reply::err(
                "BITOP NOT must be called with a single source key.",
            ));
        }
        self.check_key(dst)?;
        for k in srcs {
            self.check_key(k)?;
        }
        let mut values = Vec::with_capacity(srcs.len());
        for k in srcs {
            match self.lookup(k)? {
                Some(m) if m.kind != Type::String => return Err(wrong_type()),
                m => values.push(
                    m.as_ref()
                        .and_then(Meta::value)
                        .unwrap_or_default()
                        .to_vec(),
                ),
            }
        }
        let len = values.iter().map(Vec::len).max().unwrap_or(0);
        let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
        let out: Vec<u8> = (0..len)
            .map(|i| match op.as_slice() {
                b"not" => !byte(&values[0], i),
                b"and" => values.iter().fold(0xff, |acc, v| acc & byte(v, i)),
                b"or" => values.iter().fold(0, |acc, v| acc | byte(v, i)),
                _ => values.iter().fold(0, |acc, v| acc ^ byte(v, i)),
            })
            .collect();
        if out.is_empty() {
            if self.lookup(dst)?.is_some() {
                self.write(vec![(keys::meta(dst), None)]);
                self.notify(GENERIC, "del", dst);
            }
        } else {
            let mut writes = Vec::new();
            self.check_string(out.len())?;
            let v = self.new_version()?;
            writes.push((
                keys::meta(dst),
                Some(crate::server::meta::encode_string(v, None, &out)),
            ));
            self.write(writes);
            self.notify(STRING, "set", dst);
        }
        Ok(Reply::Int(len as i64))
    }
}
