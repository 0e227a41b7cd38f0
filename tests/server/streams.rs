//! Streams through a client: entries, ranges, trimming, XREAD (blocking
//! too), consumer groups with their pending lists, and a group that
//! resumes after a restart where its acknowledged replies left it.

use std::time::Duration;

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, info_u64, q};

fn ids(v: Value) -> Vec<String> {
    let Value::Array(entries) = v else {
        panic!("{v:?}")
    };
    entries
        .into_iter()
        .map(|e| match e {
            Value::Array(mut parts) => match parts.swap_remove(0) {
                Value::BulkString(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn entries_ranges_and_trimming_as_redis() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    for i in 1..=5 {
        let id: String = q(
            &mut c,
            &["XADD", "s", &format!("{i}-0"), "n", &i.to_string()],
        );
        assert_eq!(id, format!("{i}-0"));
    }
    assert_eq!(q::<String>(&mut c, &["XADD", "s", "5-*", "n", "x"]), "5-1");
    assert_eq!(
        e(&mut c, &["XADD", "s", "3-0", "n", "x"]),
        "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    );
    assert_eq!(
        e(&mut c, &["XADD", "s", "0-0", "n", "x"]),
        "ERR The ID specified in XADD must be greater than 0-0"
    );
    assert_eq!(
        e(&mut c, &["XADD", "s", "*", "n"]),
        "ERR wrong number of arguments for 'xadd' command"
    );
    assert_eq!(q::<i64>(&mut c, &["XLEN", "s"]), 6);
    assert_eq!(
        ids(q(&mut c, &["XRANGE", "s", "2", "4"])),
        ["2-0", "3-0", "4-0"]
    );
    assert_eq!(
        ids(q(&mut c, &["XRANGE", "s", "(2-0", "+", "COUNT", "2"])),
        ["3-0", "4-0"]
    );
    assert_eq!(
        ids(q(&mut c, &["XREVRANGE", "s", "+", "-", "COUNT", "2"])),
        ["5-1", "5-0"]
    );
    assert_eq!(q::<i64>(&mut c, &["XDEL", "s", "2-0", "2-0", "9-9"]), 1);
    assert_eq!(ids(q(&mut c, &["XRANGE", "s", "-", "3"])), ["1-0", "3-0"]);
    assert_eq!(q::<i64>(&mut c, &["XTRIM", "s", "MAXLEN", "3"]), 2);
    assert_eq!(
        ids(q(&mut c, &["XRANGE", "s", "-", "+"])),
        ["4-0", "5-0", "5-1"]
    );
    assert_eq!(q::<i64>(&mut c, &["XTRIM", "s", "MINID", "5"]), 1);
    assert_eq!(
        q::<Value>(&mut c, &["XADD", "none", "NOMKSTREAM", "*", "f", "v"]),
        Value::Nil
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "s"]), "stream");
    // Approximate trimming removes whole nodes of stream-node-max-entries.
    q::<()>(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "10"]);
    for _ in 0..100 {
        q::<String>(&mut c, &["XADD", "t", "*", "f", "v"]);
    }
    q::<String>(
        &mut c,
        &[
            "XADD", "t", "MAXLEN", "~", "55", "LIMIT", "30", "*", "f", "v",
        ],
    );
    assert_eq!(q::<i64>(&mut c, &["XLEN", "t"]), 71);
    assert!(
        e(&mut c, &["XTRIM", "t", "MAXLEN", "1", "LIMIT", "30"]).contains("LIMIT cannot be used")
    );
    q::<()>(&mut c, &["SET", "str", "v"]);
    assert!(e(&mut c, &["XADD", "str", "*", "f", "v"]).starts_with("WRONGTYPE"));
}

#[test]
fn xread_returns_and_waits_for_new_entries() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<String>(&mut c, &["XADD", "s", "1-0", "f", "v"]);
    let got: Value = q(&mut c, &["XREAD", "STREAMS", "s", "0"]);
    let Value::Array(streams) = got else { panic!() };
    assert_eq!(streams.len(), 1);
    assert_eq!(
        q::<Value>(&mut c, &["XREAD", "STREAMS", "s", "1-0"]),
        Value::Nil
    );
    // BLOCK with `$`: what comes after now.
    let mut r = s.client();
    let reader = std::thread::spawn(move || {
        q::<Value>(&mut r, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"])
    });
    while info_u64(&mut c, "clients", "blocked_clients") != 1 {
        std::thread::sleep(Duration::from_millis(5));
    }
    q::<String>(&mut c, &["XADD", "s", "2-0", "f", "w"]);
    let Value::Array(mut streams) = reader.join().unwrap() else {
        panic!()
    };
    let Value::Array(mut kv) = streams.remove(0) else {
        panic!()
    };
    assert_eq!(ids(kv.remove(1)), ["2-0"]);
    // A timeout.
    assert_eq!(
        q::<Value>(&mut c, &["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]),
        Value::Nil
    );
}

#[test]
fn consumer_groups_deliver_once_and_resume_after_a_restart() {
    let dir = tempdir();
    {
        let s = Server::start(dir.path(), &Map::default());
        let mut c = s.client();
        for i in 1..=4 {
            q::<String>(
                &mut c,
                &["XADD", "jobs", &format!("{i}-0"), "n", &i.to_string()],
            );
        }
        q::<()>(&mut c, &["XGROUP", "CREATE", "jobs", "g", "0"]);
        assert_eq!(
            e(&mut c, &["XGROUP", "CREATE", "jobs", "g", "0"]),
            "BUSYGROUP Consumer Group name already exists"
        );
        let read = |c: &mut redis::Connection, who: &str, n: &str| -> Vec<String> {
            let v: Value = q(
                c,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    who,
                    "COUNT",
                    n,
                    "STREAMS",
                    "jobs",
                    ">",
                ],
            );
            match v {
                Value::Nil => vec![],
                Value::Array(mut streams) => {
                    let Value::Array(mut kv) = streams.remove(0) else {
                        panic!()
                    };
                    ids(kv.remove(1))
                }
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(read(&mut c, "alice", "2"), ["1-0", "2-0"]);
        assert_eq!(read(&mut c, "bob", "1"), ["3-0"]);
        assert_eq!(q::<i64>(&mut c, &["XACK", "jobs", "g", "1-0", "9-0"]), 1);
        let summary: Vec<Value> = q(&mut c, &["XPENDING", "jobs", "g"]);
        assert_eq!(summary[0], Value::Int(2));
        // Bob takes over Alice's pending entry.
        let claimed: Value = q(
            &mut c,
            &["XCLAIM", "jobs", "g", "bob", "0", "2-0", "JUSTID"],
        );
        assert_eq!(
            claimed,
            Value::Array(vec![Value::BulkString(b"2-0".to_vec())])
        );
        assert!(e(
            &mut c,
            &["XREADGROUP", "GROUP", "nog", "x", "STREAMS", "jobs", ">"]
        )
        .starts_with("NOGROUP"));
    }
    // After a restart: the group goes on after 3-0, with Bob's two
    // pending entries.
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let v: Value = q(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "carol", "STREAMS", "jobs", ">"],
    );
    let Value::Array(mut streams) = v else {
        panic!("{v:?}")
    };
    let Value::Array(mut kv) = streams.remove(0) else {
        panic!()
    };
    assert_eq!(ids(kv.remove(1)), ["4-0"]);
    let pending: Vec<Vec<Value>> = q(&mut c, &["XPENDING", "jobs", "g", "-", "+", "10", "bob"]);
    assert_eq!(pending.len(), 2);
    let auto: Vec<Value> = q(
        &mut c,
        &[
            "XAUTOCLAIM",
            "jobs",
            "g",
            "dave",
            "0",
            "0-0",
            "COUNT",
            "10",
            "JUSTID",
        ],
    );
    assert_eq!(ids_of_list(&auto[1]), ["2-0", "3-0", "4-0"]);
    assert_eq!(q::<i64>(&mut c, &["XGROUP", "DESTROY", "jobs", "g"]), 1);
}

fn ids_of_list(v: &Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    items
        .iter()
        .map(|i| match i {
            Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect()
}
