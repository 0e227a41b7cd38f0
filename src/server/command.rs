//! Dispatch, and the commands about the connection and the server (the
//! data commands are in `cmd/`, the command table in `table.rs`).

use std::sync::atomic::Ordering;

use super::cmd::{integer, not_integer, syntax_error};
use super::conn::{Conn, Outcome, ReplyMode};
use super::resp::Reply;
use super::shard::pubsub::Kind;
use super::table::{position, Spec, COMMANDS};
use crate::config::Durability;

/// Redis's refusal of a command that may grow the data past `maxmemory`.
pub(super) const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

pub(super) fn show(arg: &[u8]) -> String {
    let s = String::from_utf8_lossy(&arg[..arg.len().min(128)]);
    s.replace(['\r', '\n'], " ")
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::None => "none",
        Durability::Async => "async",
        Durability::Write => "write",
        Durability::Sync => "sync",
    }
}

impl<'a> Conn<'a> {
    /// Runs one request: its command's name (for the metrics) and outcome.
    /// In a transaction, a command is queued instead, and an error found
    /// before it would run (unknown, arity, auth) aborts the EXEC.
    pub fn dispatch(&mut self, args: Vec<Vec<u8>>) -> (&'static str, Outcome) {
        let Some(at) = position(&args[0]) else {
            let mut msg = format!(
                "unknown command '{}', with args beginning with: ",
                show(&args[0])
            );
            for a in args.iter().skip(1).take(8) {
                msg.push_str(&format!("'{}' ", show(a)));
            }
            return ("unknown", Outcome::Reply(self.reject(Reply::err(msg))));
        };
        let spec = &COMMANDS[at];
        self.client.last_command.store(at, Ordering::Relaxed);
        let n = args.len() as i32;
        if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
            let r = Reply::err(format!(
                "wrong number of arguments for '{}' command",
                spec.name
            ));
            return (spec.name, Outcome::Reply(self.refuse(spec, r)));
        }
        if !self.authed && !matches!(spec.name, "auth" | "hello" | "quit" | "reset") {
            let r = Reply::Error("NOAUTH Authentication required.".into());
            return (spec.name, Outcome::Reply(self.refuse(spec, r)));
        }
        if let Some(r) = self.acl_refusal(spec, &args) {
            return (spec.name, Outcome::Reply(self.refuse(spec, r)));
        }
        if let Some(r) = self.subscribed_refusal(spec.name) {
            return (spec.name, Outcome::Reply(self.refuse(spec, r)));
        }
        if let Some(r) = self.monitor_refusal(spec) {
            return (spec.name, Outcome::Reply(self.refuse(spec, r)));
        }
        if spec.flags.contains(&"write") {
            if let Some(r) = self.replicas_refusal() {
                return (spec.name, Outcome::Reply(self.refuse(spec, r)));
            }
        }
        if self.over_maxmemory() && self.takes_memory(spec) {
            return (
                spec.name,
                Outcome::Reply(self.refuse(spec, Reply::Error(OOM.into()))),
            );
        }
        if self.in_multi() {
            if let Some(r) = self.queue(spec, &args) {
                return (spec.name, Outcome::Reply(r));
            }
        }
        (spec.name, self.run(spec, args))
    }

    /// Whether `spec`, now, is refused over `maxmemory`, as Redis decides:
    /// a command that may grow the data (`denyoom`), an EXEC of one, and
    /// in a transaction anything queued (a queue grows without end).
    fn takes_memory(&self, spec: &Spec) -> bool {
        match spec.name {
            "exec" => self.queued_flag("denyoom"),
            "discard" | "quit" | "reset" => false,
            _ => self.in_multi() || spec.flags.contains(&"denyoom"),
        }
    }

    /// True while the memstores hold more than `maxmemory` (INFO's
    /// `used_memory`; nothing is evicted, commands that would add are
    /// refused).
    pub fn over_maxmemory(&self) -> bool {
        let max = self.shared.settings.maxmemory();
        max > 0 && self.shared.engine.memory_used() > max
    }

    /// Runs a command whose arity is checked (through [`Conn::run`], which
    /// shows it to MONITOR).
    pub fn execute(&mut self, spec: &'static Spec, args: Vec<Vec<u8>>) -> Outcome {
        self.reading = false;
        match spec.name {
            "ping" if self.subscribed_ping(&args).is_some() => {
                Outcome::Reply(self.subscribed_ping(&args).expect("subscribed"))
            }
            "ping" => Outcome::Reply(match args.get(1) {
                Some(m) if args.len() == 2 => Reply::bulk(m.clone()),
                Some(_) => Reply::err("wrong number of arguments for 'ping' command"),
                None => Reply::Status("PONG"),
            }),
            "echo" => Outcome::Reply(Reply::bulk(args[1].clone())),
            "monitor" => Outcome::Reply(self.monitor()),
            "acl" => Outcome::Reply(self.acl_command(&args[1..])),
            "quit" => Outcome::Close(Reply::ok()),
            "select" => Outcome::Reply(match integer(&args[1]) {
                Some(0) => Reply::ok(),
                Some(_) => Reply::err("DB index is out of range"),
                None => not_integer(),
            }),
            "auth" => Outcome::Reply(self.auth(&args[1..])),
            "hello" => Outcome::Reply(self.hello(&args[1..])),
            "client" => Outcome::Reply(self.client_command(&args[1..])),
            "info" => Outcome::Reply(self.info(&args[1..])),
            "config" => Outcome::Reply(self.config(&args[1..])),
            "command" => Outcome::Reply(super::command_info::command(&args[1..])),
            "waitaof" => Outcome::Reply(self.waitaof(&args[1..])),
            "save" => {
                // Every write applied is made durable before the reply.
                self.shard.barrier(&mut self.deps);
                Outcome::Reply(Reply::ok())
            }
            "bgsave" => {
                self.shard.barrier(&mut Default::default());
                Outcome::Reply(Reply::Status("Background saving started"))
            }
            "lastsave" => Outcome::Reply(Reply::Int((self.shared.clock.now() / 1000) as i64)),
            "reset" => {
                self.end_multi();
                self.unsubscribe_all();
                self.shard.tracking().disable(self.token);
                self.show_tracking();
                self.unmonitor();
                self.reply_mode = ReplyMode::On;
                self.no_touch = false;
                self.proto = 2;
                self.client.proto.store(2, Ordering::Relaxed);
                self.durability = self.shared.settings.durability();
                self.client.name.lock().expect("client lock").clear();
                if let Some(u) = self.shared.acl.get("default") {
                    self.become_user(u);
                }
                self.authed = self.shared.acl.default_open();
                Outcome::Reply(Reply::Status("RESET"))
            }
            "time" => Outcome::Reply(time()),
            // What Lua takes is told to INFO after each scripting command.
            "function" | "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "script" | "fcall"
            | "fcall_ro" => {
                let r = match spec.name {
                    "function" => self.function_command(&args[1..]),
                    "eval" => self.eval(args, false, false),
                    "eval_ro" => self.eval(args, false, true),
                    "evalsha" => self.eval(args, true, false),
                    "evalsha_ro" => self.eval(args, true, true),
                    "script" => self.script_command(&args[1..]),
                    "fcall" => self.fcall(args, false),
                    _ => self.fcall(args, true),
                };
                self.report_scripting();
                Outcome::Reply(r)
            }
            "stria.durability" => Outcome::Reply(self.set_durability(&args[1..])),
            "stria.device" => Outcome::Reply(self.device_command(&args[1..])),
            "shutdown" => match args.get(1).map(|a| a.to_ascii_lowercase()) {
                Some(a) if a == b"abort" => Outcome::Reply(Reply::err("No shutdown in progress.")),
                _ => {
                    tracing::info!(
                        "SHUTDOWN from client {} ({})",
                        self.client.id,
                        self.client.addr
                    );
                    self.shared.request_stop();
                    Outcome::Stop
                }
            },
            "subscribe" => Outcome::Reply(self.subscribe(Kind::Channel, &args[1..])),
            "psubscribe" => Outcome::Reply(self.subscribe(Kind::Pattern, &args[1..])),
            "ssubscribe" => Outcome::Reply(self.subscribe(Kind::Shard, &args[1..])),
            "unsubscribe" => Outcome::Reply(self.unsubscribe(Kind::Channel, &args[1..])),
            "punsubscribe" => Outcome::Reply(self.unsubscribe(Kind::Pattern, &args[1..])),
            "sunsubscribe" => Outcome::Reply(self.unsubscribe(Kind::Shard, &args[1..])),
            "publish" => Outcome::Reply(self.publish(false, &args[1], &args[2])),
            "spublish" => Outcome::Reply(self.publish(true, &args[1], &args[2])),
            "pubsub" => Outcome::Reply(self.pubsub_command(&args[1..])),
            "slowlog" => Outcome::Reply(super::help::slowlog(&args[1..])),
            // No replicas: none acknowledges anything.
            "wait" => Outcome::Reply(match (integer(&args[1]), integer(&args[2])) {
                (Some(_), Some(t)) if t >= 0 => Reply::Int(0),
                (Some(_), Some(_)) => Reply::err("timeout is negative"),
                _ => not_integer(),
            }),
            "module" => Outcome::Reply(super::help::module(&args[1..])),
            "cluster" => Outcome::Reply(super::help::cluster(&args[1..])),
            "multi" => Outcome::Reply(self.multi()),
            "exec" => Outcome::Reply(self.exec()),
            "discard" => Outcome::Reply(self.discard()),
            "watch" => Outcome::Reply(self.watch(&args[1..])),
            "unwatch" => {
                self.unwatch_all();
                Outcome::Reply(Reply::ok())
            }
            _ => self.data(spec, args),
        }
    }

    fn hello(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut proto = self.proto;
        let mut rest = args;
        if let Some(v) = args.first() {
            match integer(v) {
                Some(p @ (2 | 3)) => proto = p as u8,
                Some(_) => return Reply::Error("NOPROTO unsupported protocol version".into()),
                None => return Reply::err("Protocol version is not an integer or out of range"),
            }
            rest = &args[1..];
        }
        let mut name = None;
        while let Some(opt) = rest.first() {
            match opt.to_ascii_lowercase().as_slice() {
                b"auth" if rest.len() >= 3 => {
                    let r = self.auth(&rest[1..3]);
                    if r.is_error() {
                        return r;
                    }
                    rest = &rest[3..];
                }
                b"setname" if rest.len() >= 2 => {
                    name = Some(rest[1].clone());
                    rest = &rest[2..];
                }
                _ => return Reply::err(format!("Syntax error in HELLO option '{}'", show(opt))),
            }
        }
        if !self.authed {
            return Reply::Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into());
        }
        if let Some(n) = name {
            if let Err(r) = self.set_name(n) {
                return r;
            }
        }
        self.proto = proto;
        self.client.proto.store(proto, Ordering::Relaxed);
        Reply::Map(vec![
            (Reply::bulk("server"), Reply::bulk("redis")),
            (Reply::bulk("version"), Reply::bulk(super::REDIS_VERSION)),
            (Reply::bulk("proto"), Reply::Int(proto as i64)),
            (Reply::bulk("id"), Reply::Int(self.client.id as i64)),
            (Reply::bulk("mode"), Reply::bulk("standalone")),
            (Reply::bulk("role"), Reply::bulk("master")),
            (Reply::bulk("modules"), Reply::Array(vec![])),
        ])
    }

    fn set_name(&self, name: Vec<u8>) -> Result<(), Reply> {
        if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
            return Err(Reply::err(
                "Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        *self.client.name.lock().expect("client lock") = name;
        Ok(())
    }

    fn client_command(&mut self, args: &[Vec<u8>]) -> Reply {
        let sub = args[0].to_ascii_lowercase();
        match (sub.as_slice(), args.len()) {
            (b"setname", 2) => match self.set_name(args[1].clone()) {
                Ok(()) => Reply::ok(),
                Err(r) => r,
            },
            (b"getname", 1) => {
                let name = self.client.name.lock().expect("client lock").clone();
                if name.is_empty() {
                    Reply::Nil
                } else {
                    Reply::Bulk(name)
                }
            }
            (b"id", 1) => Reply::Int(self.client.id as i64),
            (b"list", 1) => {
                let mut text = String::new();
                for c in self.shared.clients() {
                    text.push_str(&super::client_line(&c));
                    text.push('\n');
                }
                Reply::Verbatim(text)
            }
            (b"info", 1) => {
                let mut line = super::client_line(&self.client);
                line.push('\n');
                Reply::Verbatim(line)
            }
            (b"setinfo", 3) | (b"no-evict", 2) => Reply::ok(),
            (b"no-touch", 2) => match args[1].to_ascii_lowercase().as_slice() {
                b"on" => {
                    self.no_touch = true;
                    Reply::ok()
                }
                b"off" => {
                    self.no_touch = false;
                    Reply::ok()
                }
                _ => syntax_error(),
            },
            (b"help", 1) => super::help::client(),
            (b"reply", 2) => match args[1].to_ascii_lowercase().as_slice() {
                b"on" => {
                    self.reply_mode = ReplyMode::On;
                    Reply::ok()
                }
                b"off" => {
                    self.reply_mode = ReplyMode::Off;
                    Reply::ok()
                }
                // Its own reply is the one skipped.
                b"skip" => {
                    self.reply_mode = ReplyMode::Skip;
                    Reply::ok()
                }
                _ => syntax_error(),
            },
            (b"tracking", n) if n >= 2 => self.client_tracking(&args[1..]),
            (b"caching", 2) => self.client_caching(&args[1]),
            (b"getredir", 1) => self.client_getredir(),
            (b"trackinginfo", 1) => self.client_trackinginfo(),
            (b"unblock", 2 | 3) => {
                let error = match args.get(2).map(|a| a.to_ascii_lowercase()) {
                    None => false,
                    Some(a) if a == b"timeout" => false,
                    Some(a) if a == b"error" => true,
                    Some(_) => {
                        return Reply::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
                    }
                };
                match integer(&args[1]) {
                    Some(id) if id >= 0 => {
                        Reply::Int(self.shard.blocking().end_wait(id as u64, error) as i64)
                    }
                    _ => Reply::err("value is not an integer or out of range"),
                }
            }
            (
                b"setname" | b"getname" | b"id" | b"list" | b"info" | b"setinfo" | b"tracking"
                | b"caching" | b"getredir" | b"trackinginfo",
                _,
            ) => Reply::err(
                format!("wrong number of arguments for 'client|{}' command", show(&sub)),
            ),
            _ => Reply::err(format!(
                "unknown subcommand '{}'. Stria supports CLIENT SETNAME, GETNAME, ID, LIST, INFO, SETINFO, REPLY, TRACKING, CACHING, GETREDIR, TRACKINGINFO, UNBLOCK and HELP.",
                show(&args[0])
            )),
        }
    }

    fn config(&mut self, args: &[Vec<u8>]) -> Reply {
        let settings = &self.shared.settings;
        match args[0].to_ascii_lowercase().as_slice() {
            b"help" if args.len() == 1 => super::help::config(),
            b"get" if args.len() >= 2 => Reply::Map(
                settings
                    .get(&args[1..])
                    .into_iter()
                    .map(|(n, v)| (Reply::bulk(n), Reply::bulk(v)))
                    .collect(),
            ),
            b"get" => Reply::err("wrong number of arguments for 'config|get' command"),
            b"set" => match settings.set(&args[1..]) {
                Ok(()) => Reply::ok(),
                Err(e) => Reply::err(e),
            },
            b"resetstat" if args.len() == 1 => {
                self.shared.hits.store(0, Ordering::Relaxed);
                self.shared.misses.store(0, Ordering::Relaxed);
                self.shared.metrics.reset_expired();
                Reply::ok()
            }
            b"rewrite" => Reply::err(format!(
                "CONFIG REWRITE is not supported: Stria is configured by its device map ({})",
                self.shared.opts.config_file
            )),
            _ => Reply::err(format!(
                "unknown subcommand '{}'. Stria supports CONFIG GET, SET and RESETSTAT.",
                show(&args[0])
            )),
        }
    }

    fn waitaof(&mut self, args: &[Vec<u8>]) -> Reply {
        let (Some(local), Some(replicas), Some(timeout)) =
            (integer(&args[0]), integer(&args[1]), integer(&args[2]))
        else {
            return not_integer();
        };
        if local < 0 || replicas < 0 || timeout < 0 {
            return Reply::err("timeout is negative");
        }
        if replicas > 0 {
            return Reply::err("WAITAOF: Stria has no replicas; numreplicas must be 0");
        }
        // A barrier after every write the shard has applied: the reply
        // goes once they are all durable, or says why not.
        self.shard.barrier(&mut self.deps);
        Reply::Array(vec![Reply::Int(1), Reply::Int(0)])
    }

    fn set_durability(&mut self, args: &[Vec<u8>]) -> Reply {
        match args {
            [] => Reply::bulk(durability_name(self.durability)),
            [level] => {
                self.durability = match level.to_ascii_lowercase().as_slice() {
                    b"none" => Durability::None,
                    b"async" => Durability::Async,
                    b"write" => Durability::Write,
                    b"sync" => Durability::Sync,
                    _ => {
                        return Reply::err(format!(
                            "'{}' is not a durability level (none, async, write or sync)",
                            show(level)
                        ))
                    }
                };
                Reply::ok()
            }
            _ => Reply::err("wrong number of arguments for 'stria.durability' command"),
        }
    }

    /// `STRIA.DEVICE REPLACE name`: starts replacing a WAL device the WAL
    /// lost, while serving (see `replace.rs`); INFO's `wal_replace` says
    /// how it goes.
    fn device_command(&mut self, args: &[Vec<u8>]) -> Reply {
        match args {
            [sub, name] if sub.eq_ignore_ascii_case(b"replace") => {
                let s = self.shared;
                let started =
                    s.metrics
                        .replacements
                        .start(s.opts.map.as_ref(), &s.engine, &show(name));
                match started {
                    Ok(()) => Reply::ok(),
                    Err(why) => Reply::err(why),
                }
            }
            [sub, _] => Reply::err(format!(
                "unknown subcommand '{}'. Try STRIA.DEVICE REPLACE name.",
                show(sub)
            )),
            _ => Reply::err("wrong number of arguments for 'stria.device' command"),
        }
    }

    fn info(&mut self, args: &[Vec<u8>]) -> Reply {
        let s = self.shared;
        let names: Vec<String> = args.iter().map(|a| show(a)).collect();
        let wanted = super::info::wanted(&names);
        s.metrics.set_tracking(self.shard.tracking().counts());
        let mut text = String::new();
        if wanted.contains(&"server") {
            text.push_str(&super::server_section(s));
        }
        text.push_str(&super::info::engine_sections(
            &s.engine, &s.metrics, &wanted,
        ));
        if wanted.contains(&"keyspace") {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            text.push_str(&self.keyspace_section());
        }
        Reply::Verbatim(text)
    }
}

fn time() -> Reply {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Reply::Array(vec![
        Reply::bulk(now.as_secs().to_string()),
        Reply::bulk(now.subsec_micros().to_string()),
    ])
}
