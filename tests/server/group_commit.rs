//! A turn that will wait for the log's FLUSH looks again, before it
//! submits, for requests that arrived while it ran: their writes share its
//! group commit instead of waiting for the next.

use std::thread;
use std::time::Duration;

use crate::harness::{tempdir, Map, Server};
use crate::info_u64;

/// Client A's script writes, then runs for 1.5 s of the server's CPU
/// time; client B's write arrives 300 ms after A's request, meanwhile.
/// Both are made durable by one batch of the log, and the turn counts B
/// as gathered. Left to the next turn, B's write took a batch of its own.
#[test]
fn a_write_that_arrives_while_a_turn_runs_joins_its_group_commit() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut a = s.client();
    let mut b = s.client();
    let mut info = s.client();
    for c in [&mut a, &mut b] {
        redis::cmd("PING").query::<String>(c).unwrap();
    }
    let batches = |c: &mut redis::Connection| info_u64(c, "wal", "wal_batches");
    let gathered = |c: &mut redis::Connection| info_u64(c, "stats", "gathered_connections");
    let (batches_before, gathered_before) = (batches(&mut info), gathered(&mut info));
    let slow = thread::spawn(move || {
        let script = "redis.call('SET', KEYS[1], 'a') \
             local t0 = os.clock() \
             while os.clock() - t0 < 1.5 do end \
             return 1";
        redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg("a")
            .query::<i64>(&mut a)
            .unwrap()
    });
    thread::sleep(Duration::from_millis(300));
    redis::cmd("SET")
        .arg("b")
        .arg("b")
        .query::<()>(&mut b)
        .unwrap();
    assert_eq!(slow.join().unwrap(), 1);
    assert_eq!(
        batches(&mut info) - batches_before,
        1,
        "the script's write and the one that arrived while it ran took one batch"
    );
    assert!(gathered(&mut info) > gathered_before);
    let got: Vec<Option<String>> = redis::cmd("MGET")
        .arg("a")
        .arg("b")
        .query(&mut info)
        .unwrap();
    assert_eq!(got, [Some("a".to_string()), Some("b".to_string())]);
}
