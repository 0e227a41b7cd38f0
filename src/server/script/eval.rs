//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, and how a script's
//! `redis.call` runs a command.
//!
//! A script runs to completion on the shard, as a transaction does
//! ([`crate::server::shard::Shard::begin_atomic`]): its commands run one
//! after another with nothing of any other client between them, their
//! writes are one WAL group (all of them or none after a crash), and the
//! script's reply waits for every write any of them made or read. A
//! script may touch keys it did not declare. Blocking commands do not
//! block in a script; commands that make no sense in one (MULTI, WATCH,
//! SUBSCRIBE, EVAL, ...) are refused, and a read-only script
//! (EVAL_RO, EVALSHA_RO, FCALL_RO) may not write.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{Function, Lua, Table, Value, Variadic};

use super::convert::{argument, counted_error, error_table, from_lua, is_counted, to_lua};
use super::watch::{self, Watch};
use super::Shebang;
use super::{message, Vm};
use crate::server::cmd::integer;
use crate::server::command::OOM;
use crate::server::conn::{Conn, Outcome};
use crate::server::resp::Reply;
use crate::server::shard::busy::Running;
use crate::server::table::Spec;
use crate::server::table::{lookup, position, COMMANDS};

/// What a script is run as.
pub struct Run<'s> {
    pub f: Function,
    /// For error messages: the script's SHA1, or the function's name.
    pub name: &'s str,
    pub keys: &'s [Vec<u8>],
    pub args: &'s [Vec<u8>],
    /// The whole request, for FUNCTION STATS while the script runs long.
    pub command: &'s Rc<Vec<Vec<u8>>>,
    /// A function (called with KEYS and ARGV) rather than an EVAL script
    /// (which reads them as globals).
    pub function: bool,
    pub read_only: bool,
    /// Writes over `maxmemory` (`allow-oom`, or `no-writes`): not checked.
    pub allow_oom: bool,
}

/// A script's keys and arguments that are all text, as they are: they go
/// onto Lua's stack with the call that runs the script, which makes KEYS
/// and ARGV of them. `None` for other bytes, or more values than a
/// call's stack may hold.
fn text<'x>(keys: &'x [Vec<u8>], args: &'x [Vec<u8>]) -> Option<Variadic<&'x str>> {
    if keys.len() + args.len() > ON_STACK {
        return None;
    }
    keys.iter()
        .chain(args)
        .map(|a| std::str::from_utf8(a).ok())
        .collect::<Option<Vec<_>>>()
        .map(Variadic::from)
}

/// At most this many keys and arguments go onto Lua's stack (a call's
/// stack holds 8,000 values).
const ON_STACK: usize = 1000;

/// A table of `items`, each a string handle first (which costs a
/// reference slot and its release), filled one protected call at a time.
fn strings(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, a) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(a)?)?;
    }
    Ok(t)
}

/// A script's keys and its other arguments.
pub type KeysAndArgs<'x> = (&'x [Vec<u8>], &'x [Vec<u8>]);

/// The keys and arguments of `numkeys key ... arg ...`.
pub fn split_keys(args: &[Vec<u8>]) -> Result<KeysAndArgs<'_>, Reply> {
    let n = integer(&args[0]).ok_or_else(crate::server::cmd::not_integer)?;
    if n < 0 {
        return Err(Reply::err("Number of keys can't be negative"));
    }
    let rest = &args[1..];
    if n as usize > rest.len() {
        return Err(Reply::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    Ok(rest.split_at(n as usize))
}

impl<'a> Conn<'a> {
    /// The shard's Lua state, made on first use.
    pub fn vm(&self) -> Result<std::cell::RefMut<'_, Vm>, Reply> {
        if self.shard.scripting().is_none() {
            let stored = self.stored_libraries();
            let mut vm = Vm::new().map_err(|e| Reply::err(format!("Lua: {e}")))?;
            for code in stored {
                if let Err(e) = vm.load_library(&code, true) {
                    tracing::warn!("a stored function library does not load: {e}");
                }
            }
            vm.collect();
            *self.shard.scripting() = Some(vm);
        }
        let slot = self.shard.scripting();
        Ok(std::cell::RefMut::map(slot, |s| s.as_mut().expect("made")))
    }

    /// Tells INFO how many scripts are cached and what Lua takes.
    pub fn report_scripting(&self) {
        if let Some(vm) = self.shard.scripting().as_ref() {
            self.shared
                .metrics
                .set_scripting(vm.cached_scripts(), vm.memory());
        }
    }

    /// EVAL and EVAL_RO (`by_sha`: EVALSHA and EVALSHA_RO).
    pub fn eval(&mut self, args: Vec<Vec<u8>>, by_sha: bool, read_only: bool) -> Reply {
        let command = Rc::new(args);
        let args = &command[..];
        let (keys, rest) = match split_keys(&args[2..]) {
            Ok(k) => k,
            Err(r) => return r,
        };
        let (f, shebang, sha) = {
            let mut vm = match self.vm() {
                Ok(vm) => vm,
                Err(r) => return r,
            };
            let sha: Cow<'_, str> = if by_sha {
                // A SHA1 as clients send it, in lower case, is looked up
                // as it is.
                match std::str::from_utf8(&args[1]) {
                    Ok(s) if !s.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Borrowed(s),
                    _ => Cow::Owned(String::from_utf8_lossy(&args[1]).to_ascii_lowercase()),
                }
            } else {
                match vm.load(&args[1]) {
                    Ok(sha) => Cow::Owned(sha),
                    Err(e) => return Reply::err(e),
                }
            };
            match vm.script(&sha) {
                Some((f, shebang)) => (f, shebang, sha),
                None => {
                    return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into())
                }
            }
        };
        // A script with a shebang declares whether it writes, and is
        // refused at once where it may not; one without it is checked
        // write by write.
        let no_writes = match &shebang {
            None => false,
            Some(s) if s.no_writes() => true,
            Some(_) if read_only => {
                return Reply::err("Can not execute a script with write flag using *_ro command.")
            }
            Some(s) => {
                if let Some(r) = self.replicas_refusal() {
                    return r;
                }
                if !s.allow_oom() && self.over_maxmemory() {
                    return Reply::Error(OOM.into());
                }
                false
            }
        };
        let allow_oom = no_writes || shebang.as_ref().is_some_and(Shebang::allow_oom);
        self.run_script(Run {
            f,
            name: &sha,
            keys,
            args: rest,
            command: &command,
            function: false,
            read_only: read_only || no_writes,
            allow_oom,
        })
    }

    /// NOREPLICAS, when min-replicas-to-write asks for replicas: Stria
    /// has none, so it then takes no writes.
    pub fn replicas_refusal(&self) -> Option<Reply> {
        self.shared
            .settings
            .replicas_short()
            .then(|| Reply::Error(NOREPLICAS.into()))
    }
}

/// What a script may do, for its calls.
#[derive(Clone, Copy)]
struct Mode {
    read_only: bool,
    allow_oom: bool,
}

/// Redis's refusal of a write that too few replicas would copy.
const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

impl Conn<'_> {
    /// Runs a script or function to completion, as one atomic unit.
    pub fn run_script(&mut self, r: Run<'_>) -> Reply {
        let (lua, run, resp, watched, loaded) = match self.vm() {
            Ok(vm) => (
                vm.lua.clone(),
                vm.run.clone(),
                vm.resp.clone(),
                vm.watched.clone(),
                (vm.libraries.len(), vm.functions.len()),
            ),
            Err(e) => return e,
        };
        resp.set(2);
        let nested = self.shard.in_atomic();
        if !nested {
            self.shard.begin_atomic();
        }
        let proto = self.proto;
        let read_only = r.read_only;
        let mode = Mode {
            read_only,
            allow_oom: r.allow_oom,
        };
        // A script holds its shard: past busy-reply-threshold, the state's
        // hook answers the shard's other clients (see `watch`).
        let wrote = Rc::new(Cell::new(false));
        let limit = Some(self.shared.settings.busy_reply_threshold())
            .filter(|&ms| ms > 0)
            .map(|ms| Duration::from_millis(ms as u64));
        if let Some(limit) = limit {
            let started = Instant::now();
            *watched.borrow_mut() = Some(Watch {
                started,
                limit,
                wrote: wrote.clone(),
                busy: self.shard.busy().clone(),
                limits: self.shared.opts.limits,
                open: self.shared.acl.default_open(),
                function: r.function,
                running: Some(Running {
                    name: r.name.to_string(),
                    command: r.command.clone(),
                    started,
                    libraries: loaded.0,
                    functions: loaded.1,
                }),
                last: None,
                killed: false,
            });
        }
        let conn = RefCell::new(&mut *self);
        let outcome = lua.scope(|scope| {
            // One function for the run's calls into the server (a
            // function a scope makes is a closure and a userdata made,
            // and destroyed, per run): a command, or an ACL check of one.
            let host = scope.create_function(|lua, (acl, n, argv): (bool, usize, Table)| {
                let mut c = conn.borrow_mut();
                match acl {
                    true => c.script_acl_check(lua, n, &argv),
                    false => c.script_call(lua, n, &argv, mode, resp.get() == 3, &wrote),
                }
            })?;
            let out: (bool, Value) = match text(r.keys, r.args) {
                Some(values) => run.call((&r.f, r.function, host, r.keys.len(), values))?,
                None => {
                    let (keys, args) = (strings(&lua, r.keys)?, strings(&lua, r.args)?);
                    run.call((&r.f, r.function, host, false, keys, args))?
                }
            };
            Ok(out)
        });
        watch::end(&lua, &watched);
        if let Ok(vm) = self.vm() {
            vm.after_run();
        }
        self.shard.busy().set_running(None);
        if !nested {
            self.shard.end_atomic();
        }
        match outcome {
            Ok((true, v)) => {
                self.error_counted = is_counted(&v);
                from_lua(&v, proto)
            }
            Ok((false, e)) => {
                self.error_counted = is_counted(&e);
                script_error(&e, r.name)
            }
            Err(e) => Reply::err(format!("Error running script {}, {}", r.name, message(&e))),
        }
    }

    /// `redis.acl_check_cmd`: (true, whether the script's user may run
    /// the command in the first `n` values of `argv`), or (false, an
    /// error for a request that is none).
    fn script_acl_check(
        &mut self,
        lua: &Lua,
        n: usize,
        argv: &Table,
    ) -> mlua::Result<(bool, Value)> {
        let args = match script_args(n, argv)? {
            Ok(args) => args,
            Err(msg) => return Ok((false, error_table(lua, msg)?)),
        };
        match lookup(&args[0]) {
            Some(spec) => Ok((true, Value::Boolean(self.acl_allows(spec, &args)))),
            None => Ok((
                false,
                error_table(lua, "ERR Invalid command passed to redis.acl_check_cmd()")?,
            )),
        }
    }

    /// `redis.call` and `redis.pcall`: runs the command in the first `n`
    /// values of `argv` for the script; (true, its reply) or (false,
    /// `{err = ...}`).
    fn script_call(
        &mut self,
        lua: &Lua,
        n: usize,
        argv: &Table,
        mode: Mode,
        resp3: bool,
        wrote: &Cell<bool>,
    ) -> mlua::Result<(bool, Value)> {
        // Every error of a call is counted once, here (a refusal as the
        // command's rejected call), and its table says so: the script's
        // reply that carries it is not counted again.
        let fail = |msg: &str| Ok((false, counted_error(lua, msg)?));
        let shared = self.shared;
        let refuse = |spec: Option<&Spec>, msg: &str| {
            match spec {
                Some(spec) => shared.metrics.call_rejected(spec.name, msg),
                None => shared.metrics.error_reply(msg),
            }
            fail(msg)
        };
        let args = match script_args(n, argv)? {
            Ok(args) => args,
            Err(msg) => return refuse(None, msg),
        };
        let Some(at) = position(&args[0]) else {
            return refuse(None, "ERR Unknown Redis command called from script");
        };
        let spec = &COMMANDS[at];
        let n = args.len() as i32;
        if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
            return refuse(
                Some(spec),
                "ERR Wrong number of args calling Redis command from script",
            );
        }
        // The command table flags what makes no sense in a script
        // (MULTI, WATCH, SUBSCRIBE, EVAL, CLIENT, SHUTDOWN, ...).
        if crate::server::table::noscript(spec, &args) {
            return refuse(
                Some(spec),
                "ERR This Redis command is not allowed from script",
            );
        }
        if matches!(spec.name, "xread" | "xreadgroup")
            && args.iter().any(|a| a.eq_ignore_ascii_case(b"block"))
        {
            return refuse(
                Some(spec),
                &format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    spec.name
                ),
            );
        }
        if mode.read_only && spec.flags.contains(&"write") {
            return refuse(
                Some(spec),
                "ERR Write commands are not allowed from read-only scripts.",
            );
        }
        if let Some(Reply::Error(e)) = self.acl_refusal(spec, &args) {
            return refuse(Some(spec), &e);
        }
        // Over maxmemory, a command that may add data is refused until the
        // script's first write (it may not stop halfway), as in Redis.
        if !mode.allow_oom
            && !wrote.get()
            && spec.flags.contains(&"denyoom")
            && self.over_maxmemory()
        {
            return refuse(Some(spec), OOM);
        }
        if spec.flags.contains(&"write") {
            // Once a script has written, it may not fail on the server's
            // state: only its first write is checked.
            if !wrote.get() && self.shared.settings.replicas_short() {
                return refuse(Some(spec), NOREPLICAS);
            }
            wrote.set(true);
        }
        let outer = std::mem::replace(&mut self.scripting, true);
        let started = std::time::Instant::now();
        let out = self.run(spec, args);
        self.scripting = outer;
        if let Outcome::Reply(r) = &out {
            self.shared
                .metrics
                .command(spec.name, started.elapsed(), r.error_message());
        }
        let reply = match out {
            Outcome::Reply(r) | Outcome::Close(r) => r,
            Outcome::Stop | Outcome::Block => Reply::Nil,
        };
        if let Reply::Error(e) = &reply {
            return fail(e);
        }
        Ok((true, to_lua(lua, reply, resp3)?))
    }

    /// SCRIPT LOAD, EXISTS, FLUSH, KILL, HELP.
    pub fn script_command(&mut self, args: &[Vec<u8>]) -> Reply {
        let sub = args[0].to_ascii_lowercase();
        match (sub.as_slice(), args.len()) {
            (b"load", 2) => match self.vm().map(|mut vm| vm.load(&args[1])) {
                Ok(Ok(sha)) => Reply::bulk(sha),
                Ok(Err(e)) => Reply::err(e),
                Err(r) => r,
            },
            (b"exists", n) if n >= 2 => match self.vm() {
                Ok(vm) => Reply::Array(
                    args[1..]
                        .iter()
                        .map(|s| {
                            let sha = String::from_utf8_lossy(s).to_ascii_lowercase();
                            Reply::Int(vm.has_script(&sha) as i64)
                        })
                        .collect(),
                ),
                Err(r) => r,
            },
            (b"flush", 1 | 2) => {
                if let Some(mode) = args.get(1) {
                    if !matches!(mode.to_ascii_lowercase().as_slice(), b"sync" | b"async") {
                        return Reply::err("SCRIPT FLUSH only support SYNC|ASYNC option");
                    }
                }
                // As Redis, a new Lua state: nothing a script left in the
                // old one survives. The function libraries load again.
                *self.shard.scripting() = None;
                if let Err(r) = self.vm() {
                    return r;
                }
                Reply::ok()
            }
            // A script runs to completion before any other command of the
            // shard, SCRIPT KILL included: none is ever running when it
            // arrives.
            (b"kill", 1) => Reply::Error("NOTBUSY No scripts in execution right now.".into()),
            (b"help", 1) => crate::server::help::help(
"SCRIPT",
&[
"EXISTS <sha1> [<sha1> ...]",
"    Return information about the existence of the scripts in the script cache.",
"FLUSH [ASYNC|SYNC]",
"    Flush the Lua scripts cache.",
"KILL",
"    Kill the currently executing Lua script.",
"LOAD <script>",
"    Load a script into the scripts cache without executing it.",
],
),
            _ => Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
                crate::server::command::show(&args[0])
            )),
        }
    }
}

/// The request in the first `n` values of `argv`, or why it is none.
fn script_args(n: usize, argv: &Table) -> mlua::Result<Result<Vec<Vec<u8>>, &'static str>> {
    if n == 0 {
        return Ok(Err(
            "ERR Please specify at least one argument for this redis lib call",
        ));
    }
    let mut args = Vec::with_capacity(n);
    for i in 1..=n {
        // A string is read off Lua's stack as it is, with no handle made
        // for it. A number comes as Lua's text of it, which is Redis's
        // only for an integer of up to 14 digits: text that may be any
        // other number is read again as the value it is.
        if let Ok(text) = argv.raw_get::<mlua::BString>(i) {
            if !maybe_lua_number(&text) {
                args.push(text.into());
                continue;
            }
        }
        match argument(&argv.raw_get::<Value>(i)?) {
            Some(a) => args.push(a),
            None => {
                return Ok(Err(
                    "ERR Lua redis lib command arguments must be strings or integers",
                ))
            }
        }
    }
    Ok(Ok(args))
}

/// Whether `text` may be Lua's `%.14g` of a number other than an integer
/// of up to 14 digits: a fraction, an exponent, `inf`, `nan` or `-0`.
fn maybe_lua_number(text: &[u8]) -> bool {
    let numeric = text
        .iter()
        .all(|c| c.is_ascii_digit() || b"+-.einfa".contains(c));
    numeric && (text.starts_with(b"-0") || text.iter().any(|c| b".einfa".contains(c)))
}

/// The reply of a script that raised `e` (an `{err = ...}` table).
fn script_error(e: &Value, name: &str) -> Reply {
    let msg = match e {
        Value::Table(t) => t
            .raw_get::<Option<String>>("err")
            .ok()
            .flatten()
            .unwrap_or_else(|| "ERR execution failure".into()),
        other => format!("ERR {other:?}"),
    };
    let msg = if msg.is_empty() {
        "ERR".to_string()
    } else {
        msg
    };
    // Where it happened, as Redis says it.
    let at = match e {
        Value::Table(t) => t
            .raw_get::<Option<String>>("source")
            .ok()
            .flatten()
            .zip(t.raw_get::<Option<i64>>("line").ok().flatten()),
        _ => None,
    };
    match at {
        Some((source, line)) => Reply::Error(format!("{msg} script: {name}, on {source}:{line}.")),
        None => Reply::Error(msg),
    }
}
