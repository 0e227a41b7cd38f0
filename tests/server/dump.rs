//! DUMP and RESTORE: every type round-trips under another name with its
//! TTL, and bad payloads and options change nothing.

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
}
