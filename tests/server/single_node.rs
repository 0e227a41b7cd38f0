//! What a single-node server says where Redis would count replicas or
//! cluster nodes: CLUSTER, and min-replicas-to-write (with none, every
//! write is refused while it asks for some).

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, q};

#[test]
fn cluster_says_cluster_support_is_disabled() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    for sub in [&["INFO"][..], &["NODES"], &["SLOTS"], &["RESET", "HARD"]] {
        let mut args = vec!["CLUSTER"];
        args.extend_from_slice(sub);
        assert_eq!(
            e(&mut c, &args),
            "ERR This instance has cluster support disabled",
            "{sub:?}"
        );
    }
    assert_eq!(
        e(&mut c, &["CLUSTER", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try CLUSTER HELP."
    );
    assert_eq!(
        e(&mut c, &["CLUSTER", "INFO", "extra"]),
        "ERR wrong number of arguments for 'cluster|info' command"
    );
    assert_eq!(
        e(&mut c, &["CLUSTER"]),
        "ERR wrong number of arguments for 'cluster' command"
    );
    // In a script too; CLUSTER RESET is refused there.
    assert!(e(
        &mut c,
        &["EVAL", "return redis.call('cluster', 'info')", "0"]
    )
    .starts_with("ERR This instance has cluster support disabled"));
    assert!(e(
        &mut c,
        &["EVAL", "return redis.call('cluster', 'reset', 'hard')", "0"]
    )
    .starts_with("ERR This Redis command is not allowed from script"));
}

#[test]
fn min_replicas_to_write_refuses_every_write_without_replicas() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
    q::<()>(&mut c, &["SET", "x", "some value"]);
    let lib = "#!lua name=lib\n\
               redis.register_function('w', function(KEYS) return redis.call('set', KEYS[1], 1) end)\n\
               redis.register_function{function_name='r', callback=function(KEYS) \
               return redis.call('get', KEYS[1]) end, flags={'no-writes'}}";
    q::<String>(&mut c, &["FUNCTION", "LOAD", lib]);
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "min-*-to-write"]),
        ["min-replicas-to-write", "1", "min-slaves-to-write", "1"]
    );
    assert_eq!(e(&mut c, &["SET", "x", "1"]), NOREPLICAS);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "some value");
    // A transaction with a write in it is aborted.
    q::<()>(&mut c, &["MULTI"]);
    assert_eq!(e(&mut c, &["INCR", "n"]), NOREPLICAS);
    assert!(e(&mut c, &["EXEC"]).starts_with("EXECABORT"));
    // A script whose shebang lets it write is refused before it runs;
    // one without a shebang, at its first write.
    let get = "return redis.call('get', KEYS[1])";
    for script in [get.to_string(), format!("#!lua flags=no-writes\n{get}")] {
        assert_eq!(
            q::<String>(&mut c, &["EVAL", &script, "1", "x"]),
            "some value"
        );
    }
    assert_eq!(
        e(&mut c, &["EVAL", &format!("#!lua\n{get}"), "1", "x"]),
        NOREPLICAS
    );
    assert!(e(
        &mut c,
        &["EVAL", "return redis.call('set', KEYS[1], 1)", "1", "x"]
    )
    .starts_with(NOREPLICAS));
    assert_eq!(
        q::<Value>(
            &mut c,
            &[
                "EVAL",
                "return redis.pcall('set', KEYS[1], 1)['err']",
                "1",
                "x"
            ]
        ),
        Value::BulkString(NOREPLICAS.into())
    );
    assert_eq!(e(&mut c, &["FCALL", "w", "1", "x"]), NOREPLICAS);
    assert_eq!(q::<String>(&mut c, &["FCALL", "r", "1", "x"]), "some value");
    // With no lag allowed, no replica is counted: writes go on.
    q::<()>(&mut c, &["CONFIG", "SET", "min-slaves-max-lag", "0"]);
    q::<()>(&mut c, &["SET", "x", "2"]);
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-max-lag", "10"]);
    assert_eq!(e(&mut c, &["SET", "x", "3"]), NOREPLICAS);
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]);
    q::<()>(&mut c, &["SET", "x", "3"]);
    assert_eq!(q::<Value>(&mut c, &["FCALL", "w", "1", "x"]), Value::Okay);
}
