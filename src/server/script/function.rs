//! Redis 7 functions: FUNCTION LOAD, DELETE, FLUSH, LIST, DUMP, RESTORE,
//! STATS, KILL, and FCALL, FCALL_RO. A library is Lua code that starts
//! with `#!lua name=<library>` and registers its functions with
//! `redis.register_function`. Libraries are stored in the engine (one
//! server key each, written at the connection's level like any write),
//! so they survive restarts and crashes; a shard's Lua state loads them
//! all when it is made. Function and library names are matched without
//! regard to case, as in Redis.

use mlua::{Function, Table, Value};
use xxhash_rust::xxh3::xxh3_64;

use super::eval::{split_keys, Run};
use super::{message, Vm};
use crate::server::conn::Conn;
use crate::server::glob;
use crate::server::resp::Reply;
use crate::server::shard::Deps;

/// Where libraries are kept: this, then the library's name (lower case).
const LIBRARIES: &[u8] = b"\0\0stria:library:";

/// How long FUNCTION LOAD may run a library's code (Redis's limit).
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// A loaded library.
#[derive(Clone)]
pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    /// Its functions: name, flags, description.
    pub functions: Vec<(String, Vec<String>, Option<String>)>,
}

fn library_key(name: &str) -> Vec<u8> {
    let mut k = LIBRARIES.to_vec();
    k.extend_from_slice(name.to_ascii_lowercase().as_bytes());
    k
}

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The library name in `code`'s first line (`#!lua name=<name>`).
fn header(code: &[u8]) -> Result<String, String> {
    let line = code.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let Some(rest) = line.strip_prefix("#!") else {
        return Err("Missing library metadata".into());
    };
    let (engine, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    let mut name = None;
    for p in rest.split(' ').filter(|p| !p.is_empty()) {
        match p.split_once('=') {
            Some(("name", _)) if name.is_some() => {
                return Err("Invalid metadata value, name argument was given multiple times".into())
            }
            Some(("name", n)) => name = Some(n.trim_matches('"').to_string()),
            _ => return Err(format!("Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("Library name was not given")?;
    if !valid_name(&name) {
        return Err(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
                .into(),
        );
    }
    Ok(name)
}

impl Vm {
    /// Compiles and runs library `code`, registering its functions: the
    /// library, or why not. `replace` lets it take the place of a library
    /// of the same name; a failure leaves what was loaded as it was.
    pub fn load_library(&mut self, code: &[u8], replace: bool) -> Result<Library, String> {
        let name = header(code)?;
        let key = name.to_ascii_lowercase();
        if self.libraries.contains_key(&key) && !replace {
            return Err(format!("Library '{name}' already exists"));
        }
        // The first line is metadata, not Lua: kept as an empty line so
        // that line numbers hold.
        let body_at = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
        let f = self
            .lua
            .load(&code[body_at..])
            .set_name("@user_function")
            .into_function()
            .map_err(|e| format!("Error compiling function: {}", message(&e)))?;
        let env: Table = self.library_env.call(()).map_err(|e| e.to_string())?;
        f.set_environment(env.clone()).map_err(|e| e.to_string())?;
        let registered = self.lua.create_table().map_err(|e| e.to_string())?;
        self.lib
            .raw_set("__registering", registered.clone())
            .map_err(|e| e.to_string())?;
        // Loading only registers: a library that runs on is stopped, as
        // Redis stops it.
        let started = std::time::Instant::now();
        let _ = self.lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(10_000),
            move |_, _| {
                if started.elapsed() > LOAD_TIMEOUT {
                    return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
                }
                Ok(mlua::VmState::Continue)
            },
        );
        let ran: mlua::Result<(bool, Value)> = self.run.call((f, false));
        // Back to the hook that watches scripts.
        super::watch::install(&self.lua, &self.watched);
        let _ = self.lib.raw_set("__registering", Value::Nil);
        match ran {
            Ok((true, _)) => {}
            Ok((false, Value::Table(e))) => {
                let msg: String = e.raw_get("err").unwrap_or_default();
                return Err(msg.strip_prefix("ERR ").unwrap_or(&msg).to_string());
            }
            Ok((false, _)) => return Err("Error registering functions".into()),
            Err(e) => return Err(message(&e)),
        }
        let mut lib = Library {
            name: name.clone(),
            code: code.to_vec(),
            functions: Vec::new(),
        };
        let mut found: Vec<(String, Function, Vec<String>)> = Vec::new();
        for entry in registered.sequence_values::<Table>() {
            let entry = entry.map_err(|e| e.to_string())?;
            let fname: String = entry.raw_get("name").map_err(|e| e.to_string())?;
            let callback: Function = entry.raw_get("fn").map_err(|e| e.to_string())?;
            let flags: Vec<String> = entry.raw_get("flags").unwrap_or_default();
            let desc: Option<String> = entry.raw_get("desc").unwrap_or_default();
            let fkey = fname.to_ascii_lowercase();
            if found.iter().any(|(n, ..)| n.eq_ignore_ascii_case(&fname)) {
                return Err(format!("Function {fname} already exists"));
            }
            if let Some((owner, ..)) = self.functions.get(&fkey) {
                if *owner != key {
                    return Err(format!("Function {fname} already exists"));
                }
            }
            lib.functions.push((fname.clone(), flags.clone(), desc));
            found.push((fname, callback, flags));
        }
        if found.is_empty() {
            return Err("No functions registered".into());
        }
        let _: () = self.activate.call(env).map_err(|e| e.to_string())?;
        self.delete_library(&key);
        for (fname, callback, flags) in found {
            self.functions
                .insert(fname.to_ascii_lowercase(), (key.clone(), callback, flags));
        }
        self.libraries.insert(key, lib.clone());
        Ok(lib)
    }

    /// Forgets library `key` (lower case) and its functions.
    pub fn delete_library(&mut self, key: &str) -> Option<Library> {
        let lib = self.libraries.remove(key)?;
        self.functions.retain(|_, (owner, ..)| owner != key);
        Some(lib)
    }
}

/// FUNCTION DUMP's form: each library's code, then an xxh3 checksum.
fn dump(libs: &[&Library]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in libs {
        out.extend_from_slice(&(l.code.len() as u32).to_le_bytes());
        out.extend_from_slice(&l.code);
    }
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn undump(payload: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (body, sum) = payload.split_at(payload.len().checked_sub(8)?);
    if xxh3_64(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let mut codes = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        codes.push(rest.get(4..4 + n)?.to_vec());
        rest = &rest[4 + n..];
    }
    Some(codes)
}

impl<'a> Conn<'a> {
    /// The libraries stored in the engine (to load into a new Lua state).
    pub fn stored_libraries(&self) -> Vec<Vec<u8>> {
        let mut end = LIBRARIES.to_vec();
        *end.last_mut().expect("a prefix") += 1;
        let mut deps = Deps::default();
        self.shard
            .scan(LIBRARIES, Some(&end), usize::MAX, &mut deps)
            .map(|found| found.into_iter().map(|(_, code)| code).collect())
            .unwrap_or_default()
    }

    pub fn function_command(&mut self, args: &[Vec<u8>]) -> Reply {
        let sub = args[0].to_ascii_lowercase();
        let reply = self.function_subcommand(&sub, args);
        if matches!(sub.as_slice(), b"load" | b"delete" | b"flush" | b"restore") {
            if let Some(vm) = self.shard.scripting().as_ref() {
                vm.collect();
            }
        }
        reply
    }

    fn function_subcommand(&mut self, sub: &[u8], args: &[Vec<u8>]) -> Reply {
        match sub {
            b"load" => self.function_load(&args[1..]),
            b"delete" if args.len() == 2 => {
                let key = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
                let deleted = match self.vm() {
                    Ok(mut vm) => vm.delete_library(&key),
                    Err(r) => return r,
                };
                match deleted {
                    Some(_) => {
                        self.write_library(&key, None);
                        Reply::ok()
                    }
                    None => Reply::err("Library not found"),
                }
            }
            b"flush" if args.len() <= 2 => {
                if let Some(mode) = args.get(1) {
                    if !matches!(mode.to_ascii_lowercase().as_slice(), b"sync" | b"async") {
                        return Reply::err("FUNCTION FLUSH only supports SYNC|ASYNC option");
                    }
                }
                self.flush_libraries();
                Reply::ok()
            }
            b"list" => self.function_list(&args[1..]),
            b"dump" if args.len() == 1 => match self.vm() {
                Ok(vm) => {
                    let mut libs: Vec<&Library> = vm.libraries.values().collect();
                    libs.sort_by(|a, b| a.name.cmp(&b.name));
                    Reply::Bulk(dump(&libs))
                }
                Err(r) => r,
            },
            b"restore" if (2..=3).contains(&args.len()) => self.function_restore(&args[1..]),
            b"stats" if args.len() == 1 => match self.vm() {
                Ok(vm) => stats(Reply::Nil, vm.libraries.len(), vm.functions.len()),
                Err(r) => r,
            },
            // A function runs to completion before any other command.
            b"kill" if args.len() == 1 => {
                Reply::Error("NOTBUSY No scripts in execution right now.".into())
            }
            b"help" if args.len() == 1 => crate::server::help::function(),
            _ => Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                crate::server::command::show(&args[0])
            )),
        }
    }

    fn write_library(&mut self, key: &str, code: Option<Vec<u8>>) {
        self.write_own(vec![(library_key(key), code)]);
    }

    fn flush_libraries(&mut self) {
        let keys: Vec<String> = match self.vm() {
            Ok(mut vm) => {
                let keys = vm.libraries.keys().cloned().collect();
                vm.libraries.clear();
                vm.functions.clear();
                keys
            }
            Err(_) => return,
        };
        let writes = keys.iter().map(|k| (library_key(k), None)).collect();
        self.write_own(writes);
    }

    fn function_load(&mut self, args: &[Vec<u8>]) -> Reply {
        let (replace, code) = match args {
            [code] => (false, code),
            [opt, code] if opt.eq_ignore_ascii_case(b"replace") => (true, code),
            [] => return Reply::err("wrong number of arguments for 'function|load' command"),
            _ => return Reply::err("Unknown option given: use REPLACE or none"),
        };
        let loaded = match self.vm() {
            Ok(mut vm) => vm.load_library(code, replace),
            Err(r) => return r,
        };
        match loaded {
            Ok(lib) => {
                self.write_library(&lib.name, Some(code.clone()));
                Reply::Bulk(lib.name.into_bytes())
            }
            Err(e) => Reply::err(e),
        }
    }

    fn function_list(&mut self, args: &[Vec<u8>]) -> Reply {
        let (mut pattern, mut code) = (None, false);
        let mut i = 0;
        while i < args.len() {
            let a = args[i].to_ascii_lowercase();
            match a.as_slice() {
                b"withcode" if !code => code = true,
                b"libraryname" if pattern.is_none() => {
                    let Some(p) = args.get(i + 1) else {
                        return Reply::err("library name argument was not given");
                    };
                    pattern = Some(p.clone());
                    i += 1;
                }
                _ => {
                    return Reply::err(format!(
                        "Unknown argument {}",
                        crate::server::command::show(&args[i])
                    ))
                }
            }
            i += 1;
        }
        let vm = match self.vm() {
            Ok(vm) => vm,
            Err(r) => return r,
        };
        let mut libs: Vec<&Library> = vm
            .libraries
            .values()
            .filter(|l| {
                pattern
                    .as_ref()
                    .is_none_or(|p| glob::matches(p, l.name.as_bytes()))
            })
            .collect();
        libs.sort_by(|a, b| a.name.cmp(&b.name));
        Reply::Array(
            libs.into_iter()
                .map(|l| {
                    let functions = l
                        .functions
                        .iter()
                        .map(|(n, flags, desc)| {
                            Reply::Map(vec![
                                (Reply::bulk("name"), Reply::bulk(n.clone())),
                                (
                                    Reply::bulk("description"),
                                    desc.clone().map_or(Reply::Nil, Reply::bulk),
                                ),
                                (
                                    Reply::bulk("flags"),
                                    Reply::Array(
                                        flags.iter().map(|f| Reply::bulk(f.clone())).collect(),
                                    ),
                                ),
                            ])
                        })
                        .collect();
                    let mut m = vec![
                        (Reply::bulk("library_name"), Reply::bulk(l.name.clone())),
                        (Reply::bulk("engine"), Reply::bulk("LUA")),
                        (Reply::bulk("functions"), Reply::Array(functions)),
                    ];
                    if code {
                        m.push((Reply::bulk("library_code"), Reply::Bulk(l.code.clone())));
                    }
                    Reply::Map(m)
                })
                .collect(),
        )
    }

    fn function_restore(&mut self, args: &[Vec<u8>]) -> Reply {
        let policy =
            match args.get(1).map(|p| p.to_ascii_lowercase()) {
                None => "append".to_string(),
                Some(p) if matches!(p.as_slice(), b"append" | b"replace" | b"flush") => {
                    String::from_utf8_lossy(&p).into_owned()
                }
                Some(_) => return Reply::err(
                    "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                ),
            };
        let Some(codes) = undump(&args[0]) else {
            return Reply::err("payload version or checksum are wrong");
        };
        let before: Vec<Library> = match self.vm() {
            Ok(vm) => vm.libraries.values().cloned().collect(),
            Err(r) => return r,
        };
        if policy == "append" {
            for code in &codes {
                if let Ok(name) = header(code) {
                    if before.iter().any(|l| l.name.eq_ignore_ascii_case(&name)) {
                        return Reply::err(format!("Library {name} already exists"));
                    }
                }
            }
        }
        // All or nothing: on a failure, what was loaded before comes back.
        let result = {
            let mut vm = match self.vm() {
                Ok(vm) => vm,
                Err(r) => return r,
            };
            if policy == "flush" {
                vm.libraries.clear();
                vm.functions.clear();
            }
            let mut err = None;
            for code in &codes {
                if let Err(e) = vm.load_library(code, true) {
                    err = Some(e);
                    break;
                }
            }
            if let Some(e) = err {
                vm.libraries.clear();
                vm.functions.clear();
                for l in &before {
                    let _ = vm.load_library(&l.code, true);
                }
                Err(e)
            } else {
                Ok(vm.libraries.values().cloned().collect::<Vec<_>>())
            }
        };
        match result {
            Ok(now) => {
                let mut writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = before
                    .iter()
                    .filter(|b| !now.iter().any(|n| n.name.eq_ignore_ascii_case(&b.name)))
                    .map(|b| (library_key(&b.name), None))
                    .collect();
                writes.extend(
                    now.into_iter()
                        .map(|l| (library_key(&l.name), Some(l.code))),
                );
                self.write_own(writes);
                Reply::ok()
            }
            Err(e) => Reply::err(e),
        }
    }

    /// FCALL and FCALL_RO.
    pub fn fcall(&mut self, args: Vec<Vec<u8>>, read_only: bool) -> Reply {
        let command = std::rc::Rc::new(args);
        let args = &command[..];
        let (keys, rest) = match split_keys(&args[2..]) {
            Ok(k) => k,
            Err(Reply::Error(e)) if e.contains("not an integer") => {
                return Reply::err("Bad number of keys provided")
            }
            Err(r) => return r,
        };
        let name = String::from_utf8_lossy(&args[1]).into_owned();
        let found = match self.vm() {
            Ok(vm) => vm.functions.get(&name.to_ascii_lowercase()).cloned(),
            Err(r) => return r,
        };
        let Some((_, f, flags)) = found else {
            return Reply::err("Function not found");
        };
        let no_writes = flags.iter().any(|f| f == "no-writes");
        if read_only && !no_writes {
            return Reply::err("Can not execute a script with write flag using *_ro command.");
        }
        let allow_oom = no_writes || flags.iter().any(|f| f == "allow-oom");
        if !no_writes {
            if let Some(r) = self.replicas_refusal() {
                return r;
            }
        }
        if !allow_oom && self.over_maxmemory() {
            return Reply::Error(crate::server::command::OOM.into());
        }
        self.run_script(Run {
            f,
            name: &name,
            keys,
            args: rest,
            command: &command,
            function: true,
            read_only: read_only || no_writes,
            allow_oom,
        })
    }
}

/// FUNCTION STATS: the script running (`Nil`: none), and the libraries
/// and functions loaded.
pub fn stats(running: Reply, libraries: usize, functions: usize) -> Reply {
    Reply::Map(vec![
        (Reply::bulk("running_script"), running),
        (
            Reply::bulk("engines"),
            Reply::Map(vec![(
                Reply::bulk("LUA"),
                Reply::Map(vec![
                    (Reply::bulk("libraries_count"), Reply::Int(libraries as i64)),
                    (Reply::bulk("functions_count"), Reply::Int(functions as i64)),
                ]),
            )]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_headers_are_read_as_redis_reads_them() {
        assert_eq!(header(b"#!lua name=mylib\nreturn 1").unwrap(), "mylib");
        assert_eq!(header(b"#!LUA name=x").unwrap(), "x");
        assert!(header(b"return 1")
            .unwrap_err()
            .contains("Missing library metadata"));
        assert!(header(b"#!js name=x")
            .unwrap_err()
            .contains("Engine 'js' not found"));
        assert!(header(b"#!lua name=a-b")
            .unwrap_err()
            .contains("Library names"));
        let lib = Library {
            name: "l".into(),
            code: b"#!lua name=l\n".to_vec(),
            functions: vec![],
        };
        let d = dump(&[&lib]);
        assert_eq!(undump(&d).unwrap(), std::slice::from_ref(&lib.code));
        let mut bad = d.clone();
        bad[0] ^= 1;
        assert!(undump(&bad).is_none());
    }
}
