//! The `struct` library Redis's scripts have (Roberto Ierusalimschy's
//! lua-struct): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, i])`
//! and `struct.size(fmt)`, with its format language:
//!
//! - `>` big endian, `<` little endian, `=` native (little here);
//! - `![n]` aligns fields to at most `n` bytes (a power of 2; 8 alone);
//! - `x` a padding byte; `b`/`B` a signed/unsigned char, `h`/`H` a short,
//!   `l`/`L` a long (8 bytes), `T` a size_t, `i[n]`/`I[n]` an integer of
//!   `n` bytes (4 by default, at most 8); `f` a float, `d` a double;
//! - `s` a zero-terminated string; `c[n]` `n` chars (`c0` in `unpack`:
//!   as many as the number unpacked just before; in `pack`: the whole
//!   string);
//! - spaces are ignored.

use mlua::{Lua, MultiValue, Result, String as LuaString, Table, Value};

/// The longest integer, in bytes.
const MAX_INT: usize = 8;
/// What `!` alone aligns to.
const MAX_ALIGN: usize = 8;

fn error(msg: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::runtime(msg.to_string())
}

/// The format as it is read.
struct Format<'f> {
    fmt: &'f [u8],
    at: usize,
    little: bool,
    align: usize,
}

/// One field of a format.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Field {
    Pad,
    Int {
        size: usize,
        signed: bool,
    },
    Float,
    Double,
    /// `s`.
    ZString,
    /// `c[n]`.
    Chars(usize),
}

impl Field {
    fn size(self) -> usize {
        match self {
            Field::Pad => 1,
            Field::Int { size, .. } => size,
            Field::Float => 4,
            Field::Double => 8,
            Field::ZString => 0,
            Field::Chars(n) => n,
        }
    }
}

impl<'f> Format<'f> {
    fn new(fmt: &'f [u8]) -> Format<'f> {
        Format {
            fmt,
            at: 0,
            little: true,
            align: 1,
        }
    }

    /// The number written at the cursor, or `default`.
    fn number(&mut self, default: usize) -> Result<usize> {
        let start = self.at;
        while self.at < self.fmt.len() && self.fmt[self.at].is_ascii_digit() {
            self.at += 1;
        }
        if start == self.at {
            return Ok(default);
        }
        std::str::from_utf8(&self.fmt[start..self.at])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| error("format size too large"))
    }

    /// The next field, with the padding before it; options are applied
    /// on the way.
    fn next(&mut self, len: usize) -> Result<Option<(usize, Field)>> {
        while self.at < self.fmt.len() {
            let opt = self.fmt[self.at];
            self.at += 1;
            let field = match opt {
                b' ' => continue,
                b'>' => {
                    self.little = false;
                    continue;
                }
                b'<' | b'=' => {
                    self.little = true;
                    continue;
                }
                b'!' => {
                    let a = self.number(MAX_ALIGN)?;
                    if !a.is_power_of_two() {
                        return Err(error(format!("alignment {a} is not a power of 2")));
                    }
                    self.align = a;
                    continue;
                }
                b'x' => Field::Pad,
                b'b' | b'B' => Field::Int {
                    size: 1,
                    signed: opt == b'b',
                },
                b'h' | b'H' => Field::Int {
                    size: 2,
                    signed: opt == b'h',
                },
                b'l' | b'L' => Field::Int {
                    size: 8,
                    signed: opt == b'l',
                },
                b'T' => Field::Int {
                    size: 8,
                    signed: false,
                },
                b'i' | b'I' => {
                    let size = self.number(4)?;
                    if size == 0 || size > MAX_INT {
                        return Err(error(format!(
                            "integral size {size} is larger than limit of {MAX_INT}"
                        )));
                    }
                    Field::Int {
                        size,
                        signed: opt == b'i',
                    }
                }
                b'f' => Field::Float,
                b'd' => Field::Double,
                b's' => Field::ZString,
                b'c' => Field::Chars(self.number(1)?),
                other => {
                    return Err(error(format!(
                        "invalid format option '{}'",
                        char::from(other)
                    )))
                }
            };
            let size = field.size().min(self.align);
            let pad = if matches!(field, Field::Chars(_) | Field::ZString) || size <= 1 {
                0
            } else {
                (size - (len & (size - 1))) & (size - 1)
            };
            return Ok(Some((pad, field)));
        }
        Ok(None)
    }
}

fn int_bytes(v: i128, size: usize, little: bool, out: &mut Vec<u8>) {
    let bytes = (v as u128).to_le_bytes();
    let mut b = bytes[..size].to_vec();
    if !little {
        b.reverse();
    }
    out.extend_from_slice(&b);
}

fn number_arg(args: &[Value], i: usize) -> Result<f64> {
    match args.get(i) {
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| {
                error(format!(
                    "bad argument #{} to 'pack' (number expected, got string)",
                    i + 2
                ))
            }),
        other => Err(error(format!(
            "bad argument #{} to 'pack' (number expected, got {})",
            i + 2,
            other.map_or("no value", |v| v.type_name())
        ))),
    }
}

fn string_arg(args: &[Value], i: usize) -> Result<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(n.to_string().into_bytes()),
        Some(Value::Number(n)) => Ok(n.to_string().into_bytes()),
        other => Err(error(format!(
            "bad argument #{} to 'pack' (string expected, got {})",
            i + 2,
            other.map_or("no value", |v| v.type_name())
        ))),
    }
}

/// `struct.pack(fmt, ...)`.
pub fn pack(fmt: &[u8], args: &[Value]) -> Result<Vec<u8>> {
    let mut f = Format::new(fmt);
    let mut out = Vec::new();
    let mut arg = 0;
    while let Some((pad, field)) = f.next(out.len())? {
        out.resize(out.len() + pad, 0);
        match field {
            Field::Pad => out.push(0),
            Field::Int { size, .. } => {
                let n = number_arg(args, arg)?;
                arg += 1;
                int_bytes(n.trunc() as i128, size, f.little, &mut out);
            }
            Field::Float | Field::Double => {
                let n = number_arg(args, arg)?;
                arg += 1;
                let start = out.len();
                if field == Field::Float {
                    out.extend_from_slice(&(n as f32).to_le_bytes());
                } else {
                    out.extend_from_slice(&n.to_le_bytes());
                }
                if !f.little {
                    out[start..].reverse();
                }
            }
            Field::ZString => {
                let s = string_arg(args, arg)?;
                arg += 1;
                if s.contains(&0) {
                    return Err(error("bad argument to 'pack' (string contains zeros)"));
                }
                out.extend_from_slice(&s);
                out.push(0);
            }
            Field::Chars(n) => {
                let s = string_arg(args, arg)?;
                arg += 1;
                let n = if n == 0 { s.len() } else { n };
                if s.len() < n {
                    return Err(error(format!(
                        "bad argument #{} to 'pack' (string too short)",
                        arg + 1
                    )));
                }
                out.extend_from_slice(&s[..n]);
            }
        }
    }
    Ok(out)
}

/// `struct.unpack(fmt, s, i)`: the values, then the position after them
/// (1-based).
pub fn unpack(lua: &Lua, fmt: &[u8], data: &[u8], start: usize) -> Result<MultiValue> {
    let mut f = Format::new(fmt);
    let mut out: Vec<Value> = Vec::new();
    let mut pos = start.saturating_sub(1);
    if pos > data.len() {
        return Err(error(
            "bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ));
    }
    let short = || error("bad argument #2 to 'unpack' (data string too short)");
    while let Some((pad, field)) = f.next(pos)? {
        pos += pad;
        let need = field.size();
        match field {
            Field::Pad => {
                if pos + 1 > data.len() {
                    return Err(short());
                }
                pos += 1;
            }
            Field::Int { size, signed } => {
                let b = data.get(pos..pos + size).ok_or_else(short)?;
                let mut le = b.to_vec();
                if !f.little {
                    le.reverse();
                }
                let mut v: u64 = 0;
                for (i, byte) in le.iter().enumerate() {
                    v |= u64::from(*byte) << (8 * i);
                }
                let n = if signed && size < 8 && v & (1 << (8 * size - 1)) != 0 {
                    (v | (!0u64 << (8 * size))) as i64 as f64
                } else if signed {
                    v as i64 as f64
                } else {
                    v as f64
                };
                out.push(Value::Number(n));
                pos += size;
            }
            Field::Float | Field::Double => {
                let mut le = data.get(pos..pos + need).ok_or_else(short)?.to_vec();
                if !f.little {
                    le.reverse();
                }
                let v = match le.try_into() {
                    Ok(b4) => f64::from(f32::from_le_bytes(b4)),
                    Err(b8) => f64::from_le_bytes(b8.try_into().expect("4 or 8 bytes")),
                };
                out.push(Value::Number(v));
                pos += need;
            }
            Field::ZString => {
                let rest = data.get(pos..).ok_or_else(short)?;
                let end = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| error("unfinished string in data"))?;
                out.push(Value::String(lua.create_string(&rest[..end])?));
                pos += end + 1;
            }
            Field::Chars(n) => {
                let n = if n == 0 {
                    // As many as the number unpacked just before.
                    match out.pop() {
                        Some(Value::Number(k)) if k >= 0.0 => k as usize,
                        _ => return Err(error("format 'c0' needs a previous size")),
                    }
                } else {
                    need
                };
                let b = data.get(pos..pos + n).ok_or_else(short)?;
                out.push(Value::String(lua.create_string(b)?));
                pos += n;
            }
        }
    }
    out.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_iter(out))
}

/// `struct.size(fmt)`.
pub fn size(fmt: &[u8]) -> Result<usize> {
    let mut f = Format::new(fmt);
    let mut len = 0;
    while let Some((pad, field)) = f.next(len)? {
        match field {
            Field::ZString => return Err(error("options 's' has no fixed size")),
            Field::Chars(0) => return Err(error("options 'c0' has no fixed size")),
            _ => len += pad + field.size(),
        }
    }
    Ok(len)
}

/// The `struct` table.
pub fn library(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, (fmt, args): (LuaString, MultiValue)| {
            let args: Vec<Value> = args.into_iter().collect();
            lua.create_string(pack(&fmt.as_bytes(), &args)?)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(
            |lua, (fmt, data, start): (LuaString, LuaString, Option<usize>)| {
                unpack(lua, &fmt.as_bytes(), &data.as_bytes(), start.unwrap_or(1))
            },
        )?,
    )?;
    t.set(
        "size",
        lua.create_function(|_, fmt: LuaString| Ok(size(&fmt.as_bytes())? as f64))?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lua: &Lua, code: &str) -> Vec<Value> {
        lua.load(code)
            .eval::<MultiValue>()
            .unwrap()
            .into_iter()
            .collect()
    }

    #[test]
    fn pack_unpack_and_size_as_lua_struct() {
        let lua = Lua::new();
        lua.globals().set("struct", library(&lua).unwrap()).unwrap();
        let s = |v: &Value| v.as_string().map(|s| s.as_bytes().to_vec());
        let n = |v: &Value| v.as_number().or(v.as_integer().map(|i| i as f64));
        let out = run(&lua, "return struct.pack('>HhBb', 258, -2, 255, -1)");
        assert_eq!(s(&out[0]).unwrap(), [1, 2, 0xff, 0xfe, 0xff, 0xff]);
        let out = run(
            &lua,
            "return struct.unpack('<i2I3', struct.pack('<i2I3', -300, 70000))",
        );
        assert_eq!(
            out.iter().map(|v| n(v).unwrap()).collect::<Vec<_>>(),
            [-300.0, 70000.0, 6.0]
        );
        let out = run(
            &lua,
            "return struct.unpack('>d f', struct.pack('>d f', 1.5, -0.25))",
        );
        assert_eq!(
            out.iter().map(|v| n(v).unwrap()).collect::<Vec<_>>(),
            [1.5, -0.25, 13.0]
        );
        let out = run(
            &lua,
            "return struct.unpack('s c3 Bc0', struct.pack('s c3 Bc0', 'hi', 'abcdef', 2, 'xy'))",
        );
        assert_eq!(s(&out[0]).unwrap(), b"hi");
        assert_eq!(s(&out[1]).unwrap(), b"abc");
        assert_eq!(s(&out[2]).unwrap(), b"xy");
        assert_eq!(n(&out[3]).unwrap(), 10.0);
        // Alignment: a byte, then an int aligned to 4.
        assert_eq!(
            n(&run(&lua, "return struct.size('!4 b i')")[0]).unwrap(),
            8.0
        );
        assert_eq!(n(&run(&lua, "return struct.size('b i')")[0]).unwrap(), 5.0);
        assert_eq!(
            n(&run(&lua, "return struct.size('>!bxd')")[0]).unwrap(),
            16.0
        );
        // Unpack from a position.
        let out = run(&lua, "return struct.unpack('B', '\\1\\2\\3', 2)");
        assert_eq!((n(&out[0]).unwrap(), n(&out[1]).unwrap()), (2.0, 3.0));
        for bad in [
            "struct.pack('i9', 1)",
            "struct.pack('z', 1)",
            "struct.unpack('I4', 'ab')",
            "struct.size('s')",
            "struct.pack('!3 i', 1)",
            "struct.pack('i')",
        ] {
            assert!(lua.load(bad).exec().is_err(), "{bad}");
        }
    }
}
