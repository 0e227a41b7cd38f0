//! Expiry: SET's and GETEX's options, EXPIRE and its forms, TTL and its
//! forms, PERSIST; expired keys never come back, on access, from the
//! active cycle, after a restart or a kill -9.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Connection;

use crate::harness::{tempdir, Map, Server};
use crate::{e, info_u64, q};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn set_options_and_ttls_as_redis_gives_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "k", "v", "EX", "100"]);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((98_000..=100_000).contains(&pttl), "{pttl}");
    let at: i64 = q(&mut c, &["PEXPIRETIME", "k"]);
    assert!((at - now_ms() - 100_000).abs() < 2_000, "{at}");
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), at / 1000);
    assert_eq!(q::<i64>(&mut c, &["TTL", "nope"]), -2);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "nope"]), -2);
    q::<()>(&mut c, &["SET", "plain", "v"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "plain"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "plain"]), -1);

    // KEEPTTL keeps it, a plain SET drops it, INCR and APPEND keep it.
    q::<()>(&mut c, &["SET", "k", "w", "KEEPTTL"]);
    assert!(q::<i64>(&mut c, &["TTL", "k"]) > 90);
    q::<()>(&mut c, &["SET", "n", "1", "PX", "100000"]);
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 2);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "n", "0"]), 2);
    assert!(q::<i64>(&mut c, &["TTL", "n"]) > 90);
    q::<()>(&mut c, &["SET", "k", "x"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);

    // EXAT and PXAT are absolute; one in the past leaves no key.
    let later = (now_ms() / 1000 + 500).to_string();
    q::<()>(&mut c, &["SET", "abs", "v", "EXAT", &later]);
    assert_eq!(q::<String>(&mut c, &["EXPIRETIME", "abs"]), later);
    q::<()>(&mut c, &["SET", "gone", "v", "PXAT", "1000"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "gone"]), 0);

    // Bad times, as Redis words them; nothing is written.
    for (args, err) in [
        (
            &["SET", "k", "v", "EX", "0"][..],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "k", "v", "PX", "-5"],
            "ERR invalid expire time in 'set' command",
        ),
        (
            &["SET", "k", "v", "EX", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["SET", "k", "v", "EX", "9223372036854775"],
            "ERR invalid expire time in 'set' command",
        ),
        (&["SET", "k", "v", "EX", "1", "KEEPTTL"], "ERR syntax error"),
        (
            &["SETEX", "k", "0", "v"],
            "ERR invalid expire time in 'setex' command",
        ),
        (
            &["PSETEX", "k", "-1", "v"],
            "ERR invalid expire time in 'psetex' command",
        ),
        (
            &["GETEX", "k", "EX", "0"],
            "ERR invalid expire time in 'getex' command",
        ),
        (&["GETEX", "k", "PERSIST", "EX", "5"], "ERR syntax error"),
        (
            &["EXPIRE", "k", "10", "NX", "XX"],
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ),
        (
            &["EXPIRE", "k", "10", "GT", "LT"],
            "ERR GT and LT options at the same time are not compatible",
        ),
        (
            &["EXPIRE", "k", "10", "SOON"],
            "ERR Unsupported option SOON",
        ),
        (
            &["EXPIRE", "k", "ten"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["EXPIRE", "k", "9223372036854775807"],
            "ERR invalid expire time in 'expire' command",
        ),
    ] {
        assert_eq!(e(&mut c, args), err, "{args:?}");
    }
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "x");
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);

    // SETEX, PSETEX, GETEX.
    q::<()>(&mut c, &["SETEX", "se", "100", "v"]);
    assert!(q::<i64>(&mut c, &["TTL", "se"]) > 90);
    q::<()>(&mut c, &["PSETEX", "pse", "100000", "v"]);
    assert!(q::<i64>(&mut c, &["PTTL", "pse"]) > 90_000);
    assert_eq!(q::<String>(&mut c, &["GETEX", "se", "PERSIST"]), "v");
    assert_eq!(q::<i64>(&mut c, &["TTL", "se"]), -1);
    assert_eq!(q::<String>(&mut c, &["GETEX", "se", "EX", "50"]), "v");
    assert!((49..=50).contains(&q::<i64>(&mut c, &["TTL", "se"])));
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "nope", "EX", "5"]),
        None
    );
    q::<()>(&mut c, &["HSET", "h", "f", "v"]);
    assert!(e(&mut c, &["GETEX", "h"]).starts_with("WRONGTYPE"));
}

#[test]
fn expire_and_its_conditions_and_persist() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "nope", "10"]), 0);
    q::<()>(&mut c, &["SET", "k", "v"]);
    // XX and GT need an expiry (none counts as forever); NX needs none.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "NX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "GT"]), 1);
    assert!(q::<i64>(&mut c, &["TTL", "k"]) > 190);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "50000", "XX", "LT"]), 1);
    assert!(q::<i64>(&mut c, &["PTTL", "k"]) <= 50_000);
    let at = (now_ms() / 1000 + 1000).to_string();
    assert_eq!(q::<i64>(&mut c, &["EXPIREAT", "k", &at]), 1);
    assert_eq!(q::<String>(&mut c, &["EXPIRETIME", "k"]), at);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    // A hash expires whole.
    q::<()>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "h", "100000"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
    // A time in the past deletes the key at once.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "h", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", "1"]), 1);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    // A new hash under the old name has none of the old fields.
    q::<()>(&mut c, &["HSET", "h", "c", "3"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), ["c"]);
}

/// Keys that fell due are absent to every command at once, and the active
/// cycle deletes them without any command touching them.
#[test]
fn expired_keys_are_gone_to_every_command_and_the_cycle_deletes_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let before = info_u64(&mut c, "stats", "expired_keys");
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("SET")
            .arg(format!("short{i}"))
            .arg("v")
            .arg("PX")
            .arg(100)
            .ignore();
    }
    p.cmd("HSET").arg("shorth").arg("f").arg("v").ignore();
    p.cmd("PEXPIRE").arg("shorth").arg(100).ignore();
    p.cmd("SET")
        .arg("long")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .ignore();
    p.query::<()>(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]), ["long"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    let (_, keys): (String, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("COUNT")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["long"]);
    // The cycle gets to all of them (about 20 are due a cycle in a debug
    // build), though nothing reads them.
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_u64(&mut c, "stats", "expired_keys") < before + 201 {
        assert!(Instant::now() < deadline, "the cycle did not delete them");
        std::thread::sleep(Duration::from_millis(50));
    }
    for (args, want) in [
        (&["GET", "short0"][..], redis::Value::Nil),
        (&["HGET", "shorth", "f"], redis::Value::Nil),
        (&["EXISTS", "short1", "shorth"], redis::Value::Int(0)),
        (&["TTL", "short2"], redis::Value::Int(-2)),
    ] {
        assert_eq!(q::<redis::Value>(&mut c, args), want, "{args:?}");
    }
    assert_eq!(q::<String>(&mut c, &["TYPE", "short3"]), "none");
}

fn write_expiring(c: &mut Connection) {
    q::<()>(c, &["STRIA.DURABILITY", "sync"]);
    q::<()>(c, &["SET", "stays", "v", "EX", "1000"]);
    q::<()>(c, &["SET", "goes", "v", "PX", "300"]);
    q::<()>(c, &["HSET", "h", "f", "v"]);
    q::<i64>(c, &["EXPIRE", "h", "1000"]);
    q::<()>(c, &["SET", "kept", "v", "EX", "1000"]);
    q::<i64>(c, &["PERSIST", "kept"]);
}

fn check_expiring(c: &mut Connection) {
    let ttl: i64 = q(c, &["TTL", "stays"]);
    assert!((900..=1000).contains(&ttl), "{ttl}");
    assert!(q::<i64>(c, &["TTL", "h"]) > 900);
    assert_eq!(q::<String>(c, &["HGET", "h", "f"]), "v");
    assert_eq!(q::<i64>(c, &["TTL", "kept"]), -1);
    assert_eq!(q::<i64>(c, &["EXISTS", "goes"]), 0);
    assert_eq!(q::<Vec<String>>(c, &["KEYS", "*"]).len(), 3);
}

#[test]
fn expiry_survives_a_restart_and_a_kill() {
    let dir = tempdir();
    let map = Map::default();
    let s = Server::start(dir.path(), &map);
    write_expiring(&mut s.client());
    s.stop();
    std::thread::sleep(Duration::from_millis(300));
    let s = Server::start(dir.path(), &map);
    check_expiring(&mut s.client());
    q::<()>(&mut s.client(), &["FLUSHALL"]);
    write_expiring(&mut s.client());
    s.kill9();
    std::thread::sleep(Duration::from_millis(300));
    let s = Server::start(dir.path(), &map);
    check_expiring(&mut s.client());
}
