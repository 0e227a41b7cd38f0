//! Replies to Lua values and back, as Redis's documentation gives the
//! conversions: RESP2's (an integer is a number, a bulk string a string,
//! a null `false`, a status `{ok=...}`, an error `{err=...}`, an array a
//! table) unless the script asked for RESP3 with `redis.setresp(3)`
//! (nulls are `nil`, doubles `{double=n}`, maps `{map={...}}`); a
//! script's result goes the other way, in the client's protocol.

use mlua::{Lua, Result, Table, Value};

use crate::server::resp::{format_double, Reply};

/// A number as Lua 5.1 prints one (`%.14g`).
pub fn lua_number(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{n:.13e}");
    let (mantissa, exp) = sci.split_once('e').expect("an exponent");
    let exp: i32 = exp.parse().expect("a number");
    if !(-4..14).contains(&exp) {
        let m = mantissa.trim_end_matches('0').trim_end_matches('.');
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    let decimals = (13 - exp).max(0) as usize;
    let fixed = format!("{n:.decimals$}");
    if fixed.contains('.') {
        fixed
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        fixed
    }
}

/// `n` when the keys of table `t` are exactly 1..n (n may be 0): how
/// cjson and cmsgpack tell an array from a map.
pub fn array_len(t: &Table) -> Result<Option<usize>> {
    let (mut count, mut max) = (0usize, 0usize);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let i = match k {
            Value::Integer(i) if i > 0 => i as usize,
            Value::Number(f) if f > 0.0 && f.fract() == 0.0 => f as usize,
            _ => return Ok(None),
        };
        count += 1;
        max = max.max(i);
    }
    Ok((max == count).then_some(count))
}

/// The argument of a `redis.call`: a string as it is, a number as Redis
/// writes one ([`redis_number`]); `None` for anything else.
pub fn argument(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(redis_number(*i as f64).into_bytes()),
        Value::Number(n) => Some(redis_number(*n).into_bytes()),
        _ => None,
    }
}

/// A string, or a number as Lua prints it (`lua_tolstring`, as
/// `redis.sha1hex` reads its argument); `None` for anything else.
pub fn lua_text(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(n) => Some(lua_number(*n).into_bytes()),
        _ => None,
    }
}

/// A number passed to `redis.call`, as Redis 7.2 writes it: an integer
/// (within ±2^62) as its digits, anything else as the shortest decimal
/// that reads back the same, in the layout of Redis's `fpconv_dtoa`
/// (plain up to 7 zeros past the digits or 6 places after the point,
/// then `d.ddde±x`). Lua's own `%.14g` would lose digits.
pub fn redis_number(n: f64) -> String {
    const HALF: f64 = (i64::MAX / 2) as f64;
    if (-HALF..=HALF).contains(&n) && n == n.trunc() {
        return (n as i64).to_string();
    }
    let mut out = String::with_capacity(24);
    if n.is_sign_negative() {
        out.push('-');
    }
    let a = n.abs();
    if a.is_nan() {
        out.push_str("nan");
        return out;
    }
    if a.is_infinite() {
        out.push_str("inf");
        return out;
    }
    // The shortest digits and the exponent of the first of them.
    let sci = format!("{a:e}");
    let (mantissa, exp) = sci.split_once('e').expect("an exponent");
    let digits = mantissa.replace('.', "");
    let first: i32 = exp.parse().expect("a number");
    let nd = digits.len() as i32;
    // The exponent of the last digit.
    let k = first - nd + 1;
    let exp = first.abs();
    if k >= 0 && exp < nd + 7 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', k as usize));
    } else if k < 0 && (k > -7 || exp < 4) {
        let point = nd + k;
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&digits);
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if nd > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if first < 0 { '-' } else { '+' });
        out.push_str(&exp.to_string());
    }
    out
}

/// `{err = msg}`, as redis.pcall returns an error.
pub fn error_table(lua: &Lua, msg: &str) -> Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", msg)?;
    Ok(Value::Table(t))
}

/// Redis's field of an error table whose error was counted where it
/// arose (a script's call), so that the script's reply carrying it is not
/// counted again.
const COUNTED: &str = "ignore_error_stats_update";

/// An error table of a call's error, already counted.
pub fn counted_error(lua: &Lua, msg: &str) -> Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", msg)?;
    t.raw_set(COUNTED, true)?;
    Ok(Value::Table(t))
}

/// Whether `v` is an error table whose error was counted.
pub fn is_counted(v: &Value) -> bool {
    matches!(v, Value::Table(t) if t.raw_get::<bool>(COUNTED).unwrap_or(false))
}

fn single(lua: &Lua, key: &str, v: impl mlua::IntoLua) -> Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(key, v)?;
    Ok(Value::Table(t))
}

fn array(lua: &Lua, items: Vec<Reply>, resp3: bool) -> Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, r) in items.into_iter().enumerate() {
        t.raw_set(i + 1, to_lua(lua, r, resp3)?)?;
    }
    Ok(Value::Table(t))
}

/// A command's reply as the script sees it.
pub fn to_lua(lua: &Lua, r: Reply, resp3: bool) -> Result<Value> {
    Ok(match r {
        Reply::Int(n) => Value::Number(n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(&b)?),
        Reply::BulkFrom(b, at) => Value::String(lua.create_string(&b[at..])?),
        Reply::Verbatim(s) => Value::String(lua.create_string(&s)?),
        Reply::Nil | Reply::NilArray if resp3 => Value::Nil,
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Bool(b) if resp3 => Value::Boolean(b),
        Reply::Bool(b) => {
            if b {
                Value::Number(1.0)
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Status(s) => single(lua, "ok", s)?,
        Reply::Simple(s) => single(lua, "ok", s)?,
        Reply::Error(e) => error_table(lua, &e)?,
        Reply::Double(d) if resp3 => single(lua, "double", d)?,
        Reply::Double(d) => Value::String(lua.create_string(format_double(d))?),
        Reply::Array(items) | Reply::Push(items) | Reply::Seq(items) => array(lua, items, resp3)?,
        r @ Reply::SharedPush(..) => to_lua(lua, r.unshared(), resp3)?,
        Reply::Map(pairs) if resp3 => {
            let m = lua.create_table()?;
            for (k, v) in pairs {
                m.raw_set(to_lua(lua, k, resp3)?, to_lua(lua, v, resp3)?)?;
            }
            single(lua, "map", m)?
        }
        Reply::Map(pairs) => array(
            lua,
            pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            resp3,
        )?,
    })
}

/// How deep a script's result may nest: deeper, the rest is an error in
/// its place, as Redis's conversion stops when Lua's stack runs out (a
/// table that holds itself).
const MAX_DEPTH: usize = 128;

/// A script's result as the client gets it (`proto` 2 or 3).
pub fn from_lua(v: &Value, proto: u8) -> Reply {
    from_lua_at(v, proto, 0)
}

fn from_lua_at(v: &Value, proto: u8, depth: usize) -> Reply {
    match v {
        Value::Nil => Reply::Nil,
        Value::Boolean(b) if proto >= 3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(*n as i64),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Table(t) if depth < MAX_DEPTH => table(t, proto, depth),
        Value::Table(_) => Reply::err("reached lua stack limit"),
        _ => Reply::Nil,
    }
}

fn table(t: &Table, proto: u8, depth: usize) -> Reply {
    let field = |k: &str| t.raw_get::<Value>(k).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        let e = e.to_string_lossy();
        return Reply::Error(if e.is_empty() { "ERR".into() } else { e });
    }
    if let Value::String(s) = field("ok") {
        return Reply::Simple(s.to_string_lossy());
    }
    match field("double") {
        Value::Number(d) => return Reply::Double(d),
        Value::Integer(i) => return Reply::Double(i as f64),
        _ => {}
    }
    if let Value::Table(m) = field("map") {
        let pairs = m
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok())
            .map(|(k, v)| {
                (
                    from_lua_at(&k, proto, depth + 1),
                    from_lua_at(&v, proto, depth + 1),
                )
            })
            .collect();
        return Reply::Map(pairs);
    }
    if let Value::Table(s) = field("set") {
        let members = s
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok())
            .map(|(k, _)| from_lua_at(&k, proto, depth + 1))
            .collect();
        return Reply::Array(members);
    }
    if let Value::String(b) = field("big_number") {
        return Reply::Bulk(b.as_bytes().to_vec());
    }
    // An array: up to the first nil.
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(from_lua_at(&v, proto, depth + 1)),
        }
    }
    Reply::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_lua_prints_them() {
        for (n, s) in [
            (0.0003, "0.0003"),
            (1023.2, "1023.2"),
            (-5000.0, "-5000"),
            (100.0, "100"),
            (1e20, "1e+20"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.33333333333333"),
            (123456789012345.0, "1.2345678901234e+14"),
            (1e-5, "1e-05"),
        ] {
            assert_eq!(lua_number(n), s, "{n}");
        }
    }

    #[test]
    fn call_arguments_print_as_redis_prints_them() {
        for (n, s) in [
            (0.0, "0"),
            (-0.0, "0"),
            (60.0, "60"),
            (-7.0, "-7"),
            (123456789012345.0, "123456789012345"),
            (2f64.powi(53), "9007199254740992"),
            (2f64.powi(62), "4611686018427387904"),
            (-(2f64.powi(62)), "-4611686018427387904"),
            (2f64.powi(63), "9223372036854776000"),
            (1e19, "1e+19"),
            (1.5e300, "1.5e+300"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1.0 / 3.0, "0.3333333333333333"),
            (std::f64::consts::PI, "3.141592653589793"),
            (123456.789, "123456.789"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (-1.5e-7, "-1.5e-7"),
            (1.25e-100, "1.25e-100"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(redis_number(n), s, "{n}");
        }
    }
}
