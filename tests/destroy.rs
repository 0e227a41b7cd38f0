//! No command destroys an engine's data unless told to: the benches that
//! write raw to a map's devices refuse a map whose engine keeps data, and
//! every command that writes over the engine's log or manifest (a forced
//! bench, `format --force`) leaves the devices holding an empty engine,
//! never one the next open reads as corruption.

use std::path::Path;

#[path = "common/run.rs"]
mod run;

use run::{small_file_map as file_map, stria, tempdir, text};

/// `bench ingest` or `bench verify` of 2 clients x `records` records.
fn records(dir: &Path, cmd: &str, records: &str) -> (bool, String) {
    let out = stria(
        dir,
        &[
            "bench",
            cmd,
            "--config",
            "m.yaml",
            "--clients",
            "2",
            "--records",
            records,
            "--value-size",
            "100",
        ],
    );
    (out.status.success(), text(&out))
}

fn wal_pe(dir: &Path, extra: &[&str]) -> (bool, String) {
    let mut args = vec!["bench", "wal-pe", "--config", "m.yaml"];
    args.extend(extra);
    for (flag, default) in [("--threads", "2"), ("--iterations", "1000")] {
        if !extra.contains(&flag) {
            args.extend([flag, default]);
        }
    }
    let out = stria(dir, &args);
    (out.status.success(), text(&out))
}

fn devbench(dir: &Path, extra: &[&str]) -> (bool, String) {
    let mut args = vec![
        "devbench",
        "--config",
        "m.yaml",
        "--seconds",
        "0.05",
        "--device",
        "wal0",
    ];
    args.extend(extra);
    let out = stria(dir, &args);
    (out.status.success(), text(&out))
}

/// Fills the engine with block files and log records and checks it holds them.
fn fill(dir: &Path) {
    let (ok, t) = records(dir, "ingest", "20000");
    assert!(ok, "{t}");
    let (ok, t) = records(dir, "verify", "20000");
    assert!(ok, "{t}");
    assert!(
        !t.contains(" 0 block files (0 bytes)"),
        "the ingest left block files: {t}"
    );
}

/// The engine opens, empty: every record missing, none wrong, no error.
fn assert_empty(dir: &Path) {
    let (ok, t) = records(dir, "verify", "100");
    assert!(!ok, "{t}");
    assert!(t.contains(" 0 block files (0 bytes)"), "{t}");
    assert!(t.contains("replayed 0 WAL records"), "{t}");
    assert!(
        t.contains("0 records verified, 200 missing, 0 wrong"),
        "{t}"
    );
    let (ok, t) = records(dir, "ingest", "100");
    assert!(ok, "a new engine takes writes: {t}");
}

#[test]
fn wal_pe_on_a_formatted_map_leaves_an_engine_that_opens() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    // 40 MiB of appends: around the 31 MiB ring, so old batches lie after
    // every segment header.
    let wrap = [
        "--threads",
        "8",
        "--value-size",
        "8192",
        "--iterations",
        "600",
        "--durability",
        "write",
    ];
    let (ok, t) = wal_pe(d, &wrap);
    assert!(ok, "{t}");
    assert!(t.contains("the devices hold an empty engine"), "{t}");
    // A second run finds nothing of an engine's either.
    let (ok, t) = wal_pe(d, &wrap);
    assert!(ok, "{t}");
    let (ok, t) = records(d, "ingest", "1000");
    assert!(ok, "{t}");
    let (ok, t) = records(d, "verify", "1000");
    assert!(ok, "{t}");
    // The new log is read as the engine wrote it, not run on into the
    // bench's batches behind it.
    let (ok, t) = wal_pe(d, &[]);
    assert!(!ok, "{t}");
    assert!(
        t.contains("the log holds 2000 records past the replay point (LSNs 1..2000)"),
        "{t}"
    );
}

#[test]
fn the_raw_benches_refuse_a_map_whose_engine_keeps_data() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    fill(d);
    let before = std::fs::read(d.join("data/wal0.img")).unwrap();
    for (what, (ok, t)) in [("wal-pe", wal_pe(d, &[])), ("devbench", devbench(d, &[]))] {
        assert!(!ok, "{what}: {t}");
        assert!(
            t.contains("would destroy the engine's data on the devices of m.yaml"),
            "{what}: {t}"
        );
        assert!(t.contains("the manifest lists"), "{what}: {t}");
        assert!(t.contains("block files"), "{what}: {t}");
        assert!(t.contains("pass --force"), "{what}: {t}");
    }
    assert_eq!(
        std::fs::read(d.join("data/wal0.img")).unwrap(),
        before,
        "a refusal writes nothing"
    );
    let (ok, t) = records(d, "verify", "20000");
    assert!(ok, "the data is all there: {t}");
}

#[test]
fn log_records_alone_are_the_engines_data() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    let (ok, t) = records(d, "ingest", "50");
    assert!(ok, "{t}");
    let (ok, t) = wal_pe(d, &[]);
    assert!(!ok, "{t}");
    assert!(
        t.contains("the log holds 100 records past the replay point (LSNs 1..100)"),
        "{t}"
    );
}

#[test]
fn a_forced_wal_pe_leaves_an_empty_engine() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    fill(d);
    let (ok, t) = wal_pe(d, &["--force"]);
    assert!(ok, "{t}");
    assert!(t.contains("forced: destroyed what the engine kept"), "{t}");
    assert_empty(d);
}

#[test]
fn a_forced_devbench_leaves_an_empty_engine() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    fill(d);
    let (ok, t) = devbench(d, &["--force"]);
    assert!(ok, "{t}");
    assert!(
        t.contains("forced: destroyed what the engine kept on m.yaml"),
        "{t}"
    );
    assert_empty(d);
}

#[test]
fn format_force_leaves_an_empty_engine() {
    let dir = tempdir();
    let d = dir.path();
    file_map(d);
    fill(d);
    let out = stria(d, &["format", "--config", "m.yaml", "--force"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_empty(d);
}
