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

/// `stria device replace` of device `name` of `dir/stria.yaml`.
fn replace(dir: &std::path::Path, name: &str, force: bool) -> (bool, String) {
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
    stria(dir, &args)
}

#[test]
fn a_replaced_wal_device_takes_both_copies_again() {
    let dir = tempdir();
    let map = Map {
        wal_copies: Some(2),
        ..Map::default()
    };
    let replace = |name: &str, force: bool| replace(dir.path(), name, force);
    let s = Server::start(dir.path(), &map);
    set_keys(&s, 0, 200);
    // While the appliance runs (the device locks), a WAL device is left to
    // its server, which this map does not say where to find (it listens on
    // another port).
    let (ok, text) = replace("wal1", true);
    assert!(!ok && text.contains("cannot be reached"), "{text}");
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

    // Without wal1 the server starts on its own, degraded: wal0 served the
    // whole time, so it holds every batch.
    std::fs::remove_file(dir.path().join("data/wal1.img")).unwrap();
    let s = Server::start(dir.path(), &map);
    assert!(degraded(&s), "{}", s.printed.all());
    check_keys(&s, 200);
    set_keys(&s, 200, 300);
    s.stop();

    let (ok, text) = replace("wal1", false);
    assert!(ok, "{text}");
    assert!(
        text.contains("replaced wal1") && text.contains("wal1 holds the log again"),
        "{text}"
    );
    let s = Server::start(dir.path(), &map);
    assert!(!degraded(&s), "{}", s.printed.all());
    check_keys(&s, 300);
    set_keys(&s, 300, 400);
    // Killed: keys 300..400 are only in the log, on both copies again.
    s.kill9();

    // So the other device can go now: the new wal1's copies hold them.
    std::fs::remove_file(dir.path().join("data/wal0.img")).unwrap();
    let s = Server::start(dir.path(), &map);
    assert!(degraded(&s), "{}", s.printed.all());
    check_keys(&s, 400);
    s.stop();
    let (ok, text) = replace("wal0", false);
    assert!(ok, "{text}");
    let s = Server::start(dir.path(), &map);
    assert!(!degraded(&s), "{}", s.printed.all());
    check_keys(&s, 400);
    s.stop();

    // Both gone: the start refuses, naming the way out.
    std::fs::remove_file(dir.path().join("data/wal0.img")).unwrap();
    std::fs::remove_file(dir.path().join("data/wal1.img")).unwrap();
    let (status, printed) = serve_to_exit(dir.path(), &map, "127.0.0.1:0");
    assert!(!status.success());
    assert!(
        printed
            .all()
            .contains("devices that cannot be used: wal0, wal1")
            && printed.all().contains("stria device replace"),
        "{}",
        printed.all()
    );
}

/// Bytes `[from, ..)` of the device file `name` overwritten with garbage:
/// its block files' copies, past the reserved MiB and the manifest.
fn garble_files(dir: &std::path::Path, name: &str) {
    let path = dir.join(format!("data/{name}.img"));
    let mut bytes = std::fs::read(&path).unwrap();
    let from = (1 << 20) + (256 << 10);
    for (i, b) in bytes[from..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
}

/// INFO's `data_devices_lost`.
fn lost_data(s: &Server) -> u64 {
    let mut c = s.client();
    let info: String = redis::cmd("INFO").arg("scrub").query(&mut c).unwrap();
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("data_devices_lost:"))
        .expect("data_devices_lost in INFO");
    line.trim().parse().unwrap()
}

/// Data blocks read from another copy of their file since the start.
fn copy_reads(s: &Server) -> u64 {
    let mut c = s.client();
    let info: String = redis::cmd("INFO").arg("scrub").query(&mut c).unwrap();
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("block_copy_reads:"))
        .expect("block_copy_reads in INFO scrub");
    line.trim().parse().unwrap()
}

#[test]
fn with_two_copies_of_each_block_file_a_lost_data_device_costs_no_key() {
    let dir = tempdir();
    let map = Map {
        file_copies: Some(2),
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    set_keys(&s, 0, 400);
    // A clean stop flushes them: block files, a copy on each data device.
    s.stop();
    // Every block file's copy on data1 is garbage: the next start reads
    // them from data0, then dies under load.
    garble_files(dir.path(), "data1");
    let s = Server::start(dir.path(), &map);
    check_keys(&s, 400);
    assert!(copy_reads(&s) > 0);
    set_keys(&s, 400, 800);
    s.kill9();

    // data1 is gone: the server starts without it, degraded, every key
    // read from data0's copies.
    let data = dir.path().join("data");
    std::fs::copy(data.join("data1.img"), data.join("data1.old")).unwrap();
    std::fs::remove_file(data.join("data1.img")).unwrap();
    let s = Server::start(dir.path(), &map);
    assert_eq!(lost_data(&s), 1, "{}", s.printed.all());
    check_keys(&s, 800);
    set_keys(&s, 800, 1000);
    // Stopped: the flushes are recorded in data0's manifest copy alone.
    s.stop();

    // The old data1 back and data0 gone: data1's manifest copy missed
    // those records (the WAL devices say so), so the start is refused.
    std::fs::rename(data.join("data1.old"), data.join("data1.img")).unwrap();
    std::fs::rename(data.join("data0.img"), data.join("data0.keep")).unwrap();
    let (status, printed) = serve_to_exit(dir.path(), &map, "127.0.0.1:0");
    assert!(!status.success());
    assert!(
        printed.all().contains("data device data0 cannot be used")
            && printed
                .all()
                .contains("copy on data device data1 may be stale"),
        "{}",
        printed.all()
    );
    // Both back: the manifest copies agree again, and every key is there.
    std::fs::rename(data.join("data0.keep"), data.join("data0.img")).unwrap();
    let s = Server::start(dir.path(), &map);
    assert_eq!(lost_data(&s), 0, "{}", s.printed.all());
    check_keys(&s, 1000);
    s.stop();

    // data1 gone again, and replaced: a new one takes a copy of every
    // block file before the command returns.
    std::fs::remove_file(data.join("data1.img")).unwrap();
    let (ok, text) = replace(dir.path(), "data1", false);
    assert!(ok, "{text}");
    assert!(
        text.contains("data1 holds a copy of every block file again"),
        "{text}"
    );

    // So data0's copies can go bad now: every key comes from data1's.
    garble_files(dir.path(), "data0");
    let s = Server::start(dir.path(), &map);
    check_keys(&s, 1000);
    assert!(copy_reads(&s) > 0);
    let mut c = s.client();
    let info: String = redis::cmd("INFO").arg("scrub").query(&mut c).unwrap();
    assert!(info.contains("block_file_copies:2"), "{info}");
    assert!(info.contains("data_devices_lost:0"), "{info}");
    s.stop();
}

/// `stria device replace` of the WAL device a running appliance lost:
/// its server writes the new device and takes it into the log without a
/// stop; once the command returns the other device may go.
#[test]
fn a_wal_device_the_running_appliance_lost_is_replaced_online() {
    let dir = tempdir();
    let map = Map {
        wal_copies: Some(2),
        ..Map::default()
    };
    let s = Server::start(dir.path(), &map);
    set_keys(&s, 0, 200);
    s.stop();
    // The appliance runs without wal1, degraded.
    std::fs::remove_file(dir.path().join("data/wal1.img")).unwrap();
    let s = Server::start(dir.path(), &map);
    assert!(degraded(&s), "{}", s.printed.all());
    set_keys(&s, 200, 300);
    let addr = s.addr.to_string();
    let online = |name: &str| {
        stria(
            dir.path(),
            &[
                "device",
                "replace",
                "--config",
                "stria.yaml",
                "--device",
                name,
                "--server",
                &addr,
            ],
        )
    };
    // A device in service is not replaced.
    let (ok, text) = online("wal0");
    assert!(!ok && text.contains("in service"), "{text}");
    let (ok, text) = online("wal1");
    assert!(ok, "{text}");
    assert!(
        text.contains("replacing wal1 online") && text.contains("wal1 holds the log again"),
        "{text}"
    );
    assert!(!degraded(&s), "{}", s.printed.all());
    // The same while running, by the command itself: nothing is lost now.
    let mut c = s.client();
    let r: redis::RedisResult<String> = redis::cmd("STRIA.DEVICE")
        .arg("REPLACE")
        .arg("wal1")
        .query(&mut c);
    assert!(r.unwrap_err().to_string().contains("in service"));
    for (name, why) in [("data0", "data device"), ("wal9", "no WAL device")] {
        let r: redis::RedisResult<String> = redis::cmd("STRIA.DEVICE")
            .arg("REPLACE")
            .arg(name)
            .query(&mut c);
        let err = r.unwrap_err().to_string();
        assert!(err.contains(why), "{err}");
    }
    set_keys(&s, 300, 400);
    // Killed: keys 300..400 are only in the log, on both copies.
    s.kill9();
    std::fs::remove_file(dir.path().join("data/wal0.img")).unwrap();
    let s = Server::start(dir.path(), &map);
    assert!(degraded(&s), "{}", s.printed.all());
    check_keys(&s, 400);
    s.stop();
}

/// With one copy of each batch a lost WAL device failed the log: the
/// running server refuses to take a new one back, saying why, and writes
/// no device.
#[test]
fn online_replacement_is_refused_with_one_copy_of_the_log() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    set_keys(&s, 0, 10);
    let mut c = s.client();
    let r: redis::RedisResult<String> = redis::cmd("STRIA.DEVICE")
        .arg("REPLACE")
        .arg("wal0")
        .query(&mut c);
    let err = r.unwrap_err().to_string();
    assert!(err.contains("wal.copies is 1"), "{err}");
    let info: String = redis::cmd("INFO").arg("wal").query(&mut c).unwrap();
    assert!(info.contains("wal_replace:none"), "{info}");
    check_keys(&s, 10);
    s.stop();
}
