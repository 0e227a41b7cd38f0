//! What clients must not be able to do to the server: malformed requests,
//! requests over the limits, too many connections, no password, garbage.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::harness::{serve_to_exit, tempdir, Map, Server};
use crate::{read_line, read_to_close, request_line, resp, send_and_read_to_close};

/// A new connection still gets answers.
fn still_serves(s: &Server) {
    let mut c = s.raw();
    assert_eq!(request_line(&mut c, b"*1\r\n$4\r\nPING\r\n"), "+PONG\r\n");
}

/// `bytes` gets `-ERR Protocol error: <what>` and the connection closes;
/// replies to complete requests before it come first.
fn protocol_error(s: &Server, bytes: &[u8], before: &str, what: &str) {
    let mut c = s.raw();
    let (got, closed) = send_and_read_to_close(&mut c, bytes);
    let want = format!("{before}-ERR Protocol error: {what}\r\n");
    assert_eq!(
        got,
        want,
        "for {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
    );
    assert!(closed, "the connection stayed open after {got:?}");
    still_serves(s);
}

#[test]
fn malformed_requests_are_protocol_errors_that_close_the_connection() {
    let dir = tempdir();
    let map = Map {
        max_bulk: Some(64 << 10),
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    protocol_error(&s, b"*abc\r\n", "", "invalid multibulk length");
    protocol_error(&s, b"*1\r\n+x\r\n", "", "expected '$', got '+'");
    protocol_error(&s, b"*1\r\n$-5\r\n", "", "invalid bulk length");
    protocol_error(&s, b"*1\r\n$abc\r\n", "", "invalid bulk length");
    protocol_error(&s, b"*1\r\n$65537\r\n", "", "invalid bulk length");
    protocol_error(&s, b"*99999999999\r\n", "", "invalid multibulk length");
    protocol_error(
        &s,
        b"*1\r\n$4\r\nPINGxx\r\n",
        "",
        "bulk string is not followed by CRLF",
    );
    protocol_error(&s, b"SET \"a b\r\n", "", "unbalanced quotes in request");
    // The requests before the bad one in a pipeline are answered first.
    let mut bytes = resp(&[b"SET", b"before", b"1"]);
    bytes.extend_from_slice(&resp(&[b"GET", b"before"]));
    bytes.extend_from_slice(b"*2\r\n$3\r\nGET\r\n:1\r\n");
    protocol_error(&s, &bytes, "+OK\r\n$1\r\n1\r\n", "expected '$', got ':'");
    // A bulk string exactly at the limit is fine (64 KiB is also
    // memstore.max-value here).
    let mut c = s.raw();
    let big = vec![b'v'; 64 << 10];
    assert_eq!(
        request_line(&mut c, &resp(&[b"HSET", b"big", b"f", &big])),
        ":1\r\n"
    );
}

#[test]
fn unknown_commands_and_wrong_arity_keep_the_connection() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.raw();
    let r = request_line(&mut c, &resp(&[b"NOPE", b"a", b"b"]));
    assert_eq!(
        r,
        "-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"GET"])),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"GET", b"a", b"b"])),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"HSET", b"h", b"f"])),
        "-ERR wrong number of arguments for 'hset' command\r\n"
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"CLIENT", b"KILL", b"x"])).get(..30),
        Some("-ERR unknown subcommand 'KILL'")
    );
    // An unknown command with CR/LF in its name cannot break the framing.
    let r = request_line(&mut c, &resp(&[b"BAD\r\n+OK", b"x\r\ny"]));
    assert!(r.starts_with("-ERR unknown command 'BAD  +OK'"), "{r}");
    // The same connection goes on, inline requests too.
    assert_eq!(
        request_line(&mut c, &resp(&[b"SET", b"k", b"v"])),
        "+OK\r\n"
    );
    assert_eq!(request_line(&mut c, b"GET k\r\n"), "$1\r\n");
    assert_eq!(read_line(&mut c), "v\r\n");
    assert_eq!(request_line(&mut c, b"\r\n\r\nPING\r\n"), "+PONG\r\n");
    assert_eq!(request_line(&mut c, b"*0\r\n*-1\r\nPING\r\n"), "+PONG\r\n");
    assert_eq!(request_line(&mut c, b"QUIT\r\n"), "+OK\r\n");
    let (rest, closed) = read_to_close(&mut c);
    assert!(rest.is_empty() && closed, "{rest:?}");
}

#[test]
fn a_request_over_the_query_limit_is_refused_and_closed() {
    let dir = tempdir();
    let map = Map {
        max_bulk: Some(64 << 10),
        max_query: Some(128 << 10),
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    // Bulk strings within max-bulk, but together over max-query: the
    // request is refused at the header of the argument that passes it
    // (sent last, so the server has read everything when it closes).
    // 14 + 60010 + 60010 bytes, then a third 60000-byte string.
    let mut bytes = b"*4\r\n$4\r\nMSET\r\n".to_vec();
    for _ in 0..2 {
        bytes.extend_from_slice(b"$60000\r\n");
        bytes.extend_from_slice(&[b'x'; 60_000]);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"$60000\r\n");
    let mut c = s.raw();
    let (got, closed) = send_and_read_to_close(&mut c, &bytes);
    assert_eq!(got, "-ERR Protocol error: query buffer limit reached\r\n");
    assert!(closed);
    still_serves(&s);

    // Many small arguments: the limit counts them all. The server stops
    // reading part way; a reader thread keeps the client from blocking.
    let mut bytes = b"*100000\r\n".to_vec();
    for _ in 0..100_000 {
        bytes.extend_from_slice(b"$1\r\na\r\n");
    }
    let c = s.raw();
    let mut w = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&bytes);
    });
    let mut r = c;
    let (got, closed) = read_to_close(&mut r);
    let _ = r.shutdown(Shutdown::Both);
    writer.join().unwrap();
    assert_eq!(got, "-ERR Protocol error: query buffer limit reached\r\n");
    assert!(closed);
    still_serves(&s);
    let mut c = s.raw();
    assert_eq!(
        request_line(&mut c, &resp(&[b"EXISTS", b"a", b"b"])),
        ":0\r\n"
    );
}

#[test]
fn connections_over_max_clients_are_refused() {
    let dir = tempdir();
    let map = Map {
        max_clients: Some(4),
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = s.raw();
            assert_eq!(request_line(&mut c, b"PING\r\n"), "+PONG\r\n");
            c
        })
        .collect();
    let mut extra = s.raw();
    let (got, closed) = read_to_close(&mut extra);
    assert_eq!(got, "-ERR max number of clients reached\r\n");
    assert!(closed);
    // The ones held still work; once one leaves there is room again.
    assert_eq!(request_line(&mut held[3], b"PING\r\n"), "+PONG\r\n");
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = s.raw();
        c.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let _ = c.write_all(b"PING\r\n");
        let mut b = [0u8; 64];
        let n = std::io::Read::read(&mut c, &mut b).unwrap_or(0);
        let got = String::from_utf8_lossy(&b[..n]).into_owned();
        if got == "+PONG\r\n" {
            break;
        }
        // Refused (the reply may be lost to the reset of a socket closed
        // with our PING unread).
        assert!(
            got.is_empty() || got == "-ERR max number of clients reached\r\n",
            "{got:?}"
        );
        assert!(Instant::now() < deadline, "no room after a client left");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn values_and_keys_over_the_memstore_limits_are_refused_with_nothing_stored() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.raw();
    let big = vec![b'v'; (64 << 10) + 1];
    let long_key = vec![b'k'; 1013];
    let max_value = "-ERR a value of 65537 bytes is over the limit of 65518 bytes (memstore.max-value less 18 bytes of metadata)\r\n";
    let max_field_value =
        "-ERR a value of 65537 bytes is over the limit of 65536 bytes (memstore.max-value)\r\n";
    let max_key = "-ERR key of 1013 bytes is over the limit of 1012 bytes (memstore.max-key less 12 bytes of encoding)\r\n";
    assert_eq!(
        request_line(&mut c, &resp(&[b"SET", b"v", &big])),
        max_value
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"SET", b"v", &big, b"NX"])),
        max_value
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"SET", &long_key, b"x"])),
        max_key
    );
    assert_eq!(request_line(&mut c, &resp(&[b"GET", &long_key])), max_key);
    assert_eq!(request_line(&mut c, &resp(&[b"INCR", &long_key])), max_key);
    // A batch with one value over the limit writes none of it.
    assert_eq!(
        request_line(&mut c, &resp(&[b"MSET", b"m1", b"small", b"m2", &big])),
        max_value
    );
    assert_eq!(
        request_line(
            &mut c,
            &resp(&[b"HSET", b"h", b"f1", b"small", b"f2", &big])
        ),
        max_field_value
    );
    // A field name that makes the engine key too long.
    let long_field = vec![b'f'; 1100];
    let r = request_line(&mut c, &resp(&[b"HSET", b"h", &long_field, b"x"]));
    assert!(
        r.starts_with("-ERR a field of 1100 bytes in a key of 1 bytes")
            && r.contains("memstore.max-key"),
        "{r}"
    );
    // At the limits is fine.
    let at_key = vec![b'k'; 1012];
    let at_value = vec![b'v'; (64 << 10) - 18];
    assert_eq!(
        request_line(&mut c, &resp(&[b"SET", &at_key, &at_value])),
        "+OK\r\n"
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"EXISTS", b"v", b"m1", b"m2", b"h"])),
        ":0\r\n"
    );
    assert_eq!(request_line(&mut c, &resp(&[b"DBSIZE"])), ":1\r\n");
}

/// Commands over a wide hash take several engine batches: a value over the
/// limit must be refused before the first, not after some are applied.
#[test]
fn a_refused_value_leaves_a_wide_hash_whole() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.raw();
    let big = vec![b'v'; (64 << 10) + 1];
    let names: Vec<Vec<u8>> = (0..2000).map(|i| format!("f{i}").into_bytes()).collect();
    let mut hset: Vec<&[u8]> = vec![b"HSET", b"wide"];
    for n in &names {
        hset.push(n);
        hset.push(b"x");
    }
    assert_eq!(request_line(&mut c, &resp(&hset)), ":2000\r\n");
    let refused_string = "-ERR a value of 65537 bytes is over the limit of 65518 bytes (memstore.max-value less 18 bytes of metadata)\r\n";
    let refused =
        "-ERR a value of 65537 bytes is over the limit of 65536 bytes (memstore.max-value)\r\n";
    // SET over the hash: refused, the hash left whole.
    assert_eq!(
        request_line(&mut c, &resp(&[b"SET", b"wide", &big])),
        refused_string
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"SET", b"wide", &big, b"XX"])),
        refused_string
    );
    // A new hash of many fields, one too large.
    let mut more: Vec<&[u8]> = vec![b"HSET", b"other"];
    for n in &names[..1500] {
        more.push(n);
        more.push(b"x");
    }
    more.push(b"last");
    more.push(&big);
    assert_eq!(request_line(&mut c, &resp(&more)), refused);
    assert_eq!(
        request_line(&mut c, &resp(&[b"HLEN", b"wide"])),
        ":2000\r\n"
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"TYPE", b"wide"])),
        "+hash\r\n"
    );
    assert_eq!(
        request_line(&mut c, &resp(&[b"EXISTS", b"other"])),
        ":0\r\n"
    );
}

#[test]
fn a_password_is_required_before_anything_else() {
    let dir = tempdir();
    let map = Map {
        password: Some("s3cret".into()),
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    let mut c = s.raw();
    for req in [
        &resp(&[b"GET", b"a"])[..],
        &resp(&[b"SET", b"a", b"1"]),
        b"PING\r\n",
    ] {
        assert_eq!(
            request_line(&mut c, req),
            "-NOAUTH Authentication required.\r\n"
        );
    }
    let wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    assert_eq!(request_line(&mut c, b"AUTH wrong\r\n"), wrongpass);
    assert_eq!(request_line(&mut c, b"AUTH someone s3cret\r\n"), wrongpass);
    assert_eq!(request_line(&mut c, b"AUTH s3cre\r\n"), wrongpass);
    assert!(request_line(&mut c, b"HELLO 3\r\n").starts_with("-NOAUTH"));
    assert_eq!(
        request_line(&mut c, b"GET a\r\n"),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(request_line(&mut c, b"AUTH s3cret\r\n"), "+OK\r\n");
    assert_eq!(request_line(&mut c, b"GET a\r\n"), "$-1\r\n");
    assert_eq!(request_line(&mut c, b"SET a 1\r\n"), "+OK\r\n");
    // HELLO can authenticate, as `AUTH default <password>` can.
    let mut c = s.raw();
    assert!(request_line(&mut c, b"HELLO 3 AUTH default s3cret\r\n").starts_with("%7\r\n"));
    let mut c = s.raw();
    assert_eq!(request_line(&mut c, b"AUTH default s3cret\r\n"), "+OK\r\n");
    // Before AUTH, a large request is refused and closes the connection,
    // so a stranger cannot make the server hold `max-query` bytes.
    let mut c = s.raw();
    let eleven: Vec<&[u8]> = vec![b"MGET"; 11];
    let (r, closed) = send_and_read_to_close(&mut c, &resp(&eleven));
    assert!(
        r.starts_with("-ERR Protocol error: unauthenticated multibulk length"),
        "{r}"
    );
    assert!(closed);
    let mut c = s.raw();
    let (r, closed) = send_and_read_to_close(&mut c, b"*2\r\n$3\r\nGET\r\n$20000\r\n");
    assert!(
        r.starts_with("-ERR Protocol error: unauthenticated bulk length"),
        "{r}"
    );
    assert!(closed);
    // The client library with the password in its URL.
    let mut con = s.client();
    let v: String = redis::cmd("GET").arg("a").query(&mut con).unwrap();
    assert_eq!(v, "1");
    // ... and with a wrong one.
    let bad = redis::Client::open(format!("redis://:nope@{}/", s.addr)).unwrap();
    let err = bad
        .get_connection()
        .err()
        .expect("connected with a wrong password");
    assert_eq!(err.kind(), redis::ErrorKind::AuthenticationFailed, "{err}");
}

#[test]
fn auth_without_a_password_configured_is_an_error() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.raw();
    let r = request_line(&mut c, b"AUTH x\r\n");
    assert!(
        r.starts_with("-ERR AUTH <password> called without any password configured"),
        "{r}"
    );
    assert_eq!(request_line(&mut c, b"PING\r\n"), "+PONG\r\n");
}

#[test]
fn a_non_loopback_address_without_a_password_is_refused_at_start() {
    let dir = tempdir();
    let (status, printed) = serve_to_exit(dir.path(), &Map::default(), "0.0.0.0:0");
    assert!(!status.success(), "{}", printed.all());
    let err = printed.stderr();
    assert!(
        err.contains("--listen 0.0.0.0:0: not a loopback address and server.password is not set"),
        "{}",
        printed.all()
    );
    assert!(
        !printed.stdout().contains("listening on"),
        "{}",
        printed.all()
    );
    // Nothing was formatted either.
    assert!(!dir.path().join("data/wal0.img").exists());

    // With a password it starts (and is reached through loopback).
    let map = Map {
        password: Some("pw".into()),
        ..Map::default()
    };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_stria"));
    map.write(dir.path());
    child
        .args(["serve", "--config", "stria.yaml", "--listen", "0.0.0.0:0"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = child.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let port = loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(n > 0, "stria serve ended before listening");
        if let Some(a) = line.trim().strip_prefix("listening on 0.0.0.0:") {
            break a.parse::<u16>().unwrap();
        }
    };
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(request_line(&mut c, b"PING\r\n").starts_with("-NOAUTH"));
    let _ = child.kill();
    let _ = child.wait();
}

/// Bytes a fuzzing client sends: plain noise, noise after a RESP header,
/// and well-formed requests of harmless commands with bytes flipped.
fn garbage(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = rng.random_range(512..8192);
    let mut out = Vec::with_capacity(len + 64);
    match rng.random_range(0..4) {
        0 => {
            out.resize(len, 0);
            rng.fill_bytes(&mut out);
        }
        1 => {
            let head = [b'*', b'$', b'+', b':', b'%', b'\r', b'\n'];
            while out.len() < len {
                out.push(head[rng.random_range(0..head.len())]);
                let digits = rng.random_range(0..12);
                for _ in 0..digits {
                    out.push(b"-0123456789"[rng.random_range(0..11)]);
                }
                if rng.random_bool(0.7) {
                    out.extend_from_slice(b"\r\n");
                }
                let noise = rng.random_range(0..32);
                for _ in 0..noise {
                    out.push(rng.random());
                }
            }
        }
        _ => {
            // Read-only or harmless commands only, so a flipped byte can
            // hardly turn one into a write of the keys the test keeps.
            const CMDS: &[&[&[u8]]] = &[
                &[b"GET", b"keep:1"],
                &[b"PING"],
                &[b"ECHO", b"hello"],
                &[b"HGET", b"h", b"f"],
                &[b"SCAN", b"0", b"COUNT", b"5"],
                &[b"TYPE", b"keep:2"],
                &[b"EXISTS", b"x", b"y"],
                &[b"INFO", b"clients"],
                &[b"HELLO", b"3"],
                &[b"CLIENT", b"LIST"],
                &[b"MGET", b"keep:3", b"keep:4"],
                &[b"COMMAND", b"DOCS", b"get"],
            ];
            while out.len() < len {
                let cmd = CMDS[rng.random_range(0..CMDS.len())];
                let mut req = resp(cmd);
                let flips = rng.random_range(0..3);
                for _ in 0..flips {
                    let at = rng.random_range(0..req.len());
                    req[at] = rng.random();
                }
                out.extend_from_slice(&req);
            }
        }
    }
    out
}

#[test]
fn random_garbage_never_crashes_the_server_or_touches_data() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("SET")
            .arg(format!("keep:{i}"))
            .arg(format!("v{i}"))
            .ignore();
    }
    p.cmd("HSET").arg("keep:h").arg("f").arg("v").ignore();
    p.query::<()>(&mut c).unwrap();

    let seed = std::env::var("STRIA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s = s;
    for round in 0..12 {
        // A few connections at once, each with its own garbage.
        let batch: Vec<Vec<u8>> = (0..6).map(|_| garbage(&mut rng)).collect();
        let threads: Vec<_> = batch
            .into_iter()
            .map(|bytes| {
                let mut conn = s.raw();
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                std::thread::spawn(move || {
                    let _ = conn.write_all(&bytes);
                    // Whatever it makes of it, it must end the
                    // connection once the client is done.
                    let _ = conn.shutdown(Shutdown::Write);
                    read_to_close(&mut conn).1
                })
            })
            .collect();
        for t in threads {
            let closed = t.join().unwrap();
            assert!(
                closed,
                "seed {seed} round {round}: a connection stayed open"
            );
        }
        assert!(
            s.alive(),
            "seed {seed} round {round}: the server died\n{}",
            s.printed.all()
        );
        still_serves(&s);
    }
    let mut c = s.client();
    let got: Vec<String> = {
        let mut cmd = redis::cmd("MGET");
        for i in 0..200 {
            cmd.arg(format!("keep:{i}"));
        }
        cmd.query(&mut c).unwrap()
    };
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, format!("v{i}"), "seed {seed}: keep:{i}");
    }
    let f: String = redis::cmd("HGET")
        .arg("keep:h")
        .arg("f")
        .query(&mut c)
        .unwrap();
    assert_eq!(f, "v");
    let printed = s.stop();
    assert!(!printed.stderr().contains("panicked"), "{}", printed.all());
}
