//! Replies held until their writes are durable are bounded per
//! connection: a client that pipelines reads of what it just wrote and
//! does not read the replies holds no one up, and the server's memory for
//! it stays near its bound (1 MiB of replies held and encoded), not the
//! size of the pipeline.

use std::io::{Read, Write};
use std::time::Duration;

use crate::harness::{tempdir, Map, Server};

/// The server's peak resident memory so far, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

#[test]
fn replies_held_for_a_client_that_does_not_read_stay_bounded() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let big = "v".repeat(60_000);
    redis::cmd("HSET")
        .arg("h")
        .arg("big")
        .arg(&big)
        .query::<()>(&mut c)
        .unwrap();
    let before = peak_kib(s.pid());
    // 2,000 times: write a field of `h` (so `h` is dirty), read all of
    // `h` (a 60 KB reply held until that write is durable). 120 MB of
    // replies the client does not read.
    let mut one = crate::resp(&[b"HSET", b"h", b"f", b"x"]);
    one.extend_from_slice(&crate::resp(&[b"HGETALL", b"h"]));
    let mut hog = s.raw();
    hog.write_all(&one.repeat(2000)).unwrap();
    // Everyone else is served meanwhile.
    let mut other = s.client();
    for i in 0..200 {
        let v: i64 = redis::cmd("INCR").arg("n").query(&mut other).unwrap();
        assert_eq!(v, i + 1);
    }
    let info: String = redis::cmd("INFO").arg("clients").query(&mut other).unwrap();
    assert!(info.contains("replies_waiting_bytes:"), "{info}");
    std::thread::sleep(Duration::from_millis(300));
    let grown = peak_kib(s.pid()).saturating_sub(before);
    assert!(
        grown < 24 << 10,
        "the server's peak memory grew by {grown} KiB for a client that does not read"
    );
    // The hog gets every reply once it reads, in order.
    let mut all = b"*4\r\n$3\r\nbig\r\n$60000\r\n".to_vec();
    all.extend_from_slice(big.as_bytes());
    all.extend_from_slice(b"\r\n$1\r\nf\r\n$1\r\nx\r\n");
    hog.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut got = vec![0u8; all.len()];
    let mut first = [0u8; 4];
    for i in 0..2000 {
        hog.read_exact(&mut first)
            .unwrap_or_else(|e| panic!("reply {i}: {e}"));
        // The first HSET adds field `f`; the others overwrite it.
        let want: &[u8] = if i == 0 { b":1\r\n" } else { b":0\r\n" };
        assert_eq!(&first[..], want, "HSET reply {i}");
        hog.read_exact(&mut got)
            .unwrap_or_else(|e| panic!("reply {i}: {e}"));
        assert!(got == all, "HGETALL reply {i}");
    }
}
