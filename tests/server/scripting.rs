//! Lua scripts and functions through a client: Redis's conversions and
//! errors, the sandbox, the script cache, read-only scripts, scripts that
//! run past busy-reply-threshold (BUSY, SCRIPT KILL, FUNCTION KILL,
//! SHUTDOWN NOSAVE), and function libraries that survive a restart.

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, info_u64, q};

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

#[test]
fn eval_converts_and_calls_as_redis() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        q::<String>(&mut c, &["EVAL", "return 'hello'", "0"]),
        "hello"
    );
    assert_eq!(q::<i64>(&mut c, &["EVAL", "return 100.5", "0"]), 100);
    assert_eq!(q::<i64>(&mut c, &["EVAL", "return true", "0"]), 1);
    assert_eq!(
        q::<Value>(&mut c, &["EVAL", "return false", "0"]),
        Value::Nil
    );
    assert_eq!(
        q::<Value>(&mut c, &["EVAL", "return {1,2,'ciao',{1,2},nil,3}", "0"]),
        Value::Array(vec![
            Value::Int(1),
            Value::Int(2),
            bulk("ciao"),
            Value::Array(vec![Value::Int(1), Value::Int(2)])
        ])
    );
    assert_eq!(
        q::<String>(&mut c, &["EVAL", "return {ok='fine'}", "0"]),
        "fine"
    );
    assert_eq!(
        e(&mut c, &["EVAL", "return {err='MY_ERR custom'}", "0"]),
        "MY_ERR custom"
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "EVAL",
                "return {KEYS[1],KEYS[2],ARGV[1]}",
                "2",
                "a",
                "b",
                "c"
            ]
        ),
        ["a", "b", "c"]
    );
    // Keys and arguments that are not text, or more of them than go onto
    // Lua's stack in one call, make the same KEYS and ARGV.
    let many: Vec<String> = (0..3000).map(|i| format!("v{i}")).collect();
    let mut args = vec![
        "EVAL",
        "return {#KEYS, #ARGV, KEYS[2], ARGV[1], ARGV[#ARGV]}",
        "2",
    ];
    args.extend(many.iter().map(String::as_str));
    assert_eq!(
        q::<Vec<Value>>(&mut c, &args),
        [
            Value::Int(2),
            Value::Int(2998),
            bulk("v1"),
            bulk("v2"),
            bulk("v2999")
        ]
    );
    let binary: Value = redis::cmd("EVAL")
        .arg("return {#KEYS, #ARGV, KEYS[1], ARGV[1]}")
        .arg(1)
        .arg(&b"k\xff"[..])
        .arg(&b"\x00\xfe"[..])
        .query(&mut c)
        .expect("binary keys and arguments");
    assert_eq!(
        binary,
        Value::Array(vec![
            Value::Int(1),
            Value::Int(1),
            Value::BulkString(b"k\xff".to_vec()),
            Value::BulkString(b"\x00\xfe".to_vec())
        ])
    );
    // redis.call: replies converted, errors raised; redis.pcall returns them.
    q::<()>(&mut c, &["SET", "k", "v"]);
    q::<()>(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(
        q::<Vec<Value>>(
            &mut c,
            &[
                "EVAL",
                "return {redis.call('get', KEYS[1]), redis.call('get', 'none') == false, \
                 redis.call('lpush', 'l', 'y'), redis.call('set', 'n', 1)['ok']}",
                "1",
                "k"
            ]
        ),
        [bulk("v"), Value::Int(1), Value::Int(2), bulk("OK")]
    );
    assert!(e(&mut c, &["EVAL", "return redis.call('incr', 'l')", "0"]).starts_with("WRONGTYPE"));
    // A number argument is written as Redis 7.2 writes it (an integer's
    // digits, a float's shortest form), not as Lua's tostring would; a
    // string that looks like a number stays as it was sent.
    for (arg, want) in [
        ("60", "60"),
        ("-7", "-7"),
        ("12345678901234", "12345678901234"),
        ("123456789012345", "123456789012345"),
        ("2^53", "9007199254740992"),
        ("-0.0", "0"),
        ("0.1", "0.1"),
        ("1/3", "0.3333333333333333"),
        ("3.14159265358979", "3.14159265358979"),
        ("math.pi", "3.141592653589793"),
        ("1e300", "1e+300"),
        ("1e19", "1e+19"),
        ("1e-7", "1e-7"),
        ("0.000001", "0.000001"),
        ("1/0", "inf"),
        ("'-0'", "-0"),
        ("'1.50'", "1.50"),
        ("'inf'", "inf"),
        ("'0123'", "0123"),
    ] {
        let script = format!("redis.call('set', 'num', {arg}) return redis.call('get', 'num')");
        assert_eq!(q::<String>(&mut c, &["EVAL", &script, "0"]), want, "{arg}");
    }
    assert_eq!(
        q::<String>(
            &mut c,
            &["EVAL", "return redis.pcall('incr', 'l')['err']", "0"]
        ),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    for (script, want) in [
        (
            "redis.call('nosuchcommand')",
            "ERR Unknown Redis command called from script",
        ),
        (
            "redis.call('get')",
            "ERR Wrong number of args calling Redis command from script",
        ),
        (
            "redis.call('multi')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "redis.call()",
            "ERR Please specify at least one argument for this redis lib call",
        ),
        (
            "redis.call('get', {})",
            "ERR Lua redis lib command arguments must be strings or integers",
        ),
    ] {
        // Raised, an error says where it happened, as Redis's do.
        let sha: String = q(&mut c, &["SCRIPT", "LOAD", script]);
        assert_eq!(
            e(&mut c, &["EVAL", script, "0"]),
            format!("{want} script: {sha}, on @user_script:1."),
            "{script}"
        );
    }
    // Libraries.
    assert_eq!(
        q::<String>(
            &mut c,
            &["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"]
        ),
        "74822d82031af7493c20eefa13bd07ec4fada82f"
    );
    assert_eq!(
        q::<String>(
            &mut c,
            &["EVAL", "return bit.tohex(65535, -2147483648)", "0"]
        ),
        "0000FFFF"
    );
    assert_eq!(
        q::<i64>(&mut c, &["EVAL", "return bit.bor(1,2,4,8)", "0"]),
        15
    );
    assert_eq!(
        q::<String>(
            &mut c,
            &[
                "EVAL",
                "return cjson.encode(cjson.decode('{\"a\":[1,2,{\"b\":null}]}'))",
                "0"
            ]
        ),
        "{\"a\":[1,2,{\"b\":null}]}"
    );
    assert_eq!(
        q::<String>(
            &mut c,
            &[
                "EVAL",
                "return table.concat(cjson.decode('[0.0, -5e3, 0.3e-3, 1023.2]'), ' ')",
                "0"
            ]
        ),
        "0 -5000 0.0003 1023.2"
    );
    // RESP3 from a script that asks for it.
    assert_eq!(
        q::<Vec<Value>>(
            &mut c,
            &[
                "EVAL",
                "redis.setresp(3); return {redis.call('get', 'none') == nil}",
                "0"
            ]
        ),
        [Value::Int(1)]
    );
}

#[test]
fn scripts_are_sandboxed_cached_and_read_only_when_asked() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    for (script, want) in [
        (
            "return a",
            "Script attempted to access nonexistent global variable 'a'",
        ),
        ("a = 10", "Attempt to modify a readonly table"),
        ("setmetatable(_G, {})", "Attempt to modify a readonly table"),
        (
            "redis.call = function() end",
            "Attempt to modify a readonly table",
        ),
        ("cjson.encode = nil", "Attempt to modify a readonly table"),
        (
            "getmetatable('').__index.upper = nil",
            "Attempt to modify a readonly table",
        ),
        ("loadfile('x')", "nonexistent global variable 'loadfile'"),
        ("io.open('x')", "nonexistent global variable 'io'"),
        ("os.execute('true')", "attempt to call field 'execute'"),
        ("print('x')", "nonexistent global variable 'print'"),
    ] {
        let err = e(&mut c, &["EVAL", script, "0"]);
        assert!(err.contains(want), "{script}: {err}");
    }
    // Strings' methods are still there.
    assert_eq!(
        q::<String>(&mut c, &["EVAL", "return ('a'):upper()", "0"]),
        "A"
    );
    assert!(e(&mut c, &["EVAL", "return =", "0"]).starts_with("ERR Error compiling script"));
    // The cache.
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", "return 'loaded'"]);
    assert_eq!(sha, "b534286061d4b9e4026607613b95c06c06015ae8");
    assert_eq!(q::<String>(&mut c, &["EVALSHA", &sha, "0"]), "loaded");
    assert_eq!(
        q::<String>(&mut c, &["EVALSHA", &sha.to_uppercase(), "0"]),
        "loaded"
    );
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &[
                "SCRIPT",
                "EXISTS",
                &sha,
                "ffffffffffffffffffffffffffffffffffffffff"
            ]
        ),
        [1, 0]
    );
    q::<()>(&mut c, &["SCRIPT", "FLUSH"]);
    assert!(e(&mut c, &["EVALSHA", &sha, "0"]).starts_with("NOSCRIPT"));
    assert_eq!(
        e(&mut c, &["EVAL", "return 1", "2", "a"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        e(&mut c, &["EVAL", "return 1", "-1"]),
        "ERR Number of keys can't be negative"
    );
    // Read-only scripts read and do not write.
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        q::<String>(
            &mut c,
            &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"]
        ),
        "v"
    );
    assert!(e(
        &mut c,
        &["EVAL_RO", "return redis.call('del', KEYS[1])", "1", "k"]
    )
    .starts_with("ERR Write commands are not allowed from read-only scripts."));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 1);
    // Blocking commands do not block in a script.
    assert_eq!(
        q::<Value>(
            &mut c,
            &["EVAL", "return redis.call('blpop', 'none', 0)", "0"]
        ),
        Value::Nil
    );
}

/// Polls `c` with PING until the server says BUSY (a script holds it).
fn until_busy(c: &mut redis::Connection) -> String {
    for _ in 0..500 {
        let r: redis::RedisResult<String> = redis::cmd("PING").query(c);
        if let Err(err) = r {
            return err.to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the script never made the server busy");
}

#[test]
fn a_script_past_the_threshold_makes_others_busy_until_script_kill() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    // lua-time-limit is busy-reply-threshold's old name.
    q::<()>(&mut c, &["CONFIG", "SET", "lua-time-limit", "20"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "busy-reply-threshold"]),
        ["busy-reply-threshold", "20"]
    );
    assert!(e(&mut c, &["SCRIPT", "KILL"]).starts_with("NOTBUSY"));
    // The script's client pipelines a PING behind it; a pcall in the
    // script cannot swallow the kill.
    let mut runner = s.client();
    let script = std::thread::spawn(move || {
        let mut p = redis::pipe();
        p.cmd("EVAL")
            .arg("local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end")
            .arg(0)
            .cmd("PING");
        let r: redis::RedisResult<(String, String)> = p.query(&mut runner);
        let err = r.expect_err("the script is killed").to_string();
        let after: String = redis::cmd("PING").query(&mut runner).unwrap();
        (err, after)
    });
    let busy = until_busy(&mut c);
    assert!(
        busy.contains("BUSY") && busy.contains("SCRIPT KILL or SHUTDOWN NOSAVE"),
        "{busy}"
    );
    // A new connection is answered too, and FUNCTION KILL is not for scripts.
    let mut fresh = s.client();
    assert!(e(&mut fresh, &["GET", "k"]).starts_with("BUSY"));
    assert!(e(&mut fresh, &["FUNCTION", "KILL"]).starts_with("BUSY"));
    assert_eq!(q::<String>(&mut fresh, &["SCRIPT", "KILL"]), "OK");
    let (err, after) = script.join().unwrap();
    assert!(err.contains("killed by user"), "{err}");
    assert_eq!(after, "PONG");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut fresh, &["PING"]), "PONG");

    // A function is stopped with FUNCTION KILL.
    let lib = "#!lua name=spin\nredis.register_function('spin', function() while 1 do end end)";
    q::<String>(&mut c, &["FUNCTION", "LOAD", lib]);
    let mut runner = s.client();
    let f = std::thread::spawn(move || e(&mut runner, &["FCALL", "spin", "0"]));
    assert!(until_busy(&mut c).contains("FUNCTION KILL or SHUTDOWN NOSAVE"));
    assert!(e(&mut c, &["SCRIPT", "KILL"]).starts_with("BUSY"));
    assert_eq!(q::<String>(&mut c, &["FUNCTION", "KILL"]), "OK");
    assert!(f.join().unwrap().contains("killed by user"));
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    // The hook that failed the killed function's every instruction is
    // gone: scripts run again, and a new spin is watched again.
    assert_eq!(q::<i64>(&mut c, &["EVAL", "return 7", "0"]), 7);
    let mut runner = s.client();
    let again = std::thread::spawn(move || e(&mut runner, &["EVAL", "while 1 do end", "0"]));
    assert!(until_busy(&mut c).contains("SCRIPT KILL"));
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    assert!(again.join().unwrap().contains("killed by user"));
}

#[test]
fn a_busy_script_that_wrote_is_unkillable_and_shutdown_nosave_loses_all_of_it() {
    let dir = tempdir();
    {
        let s = Server::start(dir.path(), &Map::default());
        let mut c = s.client();
        q::<()>(&mut c, &["SET", "before", "1"]);
        q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "20"]);
        let mut runner = s.client();
        std::thread::spawn(move || {
            let _ = e(
                &mut runner,
                &[
                    "EVAL",
                    "redis.call('set', 'half', '1') while true do end",
                    "0",
                ],
            );
        });
        until_busy(&mut c);
        assert!(e(&mut c, &["SCRIPT", "KILL"])
            .starts_with("UNKILLABLE Sorry the script already executed write commands"));
        let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
        let (status, printed) = s.wait_exit();
        assert!(status.success(), "{}", printed.all());
    }
    // All of the script or none: its write is not there; what was
    // acknowledged before it is.
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        q::<Option<String>>(&mut c, &["GET", "before"]),
        Some("1".into())
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "half"]), None);
}

#[test]
fn function_libraries_load_call_and_survive_a_restart() {
    let dir = tempdir();
    let lib = "#!lua name=mylib\n\
        redis.register_function('incr_by', function(keys, args) \
            return redis.call('incrby', keys[1], args[1]) end)\n\
        redis.register_function{function_name='peek', \
            callback=function(keys) return redis.call('get', keys[1]) end, \
            flags={'no-writes'}}";
    {
        let s = Server::start(dir.path(), &Map::default());
        let mut c = s.client();
        assert_eq!(q::<String>(&mut c, &["FUNCTION", "LOAD", lib]), "mylib");
        assert!(e(&mut c, &["FUNCTION", "LOAD", lib]).contains("already exists"));
        assert_eq!(q::<i64>(&mut c, &["FCALL", "incr_by", "1", "n", "5"]), 5);
        assert_eq!(q::<i64>(&mut c, &["FCALL", "INCR_BY", "1", "n", "2"]), 7);
        assert_eq!(q::<String>(&mut c, &["FCALL_RO", "peek", "1", "n"]), "7");
        assert_eq!(
            e(&mut c, &["FCALL_RO", "incr_by", "1", "n", "1"]),
            "ERR Can not execute a script with write flag using *_ro command."
        );
        assert_eq!(e(&mut c, &["FCALL", "none", "0"]), "ERR Function not found");
        for (code, want) in [
            ("return 1", "Missing library metadata"),
            ("#!js name=x\nreturn 1", "Engine 'js' not found"),
            ("#!lua name=x\nreturn 1", "No functions registered"),
            (
                "#!lua name=x\nreturn math.random()",
                "nonexistent global variable 'math'",
            ),
            ("#!lua name=x\nwhile 1 do end", "FUNCTION LOAD timeout"),
        ] {
            let err = e(&mut c, &["FUNCTION", "LOAD", code]);
            assert!(err.contains(want), "{code}: {err}");
        }
        let list: Vec<Value> = q(&mut c, &["FUNCTION", "LIST"]);
        assert_eq!(list.len(), 1);
        let dump: Vec<u8> = q(&mut c, &["FUNCTION", "DUMP"]);
        q::<()>(&mut c, &["FUNCTION", "FLUSH"]);
        assert_eq!(
            e(&mut c, &["FCALL", "peek", "1", "n"]),
            "ERR Function not found"
        );
        let mut restore = redis::cmd("FUNCTION");
        restore.arg("RESTORE").arg(&dump);
        restore.query::<()>(&mut c).unwrap();
        assert_eq!(q::<String>(&mut c, &["FCALL", "peek", "1", "n"]), "7");
    }
    // Stored in the engine: there after a restart.
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["FCALL", "incr_by", "1", "n", "1"]), 8);
    q::<()>(&mut c, &["FUNCTION", "DELETE", "mylib"]);
    assert_eq!(
        e(&mut c, &["FUNCTION", "DELETE", "mylib"]),
        "ERR Library not found"
    );
    drop(c);
    drop(s);
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        e(&mut c, &["FCALL", "peek", "1", "n"]),
        "ERR Function not found"
    );
}

#[test]
fn a_transaction_that_meets_a_busy_script_runs_whole_or_not_at_all() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "20"]);
    q::<()>(&mut c, &["SET", "xx", "1"]);
    let spin = |s: &Server| {
        let mut runner = s.client();
        std::thread::spawn(move || e(&mut runner, &["EVAL", "while true do end", "0"]))
    };
    // EXEC while the script is busy: the transaction is discarded.
    let mut t = s.client();
    q::<()>(&mut t, &["MULTI"]);
    q::<String>(&mut t, &["INCR", "xx"]);
    let script = spin(&s);
    until_busy(&mut c);
    let err = e(&mut t, &["EXEC"]);
    assert!(
        err.starts_with("EXECABORT") && err.contains("BUSY"),
        "{err}"
    );
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    script.join().unwrap();
    assert_eq!(q::<String>(&mut t, &["PING", "out"]), "out");
    // MULTI while busy begins one; a command refused in it fails EXEC.
    let script = spin(&s);
    until_busy(&mut c);
    q::<()>(&mut t, &["MULTI"]);
    assert!(e(&mut t, &["INCR", "xx"]).starts_with("BUSY"));
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    script.join().unwrap();
    q::<String>(&mut t, &["INCR", "xx"]);
    assert!(e(&mut t, &["EXEC"])
        .starts_with("EXECABORT Transaction discarded because of previous errors"));
    assert_eq!(q::<String>(&mut c, &["GET", "xx"]), "1");
}

#[test]
fn the_struct_library_packs_and_unpacks() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &[
                "EVAL",
                "return {struct.unpack('>I2i1', struct.pack('>I2i1', 513, -3))}",
                "0"
            ]
        ),
        [513, -3, 4]
    );
    assert_eq!(
        q::<i64>(&mut c, &["EVAL", "return struct.size('<!4 B I d')", "0"]),
        16
    );
    assert!(e(&mut c, &["EVAL", "return struct.pack('q', 1)", "0"])
        .contains("invalid format option 'q'"));
    assert!(e(&mut c, &["EVAL", "struct.pack = nil", "0"]).contains("readonly"));
}

#[test]
fn sort_by_a_constant_sorts_a_set_for_a_script() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    // SORT BY a constant sorts a set's members for a script (whose result
    // must not depend on the set's order), and not for a client.
    q::<()>(&mut c, &["SADD", "myset", "c", "a", "b", "aa"]);
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "EVAL",
                "return redis.call('sort', KEYS[1], 'by', '_')",
                "1",
                "myset"
            ]
        ),
        ["a", "aa", "b", "c"]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(
            &mut c,
            &[
                "EVAL",
                "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')",
                "1",
                "myset"
            ]
        ),
        [
            Some("a".into()),
            None,
            Some("aa".into()),
            None,
            Some("b".into()),
            None,
            Some("c".into()),
            None
        ]
    );
}

#[test]
fn scripts_meet_lua_limits_as_redis_scripts_do() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    // A table that holds itself: arrays nest until the conversion stops,
    // with an error in the innermost place; the connection goes on.
    let mut raw = s.raw();
    let script = b"local a = {}; local b = {a}; a[1] = b; return a";
    let first = crate::request_line(&mut raw, &crate::resp(&[b"EVAL", script, b"0"]));
    assert_eq!(first, "*1\r\n");
    let mut depth = 1;
    let last = loop {
        let line = crate::read_line(&mut raw);
        if line != "*1\r\n" {
            break line;
        }
        depth += 1;
    };
    assert_eq!(last, "-ERR reached lua stack limit\r\n");
    assert!(depth >= 100, "{depth}");
    assert_eq!(
        crate::request_line(&mut raw, &crate::resp(&[b"PING"])),
        "+PONG\r\n"
    );
    // A command with nearly as many arguments as a C function's stack
    // holds.
    let many = "local a = {} for i = 1, 7999 do a[i] = 1 end \
                return redis.call('lpush', KEYS[1], unpack(a))";
    assert_eq!(q::<i64>(&mut c, &["EVAL", many, "1", "l"]), 7999);
    // Code loads only as text: a binary chunk is refused, as by load.
    let dumped = "return loadstring(string.dump(function() return 1 end))()";
    assert!(e(&mut c, &["EVAL", dumped, "0"]).contains("attempt to call a nil value"));
    assert_eq!(
        q::<String>(
            &mut c,
            &[
                "EVAL",
                "return select(2, loadstring(string.dump(function() end)))",
                "0"
            ]
        ),
        "[string \"\u{1b}LuaQ\"]:1: unexpected symbol near 'char(27)'"
    );
    let read = "local s = string.dump(function() return 1 end) \
                return select(2, load(function() local p = s; s = nil; return p end))";
    assert_eq!(
        q::<String>(&mut c, &["EVAL", read, "0"]),
        "(load):1: unexpected symbol near 'char(27)'"
    );
    assert_eq!(
        q::<i64>(&mut c, &["EVAL", "return loadstring('return 7')()", "0"]),
        7
    );
}

#[test]
fn acl_check_cmd_answers_for_the_scripts_user() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">123",
            "+@scripting",
            "+set",
            "~x*",
        ],
    );
    q::<()>(&mut c, &["AUTH", "bob", "123"]);
    let check = |c: &mut redis::Connection, call: &str| -> Value {
        q(
            c,
            &["EVAL", &format!("return redis.acl_check_cmd({call})"), "0"],
        )
    };
    assert_eq!(check(&mut c, "'set', 'xx', 1"), Value::Int(1));
    // Not its command, not its key.
    assert_eq!(check(&mut c, "'hset', 'xx', 'f', 1"), Value::Nil);
    assert_eq!(check(&mut c, "'set', 'yy', 1"), Value::Nil);
    // A request of the wrong arity names no key: the command alone.
    assert_eq!(check(&mut c, "'set'"), Value::Int(1));
    assert!(e(
        &mut c,
        &[
            "EVAL",
            "return redis.acl_check_cmd('invalid-cmd', 'arg')",
            "0"
        ]
    )
    .starts_with("ERR Invalid command passed to redis.acl_check_cmd()"));
    assert!(e(&mut c, &["EVAL", "return redis.acl_check_cmd()", "0"])
        .starts_with("ERR Please specify at least one argument for this redis lib call"));
    assert!(e(
        &mut c,
        &["EVAL", "return redis.acl_check_cmd('set', {})", "0"]
    )
    .starts_with("ERR Lua redis lib command arguments must be strings or integers"));
}

#[test]
fn script_flush_starts_a_new_lua_state_and_replaced_libraries_are_freed() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    // SCRIPT FLUSH makes a new state, as small as a fresh one.
    for i in 0..200 {
        q::<i64>(&mut c, &["EVAL", &format!("return {i}"), "0"]);
    }
    q::<()>(&mut c, &["SCRIPT", "FLUSH"]);
    let fresh = info_u64(&mut c, "memory", "used_memory_lua");
    assert!(fresh > 0 && fresh < 100 * 1024, "{fresh}");
    let body = "#!lua name=lib\nredis.register_function('f', function(KEYS, ARGV) \
                return redis.call('incr', KEYS[1]) end)";
    for _ in 0..500 {
        q::<String>(&mut c, &["FUNCTION", "LOAD", "REPLACE", body]);
        q::<i64>(&mut c, &["FCALL", "f", "1", "n"]);
    }
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 500);
    // INFO follows FUNCTION and FCALL too, and 500 replaced libraries
    // are not kept.
    let after = info_u64(&mut c, "memory", "used_memory_lua");
    assert!(after < fresh + 30 * 1024, "{fresh} then {after}");
    q::<()>(&mut c, &["SCRIPT", "FLUSH"]);
    // The libraries load again into the new state.
    assert_eq!(q::<i64>(&mut c, &["FCALL", "f", "1", "n"]), 501);
}

#[test]
fn a_raised_error_says_where_in_the_script_it_happened() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let at = |c: &mut redis::Connection, script: &str| -> String {
        let sha: String = q(c, &["SCRIPT", "LOAD", script]);
        e(c, &["EVALSHA", &sha, "0"]).replace(&sha, "<sha>")
    };
    assert_eq!(
        at(
            &mut c,
            "local x = 1\nlocal y = redis.call('nosuch')\nreturn y"
        ),
        "ERR Unknown Redis command called from script script: <sha>, on @user_script:2."
    );
    assert_eq!(
        at(&mut c, "error({err = 'MY_CODE custom'})"),
        "MY_CODE custom script: <sha>, on @user_script:1."
    );
    assert_eq!(
        at(&mut c, "local function h() error('boom') end\nh()"),
        "ERR user_script:1: boom script: <sha>, on @user_script:1."
    );
    // An error returned, not raised, is the reply as it is.
    assert_eq!(
        e(&mut c, &["EVAL", "return redis.pcall('nosuch')", "0"]),
        "ERR Unknown Redis command called from script"
    );
    // A function's errors name the function and its library's lines.
    let lib = "#!lua name=lib\n\
               redis.register_function('f', function() return nope end)";
    q::<String>(&mut c, &["FUNCTION", "LOAD", lib]);
    assert_eq!(
        e(&mut c, &["FCALL", "f", "0"]),
        "ERR user_function:2: Script attempted to access nonexistent global variable \
         'nope' script: f, on @user_function:2."
    );
}
