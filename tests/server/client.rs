//! The server through a real client library (the redis crate, sync API).

use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc;
use std::time::Duration;

use redis::{Connection, Value};

use crate::harness::{tempdir, Map, Server};
use crate::{e, q};

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempdir();
    let server = Server::start(dir.path(), &Map::default());
    (dir, server)
}

#[test]
fn ping_echo_and_string_commands() {
    let (_dir, s) = start();
    let mut c = s.client();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["PING", "hi there"]), "hi there");
    assert_eq!(q::<Vec<u8>>(&mut c, &["ECHO", "a\r\nb"]), b"a\r\nb");

    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    q::<()>(&mut c, &["SET", "k", "v1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v1");
    // Binary-safe values and keys.
    let bin: Vec<u8> = (0..=255u8).collect();
    redis::cmd("SET")
        .arg(&b"bin\0key"[..])
        .arg(&bin)
        .query::<()>(&mut c)
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET")
        .arg(&b"bin\0key"[..])
        .query(&mut c)
        .unwrap();
    assert_eq!(got, bin);

    // NX: only when missing; XX: only when present.
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "k", "v2", "NX"]), None);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v1");
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "new", "n1", "NX"]).as_deref(),
        Some("OK")
    );
    assert_eq!(q::<String>(&mut c, &["GET", "new"]), "n1");
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "absent", "x", "XX"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "absent"]), 0);
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "v3", "XX"]).as_deref(),
        Some("OK")
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v3");
    // GET: the old value comes back.
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "v4", "GET"]).as_deref(),
        Some("v3")
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "fresh", "f", "GET"]),
        None
    );
    assert_eq!(q::<String>(&mut c, &["GET", "fresh"]), "f");
    // NX GET on an existing key: the old value, nothing written.
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "v5", "NX", "GET"]).as_deref(),
        Some("v4")
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v4");
    assert!(e(&mut c, &["SET", "k", "v", "NX", "XX"]).contains("syntax error"));
    assert!(e(&mut c, &["SET", "k", "v", "BOGUS"]).contains("syntax error"));

    // Options that conflict or lack their argument: refused, nothing written.
    for opt in [
        &["EX"][..],
        &["EX", "10", "PX", "100"],
        &["KEEPTTL", "EX", "1"],
    ] {
        let mut args = vec!["SET", "k", "expiring"];
        args.extend_from_slice(opt);
        assert_eq!(e(&mut c, &args), "ERR syntax error");
    }
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v4");
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);

    assert_eq!(
        q::<Option<String>>(&mut c, &["GETDEL", "k"]).as_deref(),
        Some("v4")
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["GETDEL", "k"]), None);
    assert_eq!(q::<String>(&mut c, &["TYPE", "k"]), "none");
    assert_eq!(q::<String>(&mut c, &["TYPE", "new"]), "string");
}

#[test]
fn del_exists_mset_and_mget() {
    let (_dir, s) = start();
    let mut c = s.client();
    q::<()>(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["MGET", "a", "b", "nope", "c"]),
        vec![Some("1".into()), Some("2".into()), None, Some("3".into())]
    );
    assert!(e(&mut c, &["MSET", "a", "1", "b"]).contains("wrong number of arguments"));
    // MSET replaces a hash like SET does.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "v", "g", "w"]), 2);
    // Redis counts a key as often as it is named.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b", "nope", "a", "h"]), 4);
    // MGET gives nil for a hash rather than failing.
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["MGET", "h", "a"]),
        vec![None, Some("1".into())]
    );
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "nope", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["DEL", "h", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h", "b"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "none");
    // A hash deleted and written again has only its new fields.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "x", "1"]), 1);
    assert_eq!(
        q::<HashMap<String, String>>(&mut c, &["HGETALL", "h"]),
        HashMap::from([("x".to_string(), "1".to_string())])
    );
    q::<()>(&mut c, &["MSET", "h", "plain", "d", "4"]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "string");
    assert_eq!(q::<String>(&mut c, &["GET", "h"]), "plain");
    assert_eq!(q::<i64>(&mut c, &["DEL", "h", "d", "c"]), 3);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn counters_and_their_errors() {
    let (_dir, s) = start();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "10"]), 11);
    assert_eq!(q::<i64>(&mut c, &["DECR", "n"]), 10);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "25"]), -15);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "-5"]), -20);
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "-20");
    assert_eq!(q::<i64>(&mut c, &["DECR", "fresh"]), -1);

    // Values and increments that are not integers.
    q::<()>(&mut c, &["SET", "s", "abc"]);
    for args in [
        &["INCR", "s"][..],
        &["INCRBY", "n", "x"],
        &["INCRBY", "n", "1.5"],
        &["INCRBY", "n", ""],
        &["DECRBY", "n", "99999999999999999999"],
    ] {
        let err = e(&mut c, args);
        assert!(
            err.starts_with("ERR") && err.contains("not an integer"),
            "{args:?}: {err}"
        );
    }
    q::<()>(&mut c, &["SET", "sp", " 1"]);
    assert!(e(&mut c, &["INCR", "sp"]).contains("not an integer"));
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "abc");
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), -20);

    // Overflow, both ways, leaves the value as it was.
    q::<()>(&mut c, &["SET", "max", &i64::MAX.to_string()]);
    let err = e(&mut c, &["INCR", "max"]);
    assert!(err.contains("overflow"), "{err}");
    assert_eq!(q::<i64>(&mut c, &["GET", "max"]), i64::MAX);
    q::<()>(&mut c, &["SET", "min", &i64::MIN.to_string()]);
    let err = e(&mut c, &["DECR", "min"]);
    assert!(err.contains("overflow"), "{err}");
    let err = e(&mut c, &["INCRBY", "min", "-1"]);
    assert!(err.contains("overflow"), "{err}");
    assert_eq!(q::<i64>(&mut c, &["GET", "min"]), i64::MIN);
    // DECRBY of the smallest integer cannot be negated.
    assert!(e(&mut c, &["DECRBY", "n", &i64::MIN.to_string()]).starts_with("ERR"));
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), -20);
    assert_eq!(
        q::<i64>(&mut c, &["INCRBY", "max", &i64::MIN.to_string()]),
        -1
    );
}

#[test]
fn hash_commands() {
    let (_dir, s) = start();
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]), 2);
    // A field named twice in one HSET counts once; the last value wins.
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "f1", "x", "f3", "y", "f3", "z"]),
        1
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f1"]), "x");
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "nope"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "nohash", "f"]), None);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "h", "f3", "nope", "f2"]),
        vec![Some("z".into()), None, Some("v2".into())]
    );
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "f2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 3);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "nohash"]), 0);
    let all: HashMap<String, String> = q(&mut c, &["HGETALL", "h"]);
    let want: HashMap<String, String> = [("f1", "x"), ("f2", "v2"), ("f3", "z")]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(all, want);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");
    q::<()>(&mut c, &["HMSET", "h", "f4", "w"]);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 4);
    assert!(e(&mut c, &["HSET", "h", "f"]).contains("wrong number of arguments"));

    // Fields that look like other keys' rows stay in their hash.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h\0i", "f", "inner"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 4);
    assert_eq!(q::<String>(&mut c, &["HGET", "h\0i", "f"]), "inner");

    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "f1", "nope", "f1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 3);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "nohash", "f"]), 0);
    // Deleting the last field deletes the hash.
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "f2", "f3", "f4"]), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "none");
    assert!(q::<HashMap<String, String>>(&mut c, &["HGETALL", "h"]).is_empty());
}

#[test]
fn wrongtype_both_ways_and_set_replaces_a_hash() {
    let (_dir, s) = start();
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "s", "1"]);
    q::<i64>(&mut c, &["HSET", "h", "f", "v", "g", "w"]);
    let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["HSET", "s", "f", "v"][..],
        &["HGET", "s", "f"],
        &["HMGET", "s", "f"],
        &["HDEL", "s", "f"],
        &["HGETALL", "s"],
        &["HEXISTS", "s", "f"],
        &["HLEN", "s"],
        &["GET", "h"],
        &["GETDEL", "h"],
        &["INCR", "h"],
        &["DECRBY", "h", "2"],
        &["SET", "h", "x", "GET"],
    ] {
        assert_eq!(e(&mut c, args), wrong, "{args:?}");
    }
    // Nothing changed.
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "1");
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
    // NX sees the hash; XX replaces it.
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "h", "x", "NX"]), None);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");

    // A plain SET over a hash replaces it, fields and all.
    q::<()>(&mut c, &["SET", "h", "plain"]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "string");
    assert_eq!(q::<String>(&mut c, &["GET", "h"]), "plain");
    assert_eq!(e(&mut c, &["HGET", "h", "f"]), wrong);
    assert_eq!(e(&mut c, &["HLEN", "h"]), wrong);
    // Its old fields do not come back with a new hash of that name.
    assert_eq!(q::<i64>(&mut c, &["DEL", "h"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "new", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 1);
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "f"]), None);
    // SET XX replaces a hash too.
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "h", "xx", "XX"]).as_deref(),
        Some("OK")
    );
    assert_eq!(q::<String>(&mut c, &["GET", "h"]), "xx");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
}

#[test]
fn scan_returns_every_key_exactly_once() {
    let (_dir, s) = start();
    let mut c = s.client();
    let mut strings = BTreeSet::new();
    let mut hashes = BTreeSet::new();
    let mut p = redis::pipe();
    for i in 0..300 {
        let k = format!("key:{i}");
        p.cmd("SET").arg(&k).arg(i).ignore();
        strings.insert(k.into_bytes());
    }
    for i in 0..60 {
        let k = format!("hash:{i}");
        p.cmd("HSET")
            .arg(&k)
            .arg("a")
            .arg(1)
            .arg("b")
            .arg(2)
            .arg("c")
            .arg(3)
            .ignore();
        hashes.insert(k.into_bytes());
    }
    // Keys that are prefixes of others, with zero bytes, and a hash whose
    // name is a prefix of a string's.
    for k in [&b"key"[..], b"key\0", b"key\0\xff", b"\0", b"hash:1x"] {
        p.cmd("SET").arg(k).arg("odd").ignore();
        strings.insert(k.to_vec());
    }
    p.query::<()>(&mut c).unwrap();
    let all: BTreeSet<Vec<u8>> = strings.union(&hashes).cloned().collect();
    assert_eq!(q::<usize>(&mut c, &["DBSIZE"]), all.len());

    let scan = |c: &mut Connection, opts: &[&str]| -> Vec<Vec<u8>> {
        let mut cursor = 0u64;
        let mut seen = Vec::new();
        let mut calls = 0;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor);
            for o in opts {
                cmd.arg(*o);
            }
            let (next, keys): (u64, Vec<Vec<u8>>) = cmd.query(c).unwrap();
            seen.extend(keys);
            calls += 1;
            assert!(calls < 10_000, "SCAN never ends");
            if next == 0 {
                return seen;
            }
            cursor = next;
        }
    };
    let once = |seen: Vec<Vec<u8>>, want: &BTreeSet<Vec<u8>>, what: &str| {
        let n = seen.len();
        let set: BTreeSet<Vec<u8>> = seen.into_iter().collect();
        assert_eq!(n, set.len(), "{what}: a key came back twice");
        assert_eq!(&set, want, "{what}");
    };
    once(scan(&mut c, &[]), &all, "SCAN");
    once(scan(&mut c, &["COUNT", "17"]), &all, "SCAN COUNT 17");
    once(scan(&mut c, &["COUNT", "1000"]), &all, "SCAN COUNT 1000");
    let key1: BTreeSet<Vec<u8>> = all
        .iter()
        .filter(|k| k.starts_with(b"key:1"))
        .cloned()
        .collect();
    assert_eq!(key1.len(), 111);
    once(
        scan(&mut c, &["MATCH", "key:1*", "COUNT", "50"]),
        &key1,
        "MATCH",
    );
    once(
        scan(&mut c, &["TYPE", "hash", "COUNT", "7"]),
        &hashes,
        "TYPE hash",
    );
    once(
        scan(&mut c, &["COUNT", "23", "TYPE", "string"]),
        &strings,
        "TYPE string",
    );
    let h1: BTreeSet<Vec<u8>> = [b"hash:1".to_vec()].into();
    once(
        scan(&mut c, &["MATCH", "hash:1", "TYPE", "hash"]),
        &h1,
        "MATCH+TYPE",
    );
    assert!(e(&mut c, &["SCAN", "0", "COUNT", "0"]).contains("syntax error"));
    assert!(e(&mut c, &["SCAN", "0", "MATCH"]).contains("syntax error"));
    assert!(e(&mut c, &["SCAN", "123456789"]).contains("invalid cursor"));
    // A cursor may be used again, and gives the same keys.
    let (next, first): (String, Vec<Vec<u8>>) = q(&mut c, &["SCAN", "0", "COUNT", "5"]);
    assert_ne!(next, "0");
    let again: (String, Vec<Vec<u8>>) = q(&mut c, &["SCAN", &next, "COUNT", "5"]);
    let twice: (String, Vec<Vec<u8>>) = q(&mut c, &["SCAN", &next, "COUNT", "5"]);
    assert_eq!(again.1, twice.1);
    assert!(again.1.iter().all(|k| !first.contains(k)));
    assert_eq!(q::<String>(&mut c, &["TYPE", "hash:3"]), "hash");
    assert_eq!(q::<String>(&mut c, &["TYPE", "key:3"]), "string");
}

#[test]
fn server_and_connection_commands() {
    let (_dir, s) = start();
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "a", "1"]);

    let info: String = q(&mut c, &["INFO", "everything"]);
    for section in [
        "Server",
        "Keyspace",
        "Clients",
        "Memory",
        "Persistence",
        "Stats",
        "Replication",
        "Cpu",
        "WAL",
        "Memstore",
        "Devices",
        "Reactors",
        "Commandstats",
        "Errorstats",
        "Latencystats",
    ] {
        assert!(
            info.contains(&format!("# {section}\r\n")),
            "no {section} in\n{info}"
        );
    }
    // The default leaves out the per-command sections, as Redis does.
    let default: String = q(&mut c, &["INFO"]);
    assert!(default.contains("# Keyspace\r\n") && !default.contains("# Commandstats"));
    assert!(info.contains("redis_version:"), "{info}");
    assert!(
        info.contains(&format!("tcp_port:{}", s.addr.port())),
        "{info}"
    );
    let server: String = q(&mut c, &["INFO", "server"]);
    assert!(server.starts_with("# Server\r\n"), "{server}");
    assert!(!server.contains("# Clients"), "{server}");
    let clients: String = q(&mut c, &["INFO", "clients"]);
    assert!(clients.contains("connected_clients:1"), "{clients}");

    let cfg: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "save"]);
    assert_eq!(cfg, HashMap::from([("save".into(), String::new())]));
    let cfg: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "appendonly"]);
    assert_eq!(cfg, HashMap::from([("appendonly".into(), "yes".into())]));
    let cfg: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "save", "appendfsync"]);
    assert_eq!(cfg.get("appendfsync").map(String::as_str), Some("always"));
    q::<()>(&mut c, &["CONFIG", "SET", "save", ""]);

    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    let names: Vec<String> = q(&mut c, &["COMMAND", "LIST"]);
    let commands = names.iter().filter(|n| !n.contains('|')).count();
    assert_eq!(count as usize, commands);
    assert!(count >= 30, "{count}");
    for n in ["get", "set", "hset", "scan", "stria.durability"] {
        assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
    }
    let docs: HashMap<String, HashMap<String, Value>> = q(&mut c, &["COMMAND", "DOCS", "get"]);
    let get = &docs["get"];
    assert!(
        matches!(&get["summary"], Value::BulkString(b) if !b.is_empty()),
        "{docs:?}"
    );
    assert!(matches!(&get["group"], Value::BulkString(b) if b == b"string"));
    let all: HashMap<String, Value> = q(&mut c, &["COMMAND", "DOCS"]);
    assert_eq!(all.len(), commands);

    assert_eq!(q::<Option<String>>(&mut c, &["CLIENT", "GETNAME"]), None);
    q::<()>(&mut c, &["CLIENT", "SETNAME", "tester"]);
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "tester");
    assert!(e(&mut c, &["CLIENT", "SETNAME", "has space"]).contains("cannot contain spaces"));
    let id: i64 = q(&mut c, &["CLIENT", "ID"]);
    let mut other = s.client();
    let other_id: i64 = q(&mut other, &["CLIENT", "ID"]);
    assert_ne!(id, other_id);
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 2, "{list}");
    let mine = list
        .lines()
        .find(|l| l.starts_with(&format!("id={id} ")))
        .unwrap_or_else(|| panic!("no id={id} in {list}"));
    assert!(mine.contains(" name=tester "), "{mine}");
    assert!(mine.contains(" cmd=client"), "{mine}");
    assert!(list.contains(&format!("id={other_id} ")), "{list}");

    q::<()>(&mut c, &["SELECT", "0"]);
    let err = e(&mut c, &["SELECT", "1"]);
    assert!(err.contains("DB index is out of range"), "{err}");
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["WAITAOF", "0", "0", "0"]),
        vec![1, 0]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["WAITAOF", "1", "0", "0"]),
        vec![1, 0]
    );
    assert!(e(&mut c, &["WAITAOF", "0", "1", "0"]).contains("no replicas"));

    // Durability per connection: each level takes writes that read back.
    assert_eq!(q::<String>(&mut c, &["STRIA.DURABILITY"]), "sync");
    for level in ["none", "async", "write", "sync", "WRITE"] {
        q::<()>(&mut c, &["STRIA.DURABILITY", level]);
        assert_eq!(
            q::<String>(&mut c, &["STRIA.DURABILITY"]),
            level.to_ascii_lowercase()
        );
        q::<()>(&mut c, &["SET", level, level]);
        assert_eq!(q::<i64>(&mut c, &["INCR", &format!("n-{level}")]), 1);
        assert_eq!(q::<String>(&mut c, &["GET", level]), level);
    }
    let err = e(&mut c, &["STRIA.DURABILITY", "fsync"]);
    assert!(
        err.contains("'fsync' is not a durability level (none, async, write or sync)"),
        "{err}"
    );
    assert_eq!(q::<String>(&mut c, &["STRIA.DURABILITY"]), "write");
    // The other connection kept the map's level.
    assert_eq!(q::<String>(&mut other, &["STRIA.DURABILITY"]), "sync");
}

#[test]
fn hello_switches_to_resp3_and_refuses_other_versions() {
    let (_dir, s) = start();
    let mut c = s.client();
    let err = redis::cmd("HELLO")
        .arg(4)
        .query::<Value>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOPROTO"), "{err}");
    let hello: Value = redis::cmd("HELLO").arg(3).query(&mut c).unwrap();
    let Value::Map(pairs) = hello else {
        panic!("HELLO 3 replied {hello:?}, not a RESP3 map");
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == Value::BulkString(name.into()))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name} in {pairs:?}"))
    };
    assert_eq!(field("proto"), Value::Int(3));
    assert_eq!(field("server"), Value::BulkString(b"redis".to_vec()));
    // From now on, maps and nulls are RESP3's.
    q::<i64>(&mut c, &["HSET", "h", "f", "v"]);
    assert!(matches!(q::<Value>(&mut c, &["HGETALL", "h"]), Value::Map(m) if m.len() == 1));
    assert_eq!(q::<Value>(&mut c, &["GET", "missing"]), Value::Nil);
    assert!(matches!(
        q::<Value>(&mut c, &["INFO", "server"]),
        Value::VerbatimString { .. }
    ));
    // Back to RESP2: a flat array.
    let hello: Value = redis::cmd("HELLO").arg(2).query(&mut c).unwrap();
    assert!(
        matches!(hello, Value::Array(ref a) if a.len() == 14),
        "{hello:?}"
    );
    assert!(matches!(q::<Value>(&mut c, &["HGETALL", "h"]), Value::Array(a) if a.len() == 2));

    // A client that asks for RESP3 when it connects.
    let client = redis::Client::open(format!("redis://{}/?protocol=resp3", s.addr)).unwrap();
    let mut c3 = client.get_connection().unwrap();
    assert!(matches!(
        q::<Value>(&mut c3, &["CONFIG", "GET", "save"]),
        Value::Map(_)
    ));
    assert_eq!(q::<Value>(&mut c3, &["GET", "missing"]), Value::Nil);
    assert_eq!(q::<String>(&mut c3, &["HGET", "h", "f"]), "v");
}

#[test]
fn a_pipeline_of_2000_commands_replies_in_order() {
    let (_dir, s) = start();
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("SET").arg(format!("p{i}")).arg(format!("value-{i}"));
    }
    for i in 0..1000 {
        p.cmd("GET").arg(format!("p{i}"));
    }
    let replies: Vec<Value> = p.query(&mut c).unwrap();
    assert_eq!(replies.len(), 2000);
    for (i, r) in replies[..1000].iter().enumerate() {
        assert_eq!(*r, Value::Okay, "SET {i}");
    }
    for (i, r) in replies[1000..].iter().enumerate() {
        assert_eq!(
            *r,
            Value::BulkString(format!("value-{i}").into_bytes()),
            "GET {i}"
        );
    }

    // Writes and the commands that read them, on one key, in one pipeline:
    // each sees the writes before it and errors keep their place.
    let mut p = redis::pipe();
    p.ignore_errors();
    p.cmd("SET").arg("k").arg("1");
    p.cmd("INCR").arg("k");
    p.cmd("GET").arg("k");
    p.cmd("SET").arg("k").arg("x");
    p.cmd("INCR").arg("k");
    p.cmd("SET").arg("k").arg("5");
    p.cmd("INCRBY").arg("k").arg(5);
    p.cmd("HSET").arg("k").arg("f").arg("v");
    p.cmd("DEL").arg("k");
    p.cmd("HSET").arg("k").arg("f").arg("v");
    p.cmd("SET").arg("k").arg("over");
    p.cmd("GET").arg("k");
    let r: Vec<Value> = p.query(&mut c).unwrap();
    assert_eq!(r.len(), 12, "{r:?}");
    assert_eq!(r[0], Value::Okay);
    assert_eq!(r[1], Value::Int(2));
    assert_eq!(r[2], Value::BulkString(b"2".to_vec()));
    assert_eq!(r[3], Value::Okay);
    assert!(
        matches!(&r[4], Value::ServerError(e) if e.details().unwrap_or("").contains("not an integer")),
        "{:?}",
        r[4]
    );
    assert_eq!(r[5], Value::Okay);
    assert_eq!(r[6], Value::Int(10));
    assert!(
        matches!(&r[7], Value::ServerError(e) if e.code() == "WRONGTYPE"),
        "{:?}",
        r[7]
    );
    assert_eq!(r[8], Value::Int(1));
    assert_eq!(r[9], Value::Int(1));
    assert_eq!(r[10], Value::Okay);
    assert_eq!(r[11], Value::BulkString(b"over".to_vec()));
}

/// Joins the threads of `rx`, failing if one takes longer than `limit`
/// (a deadlock shows up as a timeout, not a hung test).
fn join_all(rx: mpsc::Receiver<Result<(), String>>, n: usize, limit: Duration) {
    for _ in 0..n {
        match rx.recv_timeout(limit) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => panic!("a client thread did not finish within {limit:?}: deadlock?"),
        }
    }
}

#[test]
fn concurrent_incr_is_atomic_per_key() {
    let (_dir, s) = start();
    let (tx, rx) = mpsc::channel();
    let (vtx, vrx) = mpsc::channel();
    for _ in 0..8 {
        let (tx, vtx) = (tx.clone(), vtx.clone());
        let mut c = s.client();
        std::thread::spawn(move || {
            // Write level: atomicity, not fsyncs, is what is tested.
            q::<()>(&mut c, &["STRIA.DURABILITY", "write"]);
            let mut seen = Vec::with_capacity(500);
            let mut r = Ok(());
            for _ in 0..500 {
                match redis::cmd("INCR").arg("counter").query::<i64>(&mut c) {
                    Ok(v) => seen.push(v),
                    Err(e) => {
                        r = Err(format!("INCR: {e}"));
                        break;
                    }
                }
            }
            let _ = vtx.send(seen);
            let _ = tx.send(r);
        });
    }
    join_all(rx, 8, Duration::from_secs(120));
    drop(vtx);
    let mut all: Vec<i64> = Vec::new();
    for seen in vrx {
        // Each client sees its own increments in order...
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        all.extend(seen);
    }
    // ...and every value from 1 to 4000 went to exactly one increment.
    all.sort_unstable();
    assert_eq!(all, (1..=4000).collect::<Vec<i64>>());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["GET", "counter"]), 4000);
}

#[test]
fn plain_sets_beside_incr_on_one_key_do_not_deadlock() {
    let (_dir, s) = start();
    let (tx, rx) = mpsc::channel();
    // INCRs and INCRBYs read what plain SETs (alone and pipelined), DELs
    // and SET NXs of the same key left dirty, while those are in flight.
    for t in 0..6 {
        let tx = tx.clone();
        let mut c = s.client();
        std::thread::spawn(move || {
            let r = (|| -> Result<(), String> {
                redis::cmd("STRIA.DURABILITY")
                    .arg(if t % 2 == 0 { "write" } else { "sync" })
                    .query::<()>(&mut c)
                    .map_err(|e| e.to_string())?;
                for i in 0..150 {
                    match t {
                        0 | 1 => {
                            // The value may be a SET's, always an integer.
                            redis::cmd("INCR")
                                .arg("shared")
                                .query::<i64>(&mut c)
                                .map_err(|e| format!("INCR: {e}"))?;
                        }
                        2 => {
                            redis::cmd("SET")
                                .arg("shared")
                                .arg(i)
                                .query::<()>(&mut c)
                                .map_err(|e| format!("SET: {e}"))?;
                        }
                        3 => {
                            let mut p = redis::pipe();
                            for j in 0..8 {
                                p.cmd("SET").arg("shared").arg(j).ignore();
                                p.cmd("SET").arg(format!("other{j}")).arg(i).ignore();
                            }
                            p.cmd("INCRBY").arg("shared").arg(2).ignore();
                            p.cmd("SET").arg("shared").arg(1).ignore();
                            p.query::<()>(&mut c)
                                .map_err(|e| format!("pipeline: {e}"))?;
                        }
                        4 => {
                            redis::cmd("SET")
                                .arg("shared")
                                .arg(i)
                                .arg("NX")
                                .query::<Option<String>>(&mut c)
                                .map_err(|e| format!("SET NX: {e}"))?;
                            redis::cmd("DEL")
                                .arg("shared")
                                .arg("other3")
                                .query::<i64>(&mut c)
                                .map_err(|e| format!("DEL: {e}"))?;
                        }
                        _ => {
                            redis::cmd("MSET")
                                .arg("other1")
                                .arg(i)
                                .arg("shared")
                                .arg(i)
                                .query::<()>(&mut c)
                                .map_err(|e| format!("MSET: {e}"))?;
                        }
                    }
                }
                Ok(())
            })();
            let _ = tx.send(r);
        });
    }
    join_all(rx, 6, Duration::from_secs(120));
    let mut c = s.client();
    // Whatever won, it is an integer (or the key was deleted last).
    let v: Option<String> = q(&mut c, &["GET", "shared"]);
    if let Some(v) = v {
        v.parse::<i64>()
            .unwrap_or_else(|_| panic!("shared holds {v:?}"));
    }
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

/// A server whose key `big` holds 60,000 bytes, and a client of it.
fn start_with_big() -> (tempfile::TempDir, Server, Connection) {
    let (dir, s) = start();
    let mut c = s.client();
    redis::cmd("SET")
        .arg("big")
        .arg("v".repeat(60_000))
        .query::<()>(&mut c)
        .unwrap();
    (dir, s, c)
}

/// `n` requests `GET big`.
fn gets_of_big(n: usize) -> Vec<u8> {
    crate::resp(&[b"GET", b"big"]).repeat(n)
}

#[test]
fn a_client_that_does_not_read_its_replies_holds_up_no_one_else() {
    use std::io::{Read, Write};
    let (_dir, s, mut c) = start_with_big();
    // 2,000 GETs of 60 KB: 120 MB of replies the client does not read.
    let mut hog = s.raw();
    hog.write_all(&gets_of_big(2000)).unwrap();
    // Everyone else is served meanwhile, plain writes and the commands
    // and read-modify-writes alike.
    let (tx, rx) = mpsc::channel();
    for t in 0..4 {
        let tx = tx.clone();
        let mut c = s.client();
        std::thread::spawn(move || {
            let r = (|| -> Result<(), String> {
                for i in 0..50 {
                    let k = format!("k{t}-{i}");
                    redis::cmd("SET")
                        .arg(&k)
                        .arg(i)
                        .query::<()>(&mut c)
                        .map_err(|e| e.to_string())?;
                    let v: i64 = redis::cmd("INCR")
                        .arg(&k)
                        .query(&mut c)
                        .map_err(|e| e.to_string())?;
                    if v != i + 1 {
                        return Err(format!("INCR {k}: {v}"));
                    }
                }
                Ok(())
            })();
            let _ = tx.send(r);
        });
    }
    join_all(rx, 4, Duration::from_secs(60));
    // The hog gets every reply once it reads, in order.
    let one = 8 + 60_000 + 2; // "$60000\r\n" + value + "\r\n"
    let mut got = vec![0u8; one];
    for i in 0..2000 {
        hog.read_exact(&mut got)
            .unwrap_or_else(|e| panic!("reply {i}: {e}"));
        assert!(got.starts_with(b"$60000\r\n"), "reply {i}");
        assert!(got.ends_with(b"v\r\n"), "reply {i}");
    }
    assert_eq!(q::<i64>(&mut c, &["GET", "k3-49"]), 50);
}

#[test]
fn a_set_behind_unread_replies_holds_up_no_incr() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (_dir, s, mut c) = start_with_big();
    // INCRs keep "hot" dirty nearly all the time.
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let (ntx, nrx) = mpsc::channel();
    for _ in 0..6 {
        let (tx, ntx, stop) = (tx.clone(), ntx.clone(), stop.clone());
        let mut c = s.client();
        std::thread::spawn(move || {
            let r = (|| -> Result<(), String> {
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    redis::cmd("INCR")
                        .arg("hot")
                        .query::<i64>(&mut c)
                        .map_err(|e| format!("INCR: {e}"))?;
                    n += 1;
                    let _ = ntx.send(n);
                }
                Ok(())
            })();
            let _ = tx.send(r);
        });
    }
    drop(ntx);
    std::thread::sleep(Duration::from_millis(200));
    // Clients whose SET of "hot" comes behind replies they never read:
    // the shard stops serving such a connection once its socket is full,
    // with its SET of "hot" not yet run. Where the
    // socket fills is not known, so each client asks for a different
    // number of 60 KB replies before its SET. The INCRs must go on.
    let mut hogs = Vec::new();
    for n in 1..=40 {
        let mut hog = s.raw();
        let mut req = gets_of_big(n * 5);
        req.extend_from_slice(&crate::resp(&[b"SET", b"hot", b"1"]));
        hog.write_all(&req).unwrap();
        hogs.push(hog);
    }
    let mut done = 0;
    while done < 600 {
        nrx.recv_timeout(Duration::from_secs(20))
            .expect("the INCRs stopped behind a SET of a client that does not read");
        done += 1;
    }
    stop.store(true, Ordering::SeqCst);
    join_all(rx, 6, Duration::from_secs(60));
    drop(hogs);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn a_client_that_stops_sending_gets_every_reply_before_the_close() {
    use std::io::{Read, Write};
    let (_dir, s) = start();
    let mut c = s.raw();
    // The INCR's and the GET's replies wait for the SET's acknowledgement;
    // the client has shut its side long before.
    c.write_all(b"SET a 1\r\nINCR a\r\nGET a\r\nSET b").unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = String::new();
    c.read_to_string(&mut got).unwrap();
    assert_eq!(got, "+OK\r\n:2\r\n$1\r\n2\r\n");
}
