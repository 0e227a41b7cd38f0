//! Lua scripting, Redis's dialect: Lua 5.1 (mlua, vendored) with Redis's
//! libraries (`redis`, `bit`, `cjson`, `cmsgpack`), sandboxed as Redis sandboxes it
//! (no `io`, `os` but `os.clock`, no `loadfile`, `dofile` or `print`;
//! globals and libraries read-only: `prelude.lua`). One Lua state per
//! shard, made on the first script; scripts are cached by their SHA1.
//!
//! A script runs on the shard like a transaction (`eval.rs`): its
//! commands run one after another with nothing between them, and their
//! writes are one WAL group; its reply waits for all of them.

mod bit;
mod convert;
mod eval;
pub(crate) mod function;
mod json;
mod msgpack;
mod shebang;
mod struct_lib;
mod watch;

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};

pub use function::Library;
pub use shebang::Shebang;

/// How many scripts run between steps of the collector, and how many KB
/// each step takes (Redis's `LUA_GC_CYCLE_PERIOD`).
const GC_PERIOD: u32 = 50;

/// The prelude that sandboxes a state.
const PRELUDE: &str = include_str!("prelude.lua");

/// The hex SHA1 of `body`, as scripts are named.
pub fn sha1hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// A shard's Lua state and what it has compiled.
pub struct Vm {
    lua: Lua,
    /// The hidden table the sandboxed globals read through.
    lib: Table,
    /// Runs a script under an error handler (`prelude.lua`); shared, so
    /// that a run holds it without a new Lua handle.
    run: Rc<Function>,
    /// Makes a function library's globals, and turns them from what a
    /// library may use while it loads to what its functions use.
    library_env: Function,
    activate: Function,
    /// The protocol `redis.call` replies are converted in (`setresp`).
    resp: Rc<Cell<u8>>,
    /// EVAL's scripts by SHA1: the compiled function, the body, and
    /// what its shebang declares (`None`: it has none).
    scripts: HashMap<String, (Function, Vec<u8>, Option<Shebang>)>,
    /// Scripts run since the collector last took a step.
    runs: Cell<u32>,
    /// The run the state's hook watches (busy-reply-threshold).
    watched: watch::Watched,
    /// Function libraries by name, and their functions by name.
    pub libraries: HashMap<String, Library>,
    pub functions: HashMap<String, (String, Function, Vec<String>)>,
}

impl Vm {
    pub fn new() -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS,
            LuaOptions::default(),
        )?;
        let resp = Rc::new(Cell::new(2u8));
        let g = lua.globals();
        g.set("redis", redis_library(&lua, &resp)?)?;
        g.set("bit", bit::library(&lua)?)?;
        g.set("cjson", json::library(&lua)?)?;
        g.set("cmsgpack", msgpack::library(&lua)?)?;
        g.set("struct", struct_lib::library(&lua)?)?;
        g.set("__where", lua.create_function(user_frame)?)?;
        let (lib, run, library_env, activate): (Table, Function, Function, Function) =
            lua.load(PRELUDE).set_name("@prelude").call(())?;
        let watched = watch::Watched::default();
        watch::install(&lua, &watched);
        Ok(Vm {
            lua,
            lib,
            run: Rc::new(run),
            library_env,
            activate,
            resp,
            scripts: HashMap::new(),
            runs: Cell::new(0),
            watched,
            libraries: HashMap::new(),
            functions: HashMap::new(),
        })
    }

    /// Compiles `body` (if not cached) and caches it: its SHA1, or the
    /// compiler's error.
    pub fn load(&mut self, body: &[u8]) -> Result<String, String> {
        let sha = sha1hex(body);
        if !self.scripts.contains_key(&sha) {
            let (shebang, code_at) = shebang::parse(body)?;
            let f = self
                .lua
                .load(&body[code_at..])
                .set_name("@user_script")
                .into_function()
                .map_err(|e| format!("Error compiling script (new function): {}", message(&e)))?;
            self.scripts
                .insert(sha.clone(), (f, body.to_vec(), shebang));
        }
        Ok(sha)
    }

    /// A cached script: its function and its shebang.
    pub fn script(&self, sha: &str) -> Option<(Function, Option<Shebang>)> {
        self.scripts
            .get(sha)
            .map(|(f, _, shebang)| (f.clone(), shebang.clone()))
    }

    /// After each script: every 50 runs, a step of the collector (of 50
    /// KB), as Redis takes one, so that what scripts leave is freed
    /// without a full collection's pause.
    pub fn after_run(&self) {
        let runs = self.runs.get() + 1;
        if runs >= GC_PERIOD {
            let _ = self.lua.gc_step_kbytes(GC_PERIOD as i32);
            self.runs.set(0);
        } else {
            self.runs.set(runs);
        }
    }

    pub fn has_script(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// A full collection: after a library is loaded or deleted, which
    /// leaves a whole library's code and tables behind.
    pub fn collect(&self) {
        self.lua.gc_collect().ok();
    }

    pub fn cached_scripts(&self) -> usize {
        self.scripts.len()
    }

    /// What the Lua state takes.
    pub fn memory(&self) -> usize {
        self.lua.used_memory()
    }
}

/// Where the script's own code is in the stack as an error is handled:
/// the source and line of the innermost frame of a script or function
/// (the prelude's and the server's functions are skipped), as Redis's
/// error handler finds the caller of a failing `redis.call`. Not found
/// after a tail call into the prelude (`return redis.call(...)` replaces
/// the script's frame, where Redis's C `redis.call` keeps it): that
/// error then says no place.
fn user_frame(lua: &Lua, _: ()) -> mlua::Result<(Option<String>, Option<i64>)> {
    for level in 1.. {
        let frame = lua.inspect_stack(level, |d| {
            (d.source().source.map(|s| s.into_owned()), d.current_line())
        });
        match frame {
            None => break,
            Some((Some(source), Some(line))) if source.starts_with("@user_") => {
                return Ok((Some(source), Some(line as i64)))
            }
            Some(_) => {}
        }
    }
    Ok((None, None))
}

/// The text of a Lua error, without mlua's decoration.
fn message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => message(cause),
        other => other.to_string(),
    }
}

/// The parts of `redis` that do not call commands (`prelude.lua` adds
/// `call`, `pcall`, `acl_check_cmd`, `error_reply` and `status_reply`).
fn redis_library(lua: &Lua, resp: &Rc<Cell<u8>>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "sha1hex",
        lua.create_function(|_, v: Value| match convert::lua_text(&v) {
            Some(b) => Ok(sha1hex(&b)),
            None => Err(mlua::Error::runtime("wrong number of arguments")),
        })?,
    )?;
    t.set(
        "log",
        lua.create_function(|_, args: mlua::Variadic<Value>| {
            if args.len() < 2 {
                return Err(mlua::Error::runtime(
                    "redis.log() requires two arguments or more.",
                ));
            }
            let level = match &args[0] {
                Value::Integer(i) => *i,
                Value::Number(n) => *n as i64,
                _ => {
                    return Err(mlua::Error::runtime(
                        "First argument must be a number (log level).",
                    ))
                }
            };
            let text: Vec<String> = args[1..]
                .iter()
                .filter_map(convert::argument)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect();
            let text = text.join(" ");
            match level {
                0 => tracing::debug!(target: "script", "{text}"),
                1 | 2 => tracing::info!(target: "script", "{text}"),
                3 => tracing::warn!(target: "script", "{text}"),
                _ => return Err(mlua::Error::runtime("Invalid debug level.")),
            }
            Ok(())
        })?,
    )?;
    let r = resp.clone();
    t.set(
        "setresp",
        lua.create_function(move |_, v: Option<i64>| match v {
            Some(p @ (2 | 3)) => {
                r.set(p as u8);
                Ok(())
            }
            Some(_) => Err(mlua::Error::runtime("RESP version must be 2 or 3.")),
            None => Err(mlua::Error::runtime(
                "redis.setresp() requires one argument.",
            )),
        })?,
    )?;
    // Stria has no replicas: every flag is accepted, and changes nothing.
    t.set(
        "set_repl",
        lua.create_function(|_, v: Option<i64>| match v {
            Some(0..=3) => Ok(()),
            Some(_) => Err(mlua::Error::runtime(
                "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
            )),
            None => Err(mlua::Error::runtime(
                "redis.set_repl() requires one argument.",
            )),
        })?,
    )?;
    t.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    t.set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    t.set(
        "debug",
        lua.create_function(|_, _: mlua::Variadic<Value>| Ok(()))?,
    )?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        t.set(name, v)?;
    }
    t.set("REDIS_VERSION", crate::server::REDIS_VERSION)?;
    t.set("REDIS_VERSION_NUM", 0x07_02_00)?;
    Ok(t)
}
