//! MULTI, EXEC, DISCARD, WATCH and UNWATCH through a client, with Redis's
//! replies and errors; EXEC isolated from concurrent clients; SORT.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, q, read_line, resp};

fn queued(c: &mut redis::Connection, args: &[&str]) {
    assert_eq!(q::<String>(c, args), "QUEUED", "{args:?}");
}

#[test]
fn transactions_queue_run_and_abort_as_redis() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["RPUSH", "l", "a", "b"]);
    assert_eq!(q::<String>(&mut c, &["MULTI"]), "OK");
    queued(&mut c, &["LRANGE", "l", "0", "-1"]);
    queued(&mut c, &["INCR", "n"]);
    queued(&mut c, &["PING"]);
    assert_eq!(
        q::<(Vec<String>, i64, String)>(&mut c, &["EXEC"]),
        (vec!["a".into(), "b".into()], 1, "PONG".into())
    );
    // A runtime error is that command's reply; the others run.
    let mut raw = s.raw();
    let mut sent = Vec::new();
    for cmd in [&["MULTI"][..], &["INCR", "l"], &["INCR", "n"], &["EXEC"]] {
        sent.extend(resp(&cmd.iter().map(|a| a.as_bytes()).collect::<Vec<_>>()));
    }
    raw.write_all(&sent).unwrap();
    let lines: Vec<String> = (0..6).map(|_| read_line(&mut raw)).collect();
    assert_eq!(
        lines,
        [
            "+OK\r\n",
            "+QUEUED\r\n",
            "+QUEUED\r\n",
            "*2\r\n",
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ":2\r\n"
        ]
    );

    // An error while queuing aborts the EXEC, and nothing runs.
    q::<()>(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "x", "1"]);
    assert!(e(&mut c, &["NO-SUCH-COMMAND"]).starts_with("ERR unknown command"));
    assert_eq!(
        e(&mut c, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        e(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "x"]), 0);
    // ... and SAVE or SHUTDOWN, which a transaction cannot hold.
    q::<()>(&mut c, &["MULTI"]);
    assert_eq!(
        e(&mut c, &["SHUTDOWN"]),
        "ERR Command not allowed inside a transaction"
    );
    assert!(e(&mut c, &["EXEC"]).starts_with("EXECABORT"));

    // DISCARD drops the queue.
    q::<()>(&mut c, &["MULTI"]);
    queued(&mut c, &["DEL", "l"]);
    assert_eq!(q::<String>(&mut c, &["DISCARD"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["LLEN", "l"]), 2);

    // What does not nest, and what needs a MULTI.
    q::<()>(&mut c, &["MULTI"]);
    assert_eq!(e(&mut c, &["MULTI"]), "ERR MULTI calls can not be nested");
    assert_eq!(
        e(&mut c, &["WATCH", "x"]),
        "ERR WATCH inside MULTI is not allowed"
    );
    assert_eq!(q::<Vec<Value>>(&mut c, &["EXEC"]), vec![]);
    assert_eq!(e(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(e(&mut c, &["DISCARD"]), "ERR DISCARD without MULTI");
    // RESET ends a transaction.
    q::<()>(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "x", "1"]);
    q::<()>(&mut c, &["RESET"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "x"]), 0);
}

#[test]
fn watch_aborts_exec_when_a_watched_key_changed() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut other = s.client();
    let exec_ping = |c: &mut redis::Connection| -> Value {
        q::<()>(c, &["MULTI"]);
        queued(c, &["PING"]);
        q(c, &["EXEC"])
    };
    let ran = Value::Array(vec![Value::SimpleString("PONG".into())]);

    // Not written: it runs.
    q::<()>(&mut c, &["SET", "x", "30"]);
    q::<()>(&mut c, &["WATCH", "x", "y", "z"]);
    assert_eq!(exec_ping(&mut c), ran);
    // Written by another client, of any type, and by the watcher itself.
    for write in [
        &["SET", "x", "40"][..],
        &["DEL", "x"],
        &["HSET", "x", "f", "v"],
    ] {
        q::<()>(&mut c, &["WATCH", "a", "x"]);
        q::<()>(&mut other, write);
        assert_eq!(exec_ping(&mut c), Value::Nil, "after {write:?}");
    }
    q::<()>(&mut c, &["WATCH", "x"]);
    q::<()>(&mut c, &["HSET", "x", "f", "w"]);
    assert_eq!(exec_ping(&mut c), Value::Nil);
    // An element of a collection, with no change to its size.
    q::<()>(&mut c, &["RPUSH", "l", "a"]);
    q::<()>(&mut c, &["WATCH", "l"]);
    q::<()>(&mut other, &["LSET", "l", "0", "b"]);
    assert_eq!(exec_ping(&mut c), Value::Nil);
    // A score or a field overwritten (the elements written, not the
    // metadata), and a pop (the metadata alone).
    q::<()>(&mut c, &["ZADD", "zs", "1", "m"]);
    q::<()>(&mut c, &["HSET", "h", "f", "1"]);
    q::<()>(&mut c, &["RPUSH", "l", "c"]);
    for (key, write) in [
        ("zs", &["ZADD", "zs", "2", "m"][..]),
        ("zs", &["ZINCRBY", "zs", "1", "m"]),
        ("h", &["HSET", "h", "f", "2"]),
        ("h", &["HINCRBY", "h", "f", "1"]),
        ("l", &["LPOP", "l"]),
    ] {
        q::<()>(&mut c, &["WATCH", key]);
        q::<()>(&mut other, write);
        assert_eq!(exec_ping(&mut c), Value::Nil, "after {write:?}");
    }
    // EXPIRE touches; a key that expires while watched fails the EXEC.
    q::<()>(&mut c, &["SET", "x", "1"]);
    q::<()>(&mut c, &["WATCH", "x"]);
    q::<()>(&mut other, &["EXPIRE", "x", "100"]);
    assert_eq!(exec_ping(&mut c), Value::Nil);
    // WATCH must come before the expiry: a key already gone when watched
    // is no change the watcher could have missed, and EXEC runs. A loaded
    // machine can take longer than the TTL between the SET and the WATCH;
    // such a round proves nothing and is tried again.
    let ttl = std::time::Duration::from_millis(100);
    let mut in_time = false;
    for _ in 0..20 {
        let sent = std::time::Instant::now();
        q::<()>(&mut c, &["SET", "x", "1", "PX", "100"]);
        q::<()>(&mut c, &["WATCH", "x"]);
        // Less 10 ms for an expiry kept in whole milliseconds.
        if sent.elapsed() < ttl - std::time::Duration::from_millis(10) {
            in_time = true;
            break;
        }
        q::<()>(&mut c, &["UNWATCH"]);
    }
    assert!(in_time, "never watched a key within 90 ms of its SET");
    std::thread::sleep(ttl + std::time::Duration::from_millis(50));
    assert_eq!(exec_ping(&mut c), Value::Nil);
    // After an EXEC, run or not, nothing is watched; UNWATCH forgets.
    q::<()>(&mut other, &["SET", "x", "2"]);
    assert_eq!(exec_ping(&mut c), ran);
    q::<()>(&mut c, &["WATCH", "x"]);
    q::<()>(&mut other, &["SET", "x", "3"]);
    q::<()>(&mut c, &["UNWATCH"]);
    assert_eq!(exec_ping(&mut c), ran);
    // DISCARD unwatches too.
    q::<()>(&mut c, &["WATCH", "x"]);
    q::<()>(&mut other, &["SET", "x", "10"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["DISCARD"]);
    q::<()>(&mut c, &["MULTI"]);
    queued(&mut c, &["INCR", "x"]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["EXEC"]), [11]);
    // FLUSHALL touches the watched keys that existed, and no other.
    q::<()>(&mut c, &["WATCH", "x"]);
    q::<()>(&mut other, &["FLUSHALL"]);
    assert_eq!(exec_ping(&mut c), Value::Nil);
    q::<()>(&mut c, &["WATCH", "x"]);
    q::<()>(&mut other, &["FLUSHALL"]);
    assert_eq!(exec_ping(&mut c), ran);
    // A watcher that goes leaves nothing behind for the next one.
    {
        let mut gone = s.client();
        q::<()>(&mut gone, &["WATCH", "x"]);
    }
    q::<()>(&mut c, &["WATCH", "x"]);
    assert_eq!(exec_ping(&mut c), ran);
}

/// Transfers between accounts by WATCH and retry, and by plain MULTI,
/// from several clients at once, while a reader sums the accounts in
/// transactions: every sum it reads is the total, and no transfer is lost.
#[test]
fn concurrent_transactions_are_isolated() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let accounts = 8;
    let start = 100;
    let mut c = s.client();
    for a in 0..accounts {
        q::<()>(&mut c, &["SET", &format!("acct{a}"), &start.to_string()]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let mut r = s.client();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) || reads < 10 {
                q::<()>(&mut r, &["MULTI"]);
                for a in 0..accounts {
                    queued(&mut r, &["GET", &format!("acct{a}")]);
                }
                let vals: Vec<i64> = q(&mut r, &["EXEC"]);
                assert_eq!(vals.iter().sum::<i64>(), accounts * start, "{vals:?}");
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = s.client();
            std::thread::spawn(move || {
                let mut committed = 0u64;
                for i in 0..150 {
                    let a = format!("acct{}", (w + i) % accounts);
                    let b = format!("acct{}", (w * 3 + i * 5 + 1) % accounts);
                    if a == b {
                        continue;
                    }
                    if i % 2 == 0 {
                        // Optimistic: read, then write only if unchanged.
                        loop {
                            q::<()>(&mut c, &["WATCH", &a, &b]);
                            let va: i64 = q(&mut c, &["GET", &a]);
                            let vb: i64 = q(&mut c, &["GET", &b]);
                            q::<()>(&mut c, &["MULTI"]);
                            queued(&mut c, &["SET", &a, &(va - 3).to_string()]);
                            queued(&mut c, &["SET", &b, &(vb + 3).to_string()]);
                            let r: Value = q(&mut c, &["EXEC"]);
                            if r != Value::Nil {
                                break;
                            }
                        }
                    } else {
                        q::<()>(&mut c, &["MULTI"]);
                        queued(&mut c, &["DECRBY", &a, "2"]);
                        queued(&mut c, &["INCRBY", &b, "2"]);
                        q::<Vec<i64>>(&mut c, &["EXEC"]);
                    }
                    committed += 1;
                }
                committed
            })
        })
        .collect();
    for w in writers {
        assert!(w.join().unwrap() > 0);
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() >= 10);
    let total: i64 = (0..accounts)
        .map(|a| q::<i64>(&mut c, &["GET", &format!("acct{a}")]))
        .sum();
    assert_eq!(total, accounts * start);
}

#[test]
fn sort_sorts_lists_sets_and_sorted_sets_as_redis() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["RPUSH", "l", "3", "1", "10", "2"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "l"]),
        ["1", "2", "3", "10"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "l", "ALPHA", "DESC"]),
        ["3", "2", "10", "1"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "l", "LIMIT", "1", "2"]),
        ["2", "3"]
    );
    // BY other keys and GET them, a hash's field too; nosort keeps order.
    for (e, w) in [("3", "a"), ("1", "c"), ("10", "b")] {
        q::<()>(&mut c, &["SET", &format!("w_{e}"), w]);
        q::<()>(&mut c, &["HSET", &format!("h_{e}"), "f", &format!("v{e}")]);
    }
    assert_eq!(
        q::<Vec<Option<String>>>(
            &mut c,
            &["SORT", "l", "BY", "w_*", "ALPHA", "GET", "#", "GET", "h_*->f"]
        ),
        [
            Some("2".into()),
            None,
            Some("3".into()),
            Some("v3".into()),
            Some("10".into()),
            Some("v10".into()),
            Some("1".into()),
            Some("v1".into())
        ]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "l", "BY", "nosort"]),
        ["3", "1", "10", "2"]
    );
    // STORE makes a list (and an empty result deletes the key).
    assert_eq!(q::<i64>(&mut c, &["SORT", "l", "STORE", "dst"]), 4);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "dst", "0", "-1"]),
        ["1", "2", "3", "10"]
    );
    assert_eq!(q::<i64>(&mut c, &["SORT", "none", "STORE", "dst"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    q::<()>(&mut c, &["SADD", "s", "b", "a"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "s", "ALPHA"]),
        ["a", "b"]
    );
    q::<()>(&mut c, &["ZADD", "z", "1", "x", "2", "y"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SORT", "z", "BY", "nosort", "DESC"]),
        ["y", "x"]
    );
    // Errors, and nothing changed.
    assert_eq!(
        e(&mut c, &["SORT", "s"]),
        "ERR One or more scores can't be converted into double"
    );
    q::<()>(&mut c, &["SET", "str", "v"]);
    assert!(e(&mut c, &["SORT", "str"]).starts_with("WRONGTYPE"));
    assert_eq!(e(&mut c, &["SORT", "l", "LIMIT", "1"]), "ERR syntax error");
    assert_eq!(
        e(&mut c, &["SORT_RO", "l", "STORE", "d"]),
        "ERR syntax error"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
}

/// A transaction pipelined in one write, as client libraries send MULTI
/// ... EXEC, is answered by one write: the replies ready before EXEC's
/// (`+OK`, `+QUEUED`) wait for it, as Redis sends a turn's replies after
/// its fsync. Each transaction used to take two, and woke its client twice.
#[test]
fn a_transaction_pipelined_in_one_write_is_answered_in_one() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let writes = |c: &mut redis::Connection| crate::info_u64(c, "stats", "total_writes_processed");
    let before = writes(&mut c);
    const N: u64 = 50;
    for i in 0..N {
        let (n, set): (u64, i64) = redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg("n")
            .cmd("EXPIRE")
            .arg("n")
            .arg(60)
            .query(&mut c)
            .unwrap();
        assert_eq!((n, set), (i + 1, 1));
    }
    // Less the reply to the first INFO. A pipeline that reached the server
    // in two reads (rare on loopback) takes two.
    let used = writes(&mut c) - before - 1;
    assert!(
        (N..N + N / 4).contains(&used),
        "{used} writes answered {N} transactions"
    );
}
