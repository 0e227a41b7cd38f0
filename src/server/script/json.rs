//! The `cjson` library Redis's scripts have: `encode`, `decode`, `null`
//! and the settings scripts use (`encode_max_depth`, `decode_max_depth`,
//! `encode_invalid_numbers`, `encode_keep_buffer`), with lua-cjson's
//! rules: a table whose keys are 1..n is an array, any other an object
//! (an empty table is `{}`); numbers print as Lua prints them (`%.14g`).
//! Decoding goes through serde_json.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{Lua, Result, Table, Value};

use super::convert::{array_len, lua_number};

/// What the settings functions change, per Lua state.
#[derive(Clone)]
struct Settings {
    encode_depth: Rc<Cell<usize>>,
    decode_depth: Rc<Cell<usize>>,
    invalid_numbers: Rc<Cell<bool>>,
}

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

fn escape(out: &mut String, s: &[u8]) {
    out.push('"');
    for &b in s {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'/' => out.push_str("\\/"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b if b < 0x20 || b == 0x7f => out.push_str(&format!("\\u{b:04x}")),
            // Bytes pass as they are, as lua-cjson passes them.
            b => out.push(b as char),
        }
    }
    out.push('"');
}

fn number(out: &mut String, n: f64, s: &Settings) -> Result<()> {
    if !n.is_finite() {
        if !s.invalid_numbers.get() {
            return Err(err("Cannot serialise number: must not be NaN or Inf"));
        }
        out.push_str(if n.is_nan() {
            "nan"
        } else if n > 0.0 {
            "inf"
        } else {
            "-inf"
        });
        return Ok(());
    }
    out.push_str(&lua_number(n));
    Ok(())
}

fn encode(out: &mut String, v: &Value, depth: usize, s: &Settings) -> Result<()> {
    match v {
        Value::Nil => out.push_str("null"),
        Value::LightUserData(u) if u.0.is_null() => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(i) => out.push_str(&i.to_string()),
        Value::Number(n) => number(out, *n, s)?,
        Value::String(st) => escape(out, &st.as_bytes()),
        Value::Table(t) => {
            if depth >= s.encode_depth.get() {
                return Err(err(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            if let Some(n) = array_len(t)?.filter(|&n| n > 0) {
                out.push('[');
                for i in 1..=n {
                    if i > 1 {
                        out.push(',');
                    }
                    encode(out, &t.raw_get::<Value>(i)?, depth + 1, s)?;
                }
                out.push(']');
            } else {
                out.push('{');
                let mut first = true;
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    match &k {
                        Value::String(ks) => escape(out, &ks.as_bytes()),
                        Value::Integer(i) => escape(out, i.to_string().as_bytes()),
                        Value::Number(f) => escape(out, lua_number(*f).as_bytes()),
                        other => {
                            return Err(err(format!(
                                "Cannot serialise {}: table key must be a number or string",
                                other.type_name()
                            )))
                        }
                    }
                    out.push(':');
                    encode(out, &val, depth + 1, s)?;
                }
                out.push('}');
            }
        }
        other => {
            return Err(err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn decode(lua: &Lua, v: serde_json::Value, depth: usize, max: usize) -> Result<Value> {
    use serde_json::Value as J;
    let nested = |d: usize| {
        if d > max {
            Err(err(format!("Found too many nested data structures ({d})")))
        } else {
            Ok(())
        }
    };
    Ok(match v {
        J::Null => Value::NULL,
        J::Bool(b) => Value::Boolean(b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::String(lua.create_string(&s)?),
        J::Array(items) => {
            nested(depth + 1)?;
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, decode(lua, item, depth + 1, max)?)?;
            }
            Value::Table(t)
        }
        J::Object(fields) => {
            nested(depth + 1)?;
            let t = lua.create_table_with_capacity(0, fields.len())?;
            for (k, item) in fields {
                t.raw_set(k, decode(lua, item, depth + 1, max)?)?;
            }
            Value::Table(t)
        }
    })
}

/// A setting's function: given a value, sets it; returns it.
fn knob<T>(lua: &Lua, cell: Rc<Cell<T>>) -> Result<mlua::Function>
where
    T: Copy + mlua::FromLua + mlua::IntoLua + 'static,
{
    lua.create_function(move |_, v: Option<T>| {
        if let Some(v) = v {
            cell.set(v);
        }
        Ok(cell.get())
    })
}

/// The `cjson` table.
pub fn library(lua: &Lua) -> Result<Table> {
    let s = Settings {
        encode_depth: Rc::new(Cell::new(1000)),
        decode_depth: Rc::new(Cell::new(1000)),
        invalid_numbers: Rc::new(Cell::new(false)),
    };
    let t = lua.create_table()?;
    let es = s.clone();
    t.set(
        "encode",
        lua.create_function(move |_, v: Value| {
            let mut out = String::new();
            encode(&mut out, &v, 0, &es)?;
            Ok(out)
        })?,
    )?;
    let ds = s.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, text: mlua::String| {
            let v: serde_json::Value = serde_json::from_slice(&text.as_bytes())
                .map_err(|e| err(format!("Expected value but found invalid token: {e}")))?;
            decode(lua, v, 0, ds.decode_depth.get())
        })?,
    )?;
    t.set("null", Value::NULL)?;
    t.set("encode_max_depth", knob(lua, s.encode_depth.clone())?)?;
    t.set("decode_max_depth", knob(lua, s.decode_depth.clone())?)?;
    t.set(
        "encode_invalid_numbers",
        knob(lua, s.invalid_numbers.clone())?,
    )?;
    t.set(
        "encode_keep_buffer",
        lua.create_function(|_, _on: Option<bool>| Ok(true))?,
    )?;
    Ok(t)
}
