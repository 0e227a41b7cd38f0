//! The Prometheus endpoint of a running server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::harness::{tempdir, Map, Server};

/// `GET path` over HTTP/1.1: the status line and the body.
fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    (status, body.to_string())
}

/// The value of the series `name` in an exposition text.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn metrics_count_the_commands_served() {
    let dir = tempdir();
    let map = Map {
        metrics: true,
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    // Port 0 was asked for; the real address is printed before `listening on`.
    let m = s
        .metrics
        .unwrap_or_else(|| panic!("no metrics address printed\n{}", s.printed.all()));
    assert_ne!(m.port(), 0);
    assert_ne!(m.port(), s.addr.port());

    let mut c = s.client();
    for i in 0..25 {
        redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query::<()>(&mut c)
            .unwrap();
    }
    for i in 0..7 {
        redis::cmd("GET")
            .arg(format!("k{i}"))
            .query::<i64>(&mut c)
            .unwrap();
    }
    redis::cmd("HSET")
        .arg("k1")
        .arg("f")
        .arg("v")
        .query::<i64>(&mut c)
        .unwrap_err();

    let (status, body) = http_get(m, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(
        body.contains("# TYPE stria_commands_total counter"),
        "{body}"
    );
    assert_eq!(
        sample(&body, "stria_commands_total{command=\"set\"}"),
        Some(25.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, "stria_commands_total{command=\"get\"}"),
        Some(7.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, "stria_command_errors_total{command=\"hset\"}"),
        Some(1.0),
        "{body}"
    );
    let records = sample(&body, "stria_wal_records_total").unwrap_or(0.0);
    assert!(records >= 25.0, "{body}");
    assert!(body.contains("stria_connected_clients"), "{body}");

    let (status, _) = http_get(m, "/nope");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    // The endpoint stops with the server.
    s.stop();
    assert!(TcpStream::connect_timeout(&m, Duration::from_secs(2)).is_err());
}
