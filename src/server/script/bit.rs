//! The `bit` library Redis's scripts have (LuaBitOp's API): 32-bit
//! operations on Lua numbers, which are taken modulo 2^32 as LuaBitOp
//! takes them and returned as signed 32-bit values.

use mlua::{Lua, Result, Table, Variadic};

/// A Lua number as LuaBitOp reads it: rounded, then modulo 2^32.
pub fn tobit(n: f64) -> i32 {
    if !n.is_finite() {
        return 0;
    }
    (n.round().rem_euclid(4_294_967_296.0) as u64 as u32) as i32
}

fn fold(args: Variadic<f64>, f: fn(i32, i32) -> i32) -> Result<f64> {
    let mut it = args.into_iter().map(tobit);
    let first = it
        .next()
        .ok_or_else(|| mlua::Error::runtime("bad argument #1 (number expected, got no value)"))?;
    Ok(it.fold(first, f) as f64)
}

/// `bit.tohex(x [, n])`: `n` hex digits (8 by default), upper case for a
/// negative `n`.
pub fn tohex(x: f64, n: Option<f64>) -> String {
    let mut n = n.map_or(8, tobit);
    // LuaBitOp's overflow for the most negative count (a Redis fix).
    if n == i32::MIN {
        n = i32::MIN + 1;
    }
    let upper = n < 0;
    let digits = n.unsigned_abs().min(8) as usize;
    let v = tobit(x) as u32;
    let s = if upper {
        format!("{v:08X}")
    } else {
        format!("{v:08x}")
    };
    s[8 - digits..].to_string()
}

/// The `bit` table.
pub fn library(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "tobit",
        lua.create_function(|_, x: f64| Ok(tobit(x) as f64))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|_, x: f64| Ok(!tobit(x) as f64))?,
    )?;
    t.set(
        "band",
        lua.create_function(|_, a: Variadic<f64>| fold(a, |x, y| x & y))?,
    )?;
    t.set(
        "bor",
        lua.create_function(|_, a: Variadic<f64>| fold(a, |x, y| x | y))?,
    )?;
    t.set(
        "bxor",
        lua.create_function(|_, a: Variadic<f64>| fold(a, |x, y| x ^ y))?,
    )?;
    let shift = |f: fn(i32, u32) -> i32| {
        move |_: &Lua, (x, n): (f64, f64)| Ok(f(tobit(x), (tobit(n) & 31) as u32) as f64)
    };
    t.set(
        "lshift",
        lua.create_function(shift(|x, n| ((x as u32) << n) as i32))?,
    )?;
    t.set(
        "rshift",
        lua.create_function(shift(|x, n| ((x as u32) >> n) as i32))?,
    )?;
    t.set("arshift", lua.create_function(shift(|x, n| x >> n))?)?;
    t.set(
        "rol",
        lua.create_function(shift(|x, n| (x as u32).rotate_left(n) as i32))?,
    )?;
    t.set(
        "ror",
        lua.create_function(shift(|x, n| (x as u32).rotate_right(n) as i32))?,
    )?;
    t.set(
        "bswap",
        lua.create_function(|_, x: f64| Ok((tobit(x) as u32).swap_bytes() as i32 as f64))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| Ok(tohex(x, n)))?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_wrap_and_print_as_luabitop_prints_them() {
        assert_eq!(tobit(4_294_967_295.0), -1);
        assert_eq!(tobit(4_294_967_296.0 + 5.0), 5);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tohex(65535.0, Some(-2147483648.0)), "0000FFFF");
        assert_eq!(tohex(255.0, Some(2.0)), "ff");
        assert_eq!(tohex(-1.0, None), "ffffffff");
    }
}
