//! Lua scripts and functions through a client: Redis's conversions and
//! errors, the sandbox, the script cache, read-only scripts, a script
//! that runs too long, and function libraries that survive a restart.

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, q};

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
        assert_eq!(e(&mut c, &["EVAL", script, "0"]), want, "{script}");
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
        ("loadfile('x')", "nonexistent global variable 'loadfile'"),
        ("io.open('x')", "nonexistent global variable 'io'"),
        ("os.execute('true')", "attempt to call field 'execute'"),
        ("print('x')", "nonexistent global variable 'print'"),
    ] {
        let err = e(&mut c, &["EVAL", script, "0"]);
        assert!(err.contains(want), "{script}: {err}");
    }
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
    // A script that runs on without writing is stopped at the threshold,
    // and the server goes on serving.
    q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "50"]);
    let err = e(
        &mut c,
        &["EVAL", "local a = 1 while true do a = a + 1 end", "0"],
    );
    assert!(err.contains("busy-reply-threshold"), "{err}");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
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
