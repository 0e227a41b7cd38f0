//! DUMP and RESTORE: every type round-trips under another name with its
//! TTL, a Redis server's dump of a stream or a string restores, and bad
//! payloads and options change nothing.

use crate::harness::{tempdir, Map, Server};
use crate::{e, q};

#[test]
fn dump_and_restore_round_trip_every_type() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "s", "v\0x"]);
    q::<()>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    q::<()>(&mut c, &["LPOP", "l"]);
    q::<()>(&mut c, &["HSET", "h", "f", "1", "g", "2"]);
    q::<()>(&mut c, &["SADD", "set", "x", "y"]);
    q::<()>(&mut c, &["ZADD", "z", "1.5", "m", "-2", "n"]);
    let reads: &[(&str, &[&str])] = &[
        ("s", &["GET"]),
        ("l", &["LRANGE", "", "0", "-1"]),
        ("h", &["HGETALL"]),
        ("set", &["SMEMBERS"]),
        ("z", &["ZRANGE", "", "0", "-1", "WITHSCORES"]),
    ];
    let read = |c: &mut redis::Connection, key: &str, how: &[&str]| -> Vec<String> {
        let mut args = vec![how[0], key];
        args.extend(&how[1..]);
        args.retain(|a| !a.is_empty());
        let mut v: Vec<String> = match how[0] {
            "GET" => vec![q(c, &args)],
            _ => q(c, &args),
        };
        if how[0] == "SMEMBERS" {
            v.sort();
        }
        v
    };
    for (key, how) in reads {
        let dump: Vec<u8> = q(&mut c, &["DUMP", key]);
        let copy = format!("{key}-copy");
        let mut cmd = redis::cmd("RESTORE");
        cmd.arg(&copy).arg(100_000).arg(&dump);
        cmd.query::<()>(&mut c).unwrap();
        assert_eq!(read(&mut c, &copy, how), read(&mut c, key, how), "{key}");
        let ttl: i64 = q(&mut c, &["PTTL", &copy]);
        assert!((90_000..=100_000).contains(&ttl), "{key}: {ttl}");
        // Not over an existing key, unless REPLACE.
        let mut again = redis::cmd("RESTORE");
        again.arg(&copy).arg(0).arg(&dump);
        let err = again.query::<()>(&mut c).unwrap_err();
        assert_eq!(err.code(), Some("BUSYKEY"));
        let mut replace = redis::cmd("RESTORE");
        replace.arg(&copy).arg(0).arg(&dump).arg("REPLACE");
        replace.query::<()>(&mut c).unwrap();
        assert_eq!(q::<i64>(&mut c, &["PTTL", &copy]), -1);
        // A changed byte is refused, and nothing is made.
        let mut bad = dump.clone();
        bad[dump.len() / 2] ^= 0x40;
        let mut cmd = redis::cmd("RESTORE");
        cmd.arg(format!("{key}-bad")).arg(0).arg(&bad);
        let err = cmd.query::<()>(&mut c).unwrap_err();
        assert_eq!(
            err.detail(),
            Some("DUMP payload version or checksum are wrong"),
            "{key}"
        );
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &format!("{key}-bad")]), 0);
    }
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["DUMP", "none"]), None);
    let dump: Vec<u8> = q(&mut c, &["DUMP", "s"]);
    for (opts, want) in [
        (&["-1"][..], "ERR Invalid TTL value, must be >= 0"),
        (
            &["0", "FREQ", "300"],
            "ERR Invalid FREQ value, must be >= 0 and <= 255",
        ),
        (
            &["0", "IDLETIME", "-1"],
            "ERR Invalid IDLETIME value, must be >= 0",
        ),
        (&["0", "BOGUS"], "ERR syntax error"),
    ] {
        let mut cmd = redis::cmd("RESTORE");
        cmd.arg("o").arg(opts[0]).arg(&dump);
        for o in &opts[1..] {
            cmd.arg(*o);
        }
        let err = cmd.query::<()>(&mut c).unwrap_err();
        assert_eq!(crate::text(&err), want);
    }
    // An absolute TTL in the past makes nothing.
    let mut cmd = redis::cmd("RESTORE");
    cmd.arg("past").arg(1).arg(&dump).arg("ABSTTL");
    cmd.query::<()>(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "past", "o"]), 0);
    assert!(e(&mut c, &["RESTORE", "o", "0", "short"]).contains("checksum"));
    // An existing key is refused before the payload is looked at.
    let err = e(&mut c, &["RESTORE", "s", "0", "short"]);
    assert_eq!(err, "BUSYKEY Target key name already exists.");
}

/// A Redis 7.2.6 server's DUMP of stream `s` (RDB type 21), made with
/// `redis-server --save '' --appendonly no` after: XADD s 1-1 f v g w;
/// XADD s 1-2 f x g y; XADD s 2-0 other z; XADD s 3-0 f 1 g -7;
/// XDEL s 1-2; XGROUP CREATE s grp 0; XREADGROUP GROUP grp alice COUNT 2
/// STREAMS s >; XGROUP CREATECONSUMER s grp bob; XGROUP CREATE s late $.
const REDIS_STREAM: &[u8] = b"\x15\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x40\x54\x54\x00\x00\x00\x1f\x00\x03\x01\x01\x01\x02\x01\x81\x66\x02\x81\x67\x02\x00\x01\x02\x01\x00\x01\x00\x01\x81\x76\x02\x81\x77\x02\x05\x01\x03\x01\x00\x01\x01\x01\x81\x78\x02\x81\x79\x02\x05\x01\x00\x01\x01\x01\xdf\xff\x02\x01\x01\x85\x6f\x74\x68\x65\x72\x06\x81\x7a\x02\x06\x01\x02\x01\x02\x01\xdf\xff\x02\x01\x01\xdf\xf9\x02\x05\x01\xff\x03\x03\x00\x01\x01\x01\x02\x04\x02\x03\x67\x72\x70\x02\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x73\x12\x0b\x3d\xa2\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x73\x12\x0b\x3d\xa2\x01\x00\x00\x01\x02\x05\x61\x6c\x69\x63\x65\x73\x12\x0b\x3d\xa2\x01\x00\x00\x73\x12\x0b\x3d\xa2\x01\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x03\x62\x6f\x62\x73\x12\x0b\x3d\xa2\x01\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00\x04\x6c\x61\x74\x65\x03\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x0b\x00\x67\xfe\x4b\x8c\xb5\xec\x74\x54";

/// The same server's DUMP of `SET n 12345` (an integer-encoded string),
/// of `SET long abab...` (80 bytes, LZF-compressed), and of `HSET h f v`.
const REDIS_INT: &[u8] = b"\x00\xc190\x0b\x00\xf4KWTnc\xe10";
const REDIS_LZF: &[u8] = b"\x00\xc3\n@P\x02aba\xe0B\x01\x01ab\x0b\x00\xfdB\xe2}LAM\xcc";
const REDIS_HASH: &[u8] =
    b"\x10\r\r\x00\x00\x00\x02\x00\x81f\x02\x81v\x02\xff\x0b\x00I.\x807\xde\xcb\xe1\x14";

fn restore(c: &mut redis::Connection, key: &str, payload: &[u8]) -> redis::RedisResult<()> {
    redis::cmd("RESTORE").arg(key).arg(0).arg(payload).query(c)
}

#[test]
fn restore_takes_a_redis_servers_dump_of_a_stream_or_a_string() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    restore(&mut c, "s", REDIS_STREAM).unwrap();
    let entries: Vec<(String, Vec<String>)> = q(&mut c, &["XRANGE", "s", "-", "+"]);
    let want = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        entries,
        [
            ("1-1".to_string(), want(&["f", "v", "g", "w"])),
            ("2-0".to_string(), want(&["other", "z"])),
            ("3-0".to_string(), want(&["f", "1", "g", "-7"])),
        ]
    );
    let info: Vec<redis::Value> = q(&mut c, &["XINFO", "STREAM", "s"]);
    let field = |name: &str| -> redis::Value {
        let at = info
            .iter()
            .position(|v| matches!(v, redis::Value::BulkString(b) if b == name.as_bytes()))
            .unwrap_or_else(|| panic!("no {name} in {info:?}"));
        info[at + 1].clone()
    };
    assert_eq!(field("length"), redis::Value::Int(3));
    assert_eq!(field("entries-added"), redis::Value::Int(4));
    assert_eq!(
        field("max-deleted-entry-id"),
        redis::Value::BulkString(b"1-2".to_vec())
    );
    assert_eq!(field("groups"), redis::Value::Int(2));
    let pending: Vec<(String, String, i64, i64)> =
        q(&mut c, &["XPENDING", "s", "grp", "-", "+", "10"]);
    let ids: Vec<(&str, &str, i64)> = pending
        .iter()
        .map(|(id, who, _, n)| (id.as_str(), who.as_str(), *n))
        .collect();
    assert_eq!(ids, [("1-1", "alice", 1), ("2-0", "alice", 1)]);
    let consumers: Vec<std::collections::HashMap<String, redis::Value>> =
        q(&mut c, &["XINFO", "CONSUMERS", "s", "grp"]);
    assert_eq!(consumers.len(), 2);
    assert_eq!(consumers[1]["inactive"], redis::Value::Int(-1));
    // The group reads on from where it was.
    let read: redis::Value = q(
        &mut c,
        &["XREADGROUP", "GROUP", "grp", "bob", "STREAMS", "s", ">"],
    );
    assert!(format!("{read:?}").contains("3-0"), "{read:?}");

    restore(&mut c, "n", REDIS_INT).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "12345");
    restore(&mut c, "long", REDIS_LZF).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", "long"]), "ab".repeat(40));
    // A type this server does not read from Redis's form; a changed byte.
    let err = restore(&mut c, "h", REDIS_HASH).unwrap_err();
    assert_eq!(crate::text(&err), "ERR Bad data format");
    let mut bad = REDIS_STREAM.to_vec();
    bad[40] ^= 1;
    let err = restore(&mut c, "bad", &bad).unwrap_err();
    assert_eq!(
        crate::text(&err),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h", "bad"]), 0);
}
