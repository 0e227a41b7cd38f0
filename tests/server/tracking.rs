//! CLIENT TRACKING through raw sockets: RESP3 invalidations after the
//! reply of the command that wrote, REDIRECT to a RESP2 subscriber of
//! `__redis__:invalidate` (and what a broken redirect tells), BCAST with
//! prefixes once per turn, NOLOOP, OPTIN and CLIENT CACHING, FLUSHALL,
//! `tracking-table-max-keys`, and Redis's errors for options that clash.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::harness::{tempdir, Map, Server};
use crate::{q, read_line, resp};

/// One whole RESP2 or RESP3 value, its words joined by spaces (nested
/// arrays flattened, type bytes and lengths left out, `nil` for a null).
fn value(s: &mut TcpStream) -> String {
    let line = read_line(s);
    let l = line.trim_end();
    let (kind, rest) = l.split_at(1);
    let n: i64 = rest.parse().unwrap_or(0);
    match kind {
        "*" | ">" | "~" | "%" if n < 0 => "nil".into(),
        "*" | ">" | "~" => words((0..n).map(|_| value(s))),
        "%" => words((0..2 * n).map(|_| value(s))),
        "$" if n < 0 => "nil".into(),
        "$" => read_line(s).trim_end().to_string(),
        "_" => "nil".into(),
        _ => rest.to_string(),
    }
}

/// Values joined by spaces, empty arrays left out.
fn words(parts: impl Iterator<Item = String>) -> String {
    parts
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends one command and reads one value back.
fn ask(s: &mut TcpStream, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    s.write_all(&resp(&a)).unwrap();
    value(s)
}

fn connect(s: &Server, proto: &str) -> TcpStream {
    let mut c = s.raw();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if proto == "3" {
        ask(&mut c, &["HELLO", "3"]);
    }
    c
}

#[test]
fn a_resp3_reader_is_told_once_after_the_reply_of_the_write() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut w = s.client();
    let mut r = connect(&s, "3");
    assert_eq!(ask(&mut r, &["CLIENT", "TRACKING", "on"]), "OK");
    q::<()>(&mut w, &["SET", "k", "1"]);
    assert_eq!(ask(&mut r, &["GET", "k"]), "1");
    // Read but not written: no invalidation for `other`.
    assert_eq!(ask(&mut r, &["GET", "other"]), "nil");
    q::<i64>(&mut w, &["INCR", "k"]);
    q::<i64>(&mut w, &["INCR", "k"]);
    assert_eq!(value(&mut r), "invalidate k");
    // Told once: the second INCR found no reader.
    assert_eq!(ask(&mut r, &["PING"]), "PONG");
    // Its own write: the reply first, then the invalidation.
    ask(&mut r, &["HSET", "h", "f", "1"]);
    ask(&mut r, &["HGET", "h", "f"]);
    assert_eq!(ask(&mut r, &["HDEL", "h", "f"]), "1");
    assert_eq!(value(&mut r), "invalidate h");
    // A transaction's reply comes whole, then what it invalidated.
    ask(&mut r, &["GET", "a"]);
    ask(&mut r, &["MULTI"]);
    ask(&mut r, &["INCR", "a"]);
    ask(&mut r, &["GET", "a"]);
    assert_eq!(ask(&mut r, &["EXEC"]), "1 1");
    assert_eq!(value(&mut r), "invalidate a");
    // FLUSHALL: every key, as a null.
    ask(&mut r, &["GET", "k"]);
    q::<()>(&mut w, &["FLUSHALL"]);
    assert_eq!(value(&mut r), "invalidate nil");
    let info: String = q(&mut w, &["INFO"]);
    assert!(info.contains("tracking_clients:1\r\n"), "{info}");
    let list: String = q(&mut w, &["CLIENT", "LIST"]);
    assert!(list.contains("flags=t "), "{list}");
    assert_eq!(ask(&mut r, &["RESET"]), "RESET");
    let list: String = q(&mut w, &["CLIENT", "LIST"]);
    assert!(!list.contains("flags=t "), "{list}");
}

#[test]
fn redirects_bcast_noloop_and_optin_follow_redis() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut w = s.client();
    let mut sink = connect(&s, "2");
    let id = ask(&mut sink, &["CLIENT", "ID"]);
    assert_eq!(
        ask(&mut sink, &["SUBSCRIBE", "__redis__:invalidate"]),
        "subscribe __redis__:invalidate 1"
    );
    let mut r = connect(&s, "2");
    assert_eq!(
        ask(&mut r, &["CLIENT", "TRACKING", "on", "REDIRECT", &id]),
        "OK"
    );
    assert_eq!(ask(&mut r, &["CLIENT", "GETREDIR"]), id);
    ask(&mut r, &["MGET", "a", "b"]);
    q::<()>(&mut w, &["MSET", "a", "1", "c", "1"]);
    assert_eq!(value(&mut sink), "message __redis__:invalidate a");
    // BCAST: the keys of a turn under each prefix, one message a prefix.
    ask(&mut r, &["CLIENT", "TRACKING", "off"]);
    assert_eq!(
        ask(
            &mut r,
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id, "PREFIX", "a:", "PREFIX",
                "b:"
            ]
        ),
        "OK"
    );
    q::<()>(&mut w, &["MSET", "a:1", "1", "a:2", "1", "c:1", "1"]);
    assert_eq!(value(&mut sink), "message __redis__:invalidate a:1 a:2");
    assert_eq!(
        ask(&mut r, &["CLIENT", "TRACKINGINFO"]),
        format!("flags on bcast redirect {id} prefixes a: b:")
    );
    // NOLOOP: nothing of its own writes.
    ask(&mut r, &["CLIENT", "TRACKING", "off"]);
    ask(
        &mut r,
        &["CLIENT", "TRACKING", "on", "REDIRECT", &id, "NOLOOP"],
    );
    ask(&mut r, &["MGET", "mine", "theirs"]);
    ask(&mut r, &["SET", "mine", "1"]);
    q::<()>(&mut w, &["SET", "theirs", "1"]);
    assert_eq!(value(&mut sink), "message __redis__:invalidate theirs");
    // OPTIN: only what a CLIENT CACHING yes command read.
    ask(&mut r, &["CLIENT", "TRACKING", "off"]);
    ask(
        &mut r,
        &["CLIENT", "TRACKING", "on", "OPTIN", "REDIRECT", &id],
    );
    ask(&mut r, &["GET", "x"]);
    assert_eq!(ask(&mut r, &["CLIENT", "CACHING", "yes"]), "OK");
    ask(&mut r, &["GET", "y"]);
    ask(&mut r, &["GET", "z"]);
    q::<()>(&mut w, &["MSET", "x", "1", "y", "1", "z", "1"]);
    assert_eq!(value(&mut sink), "message __redis__:invalidate y");
    // The redirect goes: the next invalidation breaks it.
    let mut r3 = connect(&s, "3");
    ask(&mut r3, &["CLIENT", "TRACKING", "on", "REDIRECT", &id]);
    ask(&mut r3, &["GET", "q"]);
    drop(sink);
    std::thread::sleep(Duration::from_millis(200));
    q::<()>(&mut w, &["SET", "q", "1"]);
    assert_eq!(value(&mut r3), format!("tracking-redir-broken {id}"));
    assert_eq!(
        ask(&mut r3, &["CLIENT", "TRACKINGINFO"]),
        format!("flags on broken_redirect redirect {id} prefixes")
    );
}

#[test]
fn options_that_clash_are_refused_as_redis_refuses_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = connect(&s, "3");
    for (args, want) in [
        (&["on", "PREFIX", "a"][..], "ERR PREFIX option requires BCAST mode to be enabled"),
        (&["on", "REDIRECT", "999999"][..], "ERR The client ID you want redirect to does not exist"),
        (&["on", "BCAST", "OPTIN"][..], "ERR OPTIN and OPTOUT are not compatible with BCAST"),
        (&["on", "OPTIN", "OPTOUT"][..], "ERR You can't specify both OPTIN mode and OPTOUT mode"),
        (&["on", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"][..], "ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap."),
        (&["maybe"][..], "ERR syntax error"),
    ] {
        let mut a = vec!["CLIENT", "TRACKING"];
        a.extend_from_slice(args);
        assert_eq!(ask(&mut c, &a), want, "{args:?}");
    }
    assert_eq!(ask(&mut c, &["CLIENT", "GETREDIR"]), "-1");
    assert_eq!(
        ask(&mut c, &["CLIENT", "CACHING", "yes"]),
        "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
    );
    ask(&mut c, &["CLIENT", "TRACKING", "on", "OPTOUT"]);
    assert_eq!(
        ask(&mut c, &["CLIENT", "CACHING", "yes"]),
        "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
    );
    assert_eq!(
        ask(&mut c, &["CLIENT", "TRACKING", "on", "BCAST"]),
        "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    );
    assert_eq!(
        ask(&mut c, &["CLIENT", "TRACKINGINFO"]),
        "flags on optout redirect 0 prefixes"
    );
}

#[test]
fn the_table_keeps_to_tracking_table_max_keys() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut w = s.client();
    let mut r = connect(&s, "3");
    ask(&mut r, &["CLIENT", "TRACKING", "on"]);
    for i in 0..50 {
        ask(&mut r, &["GET", &format!("key{i}")]);
    }
    let info: String = q(&mut w, &["INFO", "stats"]);
    assert!(info.contains("tracking_total_keys:50\r\n"), "{info}");
    q::<()>(&mut w, &["CONFIG", "SET", "tracking-table-max-keys", "10"]);
    for _ in 0..40 {
        assert!(value(&mut r).starts_with("invalidate key"));
    }
    let info: String = q(&mut w, &["INFO", "stats"]);
    assert!(info.contains("tracking_total_keys:10\r\n"), "{info}");
}
