//! Commands on a shard over simulated devices, without a socket.

use std::rc::Rc;
use std::sync::Arc;

use crate::config::Durability;
use crate::device::sim::SimDevice;
use crate::engine::EngineDevices;
use crate::server::conn::{Conn, Outcome};
use crate::server::keys;
use crate::server::metrics::testing;
use crate::server::resp::{Limits, Reply};
use crate::server::shard::{Deps, Shard};
use crate::server::{Client, ServerOptions, Shared};

pub fn options() -> ServerOptions {
    ServerOptions {
        listen: ([127, 0, 0, 1], 0).into(),
        password: None,
        max_clients: 16,
        limits: Limits {
            max_bulk: 1 << 20,
            max_query: 1 << 20,
        },
        durability: Durability::Sync,
        max_key: 1024,
        max_value: 4096,
        metrics: None,
        row_cache: 1 << 20,
        wal_on_shard: true,
        config_file: "test".into(),
        map: None,
    }
}

/// A server's shared state on simulated devices `devs`, as a test
/// opens it.
pub fn shared_on(devs: &EngineDevices<SimDevice>) -> Result<Shared, String> {
    Shared::new(
        testing::open_any(devs),
        options(),
        ([127, 0, 0, 1], 0).into(),
    )
    .map_err(|e| e.to_string())
}

/// A shard of `shared` and a connection (client `id`) on it.
pub fn conn_on(shared: &Shared, id: u64) -> (Rc<Shard<'_>>, Conn<'_>) {
    let shard = Rc::new(Shard::new(&shared.engine, shared.opts.row_cache));
    let conn = Conn::new(shared, Arc::new(Client::detached(id)), shard.clone());
    (shard, conn)
}

/// Runs one command; its reply and what the reply waits for.
pub fn run_command<'a>(conn: &mut Conn<'a>, args: &[String]) -> (Reply, Deps<'a>) {
    let args = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let (_, out) = conn.dispatch(args);
    let Outcome::Reply(r) = out else {
        panic!("a data command closes nothing");
    };
    (r, std::mem::take(&mut conn.deps))
}

/// A command line's words.
pub fn words(line: &str) -> Vec<String> {
    line.split(' ').map(str::to_string).collect()
}

/// Refreshing a key's expiry over and over leaves one entry in the
/// expiry index, whichever command refreshes it.
#[test]
fn a_refreshed_expiry_leaves_one_index_entry() {
    let devs = testing::sim_devices(&testing::model(1));
    let shared = shared_on(&devs).unwrap();
    let (shard, mut conn) = conn_on(&shared, 1);
    for i in 0..20 {
        for cmd in [
            format!("SET k v EX {}", 100 + i),
            format!("SETEX k {} v", 200 + i),
            format!("EXPIRE k {}", 300 + i),
            format!("GETEX k PX {}", 400_000 + i),
        ] {
            let (r, _) = run_command(&mut conn, &words(&cmd));
            assert!(!r.is_error(), "{cmd}: {r:?}");
        }
    }
    let (r, _) = run_command(&mut conn, &words("PERSIST k"));
    assert_eq!(r, Reply::Int(1));
    run_command(&mut conn, &words("SET gone v PX 100000"));
    run_command(&mut conn, &words("EXPIRE gone 0"));
    let mut deps = Deps::default();
    let index = shard
        .scan(keys::EXPIRES, Some(&[0, 3]), 100, &mut deps)
        .unwrap();
    assert!(index.is_empty(), "{} index entries left", index.len());
    run_command(&mut conn, &words("SET k v EX 1000"));
    let index = shard
        .scan(keys::EXPIRES, Some(&[0, 3]), 100, &mut deps)
        .unwrap();
    assert_eq!(index.len(), 1);
    std::mem::forget(conn);
    std::mem::forget(shard);
}

/// DBSIZE, KEYS and a SCAN in small steps see every live key once among
/// collections whose elements fill and cross the walk's batches, deleted
/// keys whose elements are still stored, and keys of every type.
#[test]
fn the_key_walk_steps_over_elements_and_dead_keys() {
    let devs = testing::sim_devices(&testing::model(3));
    let shared = shared_on(&devs).unwrap();
    let (_shard, mut conn) = conn_on(&shared, 1);
    let mut live = std::collections::BTreeSet::new();
    for i in 0..3000 {
        let key = format!("k{i:05}");
        let cmd = match i % 4 {
            0 => format!("SET {key} v"),
            1 => format!("HSET {key} a 1 b 2"),
            2 => format!("SADD {key} x"),
            _ => format!("ZADD {key} 1 m 2 n"),
        };
        let (r, _) = run_command(&mut conn, &words(&cmd));
        assert!(!r.is_error(), "{cmd}: {r:?}");
        live.insert(key);
    }
    // Lists long enough to fill a batch of the walk with their elements.
    for key in ["k00100x", "k02000x"] {
        let elems: Vec<String> = (0..2500).map(|e| e.to_string()).collect();
        run_command(
            &mut conn,
            &words(&format!("RPUSH {key} {}", elems.join(" "))),
        );
        live.insert(key.to_string());
    }
    // Deleted keys leave their elements until compaction.
    for i in (0..3000).step_by(3) {
        let key = format!("k{i:05}");
        let (r, _) = run_command(&mut conn, &words(&format!("DEL {key}")));
        assert_eq!(r, Reply::Int(1));
        live.remove(&key);
    }
    run_command(&mut conn, &words("DEL k02000x"));
    live.remove("k02000x");
    let (r, _) = run_command(&mut conn, &words("DBSIZE"));
    assert_eq!(r, Reply::Int(live.len() as i64));
    let names = |r: Reply| -> Vec<String> {
        let Reply::Array(items) = r else {
            panic!("{r:?}")
        };
        items
            .into_iter()
            .map(|i| match i {
                Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let (r, _) = run_command(&mut conn, &words("KEYS *"));
    let mut keys = names(r);
    keys.sort();
    assert_eq!(keys, live.iter().cloned().collect::<Vec<_>>());
    let mut scanned = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (r, _) = run_command(&mut conn, &words(&format!("SCAN {cursor} COUNT 7")));
        let Reply::Array(mut parts) = r else {
            panic!("{r:?}")
        };
        let batch = parts.pop().unwrap();
        let Reply::Bulk(next) = parts.pop().unwrap() else {
            panic!("a cursor")
        };
        scanned.extend(names(batch));
        cursor = String::from_utf8(next).unwrap();
        if cursor == "0" {
            break;
        }
    }
    scanned.sort();
    assert_eq!(scanned, live.iter().cloned().collect::<Vec<_>>());
    std::mem::forget(conn);
}

/// A key a transaction writes several times is one write in its WAL
/// group, with the last value; separate commands stay separate writes.
#[test]
fn a_transaction_writes_a_key_it_writes_again_once() {
    let devs = testing::sim_devices(&testing::model(4));
    let shared = shared_on(&devs).unwrap();
    let (shard, mut conn) = conn_on(&shared, 1);
    run_command(&mut conn, &words("INCR n"));
    run_command(&mut conn, &words("INCR n"));
    assert_eq!(shard.queued_writes(), 2, "two commands, two writes");
    for cmd in ["MULTI", "INCR n", "EXPIRE n 100", "INCR n"] {
        run_command(&mut conn, &words(cmd));
    }
    let (r, _) = run_command(&mut conn, &words("EXEC"));
    assert_eq!(
        r,
        Reply::Array(vec![Reply::Int(3), Reply::Int(1), Reply::Int(4)])
    );
    // The key's metadata once, and its expiry index entry.
    assert_eq!(shard.queued_writes(), 4);
    let (r, _) = run_command(&mut conn, &words("GET n"));
    let mut out = Vec::new();
    r.encode(&mut out, 2);
    assert_eq!(out, b"$1\r\n4\r\n");
    let (r, _) = run_command(&mut conn, &words("TTL n"));
    assert_eq!(r, Reply::Int(100));
    std::mem::forget(conn);
    std::mem::forget(shard);
}
