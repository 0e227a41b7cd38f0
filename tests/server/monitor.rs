//! MONITOR through a raw socket: each command's line once it has run, a
//! script's line before the commands it runs (shown as `lua`), a
//! transaction's commands between its MULTI and EXEC, a blocked command
//! once, passwords redacted, and RESET or a refusal for commands on keys.

use std::net::TcpStream;
use std::time::Duration;

use crate::harness::{tempdir, Map, Server};
use crate::pubsub::send;
use crate::{q, read_line};

/// The next MONITOR line, after its time: `[0 addr] "cmd" ...`.
fn line(m: &mut TcpStream) -> String {
    let l = read_line(m);
    let l = l.trim_end();
    let (time, rest) = l
        .strip_prefix('+')
        .and_then(|x| x.split_once(' '))
        .unwrap_or_else(|| panic!("not a MONITOR line: {l}"));
    assert!(
        time.contains('.') && time.replace('.', "").parse::<u64>().is_ok(),
        "{l}"
    );
    rest.to_string()
}

/// `[0 addr] "cmd" ...` without the address.
fn command(m: &mut TcpStream) -> String {
    let l = line(m);
    let (origin, cmd) = l.split_once("] ").unwrap();
    if origin == "[0 lua" {
        format!("lua {cmd}")
    } else {
        cmd.to_string()
    }
}

#[test]
fn monitor_shows_what_runs_in_the_order_redis_shows_it() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    // (Clients first: the redis crate's CLIENT SETINFO would show.)
    let mut c = s.client();
    let mut b = s.client();
    let mut m = s.raw();
    m.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    send(&mut m, &["MONITOR"]);
    assert_eq!(read_line(&mut m), "+OK\r\n");
    q::<()>(&mut c, &["SET", "foo", "bar\"\n"]);
    assert_eq!(command(&mut m), r#""SET" "foo" "bar\"\n""#);
    q::<Option<String>>(&mut c, &["GET", "foo"]);
    assert_eq!(command(&mut m), r#""GET" "foo""#);
    q::<()>(
        &mut c,
        &["EVAL", "redis.call('set', KEYS[1], 'x')", "1", "k"],
    );
    assert_eq!(
        command(&mut m),
        r#""EVAL" "redis.call('set', KEYS[1], 'x')" "1" "k""#
    );
    assert_eq!(command(&mut m), r#"lua "set" "k" "x""#);
    redis::pipe()
        .cmd("MULTI")
        .cmd("INCR")
        .arg("n")
        .cmd("EXEC")
        .query::<redis::Value>(&mut c)
        .unwrap();
    assert_eq!(command(&mut m), r#""MULTI""#);
    assert_eq!(command(&mut m), r#""INCR" "n""#);
    assert_eq!(command(&mut m), r#""EXEC""#);
    let _ = redis::cmd("AUTH").arg("secret").query::<()>(&mut c);
    assert_eq!(command(&mut m), r#""AUTH" "(redacted)""#);
    // CONFIG is an admin command: not shown.
    q::<redis::Value>(&mut c, &["CONFIG", "GET", "hz"]);
    // A blocked command is shown once, when it first runs.
    let waiter = std::thread::spawn(move || q::<Vec<String>>(&mut b, &["BLPOP", "list", "0"]));
    assert_eq!(command(&mut m), r#""BLPOP" "list" "0""#);
    q::<i64>(&mut c, &["LPUSH", "list", "1"]);
    assert_eq!(waiter.join().unwrap(), ["list", "1"]);
    assert_eq!(command(&mut m), r#""LPUSH" "list" "1""#);
    q::<i64>(&mut c, &["LPUSH", "list", "2"]);
    assert_eq!(command(&mut m), r#""LPUSH" "list" "2""#);
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert!(list.contains("flags=O "), "{list}");
    assert_eq!(command(&mut m), r#""CLIENT" "LIST""#);
    // A monitor may not touch keys; RESET ends it.
    send(&mut m, &["GET", "foo"]);
    assert_eq!(
        read_line(&mut m),
        "-ERR Replica can't interact with the keyspace\r\n"
    );
    send(&mut m, &["RESET"]);
    assert_eq!(read_line(&mut m), "+RESET\r\n");
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert!(!list.contains("flags=O "), "{list}");
}
