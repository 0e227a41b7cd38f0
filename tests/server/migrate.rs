//! MIGRATE between two running servers: keys move (or are copied) with
//! their TTL, a key is deleted here only once the target took it, the
//! target's errors and unreachable targets are reported as Redis reports
//! them, and the connection is kept for the next MIGRATE.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::harness::{tempdir, Map, Server};
use crate::{e, info_u64, q};

/// `MIGRATE 127.0.0.1 <to's port> key 0 5000 extra...`.
fn request<'r>(port: &'r str, key: &'r str, extra: &[&'r str]) -> Vec<&'r str> {
    let mut args = vec!["MIGRATE", "127.0.0.1", port, key, "0", "5000"];
    args.extend(extra);
    args
}

fn migrate(c: &mut redis::Connection, to: &Server, key: &str, extra: &[&str]) -> String {
    let port = to.addr.port().to_string();
    q(c, &request(&port, key, extra))
}

/// The error a MIGRATE that fails answers.
fn refused(c: &mut redis::Connection, to: &Server, key: &str, extra: &[&str]) -> String {
    let port = to.addr.port().to_string();
    e(c, &request(&port, key, extra))
}

#[test]
fn keys_move_and_copy_to_another_server_with_their_ttl() {
    let (d1, d2) = (tempdir(), tempdir());
    let a = Server::start(d1.path(), &Map::default());
    let b = Server::start(d2.path(), &Map::default());
    let (mut ca, mut cb) = (a.client(), b.client());
    q::<()>(&mut ca, &["SET", "s", "v"]);
    q::<()>(&mut ca, &["EXPIRE", "s", "100"]);
    q::<()>(&mut ca, &["HSET", "h", "f", "1", "g", "2"]);
    q::<()>(&mut ca, &["ZADD", "z", "1.5", "m", "-2", "n"]);
    assert_eq!(info_u64(&mut ca, "stats", "migrate_cached_sockets"), 0);

    assert_eq!(migrate(&mut ca, &b, "s", &[]), "OK");
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "s"]), 0);
    assert_eq!(q::<String>(&mut cb, &["GET", "s"]), "v");
    let ttl: i64 = q(&mut cb, &["TTL", "s"]);
    assert!((95..=100).contains(&ttl), "{ttl}");
    // The connection is kept for the next one.
    assert_eq!(info_u64(&mut ca, "stats", "migrate_cached_sockets"), 1);

    // COPY keeps the key here.
    assert_eq!(migrate(&mut ca, &b, "h", &["COPY"]), "OK");
    assert_eq!(q::<i64>(&mut ca, &["HLEN", "h"]), 2);
    assert_eq!(
        q::<Vec<String>>(&mut cb, &["HGETALL", "h"]),
        ["f", "1", "g", "2"]
    );
    // An existing key there is kept unless REPLACE.
    q::<()>(&mut ca, &["HSET", "h", "f", "3"]);
    let err = refused(&mut ca, &b, "h", &[]);
    assert_eq!(
        err,
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert_eq!(
        q::<i64>(&mut ca, &["HLEN", "h"]),
        2,
        "kept here after the error"
    );
    assert_eq!(migrate(&mut ca, &b, "h", &["REPLACE"]), "OK");
    assert_eq!(q::<String>(&mut cb, &["HGET", "h", "f"]), "3");
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "h"]), 0);

    // KEYS: the keys that exist move; none: NOKEY.
    q::<()>(&mut ca, &["SET", "k1", "1"]);
    q::<()>(&mut ca, &["SET", "k3", "3"]);
    assert_eq!(
        migrate(&mut ca, &b, "", &["KEYS", "k1", "k2", "k3", "z"]),
        "OK"
    );
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "k1", "k3", "z"]), 0);
    assert_eq!(q::<i64>(&mut cb, &["EXISTS", "k1", "k2", "k3", "z"]), 3);
    assert_eq!(
        q::<Vec<String>>(&mut cb, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        ["n", "-2", "m", "1.5"]
    );
    assert_eq!(migrate(&mut ca, &b, "", &["KEYS", "nothing"]), "NOKEY");
    assert_eq!(migrate(&mut ca, &b, "nothing", &[]), "NOKEY");

    // Keys found as Redis finds them.
    assert_eq!(
        q::<Vec<String>>(
            &mut ca,
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "AUTH2", "u", "p", "KEYS",
                "x", "y"
            ]
        ),
        ["x", "y"]
    );
    let info: Vec<redis::Value> = q(&mut ca, &["COMMAND", "INFO", "MIGRATE"]);
    assert!(format!("{info:?}").contains("movablekeys"), "{info:?}");
}

#[test]
fn bad_requests_and_unreachable_targets_change_nothing() {
    let dir = tempdir();
    let a = Server::start(dir.path(), &Map::default());
    let mut c = a.client();
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        e(
            &mut c,
            &["MIGRATE", "127.0.0.1", "1", "k", "0", "100", "KEYS", "k"]
        ),
        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
    );
    assert_eq!(
        e(&mut c, &["MIGRATE", "127.0.0.1", "1", "k", "x", "100"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        e(
            &mut c,
            &["MIGRATE", "127.0.0.1", "1", "k", "0", "100", "BOGUS"]
        ),
        "ERR syntax error"
    );
    // Nothing listens on a port just freed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    assert_eq!(
        e(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port.to_string(), "k", "0", "500"]
        ),
        "IOERR error or timeout connecting to the client"
    );
    // A target that takes the request and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let started = Instant::now();
    assert_eq!(
        e(&mut c, &["MIGRATE", "127.0.0.1", &port, "k", "0", "300"]),
        "IOERR error or timeout reading to target instance"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(info_u64(&mut c, "stats", "migrate_cached_sockets"), 0);
}

#[test]
fn auth_reaches_a_target_with_a_password() {
    let (d1, d2) = (tempdir(), tempdir());
    let a = Server::start(d1.path(), &Map::default());
    let b = Server::start(
        d2.path(),
        &Map {
            password: Some("secret".into()),
            ..Map::default()
        },
    );
    let mut c = a.client();
    q::<()>(&mut c, &["SET", "k", "v"]);
    let err = refused(&mut c, &b, "k", &["AUTH", "wrong"]);
    assert!(
        err.starts_with("ERR Target instance replied with error: WRONGPASS"),
        "{err}"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    let ok = migrate(&mut c, &b, "k", &["AUTH", "secret"]);
    assert_eq!(ok, "OK");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    let mut cb = b.client();
    assert_eq!(q::<String>(&mut cb, &["GET", "k"]), "v");
}

/// 200,000 keys in one MIGRATE: the requests go in chunks, each chunk's
/// replies read before the next, so a target that stops reading while its
/// replies wait never leaves both sides waiting. The second, refused run
/// (8 MB of BUSYKEY replies) answers with the target's error; sent whole,
/// it timed out writing.
#[test]
fn many_keys_move_in_chunks_and_the_targets_refusals_come_back() {
    let (d1, d2) = (tempdir(), tempdir());
    let a = Server::start(d1.path(), &Map::default());
    let b = Server::start(d2.path(), &Map::default());
    let mut c = a.client();
    const N: usize = 200_000;
    let names: Vec<String> = (0..N).map(|i| format!("key:{i:06}")).collect();
    for chunk in names.chunks(1000) {
        let mut mset = redis::cmd("MSET");
        for k in chunk {
            mset.arg(k).arg("v");
        }
        mset.query::<()>(&mut c).unwrap();
    }
    let port = b.addr.port().to_string();
    let mut args = vec![
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "COPY",
        "KEYS",
    ];
    args.extend(names.iter().map(String::as_str));
    assert_eq!(q::<String>(&mut c, &args), "OK");
    assert_eq!(q::<i64>(&mut b.client(), &["DBSIZE"]), N as i64);
    let err = e(&mut c, &args);
    assert_eq!(
        err,
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), N as i64);
}

/// A key whose write is still on its way to the log is sent only once it
/// is durable (a crash here must not leave the target holding a value
/// this server never acknowledged); inside a transaction, which goes to
/// the log whole when it ends, such a MIGRATE is refused.
#[test]
fn a_write_not_yet_durable_is_made_durable_before_it_leaves() {
    let (d1, d2) = (tempdir(), tempdir());
    let a = Server::start(d1.path(), &Map::default());
    let b = Server::start(d2.path(), &Map::default());
    let mut c = a.client();
    let port = b.addr.port().to_string();
    // SET and MIGRATE in one write: one turn of the shard.
    let (set, moved): (String, String) = redis::pipe()
        .cmd("SET")
        .arg("k")
        .arg("v2")
        .cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(&port)
        .arg("k")
        .arg(0)
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert_eq!((set.as_str(), moved.as_str()), ("OK", "OK"));
    assert_eq!(q::<String>(&mut b.client(), &["GET", "k"]), "v2");
    let r: redis::Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("t")
        .arg("v")
        .cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(&port)
        .arg("t")
        .arg(0)
        .arg(5000)
        .query(&mut c)
        .unwrap_or_else(|e| redis::Value::SimpleString(e.to_string()));
    let text = format!("{r:?}");
    assert!(text.contains("not yet durable"), "{text}");
    assert_eq!(q::<String>(&mut c, &["GET", "t"]), "v");
    assert_eq!(q::<i64>(&mut b.client(), &["EXISTS", "t"]), 0);
}
