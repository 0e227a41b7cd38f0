//! Pub/sub through clients: channels, patterns and shard channels, the
//! counts PUBLISH and PUBSUB give, what a subscribed RESP2 connection may
//! run, and a subscriber that never reads is disconnected at its limit.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::harness::{tempdir, Map, Server};
use crate::{q, read_line, resp};

pub fn send(s: &mut std::net::TcpStream, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    s.write_all(&resp(&a)).unwrap();
}

/// The next reply of `n` lines, joined by spaces, type bytes and lengths
/// left out: `*3 $9 subscribe $4 news :1` reads as `subscribe news 1`.
pub fn lines(s: &mut std::net::TcpStream, n: usize) -> String {
    let mut out = Vec::new();
    for _ in 0..n {
        let l = read_line(s);
        let l = l.trim_end();
        match l.as_bytes().first().copied().unwrap_or(b' ') {
            b'*' | b'$' | b'>' => {}
            b':' | b'+' | b'-' => out.push(l[1..].to_string()),
            _ => out.push(l.to_string()),
        }
    }
    out.join(" ")
}

#[test]
fn messages_reach_channel_pattern_and_shard_subscribers() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut sub = s.raw();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    send(&mut sub, &["SUBSCRIBE", "news", "sport"]);
    assert_eq!(lines(&mut sub, 12), "subscribe news 1 subscribe sport 2");
    send(&mut sub, &["PSUBSCRIBE", "n*"]);
    assert_eq!(lines(&mut sub, 6), "psubscribe n* 3");
    send(&mut sub, &["SSUBSCRIBE", "orders"]);
    assert_eq!(lines(&mut sub, 6), "ssubscribe orders 1");
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news", "hello"]), 2);
    assert_eq!(lines(&mut sub, 7), "message news hello");
    assert_eq!(lines(&mut sub, 9), "pmessage n* news hello");
    assert_eq!(q::<i64>(&mut c, &["SPUBLISH", "orders", "o1"]), 1);
    assert_eq!(lines(&mut sub, 7), "smessage orders o1");
    // Shard channels are a namespace of their own.
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "orders", "x"]), 0);
    let mut chans: Vec<String> = q(&mut c, &["PUBSUB", "CHANNELS"]);
    chans.sort();
    assert_eq!(chans, ["news", "sport"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["PUBSUB", "CHANNELS", "s*"]),
        ["sport"]
    );
    assert_eq!(
        q::<Vec<(String, i64)>>(&mut c, &["PUBSUB", "NUMSUB", "news", "none"]),
        [("news".to_string(), 1), ("none".to_string(), 0)]
    );
    assert_eq!(q::<i64>(&mut c, &["PUBSUB", "NUMPAT"]), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["PUBSUB", "SHARDCHANNELS"]),
        ["orders"]
    );
    // In RESP2 a subscribed connection may only (un)subscribe and PING.
    send(&mut sub, &["GET", "k"]);
    assert!(lines(&mut sub, 1).starts_with("ERR Can't execute 'get'"));
    send(&mut sub, &["PING"]);
    assert_eq!(lines(&mut sub, 5), "pong ");
    // UNSUBSCRIBE without arguments leaves every channel.
    send(&mut sub, &["UNSUBSCRIBE"]);
    assert_eq!(
        lines(&mut sub, 12),
        "unsubscribe news 2 unsubscribe sport 1"
    );
    send(&mut sub, &["PUNSUBSCRIBE", "n*", "other"]);
    assert_eq!(
        lines(&mut sub, 12),
        "punsubscribe n* 0 punsubscribe other 0"
    );
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news", "hello"]), 0);
    send(&mut sub, &["SUNSUBSCRIBE"]);
    assert_eq!(lines(&mut sub, 6), "sunsubscribe orders 0");
    send(&mut sub, &["SET", "k", "v"]);
    assert_eq!(lines(&mut sub, 1), "OK");
    // A subscriber that goes is forgotten.
    send(&mut sub, &["SUBSCRIBE", "news"]);
    assert_eq!(lines(&mut sub, 6), "subscribe news 1");
    drop(sub);
    let until = Instant::now() + Duration::from_secs(10);
    while q::<i64>(&mut c, &["PUBLISH", "news", "x"]) != 0 {
        assert!(Instant::now() < until);
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_subscriber_that_never_reads_is_disconnected_at_its_limit() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut sub = s.raw();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    send(&mut sub, &["SUBSCRIBE", "firehose"]);
    assert_eq!(lines(&mut sub, 6), "subscribe firehose 1");
    let big = "x".repeat(64 * 1024);
    let until = Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    loop {
        if q::<i64>(&mut c, &["PUBLISH", "firehose", &big]) == 0 {
            break;
        }
        sent += 1;
        assert!(
            Instant::now() < until,
            "still subscribed after {sent} messages"
        );
    }
    // About the 32 MiB limit and what the sockets took, not all of it.
    assert!(sent * big.len() > 32 << 20, "closed after {sent} messages");
    assert!(sent < 2000, "{sent} messages before it was closed");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}
