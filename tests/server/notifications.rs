//! Keyspace notifications through clients: `notify-keyspace-events` read
//! and refused as Redis does, the events of each type's commands on
//! `__keyspace@0__:` and `__keyevent@0__:` channels, `new`, `expired`
//! (on access and in the background) and `keymiss`.

use std::net::TcpStream;
use std::time::Duration;

use crate::harness::{tempdir, Map, Server};
use crate::pubsub::{lines, send};
use crate::q;

/// A subscriber to every channel (`PSUBSCRIBE *`).
fn subscriber(s: &Server) -> TcpStream {
    let mut sub = s.raw();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    send(&mut sub, &["PSUBSCRIBE", "*"]);
    // (`lines` drops the pattern `*`: it reads like an array's header.)
    assert_eq!(lines(&mut sub, 6), "psubscribe 1");
    sub
}

/// The next message a `PSUBSCRIBE *` subscriber gets: `channel message`.
fn next(sub: &mut TcpStream) -> String {
    let m = lines(sub, 9);
    m.strip_prefix("pmessage ")
        .unwrap_or_else(|| panic!("not a pmessage: {m}"))
        .to_string()
}

fn config(c: &mut redis::Connection, flags: &str) {
    q::<()>(c, &["CONFIG", "SET", "notify-keyspace-events", flags]);
}

#[test]
fn flags_are_read_printed_and_refused_as_redis_does() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let get = |c: &mut redis::Connection| -> String {
        let v: Vec<String> = q(c, &["CONFIG", "GET", "notify-keyspace-events"]);
        v[1].clone()
    };
    assert_eq!(get(&mut c), "");
    for (set, shown) in [
        ("gKE", "gKE"),
        ("$lshzxeKE", "$lshzxeKE"),
        ("KA", "AK"),
        ("EA", "AE"),
    ] {
        config(&mut c, set);
        assert_eq!(get(&mut c), shown);
    }
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KEq")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string().contains("Invalid event class character"),
        "{err}"
    );
    assert_eq!(get(&mut c), "AE", "a refused value changes nothing");
}

#[test]
fn each_type_tells_its_events_on_both_channels() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut sub = subscriber(&s);
    config(&mut c, "KEA");
    q::<()>(&mut c, &["SET", "foo", "bar"]);
    assert_eq!(next(&mut sub), "__keyspace@0__:foo set");
    assert_eq!(next(&mut sub), "__keyevent@0__:set foo");
    // Only the classes enabled, only keyspace channels.
    config(&mut c, "Kl");
    q::<()>(&mut c, &["SET", "foo", "baz"]);
    q::<i64>(&mut c, &["LPUSH", "list", "a", "b"]);
    q::<i64>(&mut c, &["RPUSH", "list", "c"]);
    q::<String>(&mut c, &["RPOP", "list"]);
    q::<String>(&mut c, &["LMOVE", "list", "other", "LEFT", "RIGHT"]);
    assert_eq!(next(&mut sub), "__keyspace@0__:list lpush");
    assert_eq!(next(&mut sub), "__keyspace@0__:list rpush");
    assert_eq!(next(&mut sub), "__keyspace@0__:list rpop");
    assert_eq!(next(&mut sub), "__keyspace@0__:other rpush");
    assert_eq!(next(&mut sub), "__keyspace@0__:list lpop");
    // A pop that empties a list deletes it: `del` is generic.
    config(&mut c, "Klg");
    q::<String>(&mut c, &["LPOP", "list"]);
    assert_eq!(next(&mut sub), "__keyspace@0__:list lpop");
    assert_eq!(next(&mut sub), "__keyspace@0__:list del");
    config(&mut c, "Kshz");
    q::<i64>(&mut c, &["SADD", "set", "a", "b"]);
    // Nothing removed, nothing told.
    q::<i64>(&mut c, &["SREM", "set", "x"]);
    q::<i64>(&mut c, &["SREM", "set", "a"]);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    q::<f64>(&mut c, &["ZINCRBY", "z", "2", "a"]);
    q::<i64>(&mut c, &["ZREM", "z", "nope"]);
    q::<()>(&mut c, &["HSET", "h", "f", "1"]);
    q::<i64>(&mut c, &["HINCRBY", "h", "f", "10"]);
    q::<i64>(&mut c, &["HDEL", "h", "f"]);
    for want in [
        "set sadd",
        "set srem",
        "z zadd",
        "z zincr",
        "h hset",
        "h hincrby",
        "h hdel",
    ] {
        assert_eq!(next(&mut sub), format!("__keyspace@0__:{want}"));
    }
    config(&mut c, "Eg$");
    q::<i64>(&mut c, &["INCRBY", "n", "5"]);
    q::<i64>(&mut c, &["EXPIRE", "n", "100"]);
    q::<i64>(&mut c, &["PERSIST", "n"]);
    q::<()>(&mut c, &["RENAME", "n", "m"]);
    q::<i64>(&mut c, &["COPY", "m", "m2"]);
    q::<i64>(&mut c, &["DEL", "m", "m2", "absent"]);
    for want in [
        "incrby n",
        "expire n",
        "persist n",
        "rename_from n",
        "rename_to m",
        "copy_to m2",
        "del m",
        "del m2",
    ] {
        assert_eq!(next(&mut sub), format!("__keyevent@0__:{want}"));
    }
    config(&mut c, "Kt");
    q::<()>(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    q::<String>(&mut c, &["XADD", "s", "*", "f", "v"]);
    q::<redis::Value>(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"],
    );
    q::<i64>(&mut c, &["XGROUP", "DELCONSUMER", "s", "g", "alice"]);
    for want in [
        "xgroup-create",
        "xadd",
        "xgroup-createconsumer",
        "xgroup-delconsumer",
    ] {
        assert_eq!(next(&mut sub), format!("__keyspace@0__:s {want}"));
    }
}

#[test]
fn new_keys_expired_keys_and_misses_are_told() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut sub = subscriber(&s);
    config(&mut c, "En");
    q::<()>(&mut c, &["SET", "foo", "bar"]);
    q::<()>(&mut c, &["SET", "foo", "baz"]);
    q::<i64>(&mut c, &["RPUSH", "bar", "x"]);
    assert_eq!(next(&mut sub), "__keyevent@0__:new foo");
    assert_eq!(next(&mut sub), "__keyevent@0__:new bar");
    // Expired in the background, by the active expiry cycle.
    config(&mut c, "Ex");
    q::<()>(&mut c, &["PSETEX", "soon", "100", "1"]);
    assert_eq!(next(&mut sub), "__keyevent@0__:expired soon");
    // Expired on access, before the cycle finds it.
    q::<()>(&mut c, &["CONFIG", "SET", "hz", "1"]);
    q::<()>(&mut c, &["PSETEX", "later", "50", "1"]);
    std::thread::sleep(Duration::from_millis(100));
    config(&mut c, "Exm");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "later"]), None);
    let got = [next(&mut sub), next(&mut sub)];
    assert_eq!(
        got,
        [
            "__keyevent@0__:expired later",
            "__keyevent@0__:keymiss later"
        ]
    );
    // A write command's lookup is no miss.
    q::<i64>(&mut c, &["INCR", "fresh"]);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "nothing"]), None);
    assert_eq!(next(&mut sub), "__keyevent@0__:keymiss nothing");
}
