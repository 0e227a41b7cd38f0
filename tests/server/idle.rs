//! What a server does while no client waits: the keys a write-only load
//! left outside the memstores' B-trees are folded in, so the first range
//! read after the load does not stall to sort them.

use std::time::{Duration, Instant};

use crate::harness::{tempdir, Map, Server};

/// INFO `memstore`'s field `name`.
fn memstore_field(c: &mut redis::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("memstore").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {info}"))
}

#[test]
fn an_idle_server_folds_a_loads_keys_ahead_of_the_first_range() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    // 8,000 fields of one hash (a memstore's worth on this map: no flush
    // takes them away), written without a read of the hash's elements in
    // between: none of them goes into a B-tree as written.
    let fields = 8_000;
    for start in (0..fields).step_by(1000) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("big");
        for i in start..start + 1000 {
            cmd.arg(format!("f{i:06}")).arg(i);
        }
        cmd.query::<u64>(&mut c).unwrap();
    }
    // Asked only now and then: each request is a moment the server is
    // not idle.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if memstore_field(&mut c, "memstore_unfolded_keys") < 4096 {
            break;
        }
        assert!(Instant::now() < deadline, "the server never folded ahead");
    }
    // The loop did it, not a read.
    let ahead = memstore_field(&mut c, "memstore_folded_ahead");
    assert!(ahead >= (fields - 4096) as u64, "folded ahead: {ahead}");
    // Every field is there, in order, exactly once.
    let (mut cursor, mut seen) = (0u64, Vec::new());
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("HSCAN")
            .arg("big")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(&mut c)
            .unwrap();
        seen.extend(batch.chunks(2).map(|p| p[0].clone()));
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let want: Vec<String> = (0..fields).map(|i| format!("f{i:06}")).collect();
    assert_eq!(seen, want);
    assert_eq!(
        redis::cmd("HLEN").arg("big").query::<u64>(&mut c).unwrap(),
        fields as u64
    );
    s.stop();
}
