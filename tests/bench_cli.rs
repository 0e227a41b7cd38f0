//! `stria bench ingest`, `bench verify` and `bench flush` end to end.

use std::path::{Path, PathBuf};

#[path = "common/run.rs"]
mod run;

use run::{stria, tempdir, text};

const MEMSTORE: &str =
    "memstore: { regions: 4, flush-size: 1MiB, global-limit: 4MiB, low-water: 0.9 }\n";

/// Small simulated devices: one WAL device, two data devices.
fn sim_map(dir: &Path) -> PathBuf {
    let yaml = format!(
        "appliance: bench-sim
reactors: {{ wal: [0], flush: [1], idle: park, spin-us: 20 }}
devices:
  - {{ name: wal0, backend: sim, size: 64MiB, role: wal, queue-depth: 64, sim: {{ write-us: 5, flush-us: 5, volatile-cache: false }} }}
  - {{ name: data0, backend: sim, size: 64MiB, role: data, queue-depth: 64, sim: {{ write-us: 5, flush-us: 5, volatile-cache: false }} }}
  - {{ name: data1, backend: sim, size: 64MiB, role: data, queue-depth: 64, sim: {{ write-us: 5, flush-us: 5, volatile-cache: false }} }}
wal: {{ segment-size: 4MiB, max-batch: 1MiB }}
{MEMSTORE}"
    );
    let path = dir.join("sim.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The same on io_uring files under `dir/data`.
fn file_map(dir: &Path) -> PathBuf {
    let yaml = format!(
        "appliance: bench-file
reactors: {{ wal: [0], flush: [1], idle: park, spin-us: 20 }}
devices:
  - {{ name: wal0, backend: uring, path: ./data/wal0.img, size: 32MiB, role: wal, queue-depth: 32 }}
  - {{ name: data0, backend: uring, path: ./data/data0.img, size: 64MiB, role: data, queue-depth: 32 }}
  - {{ name: data1, backend: uring, path: ./data/data1.img, size: 64MiB, role: data, queue-depth: 32 }}
wal: {{ segment-size: 2MiB, max-batch: 1MiB }}
{MEMSTORE}"
    );
    let path = dir.join("file.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn ingest_prints_a_line_per_client_and_a_total() {
    let dir = tempdir();
    let d = dir.path();
    sim_map(d);
    let out = stria(
        d,
        &[
            "bench",
            "ingest",
            "--config",
            "sim.yaml",
            "--clients",
            "2",
            "--records",
            "20000",
            "--value-size",
            "100",
            "--durability",
            "write",
        ],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("opened: new engine"), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    for who in ["client   0:", "client   1:", "total     :"] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(who))
            .unwrap_or_else(|| panic!("no {who:?} line in\n{t}"));
        assert!(line.contains("records written |"), "{t}");
        assert!(line.contains("records/sec |"), "{t}");
        assert!(line.contains("bytes written |"), "{t}");
        assert!(line.contains("bytes/sec |"), "{t}");
        assert!(line.ends_with("secs"), "{t}");
    }
    let total = lines.iter().find(|l| l.starts_with("total")).unwrap();
    assert!(total.contains("40,000 records written"), "{t}");
    assert!(t.contains("batch latency (submit to ack): n="), "{t}");
    assert!(t.contains("flushes"), "{t}");
    assert!(t.contains("writers blocked"), "{t}");
    assert!(t.contains("replay point"), "{t}");
}

#[test]
fn flush_prints_a_row_per_reactor_count() {
    let dir = tempdir();
    let d = dir.path();
    sim_map(d);
    let out = stria(
        d,
        &[
            "bench",
            "flush",
            "--config",
            "sim.yaml",
            "--regions",
            "4",
            "--flush-size",
            "1MiB",
            "--flush-reactors",
            "1,2",
            "--bytes",
            "16MiB",
        ],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("flush reactors  writes/s"))
        .unwrap_or_else(|| panic!("no table in\n{t}"));
    assert!(lines[header + 1].starts_with("---"), "{t}");
    let rows = &lines[header + 2..];
    assert_eq!(rows.len(), 2, "{t}");
    assert!(rows[0].trim_start().starts_with('1'), "{t}");
    assert!(rows[0].contains("1.00x"), "{t}");
    assert!(rows[1].trim_start().starts_with('2'), "{t}");
}

#[test]
fn flush_refuses_file_devices() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    let out = stria(d, &["bench", "flush", "--config", "file.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("only on maps whose WAL and data devices are all sim devices"),
        "{}",
        text(&out)
    );
}

#[test]
fn verify_reads_back_what_ingest_wrote_on_files() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    let out = stria(d, &["format", "--config", "file.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
    let args = |cmd: &'static str, records: &'static str| {
        let mut a = vec![
            "bench",
            cmd,
            "--config",
            "file.yaml",
            "--clients",
            "2",
            "--records",
            records,
            "--value-size",
            "100",
        ];
        if cmd == "ingest" {
            a.extend(["--durability", "sync"]);
        }
        a
    };
    let out = stria(d, &args("ingest", "5000"));
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("10,000 records written"),
        "{}",
        text(&out)
    );

    let out = stria(d, &args("verify", "5000"));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("10,000 records verified, 0 missing, 0 wrong"),
        "{t}"
    );
    assert!(t.contains("get latency: n=10000"), "{t}");

    let out = stria(d, &args("verify", "6000"));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("10,000 records verified, 2,000 missing, 0 wrong"),
        "{t}"
    );
    assert!(t.contains("missing: client 0 record 5000"), "{t}");
    assert!(
        t.contains("stria: verify failed: 2000 records missing, 0 wrong"),
        "{t}"
    );

    // A different value size is caught as wrong values.
    let out = stria(
        d,
        &[
            "bench",
            "verify",
            "--config",
            "file.yaml",
            "--clients",
            "2",
            "--records",
            "10",
            "--value-size",
            "99",
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("0 records verified, 0 missing, 20 wrong"), "{t}");
}
