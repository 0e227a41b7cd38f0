//! Lists, sets and sorted sets through a client, with Redis's replies and
//! errors, and their metadata agreeing with their elements.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::{e, info_u64, q};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn list_commands_as_redis_answers_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "l", "b", "c", "d"]), 3);
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "l", "a", "z"]), 5);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["z", "a", "b", "c", "d"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "-2", "100"]),
        ["c", "d"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "3", "1"]),
        Vec::<String>::new()
    );
    assert_eq!(q::<String>(&mut c, &["LINDEX", "l", "-1"]), "d");
    assert_eq!(q::<Option<String>>(&mut c, &["LINDEX", "l", "5"]), None);
    assert_eq!(q::<String>(&mut c, &["LPOP", "l"]), "z");
    assert_eq!(q::<Vec<String>>(&mut c, &["RPOP", "l", "2"]), ["d", "c"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LPOP", "l", "0"]),
        Vec::<String>::new()
    );
    assert_eq!(q::<i64>(&mut c, &["LLEN", "l"]), 2);
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "nope", "x"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["RPUSHX", "l", "e"]), 3);
    // Inside the list: LINSERT, LSET, LREM, LPOS.
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "BEFORE", "b", "x"]), 4);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "AFTER", "e", "x"]), 5);
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "l", "AFTER", "nope", "y"]),
        -1
    );
    assert_eq!(
        q::<i64>(&mut c, &["LINSERT", "nokey", "AFTER", "a", "y"]),
        0
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["a", "x", "b", "e", "x"]
    );
    q::<()>(&mut c, &["LSET", "l", "0", "A"]);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "l", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "l", "x", "RANK", "-1"]), 4);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "l", "x", "COUNT", "0"]),
        [1, 4]
    );
    assert_eq!(
        q::<Option<i64>>(&mut c, &["LPOS", "l", "x", "MAXLEN", "1"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "-1", "x"]), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["A", "x", "b", "e"]
    );
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "0", "x"]), 1);
    q::<()>(&mut c, &["LTRIM", "l", "1", "-1"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["b", "e"]
    );
    // Between lists.
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "l", "m", "LEFT", "RIGHT"]),
        "b"
    );
    assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", "l", "m"]), "e");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]), 0);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "m", "0", "-1"]),
        ["e", "b"]
    );
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "m", "m", "LEFT", "RIGHT"]),
        "e"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "m", "0", "-1"]),
        ["b", "e"]
    );
    assert_eq!(
        q::<(String, Vec<String>)>(&mut c, &["LMPOP", "2", "l", "m", "RIGHT", "COUNT", "5"]),
        ("m".into(), strings(&["e", "b"]))
    );
    assert_eq!(q::<Value>(&mut c, &["LMPOP", "1", "m", "LEFT"]), Value::Nil);
    // Errors, as Redis words them; nothing is written.
    q::<()>(&mut c, &["RPUSH", "k", "1", "2"]);
    for (args, err) in [
        (&["LSET", "k", "5", "x"][..], "ERR index out of range"),
        (&["LSET", "none", "0", "x"], "ERR no such key"),
        (&["LINSERT", "k", "MIDDLE", "1", "x"], "ERR syntax error"),
        (&["LPOP", "k", "-1"], "ERR value is out of range, must be positive"),
        (&["LPOS", "k", "1", "RANK", "0"], "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"),
        (&["LPOS", "k", "1", "COUNT", "-1"], "ERR COUNT can't be negative"),
        (&["LRANGE", "k", "a", "1"], "ERR value is not an integer or out of range"),
        (&["LMPOP", "0", "k", "LEFT"], "ERR numkeys should be greater than 0"),
        (&["LMPOP", "1", "k", "UP"], "ERR syntax error"),
        (&["LMOVE", "k", "m", "UP", "LEFT"], "ERR syntax error"),
    ] {
        assert_eq!(e(&mut c, args), err, "{args:?}");
    }
    q::<()>(&mut c, &["SET", "s", "v"]);
    for args in [
        &["LPUSH", "s", "x"][..],
        &["LRANGE", "s", "0", "1"],
        &["LLEN", "s"],
        &["LMOVE", "k", "s", "LEFT", "LEFT"],
    ] {
        assert_eq!(e(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "k", "0", "-1"]),
        ["1", "2"]
    );
}

#[test]
fn set_commands_as_redis_answers_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(q::<i64>(&mut c, &["SADD", "a", "1", "2", "3", "2"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SADD", "a", "3", "4"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "a"]), 4);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "a", "4"]), 1);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "a", "4", "9"]),
        [1, 0]
    );
    assert_eq!(q::<i64>(&mut c, &["SREM", "a", "4", "9", "4"]), 1);
    let sorted = |c: &mut redis::Connection, args: &[&str]| {
        let mut v: Vec<String> = q(c, args);
        v.sort();
        v
    };
    // Members come in no particular order, as in Redis.
    assert_eq!(sorted(&mut c, &["SMEMBERS", "a"]), ["1", "2", "3"]);
    q::<i64>(&mut c, &["SADD", "b", "2", "3", "5"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["SINTER", "a", "b"]), ["2", "3"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SUNION", "a", "b"]),
        ["1", "2", "3", "5"]
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["SDIFF", "a", "b"]), ["1"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SINTER", "a", "nope"]),
        Vec::<String>::new()
    );
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "dst", "a", "b"]), 2);
    assert_eq!(sorted(&mut c, &["SMEMBERS", "dst"]), ["2", "3"]);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "dst", "a", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "dst", "a", "b"]), 4);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["SINTERCARD", "2", "a", "b", "LIMIT", "1"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "b"]), 4);
    // Random members are members, distinct for a positive count.
    let all = strings(&["1", "2", "3", "5"]);
    let got: Vec<String> = q(&mut c, &["SRANDMEMBER", "b", "10"]);
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|m| all.contains(m)));
    let got: Vec<String> = q(&mut c, &["SRANDMEMBER", "b", "-10"]);
    assert_eq!(got.len(), 10);
    let popped: Vec<String> = q(&mut c, &["SPOP", "b", "3"]);
    assert_eq!(popped.len(), 3);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "b"]), 1);
    let last: String = q(&mut c, &["SPOP", "b"]);
    assert!(all.contains(&last) && !popped.contains(&last));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "b"]), 0);
    // SSCAN visits every member once.
    let members: Vec<String> = (0..100).map(|i| format!("m{i}")).collect();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big").arg(&members);
    cmd.query::<i64>(&mut c).unwrap();
    let (mut cursor, mut seen) = ("0".to_string(), Vec::<String>::new());
    loop {
        let (next, batch): (String, Vec<String>) = redis::cmd("SSCAN")
            .arg("big")
            .arg(&cursor)
            .arg("COUNT")
            .arg(7)
            .query(&mut c)
            .unwrap();
        seen.extend(batch);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    seen.sort();
    let mut want = members.clone();
    want.sort();
    assert_eq!(seen, want);
    for (args, err) in [
        (
            &["SPOP", "a", "-1"][..],
            "ERR value is out of range, must be positive",
        ),
        (
            &["SINTERCARD", "0", "a"],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["SINTERCARD", "3", "a"],
            "ERR Number of keys can't be greater than number of args",
        ),
        (
            &["SINTERCARD", "1", "a", "LIMIT", "-1"],
            "ERR LIMIT can't be negative",
        ),
    ] {
        assert_eq!(e(&mut c, args), err, "{args:?}");
    }
    q::<()>(&mut c, &["SET", "s", "v"]);
    for args in [
        &["SADD", "s", "x"][..],
        &["SMEMBERS", "s"],
        &["SINTER", "a", "s"],
        &["SMOVE", "a", "s", "2"],
    ] {
        assert_eq!(e(&mut c, args), WRONGTYPE, "{args:?}");
    }
}

#[test]
fn popping_a_large_set_one_member_at_a_time_hands_out_each_member_once() {
    // Pops of a large set read members ahead (a run from a random point):
    // one removed, moved or deleted meanwhile is never handed out, one
    // added meanwhile is, and the set's count stays its members'.
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut model: BTreeSet<String> = (0..3000).map(|i| format!("m{i}")).collect();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big").arg(model.iter().collect::<Vec<_>>());
    assert_eq!(cmd.query::<i64>(&mut c).unwrap(), 3000);
    let mut popped = BTreeSet::new();
    let mut added = 0;
    let mut round = 0;
    while !model.is_empty() {
        round += 1;
        // Several pops in one request: the later ones see the earlier
        // ones' deletes before they are in the engine.
        let mut p = redis::pipe();
        for _ in 0..5 {
            p.cmd("SPOP").arg("big");
        }
        let got: Vec<Option<String>> = p.query(&mut c).unwrap();
        for m in got.into_iter().flatten() {
            assert!(model.remove(&m), "round {round}: {m} is not a member");
            assert!(popped.insert(m.clone()), "round {round}: {m} popped twice");
        }
        let remove =
            |c: &mut redis::Connection, model: &mut BTreeSet<String>, gone: Vec<String>| {
                for m in &gone {
                    model.remove(m);
                }
                let mut cmd = redis::cmd("SREM");
                cmd.arg("big").arg(&gone);
                assert_eq!(cmd.query::<i64>(c).unwrap(), gone.len() as i64);
            };
        // Take away half the set after the first pops: a run read ahead
        // then holds members that are gone.
        if round == 1 {
            let gone = model.iter().step_by(2).cloned().collect();
            remove(&mut c, &mut model, gone);
        }
        if round % 3 == 0 {
            let gone = model.iter().take(4).cloned().collect();
            remove(&mut c, &mut model, gone);
            if let Some(m) = model.iter().nth(7).cloned() {
                assert_eq!(q::<i64>(&mut c, &["SMOVE", "big", "other", &m]), 1);
                model.remove(&m);
            }
        }
        if round % 4 == 0 && added < 200 {
            let m = format!("new{added}");
            added += 1;
            assert_eq!(q::<i64>(&mut c, &["SADD", "big", &m]), 1);
            model.insert(m);
        }
        assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), model.len() as i64);
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "big"]), 0);
    assert!(popped.iter().filter(|m| m.starts_with("new")).count() > 0);
    // A set deleted and made again under the same name: what was read
    // ahead of the old one is never handed out.
    let mut cmd = redis::cmd("SADD");
    cmd.arg("again")
        .arg((0..2000).map(|i| format!("a{i}")).collect::<Vec<_>>());
    cmd.query::<i64>(&mut c).unwrap();
    let first: String = q(&mut c, &["SPOP", "again"]);
    assert!(first.starts_with('a'));
    q::<i64>(&mut c, &["DEL", "again"]);
    let mut cmd = redis::cmd("SADD");
    cmd.arg("again")
        .arg((0..2000).map(|i| format!("b{i}")).collect::<Vec<_>>());
    cmd.query::<i64>(&mut c).unwrap();
    for _ in 0..50 {
        let m: String = q(&mut c, &["SPOP", "again"]);
        assert!(m.starts_with('b'), "{m} is from the deleted set");
    }
    assert_eq!(q::<i64>(&mut c, &["SCARD", "again"]), 1950);
}

#[test]
fn pops_of_two_large_sets_in_turn_hand_out_only_members() {
    // Each set's pops check their run against what the shard knows of
    // the last scan ahead: popping two sets in turn replaces it at every
    // seek, and members removed meanwhile from either set are never
    // handed out, whether the check knows without a read or reads.
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let mut models: Vec<BTreeSet<String>> = ["x", "y"]
        .iter()
        .map(|t| (0..2500).map(|i| format!("{t}{i}")).collect())
        .collect();
    for (key, model) in ["sx", "sy"].iter().zip(&models) {
        let mut cmd = redis::cmd("SADD");
        cmd.arg(key).arg(model.iter().collect::<Vec<_>>());
        assert_eq!(cmd.query::<i64>(&mut c).unwrap(), 2500);
    }
    let mut popped = BTreeSet::new();
    let mut round = 0;
    while models.iter().any(|m| m.len() > 1100) {
        round += 1;
        let mut p = redis::pipe();
        for i in 0..6 {
            p.cmd("SPOP").arg(["sx", "sy"][i % 2]);
        }
        let got: Vec<Option<String>> = p.query(&mut c).unwrap();
        for (i, m) in got.into_iter().enumerate() {
            let m = m.expect("a member");
            assert!(
                models[i % 2].remove(&m),
                "round {round}: {m} is not a member"
            );
            assert!(popped.insert(m.clone()), "round {round}: {m} popped twice");
        }
        // Members of both sets go, some in the same request as pops.
        for (key, model) in ["sx", "sy"].iter().zip(models.iter_mut()) {
            let gone: Vec<String> = model.iter().skip(round % 7).step_by(97).cloned().collect();
            let mut p = redis::pipe();
            p.cmd("SPOP").arg(key);
            p.cmd("SREM").arg(key).arg(&gone);
            let (m, n): (String, i64) = p.query(&mut c).unwrap();
            // The pop ran before the removal.
            let was = gone.contains(&m);
            assert!(model.remove(&m), "round {round}: {m} is not a member");
            assert!(popped.insert(m), "round {round}: popped twice");
            for g in &gone {
                model.remove(g);
            }
            assert_eq!(n, gone.len() as i64 - i64::from(was));
            assert_eq!(q::<i64>(&mut c, &["SCARD", key]), model.len() as i64);
        }
    }
}

#[test]
fn popping_a_list_from_its_block_files_hands_out_each_element_once_in_order() {
    // Pops of elements the memstores no longer hold read the next ones
    // ahead, from both ends: an element set, pushed or popped meanwhile,
    // or a list made again under the same name, is what the pops see.
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let value = |tag: &str, i: usize| format!("{tag}{i:05}{}", "x".repeat(1000));
    let push = |c: &mut redis::Connection, key: &str, values: &[String]| {
        for chunk in values.chunks(100) {
            let mut cmd = redis::cmd("RPUSH");
            cmd.arg(key).arg(chunk);
            cmd.query::<i64>(c).unwrap();
        }
    };
    let flushed = |c: &mut redis::Connection, past: u64| {
        let until = Instant::now() + Duration::from_secs(60);
        while info_u64(c, "persistence", "flushes") <= past {
            assert!(Instant::now() < until, "no memstore was flushed");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut model: VecDeque<String> = (0..3000).map(|i| value("e", i)).collect();
    push(&mut c, "q", model.make_contiguous());
    // 3 MiB of elements: the first are in a block file.
    flushed(&mut c, 0);
    let mut round = 0;
    while !model.is_empty() {
        round += 1;
        let mut p = redis::pipe();
        for _ in 0..4 {
            p.cmd("LPOP").arg("q");
            p.cmd("RPOP").arg("q");
        }
        let got: Vec<Option<String>> = p.query(&mut c).unwrap();
        for (i, g) in got.into_iter().enumerate() {
            let want = if i % 2 == 0 {
                model.pop_front()
            } else {
                model.pop_back()
            };
            assert!(
                g == want,
                "round {round}, pop {i}: {g:.20?} where {want:.20?}"
            );
        }
        if round % 7 == 0 && model.len() > 10 {
            // Elements a window read ahead holds, set anew.
            let (a, b) = (value("set", round), value("tes", round));
            assert_eq!(q::<String>(&mut c, &["LSET", "q", "3", &a]), "OK");
            assert_eq!(q::<String>(&mut c, &["LSET", "q", "-3", &b]), "OK");
            let n = model.len();
            model[3] = a;
            model[n - 3] = b;
        }
        if round % 11 == 0 {
            let (a, b) = (value("left", round), value("right", round));
            q::<i64>(&mut c, &["LPUSH", "q", &a]);
            q::<i64>(&mut c, &["RPUSH", "q", &b]);
            model.push_front(a);
            model.push_back(b);
        }
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "q"]), 0);
    let hits = info_u64(&mut c, "memory", "read_ahead_hits");
    assert!(hits > 1000, "{hits} pops answered by a read ahead");
    // A list deleted and made again under the same name: what was read
    // ahead of the old one is never handed out.
    let old: Vec<String> = (0..3000).map(|i| value("a", i)).collect();
    let flushes = info_u64(&mut c, "persistence", "flushes");
    push(&mut c, "again", &old);
    flushed(&mut c, flushes);
    assert!(q::<String>(&mut c, &["LPOP", "again"]).starts_with("a00000"));
    q::<i64>(&mut c, &["DEL", "again"]);
    let new: Vec<String> = (0..100).map(|i| value("b", i)).collect();
    push(&mut c, "again", &new);
    for want in &new[..50] {
        assert!(&q::<String>(&mut c, &["LPOP", "again"]) == want);
    }
    assert_eq!(q::<i64>(&mut c, &["LLEN", "again"]), 50);
}

#[test]
fn sorted_set_commands_as_redis_answers_them() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]),
        3
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "z", "CH", "5", "a", "2", "b", "-1.5", "d"]
        ),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 4);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        ["d", "-1.5", "b", "2", "c", "3", "a", "5"]
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "d"]), "-1.5");
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "z", "a", "x"]),
        [Some("5".into()), None]
    );
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "c"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "c"]), 1);
    assert_eq!(
        q::<(i64, String)>(&mut c, &["ZRANK", "z", "a", "WITHSCORE"]),
        (3, "5".into())
    );
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "0.5", "c"]), "3.5");
    // NX, XX, GT, LT, INCR.
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "NX", "0", "a", "9", "e"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "XX", "0", "f"]), 0);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "4", "a", "6", "c"]),
        1
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "LT", "INCR", "1", "a"]),
        None
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "c"]), "6");
    // Ranges by score, rank and lex, forwards and backwards.
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGEBYSCORE", "z", "(2", "6"]),
        ["a", "c"]
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2"]
        ),
        ["b", "a"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZREVRANGEBYSCORE", "z", "+inf", "5"]),
        ["e", "c", "a"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "6", "(9", "BYSCORE", "REV"]),
        Vec::<String>::new()
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["ZRANGE", "z", "9", "5", "BYSCORE", "REV", "LIMIT", "0", "2"]
        ),
        ["e", "c"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZREVRANGE", "z", "0", "1"]),
        ["e", "c"]
    );
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "2", "(6"]), 2);
    q::<i64>(
        &mut c,
        &["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d"],
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGEBYLEX", "lex", "[b", "(d"]),
        ["b", "c"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZREVRANGEBYLEX", "lex", "+", "(b"]),
        ["d", "c"]
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["ZRANGE", "lex", "-", "+", "BYLEX", "LIMIT", "1", "1"]
        ),
        ["b"]
    );
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "lex", "-", "+"]), 4);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "lex", "[a", "[b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "copy", "z", "0", "1"]), 2);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "copy", "0", "-1"]),
        ["d", "b"]
    );
    // Pops.
    assert_eq!(q::<Vec<String>>(&mut c, &["ZPOPMIN", "z"]), ["d", "-1.5"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZPOPMAX", "z", "2"]),
        ["e", "9", "c", "6"]
    );
    assert_eq!(
        q::<(String, Vec<(String, String)>)>(
            &mut c,
            &["ZMPOP", "2", "none", "z", "MIN", "COUNT", "1"]
        ),
        ("z".into(), vec![("b".into(), "2".into())])
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1"]), ["a"]);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "x"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    // Removal by rank and score keeps both orders in step.
    for i in 0..20 {
        q::<i64>(&mut c, &["ZADD", "r", &i.to_string(), &format!("m{i:02}")]);
    }
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "r", "0", "4"]), 5);
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "r", "(15", "+inf"]),
        4
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "r"]), 11);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "r", "0", "-1"]).len(),
        11
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGEBYLEX", "r", "-", "+"]).len(),
        11
    );
    // The algebra, sets as inputs too.
    q::<i64>(&mut c, &["ZADD", "x", "1", "a", "2", "b"]);
    q::<i64>(&mut c, &["ZADD", "y", "10", "b", "20", "c"]);
    q::<i64>(&mut c, &["SADD", "plain", "c"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZUNION", "2", "x", "y", "WITHSCORES"]),
        ["a", "1", "b", "12", "c", "20"]
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "ZINTER",
                "2",
                "x",
                "y",
                "WEIGHTS",
                "2",
                "1",
                "AGGREGATE",
                "MAX",
                "WITHSCORES"
            ]
        ),
        ["b", "10"]
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["ZDIFF", "2", "x", "y"]), ["a"]);
    assert_eq!(
        q::<i64>(&mut c, &["ZUNIONSTORE", "u", "3", "x", "y", "plain"]),
        3
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "u", "c"]), "21");
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "x", "y"]), 1);
    let got: Vec<String> = q(&mut c, &["ZRANDMEMBER", "u", "5"]);
    assert_eq!(got.len(), 3);
    for (args, err) in [
        (
            &["ZADD", "x", "NX", "XX", "1", "a"][..],
            "ERR XX and NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "x", "GT", "LT", "1", "a"],
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "x", "INCR", "1", "a", "2", "b"],
            "ERR INCR option supports a single increment-element pair",
        ),
        (&["ZADD", "x", "one", "a"], "ERR value is not a valid float"),
        (&["ZADD", "x", "1", "a", "2"], "ERR syntax error"),
        (
            &["ZRANGEBYSCORE", "x", "a", "1"],
            "ERR min or max is not a float",
        ),
        (
            &["ZRANGEBYLEX", "x", "a", "+"],
            "ERR min or max not valid string range item",
        ),
        (
            &["ZRANGE", "x", "0", "1", "LIMIT", "0", "1"],
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            &["ZUNIONSTORE", "u", "0", "x"],
            "ERR at least 1 input key is needed for 'zunionstore' command",
        ),
        (
            &["ZPOPMIN", "x", "-1"],
            "ERR value is out of range, must be positive",
        ),
    ] {
        assert_eq!(e(&mut c, args), err, "{args:?}");
    }
    q::<()>(&mut c, &["SET", "s", "v"]);
    for args in [
        &["ZADD", "s", "1", "a"][..],
        &["ZRANGE", "s", "0", "1"],
        &["ZUNION", "2", "x", "s"],
    ] {
        assert_eq!(e(&mut c, args), WRONGTYPE, "{args:?}");
    }
}

/// A collection deleted, expired or overwritten is one write, and a new
/// one under the name starts empty.
#[test]
fn sorted_set_ranges_end_where_their_bounds_do() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let r = |c: &mut redis::Connection, args: &[&str]| q::<Vec<String>>(c, args);
    q::<i64>(
        &mut c,
        &[
            "ZADD", "e", "1", "a", "1", "b", "2", "c", "2", "d", "3", "e", "+inf", "z", "0", "zero",
        ],
    );
    assert_eq!(
        r(&mut c, &["ZRANGEBYSCORE", "e", "1", "2"]),
        ["a", "b", "c", "d"]
    );
    assert_eq!(r(&mut c, &["ZRANGEBYSCORE", "e", "(1", "2"]), ["c", "d"]);
    assert_eq!(r(&mut c, &["ZRANGEBYSCORE", "e", "1", "(2"]), ["a", "b"]);
    assert!(r(&mut c, &["ZRANGEBYSCORE", "e", "(1", "(2"]).is_empty());
    assert!(r(&mut c, &["ZRANGEBYSCORE", "e", "(1", "(1"]).is_empty());
    assert!(r(&mut c, &["ZRANGEBYSCORE", "e", "2", "1"]).is_empty());
    assert!(r(&mut c, &["ZRANGEBYSCORE", "e", "-inf", "(0"]).is_empty());
    assert_eq!(r(&mut c, &["ZRANGEBYSCORE", "e", "-0", "0"]), ["zero"]);
    assert_eq!(r(&mut c, &["ZRANGEBYSCORE", "e", "3", "+inf"]), ["e", "z"]);
    assert_eq!(r(&mut c, &["ZRANGEBYSCORE", "e", "+inf", "+inf"]), ["z"]);
    assert_eq!(
        r(&mut c, &["ZREVRANGEBYSCORE", "e", "(3", "(1"]),
        ["d", "c"]
    );
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "e", "(0", "(+inf"]), 5);
    // A member and the same bytes followed by a zero byte, of one score.
    q::<i64>(
        &mut c,
        &["ZADD", "nul", "0", "a", "0", "a\0", "0", "ab", "0", "b"],
    );
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "nul", "a\0"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "nul", "b"]), 3);
    assert_eq!(r(&mut c, &["ZRANGEBYLEX", "nul", "[a", "[a"]), ["a"]);
    assert_eq!(
        r(&mut c, &["ZRANGEBYLEX", "nul", "[a", "(ab"]),
        ["a", "a\0"]
    );
    assert_eq!(
        r(&mut c, &["ZRANGEBYLEX", "nul", "(a", "[ab"]),
        ["a\0", "ab"]
    );
    assert_eq!(r(&mut c, &["ZRANGEBYLEX", "nul", "-", "[a"]), ["a"]);
    assert!(r(&mut c, &["ZRANGEBYLEX", "nul", "[b", "[a"]).is_empty());
    assert!(r(&mut c, &["ZRANGEBYLEX", "nul", "(a", "(a"]).is_empty());
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "nul", "(a", "+"]), 3);
    // Ranges longer than a scan's chunk.
    let mut add = vec!["ZADD".to_string(), "big".into()];
    for i in 0..3000 {
        add.push(i.to_string());
        add.push(format!("m{i:05}"));
    }
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(&mut c, &add), 3000);
    let got = r(&mut c, &["ZRANGEBYSCORE", "big", "10", "2500"]);
    assert_eq!(got.len(), 2491);
    assert_eq!((got[0].as_str(), got[2490].as_str()), ("m00010", "m02500"));
    assert_eq!(
        r(
            &mut c,
            &[
                "ZRANGEBYSCORE",
                "big",
                "(1500",
                "+inf",
                "LIMIT",
                "1200",
                "2"
            ]
        ),
        ["m02701", "m02702"]
    );
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "big", "m02999"]), 2999);
    let lex = r(&mut c, &["ZRANGEBYLEX", "big", "[m00100", "(m02100"]);
    assert_eq!(lex.len(), 2000);
}

#[test]
fn deleting_a_collection_of_any_size_is_one_write() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let members: Vec<String> = (0..5000).map(|i| format!("m{i}")).collect();
    let mut p = redis::pipe();
    p.cmd("RPUSH").arg("l").arg(&members).ignore();
    p.cmd("SADD").arg("s").arg(&members).ignore();
    let mut z = redis::cmd("ZADD");
    z.arg("z");
    for (i, m) in members.iter().enumerate() {
        z.arg(i).arg(m);
    }
    p.add_command(z).ignore();
    p.query::<()>(&mut c).unwrap();
    let records = |c: &mut redis::Connection| info_u64(c, "wal", "wal_records");
    let before = records(&mut c);
    assert_eq!(q::<i64>(&mut c, &["DEL", "l", "s"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "z", "0"]), 1);
    assert_eq!(records(&mut c) - before, 3);
    for (t, k) in [("list", "l"), ("set", "s"), ("zset", "z")] {
        assert_eq!(q::<String>(&mut c, &["TYPE", k]), "none", "{t}");
    }
    q::<i64>(&mut c, &["RPUSH", "l", "new"]);
    q::<i64>(&mut c, &["SADD", "s", "new"]);
    q::<i64>(&mut c, &["ZADD", "z", "1", "new"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["new"]
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["SMEMBERS", "s"]), ["new"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1"]),
        ["new"]
    );
}

#[test]
fn a_pop_or_a_trim_writes_the_metadata_alone_and_compaction_drops_what_it_left() {
    let dir = tempdir();
    let map = crate::compacting();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    // A queue that is never empty: each round pushes 2,000 elements of
    // 1 KiB, pops 1,000 and trims 500 more, so its block files fill with
    // elements outside its ends (of its one version), 200 MiB of them in
    // 100 rounds on a 128 MiB device, unless compactions drop them.
    let value = |i: usize| format!("{i:07}{}", "v".repeat(1000));
    let mut model: VecDeque<String> = VecDeque::new();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut round = 0;
    while round < 100 || info_u64(&mut c, "persistence", "compaction_filtered") == 0 {
        assert!(Instant::now() < deadline, "no compaction dropped anything");
        round += 1;
        let values: Vec<String> = (next..next + 2000).map(value).collect();
        next += 2000;
        for chunk in values.chunks(200) {
            let mut cmd = redis::cmd("RPUSH");
            cmd.arg("q").arg(chunk);
            cmd.query::<i64>(&mut c).unwrap();
        }
        model.extend(values);
        let popped: Vec<String> = q(&mut c, &["LPOP", "q", "1000"]);
        for p in popped {
            assert_eq!(Some(p), model.pop_front());
        }
        assert_eq!(q::<String>(&mut c, &["LTRIM", "q", "500", "-1"]), "OK");
        model.drain(..500);
    }
    q::<i64>(
        &mut c,
        &[
            "RPUSH", "l", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
        ],
    );
    let records = |c: &mut redis::Connection| info_u64(c, "wal", "wal_records");
    let before = records(&mut c);
    assert_eq!(q::<String>(&mut c, &["LPOP", "l"]), "a");
    assert_eq!(q::<Vec<String>>(&mut c, &["RPOP", "l", "2"]), ["j", "i"]);
    assert_eq!(q::<String>(&mut c, &["LTRIM", "l", "1", "-2"]), "OK");
    // The same list: the element at its new head, and the metadata.
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "l", "l", "RIGHT", "LEFT"]),
        "g"
    );
    assert_eq!(records(&mut c) - before, 5);
    let live = strings(&["g", "c", "d", "e", "f"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]), live);
    // What the pops left outside the ends is no element of a copy.
    let dump: Vec<u8> = q(&mut c, &["DUMP", "l"]);
    let mut restore = redis::cmd("RESTORE");
    restore.arg("restored").arg(0).arg(dump);
    restore.query::<()>(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["COPY", "l", "copied"]), 1);
    q::<()>(&mut c, &["RENAME", "copied", "renamed"]);
    for k in ["restored", "renamed"] {
        assert_eq!(
            q::<Vec<String>>(&mut c, &["LRANGE", k, "0", "-1"]),
            live,
            "{k}"
        );
    }
    // Positions taken back are written again.
    q::<i64>(&mut c, &["LPUSH", "l", "x", "y"]);
    q::<i64>(&mut c, &["RPUSH", "l", "z"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        strings(&["y", "x", "g", "c", "d", "e", "f", "z"])
    );

    let check = |c: &mut redis::Connection, model: &VecDeque<String>| {
        assert_eq!(q::<usize>(c, &["LLEN", "q"]), model.len());
        let all: Vec<String> = q(c, &["LRANGE", "q", "0", "-1"]);
        assert!(all.iter().eq(model.iter()), "the queue's elements");
    };
    check(&mut c, &model);
    s.stop();
    let s = Server::start(dir.path(), &map);
    let mut c = s.client();
    check(&mut c, &model);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "1"]),
        ["y", "x"]
    );
}
