//! `stria device replace`: a lost WAL device (wal.copies: 2) replaced
//! offline brings the appliance back to two copies; what it refuses.

use crate::harness::{serve_to_exit, stria, tempdir, Map, Server};

fn degraded(s: &Server) -> bool {
    let mut c = s.client();
    let info: String = redis::cmd("INFO").arg("wal").query(&mut c).unwrap();
    info.contains("wal_degraded:1")
}

fn set_keys(s: &Server, from: u32, to: u32) {
    let mut c = s.client();
    for i in from..to {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(format!("v{i}"))
            .query(&mut c)
            .unwrap();
    }
}

fn check_keys(s: &Server, to: u32) {
    let mut c = s.client();
    for i in 0..to {
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, Some(format!("v{i}")), "k{i}");
    }
}

#[test]
fn a_replaced_wal_device_takes_both_copies_again() {
    let dir = tempdir();
    let map = Map {
        wal_copies: Some(2),
        ..Map::default()
    };
    let replace = |name: &str, force: bool| {
        let mut args = vec![
            "device",
            "replace",
            "--config",
            "stria.yaml",
            "--device",
            name,
        ];
        if force {
            args.push("--force");
        }
        stria(dir.path(), &args)
    };
    let s = Server::start(dir.path(), &map);
    set_keys(&s, 0, 200);
    // Refused while the appliance runs (the device locks).
    let (ok, text) = replace("wal1", true);
    assert!(!ok && text.contains("in use by another engine"), "{text}");
    s.stop();
    // Refused: a sound device, a data device, a name not in the map.
    let (ok, text) = replace("wal1", false);
    assert!(
        !ok && text.contains("still holds a valid superblock"),
        "{text}"
    );
    let (ok, text) = replace("data0", false);
    assert!(!ok && text.contains("data device"), "{text}");
    let (ok, text) = replace("wal9", false);
    assert!(!ok && text.contains("no device named"), "{text}");

    // A lost WAL device stops the start, naming the way out.
    std::fs::remove_file(dir.path().join("data/wal1.img")).unwrap();
    let (status, printed) = serve_to_exit(dir.path(), &map, "127.0.0.1:0");
    assert!(!status.success());
    assert!(
        printed.all().contains("WAL device wal1 cannot be used")
            && printed.all().contains("stria device replace"),
        "{}",
        printed.all()
    );

    let (ok, text) = replace("wal1", false);
    assert!(ok, "{text}");
    assert!(text.contains("replaced wal1"), "{text}");
    let s = Server::start(dir.path(), &map);
    assert!(!degraded(&s), "{}", s.printed.all());
    check_keys(&s, 200);
    set_keys(&s, 200, 400);
    // Killed: keys 200..400 are only in the log, on both copies again.
    s.kill9();

    // So the other device can go now: the new wal1's copies hold them.
    std::fs::remove_file(dir.path().join("data/wal0.img")).unwrap();
    let (ok, text) = replace("wal0", false);
    assert!(ok, "{text}");
    let s = Server::start(dir.path(), &map);
    check_keys(&s, 400);
    s.stop();
}
