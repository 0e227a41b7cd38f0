//! What the server tells about its commands and itself: COMMAND's
//! entries, subcommands, key positions and flags; INFO errorstats;
//! OBJECT IDLETIME.

use crate::harness::{tempdir, Map, Server};
use crate::{e, q};
use redis::Value;

/// A reply as nested strings and integers, for comparing shapes.
fn plain(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Nil => "nil".into(),
        Value::Array(a) | Value::Set(a) => {
            format!("[{}]", a.iter().map(plain).collect::<Vec<_>>().join(" "))
        }
        other => format!("{other:?}"),
    }
}

fn query(c: &mut redis::Connection, args: &[&str]) -> String {
    plain(&q::<Value>(c, args))
}

#[test]
fn command_getkeys_and_flags_find_keys_as_redis_does() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let flags = |c: &mut redis::Connection, args: &[&str]| {
        let mut all = vec!["COMMAND", "GETKEYSANDFLAGS"];
        all.extend_from_slice(args);
        query(c, &all)
    };
    assert_eq!(flags(&mut c, &["SET", "k1", "v1"]), "[[k1 [OW update]]]");
    assert_eq!(
        flags(&mut c, &["SET", "k1", "v1", "GET"]),
        "[[k1 [RW access update]]]"
    );
    assert_eq!(
        flags(&mut c, &["MSET", "k1", "v1", "k2", "v2"]),
        "[[k1 [OW update]] [k2 [OW update]]]"
    );
    assert_eq!(
        flags(&mut c, &["LMOVE", "k1", "k2", "left", "right"]),
        "[[k1 [RW access delete]] [k2 [RW insert]]]"
    );
    assert_eq!(
        flags(&mut c, &["SORT", "k1", "LIMIT", "0", "1", "STORE", "k2"]),
        "[[k1 [RO access]] [k2 [OW update]]]"
    );
    assert_eq!(
        flags(&mut c, &["BITOP", "AND", "d", "a", "b"]),
        "[[d [OW update]] [a [RO access]] [b [RO access]]]"
    );
    assert_eq!(
        flags(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]),
        "[[s [RW insert]]]"
    );

    let keys = |c: &mut redis::Connection, args: &[&str]| {
        let mut all = vec!["COMMAND", "GETKEYS"];
        all.extend_from_slice(args);
        query(c, &all)
    };
    assert_eq!(keys(&mut c, &["MEMORY", "USAGE", "k"]), "[k]");
    assert_eq!(keys(&mut c, &["OBJECT", "IDLETIME", "k"]), "[k]");
    assert_eq!(keys(&mut c, &["XINFO", "STREAM", "s"]), "[s]");
    assert_eq!(keys(&mut c, &["EVAL", "return 1", "1", "k"]), "[k]");
    assert_eq!(keys(&mut c, &["EVAL", "return 1", "0"]), "[]");
    assert_eq!(keys(&mut c, &["LCS", "a", "b"]), "[a b]");
    assert_eq!(
        keys(
            &mut c,
            &["XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0"]
        ),
        "[a b]"
    );
    assert_eq!(keys(&mut c, &["XREAD", "STREAMS", "a", "b", "c"]), "[a]");
    assert_eq!(
        keys(
            &mut c,
            &["GEORADIUS", "g", "0", "0", "1", "km", "STORE", "d"]
        ),
        "[g d]"
    );
    // More keys than any fixed buffer: all of them, in order.
    let many: Vec<String> = (1..=260).map(|i| format!("key{i}")).collect();
    let mut args = vec!["COMMAND", "GETKEYS", "ZUNIONSTORE", "target", "260"];
    args.extend(many.iter().map(String::as_str));
    let got: Vec<String> = q(&mut c, &args);
    assert_eq!(got.len(), 261);
    assert_eq!((got[0].as_str(), got[260].as_str()), ("target", "key260"));

    for (args, want) in [
        (&["NOSUCH", "k"][..], "ERR Invalid command specified"),
        (&["MEMORY", "NOSUCH", "k"], "ERR Invalid command specified"),
        (&["PING"], "ERR The command has no key arguments"),
        (
            &["SSUBSCRIBE", "ch"],
            "ERR The command has no key arguments",
        ),
        (
            &["GET", "a", "b"],
            "ERR Invalid number of arguments specified for command",
        ),
        (
            &["ZUNIONSTORE", "d", "5", "a"],
            "ERR Invalid arguments specified for command",
        ),
        (
            &["XREAD", "COUNT", "2", "a", "b"],
            "ERR Invalid arguments specified for command",
        ),
    ] {
        let mut all = vec!["COMMAND", "GETKEYS"];
        all.extend_from_slice(args);
        assert_eq!(e(&mut c, &all), want, "{args:?}");
    }
}

#[test]
fn command_lists_subcommands_and_filters_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let names: Vec<String> = q(&mut c, &["COMMAND", "LIST"]);
    for n in [
        "set",
        "client|list",
        "config|get",
        "xgroup|create",
        "cluster|help",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
    }
    // COUNT counts the commands, not their subcommands.
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    assert_eq!(
        count as usize,
        names.iter().filter(|n| !n.contains('|')).count()
    );

    let filter = |c: &mut redis::Connection, kind: &str, arg: &str| -> Vec<String> {
        q(c, &["COMMAND", "LIST", "FILTERBY", kind, arg])
    };
    let scripting = filter(&mut c, "ACLCAT", "scripting");
    assert!(scripting.iter().any(|n| n == "eval"), "{scripting:?}");
    assert!(
        scripting.iter().any(|n| n == "script|kill"),
        "{scripting:?}"
    );
    assert!(!scripting.iter().any(|n| n == "set"), "{scripting:?}");
    assert!(filter(&mut c, "aclcat", "nosuch").is_empty());
    assert_eq!(filter(&mut c, "PATTERN", "set"), ["set"]);
    let config = filter(&mut c, "pattern", "CONFIG|*re*");
    assert!(config.iter().any(|n| n == "config|resetstat"), "{config:?}");
    assert!(config.iter().any(|n| n == "config|rewrite"), "{config:?}");
    assert!(!config.iter().any(|n| n == "config"), "{config:?}");
    let help = filter(&mut c, "pattern", "cl*help");
    assert_eq!(help, ["client|help", "cluster|help"]);
    assert!(filter(&mut c, "pattern", "nosuch*").is_empty());
    assert!(filter(&mut c, "module", "nosuch").is_empty());
    for args in [
        &["COMMAND", "LIST", "bad"][..],
        &["COMMAND", "LIST", "FILTERBY", "bad"],
        &["COMMAND", "LIST", "FILTERBY", "bad", "x"],
    ] {
        assert_eq!(e(&mut c, args), "ERR syntax error", "{args:?}");
    }
    assert_eq!(
        e(&mut c, &["COMMAND", "NOSUCH"]),
        "ERR unknown subcommand 'NOSUCH'. Try COMMAND HELP."
    );
    assert_eq!(
        e(&mut c, &["CLUSTER", "INFO"]),
        "ERR This instance has cluster support disabled"
    );
}

#[test]
fn command_info_describes_commands_and_subcommands() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        query(
            &mut c,
            &["COMMAND", "INFO", "get|key", "config|get|key", "nosuch"]
        ),
        "[nil nil nil]"
    );
    assert_eq!(
        query(&mut c, &["COMMAND", "INFO", "MEMORY|USAGE"]),
        "[[memory|usage -3 [readonly] 2 2 1 [@read @slow] [] [] []]]"
    );
    // A container's entry ends with its subcommands' entries.
    let info: Vec<Vec<Value>> = q(&mut c, &["COMMAND", "INFO", "object"]);
    let subs: Vec<String> = match &info[0][9] {
        Value::Array(a) => a
            .iter()
            .map(|e| plain(e).split(' ').next().unwrap()[1..].to_string())
            .collect(),
        other => panic!("{other:?}"),
    };
    assert!(subs.contains(&"object|idletime".to_string()), "{subs:?}");
    let flags = |c: &mut redis::Connection, name: &str| {
        let info: Vec<Vec<Value>> = q(c, &["COMMAND", "INFO", name]);
        plain(&info[0][2])
    };
    for name in [
        "ZUNIONSTORE",
        "XREAD",
        "EVAL",
        "SORT",
        "SORT_RO",
        "GEORADIUS",
    ] {
        assert!(flags(&mut c, name).contains("movablekeys"), "{name}");
    }
    for name in [
        "SET",
        "GET",
        "MSET",
        "LMOVE",
        "BLPOP",
        "RENAME",
        "GEORADIUS_RO",
    ] {
        assert!(!flags(&mut c, name).contains("movablekeys"), "{name}");
    }
    assert!(flags(&mut c, "eval").contains("no_mandatory_keys"));
    let docs: Vec<Value> = q(&mut c, &["COMMAND", "DOCS", "config|get"]);
    assert_eq!(plain(&docs[0]), "config|get");
}

#[test]
fn info_errorstats_counts_error_replies_by_code() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let errorstats = |c: &mut redis::Connection| -> Vec<String> {
        let info: String = q(c, &["INFO", "errorstats"]);
        assert!(info.starts_with("# Errorstats\r\n"), "{info}");
        info.lines().skip(1).map(str::to_string).collect()
    };
    assert!(errorstats(&mut c).is_empty());
    q::<()>(&mut c, &["SET", "str", "x"]);
    e(&mut c, &["LPUSH", "str", "a"]);
    e(&mut c, &["NOSUCHCOMMAND"]);
    e(&mut c, &["GET"]);
    e(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "nostream", ">"],
    );
    // A failed command of a transaction counts as well.
    redis::cmd("MULTI").query::<()>(&mut c).unwrap();
    redis::cmd("INCR").arg("str").query::<()>(&mut c).unwrap();
    let _ = redis::cmd("EXEC").query::<Value>(&mut c);
    assert_eq!(
        errorstats(&mut c),
        [
            "errorstat_ERR:count=3",
            "errorstat_NOGROUP:count=1",
            "errorstat_WRONGTYPE:count=1"
        ]
    );
    let all: String = q(&mut c, &["INFO"]);
    assert!(all.contains("# Errorstats\r\n"), "{all}");
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    assert!(errorstats(&mut c).is_empty());
}

#[test]
fn object_idletime_counts_from_the_last_read_or_write() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let idle = |c: &mut redis::Connection, key: &str| -> Option<i64> {
        q(c, &["OBJECT", "IDLETIME", key])
    };
    q::<()>(&mut c, &["SET", "k", "v"]);
    q::<()>(&mut c, &["SET", "r", "v"]);
    let dump: Vec<u8> = q(&mut c, &["DUMP", "k"]);
    assert_eq!(idle(&mut c, "k"), Some(0));
    std::thread::sleep(std::time::Duration::from_millis(2100));
    // Commands that only ask about a key leave its access time.
    q::<i64>(&mut c, &["TTL", "k"]);
    q::<String>(&mut c, &["TYPE", "k"]);
    q::<i64>(&mut c, &["EXISTS", "k"]);
    q::<String>(&mut c, &["OBJECT", "ENCODING", "k"]);
    assert!(idle(&mut c, "k") >= Some(2));
    q::<String>(&mut c, &["GET", "k"]);
    assert_eq!(idle(&mut c, "k"), Some(0));
    // RESTORE's IDLETIME, no earlier than the start.
    redis::cmd("RESTORE")
        .arg("old")
        .arg(0)
        .arg(&dump)
        .arg("IDLETIME")
        .arg(100_000)
        .query::<()>(&mut c)
        .unwrap();
    let old = idle(&mut c, "old").unwrap();
    assert!((2..100).contains(&old), "{old}");
    // NO-TOUCH: reads leave access times; TOUCH still touches.
    q::<()>(&mut c, &["CLIENT", "NO-TOUCH", "ON"]);
    q::<String>(&mut c, &["GET", "r"]);
    assert!(idle(&mut c, "r") >= Some(2));
    q::<i64>(&mut c, &["TOUCH", "r"]);
    assert_eq!(idle(&mut c, "r"), Some(0));
    q::<()>(&mut c, &["CLIENT", "NO-TOUCH", "OFF"]);
    q::<String>(&mut c, &["GET", "old"]);
    assert_eq!(idle(&mut c, "old"), Some(0));
    assert_eq!(idle(&mut c, "nope"), None);
    assert_eq!(
        e(&mut c, &["CLIENT", "NO-TOUCH", "maybe"]),
        "ERR syntax error"
    );
}
