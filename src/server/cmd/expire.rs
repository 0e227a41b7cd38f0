//! Expiry commands: EXPIRE and its forms, TTL and its forms, PERSIST.
//!
//! An expiry is an absolute time in milliseconds in the key's metadata,
//! logged with it; the expiry index ([`crate::server::keys::expiry`]) lets
//! the active cycle ([`crate::server::expiry`]) find keys as they fall due.

use super::{index_expiry, integer, not_integer, Res};
use crate::server::conn::Conn;
use crate::server::keys;
use crate::server::notify::GENERIC;
use crate::server::resp::Reply;

/// What an expiry argument counts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Millis,
}

fn invalid(command: &str) -> Reply {
    Reply::err(format!("invalid expire time in '{command}' command"))
}

/// The expiry an EX, PX (`relative`), EXAT or PXAT argument of SET, GETEX
/// or SETEX gives, as Redis checks it: a positive integer that does not
/// overflow.
pub fn option_expiry(arg: &[u8], unit: Unit, relative: bool, now: u64, command: &str) -> Res<u64> {
    let n = integer(arg).ok_or_else(not_integer)?;
    if n <= 0 || (unit == Unit::Seconds && n > i64::MAX / 1000) {
        return Err(invalid(command));
    }
    let ms = if unit == Unit::Seconds { n * 1000 } else { n };
    let at = if relative {
        ms.checked_add(now as i64).ok_or_else(|| invalid(command))?
    } else {
        ms
    };
    Ok(at as u64)
}

/// EXPIRE's NX, XX, GT and LT.
#[derive(Default)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn conditions(args: &[Vec<u8>]) -> Res<Conditions> {
    let mut c = Conditions::default();
    for a in args {
        match a.to_ascii_lowercase().as_slice() {
            b"nx" => c.nx = true,
            b"xx" => c.xx = true,
            b"gt" => c.gt = true,
            b"lt" => c.lt = true,
            _ => {
                return Err(Reply::err(format!(
                    "Unsupported option {}",
                    String::from_utf8_lossy(a)
                )))
            }
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(Reply::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if c.gt && c.lt {
        return Err(Reply::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    Ok(c)
}

impl<'a> Conn<'a> {
    pub(super) fn expire(&mut self, name: &str, args: &[Vec<u8>]) -> Option<Res<Reply>> {
        Some(match name {
            "expire" => self.set_expiry(name, args, Unit::Seconds, true),
            "pexpire" => self.set_expiry(name, args, Unit::Millis, true),
            "expireat" => self.set_expiry(name, args, Unit::Seconds, false),
            "pexpireat" => self.set_expiry(name, args, Unit::Millis, false),
            "ttl" => self.ttl(&args[1], Unit::Seconds, true),
            "pttl" => self.ttl(&args[1], Unit::Millis, true),
            "expiretime" => self.ttl(&args[1], Unit::Seconds, false),
            "pexpiretime" => self.ttl(&args[1], Unit::Millis, false),
            "persist" => self.persist(&args[1]),
            _ => return None,
        })
    }

    fn set_expiry(
        &mut self,
        name: &str,
        args: &[Vec<u8>],
        unit: Unit,
        relative: bool,
    ) -> Res<Reply> {
        let key = &args[1];
        let c = conditions(&args[3..])?;
        let mut when = integer(&args[2]).ok_or_else(not_integer)?;
        if unit == Unit::Seconds {
            when = when.checked_mul(1000).ok_or_else(|| invalid(name))?;
        }
        if relative {
            when = when
                .checked_add(self.now() as i64)
                .ok_or_else(|| invalid(name))?;
        }
        let Some(m) = self.lookup(key)? else {
            return Ok(Reply::Int(0));
        };
        let current = m.expire_at.map(|at| at as i64);
        let refused = (c.nx && current.is_some())
            || (c.xx && current.is_none())
            || (c.gt && current.is_none_or(|cur| when <= cur))
            || (c.lt && current.is_some_and(|cur| when >= cur));
        if refused {
            return Ok(Reply::Int(0));
        }
        if when <= self.now() as i64 {
            let mut writes = Vec::new();
            index_expiry(key, None, m.expire_at, &mut writes);
            writes.push((keys::meta(key), None));
            self.write(writes);
            self.notify(GENERIC, "del", key);
            return Ok(Reply::Int(1));
        }
        let mut next = m.clone();
        next.expire_at = Some(when as u64);
        let mut writes = Vec::new();
        self.put(key, &next, Some(&m), &mut writes);
        self.write(writes);
        self.notify(GENERIC, "expire", key);
        Ok(Reply::Int(1))
    }

    /// TTL and PTTL (`remaining`), EXPIRETIME and PEXPIRETIME.
    fn ttl(&mut self, key: &[u8], unit: Unit, remaining: bool) -> Res<Reply> {
        let Some(m) = self.lookup(key)? else {
            return Ok(Reply::Int(-2));
        };
        let Some(at) = m.expire_at else {
            return Ok(Reply::Int(-1));
        };
        let ms = if remaining {
            at.saturating_sub(self.now())
        } else {
            at
        } as i64;
        Ok(Reply::Int(match (unit, remaining) {
            (Unit::Millis, _) => ms,
            (Unit::Seconds, true) => (ms + 500) / 1000,
            (Unit::Seconds, false) => ms / 1000,
        }))
    }

    fn persist(&mut self, key: &[u8]) -> Res<Reply> {
        let Some(m) = self.lookup(key)? else {
            return Ok(Reply::Int(0));
        };
        if m.expire_at.is_none() {
            return Ok(Reply::Int(0));
        }
        let mut next = m.clone();
        next.expire_at = None;
        let mut writes = Vec::new();
        self.put(key, &next, Some(&m), &mut writes);
        self.write(writes);
        self.notify(GENERIC, "persist", key);
        Ok(Reply::Int(1))
    }
}
