//! `maxmemory`, as Redis's `noeviction`: while the memstores hold more
//! than it, commands that may add data are refused with Redis's OOM
//! error, reads and deletes go on, and scripts are refused as Redis
//! refuses them (at their first such call, or at once for a shebang
//! script without `allow-oom` or `no-writes`).

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, q};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

#[test]
fn over_maxmemory_writes_that_add_are_refused_and_the_rest_goes_on() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "x", "123"]);
    q::<()>(&mut c, &["SET", "gone", "1"]);
    let config =
        |c: &mut redis::Connection| -> Vec<String> { q(c, &["CONFIG", "GET", "maxmemory"]) };
    assert_eq!(config(&mut c), ["maxmemory", "0"]);
    for (bad, why) in [("lots", "lots"), ("1tb", "1tb"), ("-1", "-1")] {
        assert_eq!(
            e(&mut c, &["CONFIG", "SET", "maxmemory", bad]),
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
            "{why}"
        );
    }
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "2mb"]);
    assert_eq!(
        config(&mut c),
        ["maxmemory", (2u64 << 20).to_string().as_str()]
    );
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(config(&mut c), ["maxmemory", "1"]);

    // Commands that may add data are refused; reads and deletes are not.
    assert_eq!(e(&mut c, &["SET", "x", "1"]), OOM);
    assert_eq!(e(&mut c, &["LPUSH", "l", "a"]), OOM);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "123");
    assert_eq!(q::<i64>(&mut c, &["DEL", "gone"]), 1);

    // In a transaction anything queued is refused, and EXEC aborts.
    q::<()>(&mut c, &["MULTI"]);
    assert_eq!(e(&mut c, &["GET", "x"]), OOM);
    assert!(e(&mut c, &["EXEC"]).starts_with("EXECABORT"));
    // Queued before the limit was passed: an EXEC of only reads runs, an
    // EXEC holding a write is refused and discards the transaction.
    let mut other = s.client();
    q::<()>(&mut other, &["CONFIG", "SET", "maxmemory", "0"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["GET", "x"]);
    q::<()>(&mut other, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["EXEC"]), ["123"]);
    q::<()>(&mut other, &["CONFIG", "SET", "maxmemory", "0"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["SET", "x", "2"]);
    q::<()>(&mut other, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(
        e(&mut c, &["EXEC"]),
        format!("EXECABORT Transaction discarded because of: {OOM}")
    );
    assert_eq!(e(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "123");

    // Scripts: one without a shebang is refused at its first call that
    // may add data, and may read.
    let err = e(&mut c, &["EVAL", "redis.call('set', KEYS[1], 1)", "1", "x"]);
    assert!(err.starts_with(OOM), "{err}");
    assert_eq!(
        q::<String>(
            &mut c,
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "x"]
        ),
        "123"
    );
    // A shebang without flags is refused whatever it does; allow-oom
    // may write, no-writes may read.
    assert_eq!(e(&mut c, &["EVAL", "#!lua flags=\nreturn 1", "0"]), OOM);
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "EVAL",
                "#!lua flags=allow-oom\nredis.call('set', KEYS[1], 7)\nreturn 1",
                "1",
                "x"
            ]
        ),
        1
    );
    assert_eq!(
        q::<Value>(
            &mut c,
            &[
                "EVAL_RO",
                "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
                "1",
                "x"
            ]
        ),
        Value::BulkString(b"7".to_vec())
    );
    // Functions: refused unless they declare no-writes or allow-oom.
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    q::<String>(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\n\
             redis.register_function('w', function(keys) return redis.call('set', keys[1], 9) end)\n\
             redis.register_function{function_name='r', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}",
        ],
    );
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(e(&mut c, &["FCALL", "w", "1", "x"]), OOM);
    assert_eq!(q::<String>(&mut c, &["FCALL", "r", "1", "x"]), "7");

    // Back under no limit, everything is taken again.
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    q::<()>(&mut c, &["SET", "x", "1"]);
    q::<()>(&mut c, &["FCALL", "w", "1", "x"]);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "9");
    s.stop();
}

#[test]
fn an_error_a_script_call_raised_counts_once_and_a_refused_call_as_rejected() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "x", "1"]);
    let info = |c: &mut redis::Connection, section: &str, field: &str| -> String {
        let text: String = q(c, &["INFO", section]);
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or("")
            .to_string()
    };
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    let err = e(
        &mut c,
        &["EVAL", "return redis.call('set', KEYS[1], 'y')", "1", "x"],
    );
    assert!(err.starts_with(OOM), "{err}");
    assert_eq!(info(&mut c, "errorstats", "errorstat_OOM"), "count=1");
    assert_eq!(info(&mut c, "stats", "total_error_replies"), "1");
    let set = info(&mut c, "commandstats", "cmdstat_set");
    assert!(set.starts_with("calls=0,"), "{set}");
    assert!(set.ends_with("rejected_calls=1,failed_calls=0"), "{set}");
    let eval = info(&mut c, "commandstats", "cmdstat_eval");
    assert!(eval.starts_with("calls=1,"), "{eval}");
    assert!(eval.ends_with("rejected_calls=0,failed_calls=1"), "{eval}");
    q::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);

    // A command's own error in a script: one error, the command's and the
    // script's failed calls.
    q::<()>(&mut c, &["SET", "s", "text"]);
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    let err = e(
        &mut c,
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "s"],
    );
    assert!(err.starts_with("ERR value is not an integer"), "{err}");
    assert_eq!(info(&mut c, "stats", "total_error_replies"), "1");
    assert_eq!(info(&mut c, "errorstats", "errorstat_ERR"), "count=1");
    // Caught by pcall and returned as a value: no error reply at all.
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    let caught: i64 = q(
        &mut c,
        &[
            "EVAL",
            "local t = redis.pcall('incr', KEYS[1]) if t.err then return 1 end return 0",
            "1",
            "s",
        ],
    );
    assert_eq!(caught, 1);
    assert_eq!(info(&mut c, "stats", "total_error_replies"), "1");
    let eval = info(&mut c, "commandstats", "cmdstat_eval");
    assert!(eval.ends_with("rejected_calls=0,failed_calls=0"), "{eval}");
    s.stop();
}
