//! Which arguments of a request are keys, and what the command does with
//! each (Redis's key-spec flags), as COMMAND GETKEYS and GETKEYSANDFLAGS
//! tell clients and ACL checks key permissions. Most commands name their
//! keys at fixed places (the table's first key, last key, step); the
//! others find them by parsing (a count of keys, a STORE option, the
//! STREAMS keyword) and are `movablekeys` in COMMAND INFO.
//!
//! The flags: `RO` reads the key's value, `RW` reads and writes it, `OW`
//! overwrites it without reading, `RM` deletes it; `access` returns data
//! from it, `update` changes it, `insert` adds to it, `delete` removes
//! from it; `not_key` names a shard channel, not a key.

use super::cmd::integer;
use super::subcommands::lookup_request;
use super::table::Spec;

/// Flags of a key, as GETKEYSANDFLAGS replies them.
pub type KeyFlags = &'static [&'static str];

const RO: KeyFlags = &["RO"];
const RO_ACCESS: KeyFlags = &["RO", "access"];
const RW_ACCESS_DELETE: KeyFlags = &["RW", "access", "delete"];
const RW_ACCESS_UPDATE: KeyFlags = &["RW", "access", "update"];
const RW_INSERT: KeyFlags = &["RW", "insert"];
const RW_UPDATE: KeyFlags = &["RW", "update"];
const RW_DELETE: KeyFlags = &["RW", "delete"];
const RM_DELETE: KeyFlags = &["RM", "delete"];
const OW_UPDATE: KeyFlags = &["OW", "update"];
const OW_INSERT: KeyFlags = &["OW", "insert"];
const NOT_KEY: KeyFlags = &["not_key"];

/// Commands whose keys are found by parsing the request.
const MOVABLE: &[&str] = &[
    "blmpop",
    "bzmpop",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "georadius",
    "georadiusbymember",
    "lmpop",
    "migrate",
    "sintercard",
    "sort",
    "sort_ro",
    "xread",
    "xreadgroup",
    "zdiff",
    "zdiffstore",
    "zinter",
    "zintercard",
    "zinterstore",
    "zmpop",
    "zunion",
    "zunionstore",
];

/// Commands whose requests may name no key at all (a script given none).
const NO_MANDATORY_KEYS: &[&str] = &[
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// Whether COMMAND INFO marks `spec` `movablekeys`.
pub fn movable(spec: &Spec) -> bool {
    MOVABLE.contains(&spec.name)
}

/// Whether `spec` may run with no key (COMMAND INFO's `no_mandatory_keys`).
pub fn keys_optional(spec: &Spec) -> bool {
    NO_MANDATORY_KEYS.contains(&spec.name)
}

/// Whether `spec` has key arguments at all (shard channels are not keys).
pub fn has_keys(spec: &Spec) -> bool {
    (spec.keys.0 > 0 || movable(spec) || spec.name == "bitop")
        && !matches!(spec.name, "ssubscribe" | "sunsubscribe" | "spublish")
}

/// The keys a request names (`cmd[0]` naming `spec`, its arity checked),
/// as COMMAND GETKEYS gives them and ACL checks them. A subcommand's keys
/// are its own (XGROUP CREATE's stream).
pub fn keys_of(spec: &Spec, cmd: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let spec = lookup_request(cmd).unwrap_or(spec);
    key_positions(spec, cmd)
        .into_iter()
        .map(|(i, _)| cmd[i].clone())
        .collect()
}

/// Where the keys of a request to `spec` (a command or a subcommand)
/// are, and what it does with each; none for a request whose keys cannot
/// be found (a count beyond the arguments).
pub fn key_positions(spec: &Spec, cmd: &[Vec<u8>]) -> Vec<(usize, KeyFlags)> {
    let n = cmd.len();
    let name = spec.name;
    let first = first_flags(spec, cmd);
    let mut out = Vec::new();
    // A count of keys at `at`, then the keys.
    let counted = |at: usize, out: &mut Vec<(usize, KeyFlags)>, flags: KeyFlags| {
        let Some(k) = cmd.get(at).and_then(|a| integer(a)) else {
            return false;
        };
        if k < 0 || at + 1 + k as usize > n {
            return false;
        }
        out.extend((at + 1..at + 1 + k as usize).map(|i| (i, flags)));
        true
    };
    match name {
        "lmpop" | "zmpop" | "sintercard" | "zintercard" | "zunion" | "zinter" | "zdiff" => {
            if !counted(1, &mut out, first) || out.is_empty() {
                return Vec::new();
            }
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            out.push((1, first));
            if !counted(2, &mut out, RO_ACCESS) || out.len() == 1 {
                return Vec::new();
            }
        }
        "blmpop" | "bzmpop" => {
            if !counted(2, &mut out, first) || out.is_empty() {
                return Vec::new();
            }
        }
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            if !counted(2, &mut out, first) {
                return Vec::new();
            }
        }
        "migrate" => {
            // As Redis's migrateGetKeys: the key at 3, or what follows
            // KEYS (with the key argument empty), skipping the options'
            // arguments.
            let mut keys = 3..4.min(n);
            let mut i = 6;
            while i < n {
                match cmd[i].to_ascii_lowercase().as_slice() {
                    b"keys" => {
                        if !cmd[3].is_empty() {
                            return Vec::new();
                        }
                        keys = i + 1..n;
                        break;
                    }
                    b"auth" => i += 1,
                    b"auth2" => i += 2,
                    _ => {}
                }
                i += 1;
            }
            out.extend(keys.map(|k| (k, first)));
        }
        "sort" | "sort_ro" => {
            // As Redis parses it: LIMIT takes two arguments, GET and BY
            // one; the last STORE wins.
            out.push((1, first));
            let mut store = None;
            let mut i = 2;
            while i < n {
                let a = cmd[i].to_ascii_lowercase();
                match a.as_slice() {
                    b"limit" => i += 2,
                    b"get" | b"by" => i += 1,
                    b"store" if i + 1 < n => store = Some(i + 1),
                    _ => {}
                }
                i += 1;
            }
            if let Some(s) = store {
                out.push((s, OW_UPDATE));
            }
        }
        "georadius" | "georadiusbymember" => {
            out.push((1, first));
            let mut store = None;
            let mut i = 5;
            while i < n {
                let a = &cmd[i];
                if (a.eq_ignore_ascii_case(b"store") || a.eq_ignore_ascii_case(b"storedist"))
                    && i + 1 < n
                {
                    store = Some(i + 1);
                    i += 1;
                }
                i += 1;
            }
            if let Some(s) = store {
                out.push((s, OW_UPDATE));
            }
        }
        "xread" | "xreadgroup" => {
            let mut at = None;
            let mut i = 1;
            while i < n {
                match cmd[i].to_ascii_lowercase().as_slice() {
                    b"block" | b"count" => i += 1,
                    b"group" => i += 2,
                    b"noack" => {}
                    b"streams" => {
                        at = Some(i);
                        break;
                    }
                    _ => break,
                }
                i += 1;
            }
            let Some(at) = at else {
                return Vec::new();
            };
            // Half of what follows: the keys, then as many IDs.
            let half = (n - at - 1) / 2;
            out.extend((at + 1..at + 1 + half).map(|i| (i, first)));
        }
        "bitop" => {
            out.push((2, first));
            out.extend((3..n).map(|i| (i, RO_ACCESS)));
        }
        _ => {
            let (f, last, step) = spec.keys;
            if f <= 0 {
                return Vec::new();
            }
            let last = if last < 0 { n as i32 + last } else { last };
            let mut i = f;
            while i <= last && (i as usize) < n {
                let flags = if i == f {
                    first
                } else {
                    rest_flags(name, first)
                };
                out.push((i as usize, flags));
                i += step.max(1);
            }
        }
    }
    out
}

/// What a command does with the keys after its first (for the commands
/// whose keys differ: a source and a destination).
fn rest_flags(name: &str, first: KeyFlags) -> KeyFlags {
    match name {
        "copy" | "rename" => OW_UPDATE,
        "renamenx" => OW_INSERT,
        "lmove" | "blmove" | "rpoplpush" | "brpoplpush" | "smove" => RW_INSERT,
        "sdiffstore" | "sinterstore" | "sunionstore" | "zrangestore" | "geosearchstore" => {
            RO_ACCESS
        }
        _ => first,
    }
}

/// What a command does with its first key.
fn first_flags(spec: &Spec, cmd: &[Vec<u8>]) -> KeyFlags {
    let has_arg = |w: &[u8]| cmd.iter().skip(2).any(|a| a.eq_ignore_ascii_case(w));
    match spec.name {
        // SET reads the old value only with GET.
        "set" if has_arg(b"get") => RW_ACCESS_UPDATE,
        "set" => OW_UPDATE,
        // BITFIELD writes unless it only GETs.
        "bitfield" => {
            let writes = cmd
                .iter()
                .skip(2)
                .any(|a| a.eq_ignore_ascii_case(b"set") || a.eq_ignore_ascii_case(b"incrby"));
            if writes {
                RW_ACCESS_UPDATE
            } else {
                RO_ACCESS
            }
        }
        name => flags_of(name, spec),
    }
}

fn flags_of(name: &str, spec: &Spec) -> KeyFlags {
    match name {
        "exists" | "hexists" | "hlen" | "hstrlen" | "llen" | "scard" | "sismember" | "strlen"
        | "touch" | "type" | "watch" | "xlen" | "zcard" | "memory|usage" | "object|encoding"
        | "object|freq" | "object|idletime" | "object|refcount" => RO,
        "copy" | "georadius" | "georadiusbymember" | "sort" => RO_ACCESS,
        "blmove" | "blmpop" | "blpop" | "brpop" | "brpoplpush" | "bzmpop" | "bzpopmax"
        | "bzpopmin" | "getdel" | "lmove" | "lmpop" | "lpop" | "rename" | "renamenx" | "rpop"
        | "rpoplpush" | "smove" | "spop" | "zmpop" | "zpopmax" | "zpopmin" | "migrate" => {
            RW_ACCESS_DELETE
        }
        "decr" | "decrby" | "eval" | "evalsha" | "fcall" | "getex" | "getset" | "hincrby"
        | "hincrbyfloat" | "incr" | "incrby" | "incrbyfloat" | "setbit" | "zincrby" => {
            RW_ACCESS_UPDATE
        }
        "append"
        | "hsetnx"
        | "linsert"
        | "lpush"
        | "lpushx"
        | "rpush"
        | "rpushx"
        | "sadd"
        | "xgroup|create"
        | "xgroup|createconsumer" => RW_INSERT,
        "hdel" | "lrem" | "ltrim" | "srem" | "xautoclaim" | "xdel" | "xtrim" | "zrem"
        | "zremrangebylex" | "zremrangebyrank" | "zremrangebyscore" | "xgroup|delconsumer"
        | "xgroup|destroy" => RW_DELETE,
        "del" | "unlink" => RM_DELETE,
        "bitop" | "geosearchstore" | "mset" | "psetex" | "restore" | "sdiffstore" | "setex"
        | "sunionstore" | "zdiffstore" | "zinterstore" | "zrangestore" | "zunionstore" => OW_UPDATE,
        "msetnx" | "setnx" => OW_INSERT,
        "ssubscribe" | "sunsubscribe" | "spublish" => NOT_KEY,
        _ if spec.flags.contains(&"write") => RW_UPDATE,
        _ => RO_ACCESS,
    }
}
