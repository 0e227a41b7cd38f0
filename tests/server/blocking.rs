//! Blocking pops through clients: served when a key gets an element, in
//! the order the clients blocked, timed out with Redis's replies, not
//! blocking inside a transaction, forgotten when their client goes; and
//! producers and consumers that hand every element over exactly once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, info_u64, q};

/// Waits until `n` clients are blocked.
fn blocked(c: &mut redis::Connection, n: u64) {
    let until = Instant::now() + Duration::from_secs(10);
    while info_u64(c, "clients", "blocked_clients") != n {
        assert!(Instant::now() < until, "never {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `args` on a new client in a thread; its reply.
fn in_thread(s: &Server, args: &[&str]) -> std::thread::JoinHandle<Value> {
    let mut c = s.client();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    std::thread::spawn(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        q::<Value>(&mut c, &refs)
    })
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

#[test]
fn blocked_pops_are_served_in_order_and_time_out_as_redis() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    // An element there already: no wait.
    q::<()>(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["BLPOP", "none", "l", "0"]),
        ["l", "a"]
    );
    // Two clients wait; one push of two elements serves both, first
    // blocked first.
    let first = in_thread(&s, &["BLPOP", "l", "0"]);
    blocked(&mut c, 1);
    let second = in_thread(&s, &["BRPOP", "other", "l", "0"]);
    blocked(&mut c, 2);
    q::<()>(&mut c, &["RPUSH", "l", "x", "y"]);
    assert_eq!(
        first.join().unwrap(),
        Value::Array(vec![bulk("l"), bulk("x")])
    );
    assert_eq!(
        second.join().unwrap(),
        Value::Array(vec![bulk("l"), bulk("y")])
    );
    blocked(&mut c, 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]), 0);
    // A key moved into place serves too, and BLMOVE hands on to the next.
    let mover = in_thread(&s, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    blocked(&mut c, 1);
    let taker = in_thread(&s, &["BRPOPLPUSH", "dst", "end", "0"]);
    blocked(&mut c, 2);
    q::<()>(&mut c, &["RPUSH", "tmp", "v"]);
    q::<()>(&mut c, &["RENAME", "tmp", "src"]);
    assert_eq!(mover.join().unwrap(), bulk("v"));
    assert_eq!(taker.join().unwrap(), bulk("v"));
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "end", "0", "-1"]),
        ["v"]
    );
    // Sorted sets.
    let z = in_thread(&s, &["BZPOPMAX", "z", "0"]);
    let zm = in_thread(&s, &["BZMPOP", "0", "1", "z2", "MIN", "COUNT", "2"]);
    blocked(&mut c, 2);
    q::<()>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    q::<()>(&mut c, &["ZADD", "z2", "3", "c"]);
    assert_eq!(
        z.join().unwrap(),
        Value::Array(vec![bulk("z"), bulk("b"), bulk("2")])
    );
    assert_eq!(
        zm.join().unwrap(),
        Value::Array(vec![
            bulk("z2"),
            Value::Array(vec![Value::Array(vec![bulk("c"), bulk("3")])])
        ])
    );
    let lm = in_thread(&s, &["BLMPOP", "0", "2", "m1", "m2", "RIGHT", "COUNT", "5"]);
    blocked(&mut c, 1);
    q::<()>(&mut c, &["RPUSH", "m2", "1", "2"]);
    assert_eq!(
        lm.join().unwrap(),
        Value::Array(vec![bulk("m2"), Value::Array(vec![bulk("2"), bulk("1")])])
    );
    // Timeouts: a null array, or a null for BLMOVE and BRPOPLPUSH.
    let t = Instant::now();
    assert_eq!(q::<Value>(&mut c, &["BLPOP", "none", "0.1"]), Value::Nil);
    assert!(t.elapsed() >= Duration::from_millis(100));
    assert_eq!(
        q::<Value>(&mut c, &["BRPOPLPUSH", "none", "x", "0.05"]),
        Value::Nil
    );
    assert_eq!(
        q::<Value>(&mut c, &["BZMPOP", "0.05", "1", "none", "MAX"]),
        Value::Nil
    );
    blocked(&mut c, 0);
    // Errors, before anything blocks.
    assert_eq!(e(&mut c, &["BLPOP", "l", "-1"]), "ERR timeout is negative");
    assert_eq!(
        e(&mut c, &["BLPOP", "l", "x"]),
        "ERR timeout is not a float or out of range"
    );
    q::<()>(&mut c, &["SET", "str", "v"]);
    assert!(e(&mut c, &["BLPOP", "str", "0"]).starts_with("WRONGTYPE"));
    assert!(e(&mut c, &["BZPOPMIN", "str", "0"]).starts_with("WRONGTYPE"));
    assert_eq!(
        e(&mut c, &["BLMPOP", "0", "1", "l", "UP"]),
        "ERR syntax error"
    );
    // Inside a transaction nothing blocks.
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["BLPOP", "none", "0"]);
    q::<()>(&mut c, &["BZPOPMIN", "none", "0"]);
    assert_eq!(
        q::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
}

#[test]
fn client_unblock_ends_a_wait_as_a_timeout_or_an_error() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    for (how, want) in [("TIMEOUT", "nil"), ("ERROR", "UNBLOCKED")] {
        let mut w = s.client();
        let id: i64 = q(&mut w, &["CLIENT", "ID"]);
        let waiter = std::thread::spawn(move || {
            match redis::cmd("BLPOP")
                .arg("l")
                .arg(0)
                .query::<Option<Vec<String>>>(&mut w)
            {
                Ok(None) => "nil".to_string(),
                Ok(Some(v)) => format!("{v:?}"),
                Err(e) => e.code().unwrap_or("?").to_string(),
            }
        });
        blocked(&mut c, 1);
        assert_eq!(
            q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), how]),
            1
        );
        assert_eq!(waiter.join().unwrap(), want);
        blocked(&mut c, 0);
        // Not blocked (any more): nothing to do.
        assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]), 0);
    }
    assert_eq!(
        e(&mut c, &["CLIENT", "UNBLOCK", "1", "LATER"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
}

#[test]
fn a_blocked_client_that_goes_is_forgotten_and_others_still_served() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut raw = s.raw();
    std::io::Write::write_all(&mut raw, b"BLPOP l 0\r\n").unwrap();
    blocked(&mut c, 1);
    drop(raw);
    blocked(&mut c, 0);
    let waiter = in_thread(&s, &["BLPOP", "l", "0"]);
    blocked(&mut c, 1);
    q::<()>(&mut c, &["LPUSH", "l", "v"]);
    assert_eq!(
        waiter.join().unwrap(),
        Value::Array(vec![bulk("l"), bulk("v")])
    );
    // The element went to the one still there; nothing is left.
    assert_eq!(q::<i64>(&mut c, &["LLEN", "l"]), 0);
}

/// Ten consumers BRPOP what ten producers LPUSH: every element is
/// delivered once, none twice, none lost.
#[test]
fn producers_and_blocked_consumers_hand_over_every_element_once() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let (producers, each) = (10, 100);
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let mut c = s.client();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    let r: Option<(String, String)> = q(&mut c, &["BRPOP", "jobs", "1"]);
                    match r {
                        Some((_, v)) if v == "stop" => return got,
                        Some((_, v)) => got.push(v),
                        None => {}
                    }
                }
            })
        })
        .collect();
    let ps: Vec<_> = (0..producers)
        .map(|p| {
            let mut c = s.client();
            std::thread::spawn(move || {
                for i in 0..each {
                    q::<()>(&mut c, &["LPUSH", "jobs", &format!("{p}-{i}")]);
                }
            })
        })
        .collect();
    for p in ps {
        p.join().unwrap();
    }
    let mut c = s.client();
    for _ in 0..10 {
        q::<()>(&mut c, &["LPUSH", "jobs", "stop"]);
    }
    let mut seen = HashSet::new();
    for h in consumers {
        for v in h.join().unwrap() {
            assert!(seen.insert(v.clone()), "{v} delivered twice");
        }
    }
    assert_eq!(seen.len(), producers * each);
}

/// A client that blocks in the last command it sent before closing (its
/// end of file already read) is forgotten, not left blocked for ever.
#[test]
fn a_client_that_closes_behind_its_blocking_command_is_forgotten() {
    use std::io::Write;
    let dir = crate::harness::tempdir();
    let s = crate::harness::Server::start(dir.path(), &crate::harness::Map::default());
    let mut c = s.client();
    for _ in 0..20 {
        let mut raw = s.raw();
        let mut req = crate::resp(&[b"LPUSH", b"q", b"1"]);
        req.extend_from_slice(&crate::resp(&[b"BRPOPLPUSH", b"empty", b"b", b"0"]));
        raw.write_all(&req).unwrap();
        raw.shutdown(std::net::Shutdown::Write).unwrap();
        drop(raw);
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        // Every connection's LPUSH has run (so each has been read and has
        // blocked behind it), and none is left blocked or connected.
        let pushed: i64 = crate::q(&mut c, &["LLEN", "q"]);
        let info: String = crate::q(&mut c, &["INFO", "clients"]);
        if pushed == 20
            && info.contains("blocked_clients:0\r\n")
            && info.contains("connected_clients:1\r\n")
        {
            break;
        }
        assert!(std::time::Instant::now() < until, "{info}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(crate::q::<i64>(&mut c, &["LLEN", "q"]), 20);
}
