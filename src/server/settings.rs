//! CONFIG GET and CONFIG SET: the server's settings under Redis's names.
//!
//! Three kinds: settings the device map fixes (CONFIG SET says so and
//! changes nothing); settings applied at run time (`appendfsync` is the
//! durability new connections start at, `hz` how often the active expiry
//! cycle runs, `min-replicas-to-write` above 0 refuses every write, as
//! Stria has no replicas); and Redis settings that have nothing to act
//! on in Stria (the thresholds of Redis's small encodings: Stria has one
//! encoding per type; snapshot and other replica settings: Stria's data
//! is always on its devices and it has no replicas), which CONFIG SET
//! takes and CONFIG GET reports so that clients and tools that set them
//! keep working.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use super::glob;
use super::notify;
use super::ServerOptions;
use crate::config::Durability;

/// How a setting's value is checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Int,
    Bool,
    Text,
    Enum(&'static [&'static str]),
}

/// Redis settings kept as given, with Redis's defaults: most have nothing
/// to act on in Stria; `busy-reply-threshold` (`lua-time-limit`) and
/// `tracking-table-max-keys` are read where they act ([`Settings::number`]),
/// `min-replicas-to-write` and `min-replicas-max-lag` by
/// [`Settings::replicas_short`].
const INERT: &[(&str, &str, Form)] = &[
    ("save", "", Form::Text),
    ("hash-max-listpack-entries", "128", Form::Int),
    ("hash-max-listpack-value", "64", Form::Int),
    ("hash-max-ziplist-entries", "128", Form::Int),
    ("hash-max-ziplist-value", "64", Form::Int),
    ("list-max-listpack-size", "-2", Form::Int),
    ("list-max-ziplist-size", "-2", Form::Int),
    ("list-compress-depth", "0", Form::Int),
    ("set-max-intset-entries", "512", Form::Int),
    ("set-max-listpack-entries", "128", Form::Int),
    ("set-max-listpack-value", "64", Form::Int),
    ("zset-max-listpack-entries", "128", Form::Int),
    ("zset-max-listpack-value", "64", Form::Int),
    ("zset-max-ziplist-entries", "128", Form::Int),
    ("zset-max-ziplist-value", "64", Form::Int),
    ("stream-node-max-bytes", "4096", Form::Int),
    ("stream-node-max-entries", "100", Form::Int),
    ("activerehashing", "yes", Form::Bool),
    ("lazyfree-lazy-eviction", "no", Form::Bool),
    ("lazyfree-lazy-expire", "no", Form::Bool),
    ("lazyfree-lazy-server-del", "no", Form::Bool),
    ("lazyfree-lazy-user-del", "no", Form::Bool),
    ("lazyfree-lazy-user-flush", "no", Form::Bool),
    ("rdb-key-save-delay", "0", Form::Int),
    ("rdbcompression", "yes", Form::Bool),
    ("aof-use-rdb-preamble", "yes", Form::Bool),
    ("replica-read-only", "yes", Form::Bool),
    ("slowlog-log-slower-than", "10000", Form::Int),
    ("slowlog-max-len", "128", Form::Int),
    ("latency-tracking", "yes", Form::Bool),
    ("latency-monitor-threshold", "0", Form::Int),
    ("maxmemory-policy", "noeviction", Form::Text),
    ("lua-time-limit", "5000", Form::Int),
    ("busy-reply-threshold", "5000", Form::Int),
    ("tracking-table-max-keys", "1000000", Form::Int),
    ("active-expire-effort", "1", Form::Int),
    ("close-on-oom", "no", Form::Bool),
    ("min-replicas-to-write", "0", Form::Int),
    ("min-slaves-to-write", "0", Form::Int),
    ("min-replicas-max-lag", "10", Form::Int),
    ("min-slaves-max-lag", "10", Form::Int),
];

/// How the settings stand.
pub struct Settings {
    /// The durability new connections start at (`appendfsync`).
    durability: AtomicU8,
    /// Active expiry cycles a second (`hz`).
    hz: AtomicU64,
    /// `maxmemory`, bytes (0: no limit).
    maxmemory: AtomicU64,
    /// `notify-keyspace-events`, as flags.
    notify: AtomicU32,
    /// Whether `min-replicas-to-write` asks for replicas (and
    /// `min-replicas-max-lag` is not 0).
    replicas_short: AtomicBool,
    /// `busy-reply-threshold` and `stream-node-max-entries`, read by every
    /// script run and every XADD without the lock and a search of `inert`.
    busy_reply_ms: AtomicI64,
    stream_node_max: AtomicI64,
    inert: Mutex<Vec<(&'static str, String, Form)>>,
    /// What the device map fixes, by Redis's names.
    fixed: Vec<(&'static str, String)>,
}

/// The number setting `name` holds among `settings` (0 if none or not a
/// number).
fn inert_number<'v>(
    mut settings: impl Iterator<Item = (&'static str, &'v str)>,
    name: &str,
) -> i64 {
    settings
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn level_code(d: Durability) -> u8 {
    match d {
        Durability::None => 0,
        Durability::Async => 1,
        Durability::Write => 2,
        Durability::Sync => 3,
    }
}

fn appendfsync(d: Durability) -> &'static str {
    match d {
        Durability::Sync => "always",
        Durability::Write | Durability::Async => "everysec",
        Durability::None => "no",
    }
}

/// A memory value as Redis reads one: a number of bytes, or with a unit
/// `k`, `m`, `g` (powers of 1000) or `kb`, `mb`, `gb` (of 1024), in any
/// case.
fn memory_value(v: &str) -> Option<u64> {
    let v = v.to_ascii_lowercase();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: u64 = v[..digits].parse().ok()?;
    let unit: u64 = match &v[digits..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(unit)
}

fn invalid(name: &str, why: &str) -> String {
    format!("CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

fn check(form: Form, name: &str, value: &str) -> Result<String, String> {
    match form {
        Form::Int => value
            .parse::<i64>()
            .map(|n| n.to_string())
            .map_err(|_| invalid(name, "argument couldn't be parsed into an integer")),
        Form::Bool => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err(invalid(name, "argument must be 'yes' or 'no'")),
        },
        Form::Text => Ok(value.to_string()),
        Form::Enum(allowed) => {
            let v = value.to_ascii_lowercase();
            if allowed.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err(invalid(
                    name,
                    "argument(s) must be one of the following: always, everysec, no",
                ))
            }
        }
    }
}

impl Settings {
    pub fn new(o: &ServerOptions, port: u16, ip: String) -> Settings {
        Settings {
            durability: AtomicU8::new(level_code(o.durability)),
            hz: AtomicU64::new(10),
            maxmemory: AtomicU64::new(0),
            notify: AtomicU32::new(0),
            replicas_short: AtomicBool::new(false),
            busy_reply_ms: AtomicI64::new(inert_number(
                INERT.iter().map(|(n, v, _)| (*n, *v)),
                "busy-reply-threshold",
            )),
            stream_node_max: AtomicI64::new(inert_number(
                INERT.iter().map(|(n, v, _)| (*n, *v)),
                "stream-node-max-entries",
            )),
            inert: Mutex::new(
                INERT
                    .iter()
                    .map(|(n, v, f)| (*n, v.to_string(), *f))
                    .collect(),
            ),
            fixed: vec![
                ("port", port.to_string()),
                ("bind", ip),
                ("databases", "1".into()),
                ("appendonly", "yes".into()),
                ("maxclients", o.max_clients.to_string()),
                ("proto-max-bulk-len", o.limits.max_bulk.to_string()),
                ("client-query-buffer-limit", o.limits.max_query.to_string()),
                (
                    "protected-mode",
                    if o.password.is_some() { "no" } else { "yes" }.into(),
                ),
                ("timeout", "0".into()),
                ("io-threads", "1".into()),
                ("daemonize", "no".into()),
            ],
        }
    }

    /// The durability a new connection starts at.
    pub fn durability(&self) -> Durability {
        match self.durability.load(Ordering::Relaxed) {
            0 => Durability::None,
            1 => Durability::Async,
            2 => Durability::Write,
            _ => Durability::Sync,
        }
    }

    /// Active expiry cycles a second.
    pub fn hz(&self) -> u64 {
        self.hz.load(Ordering::Relaxed)
    }

    /// `maxmemory` in bytes; 0 for no limit.
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// The classes of keyspace notifications enabled
    /// (`notify-keyspace-events`, [`super::notify`]).
    pub fn notify_flags(&self) -> u32 {
        self.notify.load(Ordering::Relaxed)
    }

    /// Whether writes are refused for want of replicas: Redis refuses a
    /// write while fewer good replicas than `min-replicas-to-write` are
    /// connected (unless `min-replicas-max-lag` is 0), and Stria has none.
    pub fn replicas_short(&self) -> bool {
        self.replicas_short.load(Ordering::Relaxed)
    }

    /// `busy-reply-threshold`, milliseconds (0 or less: none).
    pub fn busy_reply_threshold(&self) -> i64 {
        self.busy_reply_ms.load(Ordering::Relaxed)
    }

    /// `stream-node-max-entries` (0 or less: no limit).
    pub fn stream_node_max_entries(&self) -> i64 {
        self.stream_node_max.load(Ordering::Relaxed)
    }

    /// The number a setting of Redis's that Stria takes holds (such as
    /// `busy-reply-threshold`).
    pub fn number(&self, name: &str) -> Option<i64> {
        let inert = self.inert.lock().expect("settings lock");
        inert
            .iter()
            .find(|(n, ..)| *n == name)
            .and_then(|(_, v, _)| v.parse().ok())
    }

    /// Every setting whose name matches one of `patterns`, once each.
    pub fn get(&self, patterns: &[Vec<u8>]) -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = self
            .fixed
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        all.push(("appendfsync".into(), appendfsync(self.durability()).into()));
        all.push(("hz".into(), self.hz().to_string()));
        all.push(("maxmemory".into(), self.maxmemory().to_string()));
        all.push((
            "notify-keyspace-events".into(),
            notify::format(self.notify_flags()),
        ));
        for (n, v, _) in self.inert.lock().expect("settings lock").iter() {
            all.push((n.to_string(), v.clone()));
        }
        all.into_iter()
            .filter(|(n, _)| {
                patterns
                    .iter()
                    .any(|p| glob::matches(&p.to_ascii_lowercase(), n.as_bytes()))
            })
            .collect()
    }

    /// Sets every `name value` pair, or none if one is refused.
    pub fn set(&self, pairs: &[Vec<u8>]) -> Result<(), String> {
        if pairs.is_empty() || pairs.len() % 2 != 0 {
            return Err("wrong number of arguments for 'config|set' command".into());
        }
        let mut inert = self.inert.lock().expect("settings lock");
        let mut changes: Vec<(String, String)> = Vec::new();
        for pair in pairs.chunks(2) {
            let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
            let value = String::from_utf8_lossy(&pair[1]).into_owned();
            if changes.iter().any(|(n, _)| *n == name) {
                return Err(invalid(&name, "duplicate parameter"));
            }
            let checked = if name == "appendfsync" {
                check(Form::Enum(&["always", "everysec", "no"]), &name, &value)?
            } else if name == "hz" {
                match value.parse::<u64>() {
                    Ok(n) => n.clamp(1, 500).to_string(),
                    Err(_) => {
                        return Err(invalid(
                            &name,
                            "argument couldn't be parsed into an integer",
                        ))
                    }
                }
            } else if name == "maxmemory" {
                match memory_value(&value) {
                    Some(n) => n.to_string(),
                    None => return Err(invalid(&name, "argument must be a memory value")),
                }
            } else if name == "notify-keyspace-events" {
                match notify::parse(value.as_bytes()) {
                    Some(f) => f.to_string(),
                    None => {
                        return Err(invalid(
                            &name,
                            "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.",
                        ))
                    }
                }
            } else if self.fixed.iter().any(|(n, _)| *n == name) {
                return Err(invalid(
                    &name,
                    "can't set immutable config (Stria's device map fixes it)",
                ));
            } else if let Some((_, _, form)) = inert.iter().find(|(n, _, _)| *n == name) {
                check(*form, &name, &value)?
            } else {
                return Err(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
            };
            changes.push((name, checked));
        }
        for (name, value) in changes {
            match name.as_str() {
                "appendfsync" => {
                    let d = match value.as_str() {
                        "always" => Durability::Sync,
                        "everysec" => Durability::Write,
                        _ => Durability::None,
                    };
                    self.durability.store(level_code(d), Ordering::Relaxed);
                }
                "hz" => self
                    .hz
                    .store(value.parse().expect("checked"), Ordering::Relaxed),
                "maxmemory" => self
                    .maxmemory
                    .store(value.parse().expect("checked"), Ordering::Relaxed),
                "notify-keyspace-events" => self
                    .notify
                    .store(value.parse().expect("checked"), Ordering::Relaxed),
                _ => {
                    // Redis's aliases: either name sets both.
                    let alias = match name.as_str() {
                        "lua-time-limit" => "busy-reply-threshold",
                        "busy-reply-threshold" => "lua-time-limit",
                        "min-replicas-to-write" => "min-slaves-to-write",
                        "min-slaves-to-write" => "min-replicas-to-write",
                        "min-replicas-max-lag" => "min-slaves-max-lag",
                        "min-slaves-max-lag" => "min-replicas-max-lag",
                        _ => "",
                    };
                    for slot in inert
                        .iter_mut()
                        .filter(|(n, _, _)| *n == name || *n == alias)
                    {
                        slot.1 = value.clone();
                    }
                }
            }
        }
        let number =
            |name: &str| inert_number(inert.iter().map(|(n, v, _)| (*n, v.as_str())), name);
        let short = number("min-replicas-to-write") > 0 && number("min-replicas-max-lag") > 0;
        self.busy_reply_ms
            .store(number("busy-reply-threshold"), Ordering::Relaxed);
        self.stream_node_max
            .store(number("stream-node-max-entries"), Ordering::Relaxed);
        self.replicas_short.store(short, Ordering::Relaxed);
        Ok(())
    }
}
