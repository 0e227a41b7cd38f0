//! Typed keys through a client: the string and hash commands beyond GET,
//! SET and HSET, and the keyspace (RENAME, KEYS, RANDOMKEY, FLUSHALL),
//! with Redis's replies and errors.

use crate::harness::{tempdir, Map, Server};
use crate::{e, info_u64, q};
use redis::Value;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn string_commands_as_redis_answers_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "b"]), 0);
    assert_eq!(q::<String>(&mut c, &["GETSET", "k", "hello"]), "a");
    assert_eq!(q::<Option<String>>(&mut c, &["GETSET", "new", "x"]), None);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "k", " world"]), 11);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "fresh", "abc"]), 3);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "k"]), 11);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "nope"]), 0);
    for (start, end, want) in [
        ("0", "4", "hello"),
        ("-5", "-1", "world"),
        ("6", "100", "world"),
        ("5", "3", ""),
        ("-1", "-5", ""),
        ("-100", "1", "he"),
    ] {
        assert_eq!(q::<String>(&mut c, &["GETRANGE", "k", start, end]), want);
    }
    assert_eq!(q::<String>(&mut c, &["SUBSTR", "k", "0", "0"]), "h");
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "nope", "0", "-1"]), "");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "6", "there"]), 11);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "hello there");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "pad", "3", "x"]), 4);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "pad"]), b"\0\0\0x");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "none", "5", ""]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]), 0);
    assert_eq!(
        e(&mut c, &["SETRANGE", "k", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(
        e(&mut c, &["SETRANGE", "k", "536870911", "xx"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    // Floats.
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "10.5"]), "10.5");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "0.1"]), "10.6");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "-10.6"]), "0");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "5.0e3"]), "5000");
    assert_eq!(
        e(&mut c, &["INCRBYFLOAT", "f", "abc"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        e(&mut c, &["INCRBYFLOAT", "k", "1"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        e(&mut c, &["INCRBYFLOAT", "f", "+inf"]),
        "ERR increment would produce NaN or Infinity"
    );
    // Integers as Redis reads them.
    q::<()>(&mut c, &["SET", "n", "007"]);
    assert_eq!(
        e(&mut c, &["INCR", "n"]),
        "ERR value is not an integer or out of range"
    );
    q::<()>(&mut c, &["SET", "n", "9223372036854775807"]);
    assert_eq!(
        e(&mut c, &["INCR", "n"]),
        "ERR increment or decrement would overflow"
    );
    // MSETNX: all or none.
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "x1", "1", "x2", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "x2", "9", "x3", "3"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "x3"]), 0);
    // Every string command refuses a hash.
    q::<()>(&mut c, &["HSET", "h", "f", "v"]);
    for args in [
        &["GET", "h"][..],
        &["INCR", "h"],
        &["APPEND", "h", "x"],
        &["STRLEN", "h"],
        &["GETRANGE", "h", "0", "1"],
        &["SETRANGE", "h", "0", "x"],
        &["INCRBYFLOAT", "h", "1"],
        &["GETSET", "h", "x"],
        &["GETDEL", "h"],
        &["SET", "h", "x", "GET"],
    ] {
        assert_eq!(e(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["MGET", "h", "x1"]),
        [None, Some("1".into())]
    );
    // A SET over a hash replaces it whole.
    q::<()>(&mut c, &["SET", "h", "s"]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "string");
    q::<()>(&mut c, &["DEL", "h"]);
    q::<()>(&mut c, &["HSET", "h", "g", "1"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), ["g"]);
}

#[test]
fn hash_commands_keep_their_count() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2", "a", "3"]),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "3");
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "a", "x"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "c", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "new", "c", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 3);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), ["a", "b", "c"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["HVALS", "h"]), ["3", "2", "x"]);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "c"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "zz"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "5"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "-7"]), -2);
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "fl", "1.5"]),
        "1.5"
    );
    assert_eq!(
        e(&mut c, &["HINCRBY", "h", "c", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        e(&mut c, &["HINCRBYFLOAT", "h", "c", "1"]),
        "ERR hash value is not a float"
    );
    assert_eq!(
        e(&mut c, &["HINCRBY", "h", "n", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a", "a", "zz"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 4);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "b", "c", "n", "fl"]), 4);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 0);
    q::<()>(&mut c, &["SET", "s", "v"]);
    for args in [
        &["HSET", "s", "f", "v"][..],
        &["HGET", "s", "f"],
        &["HLEN", "s"],
        &["HKEYS", "s"],
        &["HINCRBY", "s", "f", "1"],
        &["HSETNX", "s", "f", "v"],
    ] {
        assert_eq!(e(&mut c, args), WRONGTYPE, "{args:?}");
    }
}

#[test]
fn rename_keys_randomkey_and_flushall() {
    let dir = tempdir();
    let map = Map::default();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "s", "v", "EX", "1000"]);
    q::<()>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    q::<()>(&mut c, &["RENAME", "s", "s2"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "s2"]), "v");
    assert!(q::<i64>(&mut c, &["TTL", "s2"]) > 900);
    q::<()>(&mut c, &["RENAME", "h", "s2"]);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "s2"]), 2);
    assert_eq!(q::<i64>(&mut c, &["TTL", "s2"]), -1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(e(&mut c, &["RENAME", "nope", "x"]), "ERR no such key");
    q::<()>(&mut c, &["SET", "t", "1"]);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "t", "s2"]), 0);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "t", "u"]), 1);

    for k in ["user:1", "user:2", "user:10", "usex", "other"] {
        q::<()>(&mut c, &["SET", k, "v"]);
    }
    let mut got: Vec<String> = q(&mut c, &["KEYS", "user:*"]);
    got.sort();
    assert_eq!(got, ["user:1", "user:10", "user:2"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "user:?"]).len(), 2);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*x"]), ["usex"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 7);
    assert_eq!(q::<i64>(&mut c, &["TOUCH", "u", "nope", "u"]), 2);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "u", "nope"]), 1);
    let all: Vec<String> = q(&mut c, &["KEYS", "*"]);
    // Every key comes up: of a few keys each is about as likely (7 keys,
    // 200 draws: one never drawn has odds of about 1 in 10^13).
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let k: String = q(&mut c, &["RANDOMKEY"]);
        assert!(all.contains(&k), "{k}");
        seen.insert(k);
    }
    assert_eq!(seen.len(), all.len(), "{seen:?} of {all:?}");
    assert_eq!(e(&mut c, &["FLUSHALL", "SOON"]), "ERR syntax error");
    q::<()>(&mut c, &["FLUSHALL"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "other"]), None);
    q::<()>(&mut c, &["HSET", "s2", "c", "3"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "s2"]), ["c"]);
    q::<()>(&mut c, &["FLUSHDB", "ASYNC"]);
    q::<()>(&mut c, &["SET", "after", "v"]);
    s.kill9();
    // What FLUSHALL deleted stays deleted after a crash.
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]), ["after"]);
}

/// Deleting or replacing a hash is one write; compaction then drops the
/// old fields from the block files, and never a live one.
#[test]
fn compaction_drops_the_fields_of_deleted_and_replaced_hashes() {
    let dir = tempdir();
    let map = crate::compacting();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    let value = "v".repeat(200);
    let hset = |c: &mut redis::Connection, key: &str, round: usize| {
        let mut p = redis::pipe();
        for chunk in 0..10 {
            let mut cmd = redis::cmd("HSET");
            cmd.arg(key);
            for f in 0..500 {
                cmd.arg(format!("f{chunk}.{f}"))
                    .arg(format!("{round}{value}"));
            }
            p.add_command(cmd).ignore();
        }
        p.query::<()>(c).unwrap();
    };
    // Each round replaces "h" (a SET over it, then a new hash), deletes
    // "d", and leaves "live" alone; about 2 MiB a round in one region.
    hset(&mut c, "live", 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut round = 0;
    while info_u64(&mut c, "persistence", "compaction_filtered") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction dropped anything"
        );
        round += 1;
        hset(&mut c, "h", round);
        hset(&mut c, "d", round);
        q::<()>(&mut c, &["SET", "h", "now a string"]);
        q::<i64>(&mut c, &["DEL", "d", "h"]);
        hset(&mut c, "h", round);
    }
    assert!(info_u64(&mut c, "persistence", "compactions") >= 1);
    for key in ["live", "h"] {
        assert_eq!(q::<i64>(&mut c, &["HLEN", key]), 5000, "{key}");
        let all: std::collections::HashMap<String, String> = q(&mut c, &["HGETALL", key]);
        assert_eq!(all.len(), 5000, "{key}");
        let want = if key == "live" { 0 } else { round };
        assert!(
            all.values().all(|v| v == &format!("{want}{value}")),
            "{key}"
        );
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
    // After a restart the files still hold every live field.
    s.stop();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    for key in ["live", "h"] {
        let all: std::collections::HashMap<String, String> = q(&mut c, &["HGETALL", key]);
        assert_eq!(all.len(), 5000, "{key}");
    }
}

#[test]
fn bits_lcs_copy_object_and_memory() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "b", "7", "1"]), 1);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "b"]), [1]);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "7"]), 1);
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "b", "100"]), 0);
    q::<()>(&mut c, &["SET", "f", "foobar"]);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f"]), 26);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "1", "1"]), 6);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "5", "30", "BIT"]), 17);
    // Both from the end and crossed: nothing, though clamped they would
    // meet at the first byte; crossed from the start too.
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "-8", "-9"]), 0);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "-60", "-70", "BIT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "f", "-8", "-7"]), 4);
    // SETBIT and BITFIELD write only what changes: a new key, a longer
    // string, or bits that differ (INFO's count of changes says).
    let changes = |c: &mut redis::Connection| -> u64 {
        let text: String = q(c, &["INFO", "persistence"]);
        text.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .expect("the field")
            .trim()
            .parse()
            .unwrap()
    };
    let before = changes(&mut c);
    q::<i64>(&mut c, &["SETBIT", "sb", "0", "0"]);
    q::<Vec<i64>>(&mut c, &["BITFIELD", "bfd", "SET", "i5", "0", "0"]);
    assert_eq!(changes(&mut c), before + 2, "new keys");
    q::<i64>(&mut c, &["SETBIT", "sb", "0", "0"]);
    q::<Vec<i64>>(&mut c, &["BITFIELD", "bfd", "SET", "i5", "0", "0"]);
    assert_eq!(changes(&mut c), before + 2, "no change");
    q::<i64>(&mut c, &["SETBIT", "sb", "0", "1"]);
    q::<Vec<i64>>(&mut c, &["BITFIELD", "bfd", "SET", "i5", "0", "1"]);
    q::<i64>(&mut c, &["SETBIT", "sb", "90", "0"]);
    assert_eq!(changes(&mut c), before + 5, "changed bits, a longer string");
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "sb", "0"]), 1);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "sb"]), 12);
    q::<()>(&mut c, &["SET", "p", "\u{ff}\u{f0}"]);
    q::<()>(&mut c, &["SET", "z", "\0\0\x0f"]);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "z", "1"]), 20);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "nope", "0"]), 0);
    assert_eq!(q::<i64>(&mut c, &["BITOP", "OR", "o", "b", "z"]), 3);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "o"]), [1, 0, 0x0f]);
    assert_eq!(
        e(&mut c, &["SETBIT", "b", "-1", "1"]),
        "ERR bit offset is not an integer or out of range"
    );
    assert_eq!(
        e(&mut c, &["SETBIT", "b", "1", "2"]),
        "ERR bit is not an integer or out of range"
    );
    assert_eq!(
        e(&mut c, &["BITOP", "NOT", "o", "b", "z"]),
        "ERR BITOP NOT must be called with a single source key."
    );
    // BITFIELD: wrap by default, SAT and FAIL on request.
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &["BITFIELD", "bf", "SET", "u8", "0", "255", "GET", "u8", "0"]
        ),
        [0, 255]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["BITFIELD", "bf", "INCRBY", "u8", "0", "10"]),
        [9]
    );
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &["BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u8", "#0", "300"]
        ),
        [255]
    );
    assert_eq!(
        q::<Vec<Option<i64>>>(
            &mut c,
            &["BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1"]
        ),
        [None]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["BITFIELD_RO", "bf", "GET", "i8", "0"]),
        [-1]
    );
    assert_eq!(
        e(&mut c, &["BITFIELD_RO", "bf", "SET", "u8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    assert!(
        e(&mut c, &["BITFIELD", "bf", "GET", "u64", "0"]).starts_with("ERR Invalid bitfield type")
    );
    // LCS, as Redis's documentation gives it.
    q::<()>(&mut c, &["MSET", "k1", "ohmytext", "k2", "mynewtext"]);
    assert_eq!(q::<String>(&mut c, &["LCS", "k1", "k2"]), "mytext");
    assert_eq!(q::<i64>(&mut c, &["LCS", "k1", "k2", "LEN"]), 6);
    let idx: Value = q(
        &mut c,
        &["LCS", "k1", "k2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
    );
    let pair = |x, y| Value::Array(vec![Value::Int(x), Value::Int(y)]);
    assert_eq!(
        idx,
        Value::Array(vec![
            Value::BulkString(b"matches".to_vec()),
            Value::Array(vec![Value::Array(vec![
                pair(4, 7),
                pair(5, 8),
                Value::Int(4)
            ])]),
            Value::BulkString(b"len".to_vec()),
            Value::Int(6),
        ])
    );
    // COPY keeps the source; OBJECT and MEMORY describe a key.
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", "l", "l2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["COPY", "l", "l2"]), 0);
    assert_eq!(q::<i64>(&mut c, &["COPY", "k1", "l2", "REPLACE"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "l2"]), "ohmytext");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["a", "b"]
    );
    assert_eq!(
        e(&mut c, &["COPY", "l", "l"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "l"]),
        "positions"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["OBJECT", "ENCODING", "nope"]),
        None
    );
    assert!(q::<i64>(&mut c, &["MEMORY", "USAGE", "l"]) > 0);
    assert_eq!(q::<Option<i64>>(&mut c, &["MEMORY", "USAGE", "nope"]), None);
    // CONFIG SET takes what it can act on and names what it cannot.
    q::<()>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "hash-max-listpack-entries",
            "16",
            "hz",
            "20",
        ],
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "hash-max-listpack-entries"]),
        ["hash-max-listpack-entries", "16"]
    );
    assert_eq!(
        e(&mut c, &["CONFIG", "SET", "port", "1"]),
        "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config (Stria's device map fixes it)"
    );
    assert_eq!(
        e(&mut c, &["CONFIG", "SET", "nosuch", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        e(&mut c, &["CONFIG", "SET", "hz", "x", "save", ""]),
        "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"
    );
    // appendfsync is the level new connections start at.
    q::<()>(&mut c, &["CONFIG", "SET", "appendfsync", "no"]);
    let mut fresh = s.client();
    assert_eq!(q::<String>(&mut fresh, &["STRIA.DURABILITY"]), "none");
    q::<()>(&mut c, &["CONFIG", "SET", "appendfsync", "always"]);
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "2", "a", "b"]
        ),
        ["d", "a", "b"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]),
        ["a", "b"]
    );
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=12,expires=0,avg_ttl=0"), "{info}");
    q::<()>(&mut c, &["SAVE"]);
    assert_eq!(q::<String>(&mut c, &["RESET"]), "RESET");
}
