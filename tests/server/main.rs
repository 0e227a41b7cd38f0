//! `stria serve` end to end: the binary on small file devices, driven
//! through the redis crate, raw sockets, redis-cli and redis-benchmark.
//! Each test starts its own server (tests/common/server.rs) on a free
//! port in its own folder.

#[path = "../common/server.rs"]
mod harness;

mod acl;
mod bad_input;
mod blocking;
mod client;
mod collections;
mod dump;
mod expire;
mod geo;
mod group_commit;
mod held;
mod idle;
mod introspection;
mod kill9;
mod maxmemory;
mod metrics;
mod migrate;
mod monitor;
mod notifications;
mod patterns;
mod pubsub;
mod replace;
mod restart;
mod revealed;
mod script_flags;
mod scripting;
mod single_node;
mod streams;
mod tools;
mod tracking;
mod transactions;
mod types;

use std::io::{Read, Write};
use std::net::TcpStream;

use redis::{Connection, FromRedisValue, RedisError, Value};

/// Sends `bytes`, then reads what comes back until the server closes the
/// connection (or 10 s pass): the text read and whether it was closed.
pub fn send_and_read_to_close(s: &mut TcpStream, bytes: &[u8]) -> (String, bool) {
    // The server may stop reading (and close) before it has taken
    // everything; what it replied is still read below.
    let _ = s.write_all(bytes);
    read_to_close(s)
}

/// Reads until the server closes the connection or the read times out.
pub fn read_to_close(s: &mut TcpStream) -> (String, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            // A reset after the reply also means closed.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

/// Sends `bytes` and reads exactly one line of reply (up to `\r\n`).
pub fn request_line(s: &mut TcpStream, bytes: &[u8]) -> String {
    s.write_all(bytes).unwrap();
    read_line(s)
}

/// One reply line, `\r\n` included.
pub fn read_line(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n") {
        match s.read(&mut b) {
            Ok(0) => panic!(
                "connection closed after {:?}",
                String::from_utf8_lossy(&got)
            ),
            Ok(_) => got.push(b[0]),
            Err(e) => panic!("read after {:?}: {e}", String::from_utf8_lossy(&got)),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A request in RESP: an array of bulk strings.
pub fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Runs `args` and converts the reply, failing on an error.
pub fn q<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{args:?}: {}", text(&e)))
}

/// Runs `args`, which must fail; the error as the server sent it.
pub fn e(con: &mut Connection, args: &[&str]) -> String {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<Value>(con) {
        Ok(v) => panic!("{args:?} succeeded with {v:?}"),
        Err(err) => text(&err),
    }
}

/// `CODE detail`, as the server sent it.
pub fn text(err: &RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.to_string(),
        _ => err.to_string(),
    }
}

/// A map whose data device (128 MiB) is small enough that a test's writes
/// fill it unless compactions give space back.
pub fn compacting() -> harness::Map {
    harness::Map {
        data_size: "128MiB",
        ..harness::Map::default()
    }
}

/// The number field `name` of INFO's `section`.
pub fn info_u64(c: &mut Connection, section: &str, name: &str) -> u64 {
    let info: String = q(c, &["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
        .parse()
        .unwrap()
}
