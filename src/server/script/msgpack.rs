//! The `cmsgpack` library Redis's scripts have (lua-cmsgpack's API and
//! encoding choices): `pack(...)`, `unpack(s)`, `unpack_one(s, offset)`,
//! `unpack_limit(s, limit, offset)`. Integral numbers take the smallest
//! integer form, others a float32 when exact, else a float64; a table
//! whose keys are 1..n (or none) is an array, any other a map; tables
//! nest at most 16 deep (deeper ones are nil).

use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};

use super::convert::array_len;

const MAX_NESTING: usize = 16;

fn err(msg: &str) -> mlua::Error {
    mlua::Error::runtime(msg.to_string())
}

fn int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        let u = n as u64;
        match u {
            0..=127 => out.push(u as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, u as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(u as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(u as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&u.to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn number(out: &mut Vec<u8>, n: f64) {
    if n.is_finite() && (n as i64) as f64 == n {
        int(out, n as i64);
    } else if (n as f32) as f64 == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn length(out: &mut Vec<u8>, n: usize, fix: u8, fix_max: usize, k16: u8, k32: u8) {
    if n <= fix_max {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(k16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(k32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else {
        length(out, n, 0, 0, 0xda, 0xdb);
    }
    out.extend_from_slice(b);
}

fn encode(out: &mut Vec<u8>, v: &Value, level: usize) -> Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => int(out, *i),
        Value::Number(n) => number(out, *n),
        Value::String(s) => bytes(out, &s.as_bytes()),
        Value::Table(_) if level == MAX_NESTING => out.push(0xc0),
        Value::Table(t) => match array_len(t)? {
            Some(n) => {
                length(out, n, 0x90, 15, 0xdc, 0xdd);
                for i in 1..=n {
                    encode(out, &t.raw_get::<Value>(i)?, level + 1)?;
                }
            }
            None => {
                // Counted first, then encoded a pair at a time (a large
                // map held whole would pass Lua's reference limit).
                let n = t.pairs::<Value, Value>().count();
                length(out, n, 0x80, 15, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    encode(out, &k, level + 1)?;
                    encode(out, &val, level + 1)?;
                }
            }
        },
        // What msgpack cannot hold is nil, as lua-cmsgpack makes it.
        _ => out.push(0xc0),
    }
    Ok(())
}

struct Reader<'b> {
    b: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8]> {
        let s = self
            .b
            .get(self.at..self.at + n)
            .ok_or_else(|| err("Missing bytes in input."))?;
        self.at += n;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    fn value(&mut self, lua: &Lua) -> Result<Value> {
        let t = self.take(1)?[0];
        let num = |n: f64| Ok(Value::Number(n));
        match t {
            0x00..=0x7f => num(t as f64),
            0xe0..=0xff => num(t as i8 as f64),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(self.uint(1)? as u8 as i8 as f64),
            0xd1 => num(self.uint(2)? as u16 as i16 as f64),
            0xd2 => num(self.uint(4)? as u32 as i32 as f64),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xca => num(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xa0..=0xbf => self.string(lua, (t & 0x1f) as usize),
            0xd9 | 0xc4 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)
            }
            0xda | 0xc5 => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)
            }
            0xdb | 0xc6 => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)
            }
            0x90..=0x9f => self.array(lua, (t & 0x0f) as usize),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)
            }
            0x80..=0x8f => self.map(lua, (t & 0x0f) as usize),
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)
            }
            _ => Err(err("Bad data format in input.")),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<Value> {
        Ok(Value::String(lua.create_string(self.take(n)?)?))
    }

    fn array(&mut self, lua: &Lua, n: usize) -> Result<Value> {
        let t = lua.create_table_with_capacity(n.min(1 << 16), 0)?;
        for i in 1..=n {
            t.raw_set(i, self.value(lua)?)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> Result<Value> {
        let t = lua.create_table_with_capacity(0, n.min(1 << 16))?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if k != Value::Nil {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// Up to `limit` objects (0: all) of `s` from `offset`: the offset after
/// them (-1 at the end) and the objects.
fn unpack_from(lua: &Lua, s: &[u8], limit: usize, offset: usize) -> Result<(i64, Vec<Value>)> {
    if offset > s.len() {
        return Err(err("Start offset greater than input length"));
    }
    let mut r = Reader { b: s, at: offset };
    let mut out = Vec::new();
    while r.at < s.len() && (limit == 0 || out.len() < limit) {
        out.push(r.value(lua)?);
    }
    let next = if r.at >= s.len() { -1 } else { r.at as i64 };
    Ok((next, out))
}

/// The `cmsgpack` table.
pub fn library(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return Err(err("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for a in args.iter() {
                encode(&mut out, a, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::String| {
            let (_, vals) = unpack_from(lua, &s.as_bytes(), 0, 0)?;
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::String, Option<i64>)| {
            let (next, vals) =
                unpack_from(lua, &s.as_bytes(), 1, offset.unwrap_or(0).max(0) as usize)?;
            let mut out = vec![Value::Number(next as f64)];
            out.extend(vals);
            Ok(MultiValue::from_iter(out))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(
            |lua, (s, limit, offset): (mlua::String, Option<i64>, Option<i64>)| {
                let limit = limit.unwrap_or(0).max(0) as usize;
                let (next, vals) = unpack_from(
                    lua,
                    &s.as_bytes(),
                    limit,
                    offset.unwrap_or(0).max(0) as usize,
                )?;
                let mut out = vec![Value::Number(next as f64)];
                out.extend(vals);
                Ok(MultiValue::from_iter(out))
            },
        )?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(v: &[u8]) -> String {
        v.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn numbers_take_lua_cmsgpacks_forms() {
        let mut out = Vec::new();
        number(&mut out, 0.1);
        assert_eq!(hex(&out), "cb3fb999999999999a");
        out.clear();
        number(&mut out, -1_099_511_627_776.0);
        assert_eq!(hex(&out), "d3ffffff0000000000");
        out.clear();
        for n in [5.0, -3.0, 200.0, -100.0, 70000.0, 1.5] {
            number(&mut out, n);
        }
        assert_eq!(hex(&out), "05fdccc8d09cce00011170ca3fc00000");
    }
}
