//! `stria bench random-write` and `bench redis-compare` against a real
//! Redis (`redis-server` from Debian's redis-server package). Every test
//! prints why and passes when the Redis tools are not installed.
//!
//! Until `stria serve` exists in this build, the servers the benches start
//! are stood in for by a script that runs redis-server and prints
//! `listening on <address>` as `stria serve` does.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stria::bench::process::{self, installed, Serve};
use stria::bench::random_write::{self, RandomWriteError, RandomWriteOptions, Target};
use stria::bench::redis_compare::{self, CompareOptions};
use stria::bench::resp_client::{Reply, RespClient};
use stria::config::Config;

#[path = "common/run.rs"]
mod run;

use run::{stria, tempdir, text};

fn have(program: &str, test: &str) -> bool {
    let ok = installed(Path::new(program));
    if !ok {
        println!("{test}: skipped: {program} is not installed (Debian: redis-server, redis-tools)");
    }
    ok
}

/// A redis-server without persistence on a free port, killed when dropped.
struct Redis {
    child: Child,
    addr: SocketAddr,
}

impl Redis {
    fn start(dir: &Path) -> Redis {
        let port = process::free_port().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(20);
        while RespClient::connect(addr)
            .and_then(|mut c| c.command(&["PING"]).map_err(std::io::Error::other))
            .is_err()
        {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, addr }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn random_write_drives_a_real_redis() {
    if !have("redis-server", "random_write_drives_a_real_redis") {
        return;
    }
    let dir = tempdir();
    let redis = Redis::start(dir.path());
    let addr = redis.addr.to_string();
    let out = stria(
        dir.path(),
        &[
            "bench",
            "random-write",
            "--connect",
            &addr,
            "--rows",
            "200",
            "--runs",
            "1",
        ],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("1 client x 200 rows (keys below 200), 1000-byte values, durability not set"),
        "{t}"
    );
    assert!(t.contains("\n  1   200  "), "one row per run: {t}");
    assert!(t.contains("summary: 1 run, rows/s mean"), "{t}");

    // The rows are there: keys of ten digits below 200, 1000-byte values.
    let mut c = RespClient::connect(redis.addr).unwrap();
    match c.command(&["DBSIZE"]).unwrap() {
        Reply::Integer(n) => assert!((1..=200).contains(&n), "{n} keys"),
        other => panic!("{other:?}"),
    }
    let Reply::Array(Some(keys)) = c.command(&["KEYS", "*"]).unwrap() else {
        panic!("KEYS")
    };
    let Reply::Bulk(Some(key)) = &keys[0] else {
        panic!("{keys:?}")
    };
    assert_eq!(key.len(), 10);
    let n: u64 = std::str::from_utf8(key).unwrap().parse().unwrap();
    assert!(n < 200);
    match c.command(&[&b"STRLEN"[..], key]).unwrap() {
        Reply::Integer(len) => assert_eq!(len, 1000),
        other => panic!("{other:?}"),
    }

    // A durability level asked for and refused is fatal, and says why.
    let out = stria(
        dir.path(),
        &[
            "bench",
            "random-write",
            "--connect",
            &addr,
            "--rows",
            "10",
            "--runs",
            "1",
            "--durability",
            "sync",
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("the server refused `STRIA.DURABILITY sync`: ERR unknown command"),
        "{t}"
    );
}

#[test]
fn random_write_says_how_to_create_devices_that_are_partly_missing() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::write(
        d.join("m.yaml"),
        "appliance: t
reactors: { wal: [0], flush: [1], idle: park, spin-us: 20 }
devices:
  - { name: wal0, backend: uring, path: ./data/wal0.img, size: 4MiB, role: wal }
  - { name: data0, backend: uring, path: ./data/data0.img, size: 32MiB, role: data }
wal: { segment-size: 1MiB, max-batch: 256KiB }
",
    )
    .unwrap();
    // With none of the files, `stria serve` formats them on its first
    // start; with some missing, something is wrong and nothing is touched.
    std::fs::create_dir(d.join("data")).unwrap();
    std::fs::write(d.join("data/data0.img"), b"").unwrap();
    let out = stria(d, &["bench", "random-write", "--config", "m.yaml"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("./data/wal0.img does not exist; create the devices with `stria format --config m.yaml`"),
        "{t}"
    );
}

/// A map of file devices in `dir` (empty files: the stand-in server does
/// not open them), by a relative path when `dir` is under the current
/// directory, as in the shipped maps.
fn file_map(dir: &Path) -> Config {
    for f in ["wal0.img", "data0.img"] {
        std::fs::write(dir.join(f), b"").unwrap();
    }
    let cwd = std::env::current_dir().unwrap();
    let dir = match dir.strip_prefix(&cwd) {
        Ok(rel) => Path::new(".").join(rel),
        Err(_) => dir.to_path_buf(),
    };
    let yaml = format!(
        "appliance: t
reactors: {{ wal: [0], flush: [1], idle: park, spin-us: 20 }}
devices:
  - {{ name: wal0, backend: uring, path: {d}/wal0.img, size: 4MiB, role: wal }}
  - {{ name: data0, backend: uring, path: {d}/data0.img, size: 32MiB, role: data }}
wal: {{ segment-size: 1MiB, max-batch: 256KiB }}
",
        d = dir.display()
    );
    Config::parse(&yaml, "test map").unwrap()
}

/// A stand-in for `stria serve`: starts redis-server, waits until it
/// answers, prints `listening on <address>`, and passes SIGTERM on.
fn stand_in_serve(dir: &Path) -> Serve {
    let port = process::free_port().unwrap();
    let script = dir.join("serve.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh
redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no --dir '{d}' >/dev/null 2>&1 &
pid=$!
trap 'kill -TERM $pid; wait $pid; exit 0' TERM
until redis-cli -p {port} ping >/dev/null 2>&1; do sleep 0.05; done
echo 'listening on 127.0.0.1:{port}'
wait $pid
",
            d = dir.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    Serve {
        exe: script,
        config: None,
    }
}

#[test]
fn random_write_starts_the_server_and_sets_durability_sync() {
    let name = "random_write_starts_the_server_and_sets_durability_sync";
    if !have("redis-server", name) || !have("redis-cli", name) {
        return;
    }
    let dir = tempdir();
    let cfg = file_map(dir.path());
    let serve = stand_in_serve(dir.path());
    let opts = RandomWriteOptions {
        rows: 10,
        clients: 2,
        runs: 1,
        value_size: 100,
        durability: None,
        password: None,
        fio_seconds: None,
    };
    // The server the bench starts gets STRIA.DURABILITY sync by default,
    // which Redis refuses: proof that the server started and was reached.
    let started = Instant::now();
    let e = random_write::run(&Target::Serve(serve), &cfg, &opts, |_, _| {}).unwrap_err();
    assert!(
        matches!(&e, RandomWriteError::Client { .. })
            && e.to_string().contains("STRIA.DURABILITY sync"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn redis_compare_against_a_stand_in_and_redis() {
    let name = "redis_compare_against_a_stand_in_and_redis";
    if !have("redis-server", name) || !have("redis-cli", name) || !have("redis-benchmark", name) {
        return;
    }
    let dir = tempdir();
    let cfg = file_map(dir.path());
    let serve = stand_in_serve(dir.path());
    let opts = CompareOptions {
        requests: 200,
        data_size: 64,
        redis_server: None,
    };
    let mut lines = Vec::new();
    let report = redis_compare::run(&serve, &cfg, &opts, |l| lines.push(l.to_string())).unwrap();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(report.cases.len(), 3);
    for case in &report.cases {
        assert_eq!(case.stria.len(), 4);
        assert_eq!(case.redis.as_ref().unwrap().len(), 4);
        let redis = case.redis.as_ref().unwrap();
        assert!(
            redis
                .iter()
                .all(|r| r.cpu_us.is_some() && r.switches.is_some()),
            "{redis:?}"
        );
    }
    let t = report.to_string();
    assert!(
        t.contains("redis: appendonly yes, appendfsync always"),
        "{t}"
    );
    let rows: Vec<String> = t
        .lines()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .collect();
    for row in [
        "SET 1 1",
        "GET 1 1",
        "SET 50 1",
        "GET 50 1",
        "SET 50 16",
        "GET 50 16",
        "INCR 50 16",
        "INCR-1-KEY 50 1",
    ] {
        assert!(rows.iter().any(|r| r == row), "{row:?} in\n{t}");
    }
    assert!(report.stop_notes.is_empty(), "{:?}", report.stop_notes);
    // Redis's folder next to the WAL file is gone.
    let left: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("stria-redis-compare"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
