//! The blocking pops: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP. Each runs as its non-blocking form (LMPOP, LMOVE,
//! ZMPOP); when that finds every key empty, the connection blocks on the
//! keys ([`crate::server::shard::blocking`]) and reads nothing more until
//! it is served or its timeout (seconds, a double; 0 for ever) passes.
//! A write to one of the keys makes the event loop run the command again
//! for its waiters, first blocked first, as Redis 7 does; the pop is then
//! an ordinary write at the connection's level, and the reply waits for
//! it, so a crash never hands one element to two consumers or loses it.
//! Inside a transaction nothing blocks: an empty pop times out at once.

use std::time::{Duration, Instant};

use super::{float, mpop_args, Res};
use crate::server::conn::{Conn, Outcome};
use crate::server::meta::Type;
use crate::server::resp::Reply;
use crate::server::shard::watch::owner;
use crate::server::table::Spec;

/// A connection blocked in a command.
pub struct Blocked {
    spec: &'static Spec,
    args: Vec<Vec<u8>>,
    /// The keys waited on, as the shard knows them.
    owners: Vec<Vec<u8>>,
    deadline: Option<Instant>,
}

/// The commands that block.
pub const BLOCKING: &[&str] = &[
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "blmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
];

/// Whether XREAD or XREADGROUP asks to BLOCK.
pub fn reads_blocked(name: &str, args: &[Vec<u8>]) -> bool {
    matches!(name, "xread" | "xreadgroup")
        && args
            .iter()
            .take_while(|a| !a.eq_ignore_ascii_case(b"streams"))
            .any(|a| a.eq_ignore_ascii_case(b"block"))
}

/// What a blocking command replies when its time is up.
fn timed_out(name: &str) -> Reply {
    match name {
        "blmove" | "brpoplpush" => Reply::Nil,
        _ => Reply::NilArray,
    }
}

/// A timeout argument in seconds, as Redis reads one: `None` for 0 (for
/// ever).
fn timeout(arg: &[u8]) -> Res<Option<Duration>> {
    // C's strtold, which Redis reads it with, takes hex too.
    let hex = || {
        let digits = arg
            .strip_prefix(b"0x")
            .or_else(|| arg.strip_prefix(b"0X"))?;
        u128::from_str_radix(std::str::from_utf8(digits).ok()?, 16)
            .ok()
            .map(|n| n as f64)
    };
    let secs = float(arg)
        .or_else(hex)
        .ok_or_else(|| Reply::err("timeout is not a float or out of range"))?;
    if secs < 0.0 {
        return Err(Reply::err("timeout is negative"));
    }
    let ms = (secs * 1000.0).ceil();
    if ms > i64::MAX as f64 / 2.0 {
        return Err(Reply::err("timeout is out of range"));
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// How long a blocking command waits (`None`: for ever), and the keys
/// it waits on.
fn shape(name: &str, args: &[Vec<u8>]) -> Res<(Option<Duration>, Vec<Vec<u8>>)> {
    if matches!(name, "xread" | "xreadgroup") {
        let skip = if name == "xread" { 1 } else { 4 };
        let (_, block, (keys, _)) = super::streams::read_options(
            args.get(skip..).unwrap_or_default(),
            name == "xreadgroup",
        )?;
        let wait = block.filter(|&ms| ms > 0).map(Duration::from_millis);
        return Ok((wait, keys.to_vec()));
    }
    let (at, keys) = shape_pops(name, args)?;
    Ok((timeout(&args[at])?, keys))
}

/// Where a blocking pop's timeout is, and the keys it waits on.
fn shape_pops(name: &str, args: &[Vec<u8>]) -> Res<(usize, Vec<Vec<u8>>)> {
    let n = args.len();
    Ok(match name {
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => (n - 1, args[1..n - 1].to_vec()),
        "blmove" | "brpoplpush" => (n - 1, vec![args[1].clone()]),
        // BLMPOP and BZMPOP: timeout numkeys key ... where [COUNT n].
        _ => (1, mpop_args(&args[2..])?.0.to_vec()),
    })
}

impl<'a> Conn<'a> {
    /// Runs a blocking command: its reply, or [`Outcome::Block`].
    pub(super) fn blocking(&mut self, spec: &'static Spec, args: Vec<Vec<u8>>) -> Outcome {
        let name = spec.name;
        let mut args = args;
        let (wait, keys) = match shape(name, &args) {
            Ok(s) => s,
            Err(r) => return Outcome::Reply(r),
        };
        // A blocked XREAD waits for what comes after now.
        if name == "xread" {
            if let Err(r) = self.resolve_dollar(&mut args, false) {
                return Outcome::Reply(r);
            }
        }
        match self.pop_now(name, &args) {
            Err(r) | Ok(Some(r)) => Outcome::Reply(r),
            Ok(None) if self.shard.in_atomic() => Outcome::Reply(timed_out(name)),
            Ok(None) => {
                let owners: Vec<Vec<u8>> = keys.iter().map(|k| owner(k)).collect();
                let deadline = wait.map(|w| Instant::now() + w);
                self.shard.blocking().block(
                    self.token,
                    self.client.id,
                    &owners,
                    deadline,
                    name == "xreadgroup",
                );
                self.shared.metrics.blocked(1);
                let (keys, nokey) = self.shard.blocking().keys();
                self.shared.metrics.set_blocking_keys(keys, nokey);
                self.blocked = Some(Blocked {
                    spec,
                    args,
                    owners,
                    deadline,
                });
                Outcome::Block
            }
        }
    }

    /// The command's non-blocking form: its reply, `None` when every key
    /// is empty.
    fn pop_now(&mut self, name: &str, args: &[Vec<u8>]) -> Res<Option<Reply>> {
        let n = args.len();
        let counted = |keys: &[Vec<u8>], at: &str| {
            let mut a = vec![keys.len().to_string().into_bytes()];
            a.extend(keys.iter().cloned());
            a.push(at.as_bytes().to_vec());
            a
        };
        let r = match name {
            "blpop" | "brpop" => {
                let at = if name == "blpop" { "left" } else { "right" };
                match self.lmpop(&counted(&args[1..n - 1], at))? {
                    // [key, [element]] as [key, element].
                    Reply::Array(mut kv) => {
                        let Some(Reply::Array(mut elems)) = kv.pop() else {
                            return Ok(None);
                        };
                        kv.extend(elems.pop());
                        Reply::Array(kv)
                    }
                    _ => return Ok(None),
                }
            }
            "bzpopmin" | "bzpopmax" => {
                let at = if name == "bzpopmin" { "min" } else { "max" };
                match self.zmpop(&counted(&args[1..n - 1], at))? {
                    // [key, [[member, score]]] as [key, member, score].
                    Reply::Array(mut kv) => {
                        let Some(Reply::Array(mut pairs)) = kv.pop() else {
                            return Ok(None);
                        };
                        if let Some(Reply::Array(pair)) = pairs.pop() {
                            kv.extend(pair);
                        }
                        Reply::Array(kv)
                    }
                    _ => return Ok(None),
                }
            }
            "blmove" => self.lmove_command(&args[1..5])?,
            "brpoplpush" => {
                let a = [
                    args[1].clone(),
                    args[2].clone(),
                    b"right".to_vec(),
                    b"left".to_vec(),
                ];
                self.lmove_command(&a)?
            }
            "blmpop" => self.lmpop(&args[2..])?,
            "xread" => return self.xread(args),
            "xreadgroup" => return self.xreadgroup(args),
            _ => self.zmpop(&args[2..])?,
        };
        Ok(match r {
            Reply::Nil | Reply::NilArray => None,
            r => Some(r),
        })
    }

    /// Runs the command a blocked connection waits in again (a key it
    /// waits on was written): its reply once it is served.
    pub fn retry_blocked(&mut self) -> Option<Reply> {
        let b = self.blocked.as_ref()?;
        let (name, args) = (b.spec.name, b.args.clone());
        self.deps = Default::default();
        self.now = 0;
        let r = match self.pop_now(name, &args) {
            Ok(r) => r,
            // A key it waits on now holds another type: it waits on, as
            // in Redis; a BLMOVE whose source has an element but whose
            // destination is of another type is answered with the error.
            Err(e) => match name {
                // The stream or group went: a group's reader is told.
                "xreadgroup" => Some(e),
                "blmove" | "brpoplpush" => match self.lookup(&args[1]) {
                    Ok(Some(m)) if m.kind == Type::List => Some(e),
                    _ => None,
                },
                _ => None,
            },
        };
        if let Some(reply) = &r {
            // A blocked command counts once, when it is answered.
            self.shared
                .metrics
                .command(name, Duration::ZERO, reply.error_message());
            self.unblock();
        }
        r
    }

    /// The reply of a blocked connection whose time is up.
    pub fn time_out_blocked(&mut self) -> Option<Reply> {
        let name = self.blocked.as_ref()?.spec.name;
        self.shared.metrics.command(name, Duration::ZERO, None);
        self.unblock();
        Some(timed_out(name))
    }

    /// The reply of a blocked connection that CLIENT UNBLOCK ended.
    pub fn unblocked_by_client(&mut self, error: bool) -> Option<Reply> {
        let r = self.time_out_blocked()?;
        Some(if error {
            Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
        } else {
            r
        })
    }

    /// Whether the connection waits in a blocking command.
    pub fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }

    /// Waits no more.
    pub fn unblock(&mut self) {
        if let Some(b) = self.blocked.take() {
            self.shard.blocking().unblock(
                self.token,
                self.client.id,
                &b.owners,
                b.deadline,
                b.spec.name == "xreadgroup",
            );
            self.shared.metrics.blocked(-1);
            let (keys, nokey) = self.shard.blocking().keys();
            self.shared.metrics.set_blocking_keys(keys, nokey);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::timeout;
    use std::time::Duration;

    #[test]
    fn timeouts_read_as_redis_reads_them() {
        assert_eq!(timeout(b"0").unwrap(), None);
        assert_eq!(timeout(b"1.5").unwrap(), Some(Duration::from_millis(1500)));
        assert_eq!(timeout(b"0.0001").unwrap(), Some(Duration::from_millis(1)));
        for (bad, why) in [
            (&b"-1"[..], "timeout is negative"),
            (b"abc", "timeout is not a float or out of range"),
            (b"inf", "timeout is out of range"),
            (b"0x7FFFFFFFFFFFFF", "timeout is out of range"),
        ] {
            let e = timeout(bad).unwrap_err();
            assert_eq!(e, crate::server::resp::Reply::err(why));
        }
    }
}
