//! What a client was told `OK` is there after a clean stop and a restart
//! on the same devices, and a clean stop leaves nothing to replay.

use std::collections::HashMap;

use redis::Connection;

use crate::harness::{tempdir, Map, Server};

fn value(i: usize) -> String {
    format!("value-{i}-{}", "x".repeat(i % 300))
}

/// Strings, hashes, counters and deletes, at `sync`.
fn write(c: &mut Connection) {
    redis::cmd("STRIA.DURABILITY")
        .arg("sync")
        .query::<()>(c)
        .unwrap();
    let mut p = redis::pipe();
    for i in 0..500 {
        p.cmd("SET").arg(format!("s{i}")).arg(value(i)).ignore();
    }
    p.query::<()>(c).unwrap();
    for h in 0..20 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(format!("h{h}"));
        for f in 0..h + 1 {
            cmd.arg(format!("f{f}")).arg(format!("{h}.{f}"));
        }
        cmd.query::<i64>(c).unwrap();
    }
    for n in 0..37 {
        redis::cmd("INCR").arg("counter").query::<i64>(c).unwrap();
        redis::cmd("INCRBY")
            .arg(format!("c{}", n % 3))
            .arg(n)
            .query::<i64>(c)
            .unwrap();
    }
    redis::cmd("DEL")
        .arg("s7")
        .arg("h3")
        .query::<i64>(c)
        .unwrap();
    redis::cmd("HDEL")
        .arg("h4")
        .arg("f0")
        .query::<i64>(c)
        .unwrap();
    redis::cmd("SET")
        .arg("h5")
        .arg("now a string")
        .query::<()>(c)
        .unwrap();
}

fn check(c: &mut Connection) {
    let got: Vec<Option<String>> = {
        let mut cmd = redis::cmd("MGET");
        for i in 0..500 {
            cmd.arg(format!("s{i}"));
        }
        cmd.query(c).unwrap()
    };
    for (i, v) in got.into_iter().enumerate() {
        if i == 7 {
            assert_eq!(v, None, "s7 was deleted");
        } else {
            assert_eq!(v.as_deref(), Some(value(i).as_str()), "s{i}");
        }
    }
    for h in 0..20 {
        if h == 5 {
            let v: String = redis::cmd("GET").arg("h5").query(c).unwrap();
            assert_eq!(v, "now a string");
            continue;
        }
        let all: HashMap<String, String> =
            redis::cmd("HGETALL").arg(format!("h{h}")).query(c).unwrap();
        let want: HashMap<String, String> = match h {
            3 => HashMap::new(),
            _ => (0..h + 1)
                .filter(|&f| !(h == 4 && f == 0))
                .map(|f| (format!("f{f}"), format!("{h}.{f}")))
                .collect(),
        };
        assert_eq!(all, want, "h{h}");
    }
    // That hashes exist is known after a restart too: a hash is seen as
    // one by TYPE and by GET.
    let t: String = redis::cmd("TYPE").arg("h6").query(c).unwrap();
    assert_eq!(t, "hash");
    let e = redis::cmd("GET").arg("h6").query::<String>(c).unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
    let n: i64 = redis::cmd("GET").arg("counter").query(c).unwrap();
    assert_eq!(n, 37);
    for k in 0..3 {
        let want: usize = (0..37).filter(|n| n % 3 == k).sum();
        let v: usize = redis::cmd("GET").arg(format!("c{k}")).query(c).unwrap();
        assert_eq!(v, want, "c{k}");
    }
    let size: usize = redis::cmd("DBSIZE").query(c).unwrap();
    assert_eq!(size, 499 + 18 + 1 + 1 + 3);
}

fn restart_keeps_everything(map: &Map, by_shutdown: bool) {
    let dir = tempdir();
    let s = Server::start(dir.path(), map);
    assert!(
        s.printed
            .stdout()
            .contains("first start: no device files yet, formatted appliance servertest"),
        "{}",
        s.printed.all()
    );
    let mut c = s.client();
    write(&mut c);
    check(&mut c);
    let printed = if by_shutdown {
        // The server closes the connection without a reply.
        let r = redis::cmd("SHUTDOWN").query::<redis::Value>(&mut c);
        assert!(r.is_err(), "SHUTDOWN replied {r:?}");
        let (status, printed) = s.wait_exit();
        assert!(status.success(), "exit {status}\n{}", printed.all());
        printed
    } else {
        s.stop()
    };
    assert!(
        printed.stdout().contains("stopped cleanly"),
        "{}",
        printed.all()
    );

    let s = Server::start(dir.path(), map);
    let out = s.printed.stdout();
    assert!(!out.contains("first start"), "{out}");
    // Everything was flushed at the stop: the log has nothing to replay.
    assert!(out.contains("replayed 0 WAL records"), "{out}");
    let mut c = s.client();
    check(&mut c);
    // And it goes on taking writes.
    redis::cmd("INCR")
        .arg("counter")
        .query::<i64>(&mut c)
        .unwrap();
    s.stop();
    let s = Server::start_after_clean_stop(dir.path(), map);
    let mut c = s.client();
    let n: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(n, 38);
    s.stop();
}

#[test]
fn sync_writes_survive_shutdown_and_restart_on_psync() {
    restart_keeps_everything(&Map::default(), true);
}

#[test]
fn sync_writes_survive_sigterm_and_restart_on_uring() {
    let map = Map {
        backend: "uring",
        ..Map::default()
    };
    restart_keeps_everything(&map, false);
}

#[test]
fn sigint_stops_cleanly_too() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    redis::cmd("SET")
        .arg("a")
        .arg("1")
        .query::<()>(&mut c)
        .unwrap();
    s.signal(libc::SIGINT);
    let (status, printed) = s.wait_exit();
    assert!(status.success(), "{}", printed.all());
    let out = printed.stdout();
    assert!(
        out.contains("SIGINT: stopping") && out.contains("stopped cleanly"),
        "{out}"
    );
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let v: String = redis::cmd("GET").arg("a").query(&mut c).unwrap();
    assert_eq!(v, "1");
}

#[test]
fn that_hashes_exist_survives_a_kill_even_when_the_first_came_at_none() {
    let dir = tempdir();
    let map = Map::default();
    let s = Server::start(dir.path(), &map);
    let mut a = s.client();
    let mut b = s.client();
    // The first hash at `none` (not logged), the second at `sync`.
    redis::cmd("STRIA.DURABILITY")
        .arg("none")
        .query::<()>(&mut a)
        .unwrap();
    redis::cmd("HSET")
        .arg("h1")
        .arg("f")
        .arg("v")
        .query::<i64>(&mut a)
        .unwrap();
    redis::cmd("HSET")
        .arg("h2")
        .arg("f")
        .arg("v")
        .query::<i64>(&mut b)
        .unwrap();
    s.kill9();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    let t: String = redis::cmd("TYPE").arg("h2").query(&mut c).unwrap();
    assert_eq!(t, "hash");
    let e = redis::cmd("GET")
        .arg("h2")
        .query::<String>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
    s.stop();
}

/// Keys as long as the formats allow (64 KiB less the encoding): through
/// the log after a kill -9, and through block files after a clean stop.
#[test]
fn keys_of_tens_of_kilobytes_survive_the_log_and_block_files() {
    let dir = tempdir();
    let map = Map {
        max_key: 64 << 10,
        ..Map::default()
    };
    let long = |c: char, n: usize| c.to_string().repeat(n);
    let (s50k, h40k, f20k) = (long('a', 50_000), long('h', 40_000), long('f', 20_000));
    let check = |c: &mut Connection| {
        let v: String = redis::cmd("GET").arg(&s50k).query(c).unwrap();
        assert_eq!(v, "1");
        let v: String = redis::cmd("HGET").arg(&h40k).arg(&f20k).query(c).unwrap();
        assert_eq!(v, "2");
        let keys: Vec<String> = redis::cmd("KEYS").arg("a*").query(c).unwrap();
        assert_eq!(keys, vec![s50k.clone()]);
    };
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    redis::cmd("SET")
        .arg(&s50k)
        .arg(1)
        .query::<()>(&mut c)
        .unwrap();
    redis::cmd("HSET")
        .arg(&h40k)
        .arg(&f20k)
        .arg(2)
        .query::<()>(&mut c)
        .unwrap();
    // A key and a field together past the limit: refused, nothing written.
    let e = redis::cmd("HSET")
        .arg(&h40k)
        .arg(long('g', 30_000))
        .arg(3)
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("memstore.max-key"), "{e}");
    check(&mut c);
    s.kill9();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    check(&mut c);
    s.stop();
    let s = Server::start_after_clean_stop(dir.path(), &map);
    let mut c = s.client();
    check(&mut c);
    let n: i64 = redis::cmd("HLEN").arg(&h40k).query(&mut c).unwrap();
    assert_eq!(n, 1);
    s.stop();
}
