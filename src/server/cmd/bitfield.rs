//! BITFIELD and BITFIELD_RO: signed and unsigned integers of 1 to 64 bits
//! (unsigned to 63) at any bit offset of a string, with GET, SET, INCRBY
//! and OVERFLOW WRAP, SAT or FAIL, as Redis's bitops.c does them.

use super::{integer, not_integer, syntax_error, Res};
use crate::server::conn::Conn;
use crate::server::resp::Reply;

/// The largest bit offset, as Redis's 512 MiB strings allow.
const MAX_BIT: u64 = (512 << 23) - 1;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Code {
    Get,
    Set,
    Incr,
}

struct Op {
    code: Code,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

fn field_type(arg: &[u8]) -> Res<(bool, u32)> {
    let bad = || {
        Reply::err("Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
    };
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    match integer(&arg[1..]) {
        Some(b) if b >= 1 && (b <= 63 || (signed && b == 64)) => Ok((signed, b as u32)),
        _ => Err(bad()),
    }
}

fn field_offset(arg: &[u8], bits: u32) -> Res<u64> {
    let bad = || Reply::err("bit offset is not an integer or out of range");
    let (hash, digits) = match arg.first() {
        Some(b'#') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let n = integer(digits).ok_or_else(bad)?;
    let n = if hash {
        n.checked_mul(bits as i64).ok_or_else(bad)?
    } else {
        n
    };
    if n < 0 || n as u64 > MAX_BIT {
        return Err(bad());
    }
    Ok(n as u64)
}

fn get_bits(v: &[u8], offset: u64, bits: u32) -> u64 {
    let mut out = 0u64;
    for i in 0..bits as u64 {
        let at = offset + i;
        let bit = v
            .get((at / 8) as usize)
            .is_some_and(|b| b & (0x80 >> (at % 8)) != 0);
        out = (out << 1) | bit as u64;
    }
    out
}

fn set_bits(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let at = offset + i;
        let bit = (value >> (bits as u64 - 1 - i)) & 1 == 1;
        let byte = &mut v[(at / 8) as usize];
        let mask = 0x80u8 >> (at % 8);
        if bit {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

fn signed_of(raw: u64, bits: u32) -> i64 {
    if bits == 64 {
        return raw as i64;
    }
    let shift = 64 - bits;
    ((raw << shift) as i64) >> shift
}

/// `value + incr` as a field of `bits` unsigned bits: the result, or
/// `None` when it overflows under FAIL.
fn add_unsigned(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let sum = value as i128 + incr as i128;
    if (0..=max as i128).contains(&sum) {
        return Some(sum as u64);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if sum > max as i128 { max } else { 0 }),
        Overflow::Wrap => Some((sum as u128 as u64) & max),
    }
}

/// The same for a signed field.
fn add_signed(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let sum = value as i128 + incr as i128;
    if (min as i128..=max as i128).contains(&sum) {
        return Some(sum as i64);
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if sum > max as i128 { max } else { min }),
        Overflow::Wrap => Some(signed_of(sum as u128 as u64, bits)),
    }
}

fn parse(args: &[Vec<u8>]) -> Res<Vec<Op>> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let code = match args[j].to_ascii_lowercase().as_slice() {
            b"get" if left >= 2 => Code::Get,
            b"set" if left >= 3 => Code::Set,
            b"incrby" if left >= 3 => Code::Incr,
            b"overflow" if left >= 1 => {
                overflow = match args[j + 1].to_ascii_lowercase().as_slice() {
                    b"wrap" => Overflow::Wrap,
                    b"sat" => Overflow::Sat,
                    b"fail" => Overflow::Fail,
                    _ => return Err(Reply::err("Invalid OVERFLOW type specified")),
                };
                j += 2;
                continue;
            }
            _ => return Err(syntax_error()),
        };
        let (signed, bits) = field_type(&args[j + 1])?;
        let offset = field_offset(&args[j + 2], bits)?;
        let value = if code == Code::Get {
            0
        } else {
            integer(&args[j + 3]).ok_or_else(not_integer)?
        };
        ops.push(Op {
            code,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if code == Code::Get { 3 } else { 4 };
    }
    Ok(ops)
}

impl<'a> Conn<'a> {
    pub(super) fn bitfield(&mut self, args: &[Vec<u8>], readonly: bool) -> Res<Reply> {
        let key = &args[1];
        let ops = parse(args)?;
        let writes = ops.iter().any(|o| o.code != Code::Get);
        if writes && readonly {
            return Err(Reply::err("BITFIELD_RO only supports the GET subcommand"));
        }
        let (m, mut v) = self.string_bytes(key)?;
        // Whether the string changes: a new key or a longer string does,
        // else only a write of bits that differ (no write otherwise, as
        // in Redis).
        let mut changed = writes && m.is_none();
        if writes {
            let end = ops
                .iter()
                .filter(|o| o.code != Code::Get)
                .map(|o| (o.offset + o.bits as u64).div_ceil(8) as usize)
                .max()
                .unwrap_or(0);
            if v.len() < end {
                v.resize(end, 0);
                changed = true;
            }
        }
        let mut out = Vec::with_capacity(ops.len());
        for o in &ops {
            let raw = get_bits(&v, o.offset, o.bits);
            if o.code == Code::Get {
                out.push(Reply::Int(if o.signed {
                    signed_of(raw, o.bits)
                } else {
                    raw as i64
                }));
                continue;
            }
            let (old, new) = if o.signed {
                let old = signed_of(raw, o.bits);
                let new = match o.code {
                    Code::Incr => add_signed(old, o.value, o.bits, o.overflow),
                    _ => add_signed(o.value, 0, o.bits, o.overflow),
                };
                (old, new.map(|n| (n, n as u64)))
            } else {
                let new = match o.code {
                    Code::Incr => add_unsigned(raw, o.value, o.bits, o.overflow),
                    // A value to SET is taken as unsigned, as Redis does.
                    _ => {
                        let (val, max) = (o.value as u64, mask(o.bits));
                        match o.overflow {
                            _ if val <= max => Some(val),
                            Overflow::Fail => None,
                            Overflow::Sat => Some(max),
                            Overflow::Wrap => Some(val & max),
                        }
                    }
                };
                (raw as i64, new.map(|n| (n as i64, n)))
            };
            match new {
                None => out.push(Reply::Nil),
                Some((shown, bits)) => {
                    out.push(Reply::Int(if o.code == Code::Incr { shown } else { old }));
                    changed |= bits & mask(o.bits) != raw;
                    set_bits(&mut v, o.offset, o.bits, bits & mask(o.bits));
                }
            }
        }
        if changed {
            self.update_string(key, m, v)?;
            self.notify(crate::server::notify::STRING, "setbit", key);
        }
        Ok(Reply::Array(out))
    }
}

fn mask(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_as_redis_handles_it() {
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(add_unsigned(250, 10, 8, Overflow::Fail), None);
        assert_eq!(add_unsigned(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(add_signed(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(add_signed(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(add_signed(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
        let mut v = vec![0u8; 3];
        set_bits(&mut v, 5, 10, 0b10_1010_1010);
        assert_eq!(get_bits(&v, 5, 10), 0b10_1010_1010);
        assert_eq!(signed_of(0b1111, 4), -1);
    }
}
