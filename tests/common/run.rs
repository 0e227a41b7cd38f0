//! Running the `stria` binary from integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `stria args...` in `dir` and returns what it did.
pub fn stria(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stria"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("STRIA_CONFIG")
        .output()
        .expect("run stria")
}

/// As [`stria`], with the environment variable `key` set to `value`.
pub fn stria_env(dir: &Path, args: &[&str], key: &str, value: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stria"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env(key, value)
        .output()
        .expect("run stria")
}

/// Standard output and standard error, together.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A temporary folder under cargo's target directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Writes `dir/m.yaml`, a map of small psync files under `dir/data`
/// (memstores small enough that an ingest of a few thousand records leaves
/// block files as well as log records), and formats it.
pub fn small_file_map(dir: &Path) {
    let yaml = "appliance: small
reactors: { wal: [0], flush: [1], idle: park, spin-us: 20 }
devices:
  - { name: wal0, backend: psync, path: ./data/wal0.img, size: 32MiB, role: wal, queue-depth: 32 }
  - { name: data0, backend: psync, path: ./data/data0.img, size: 96MiB, role: data, queue-depth: 32 }
wal: { segment-size: 2MiB, max-batch: 1MiB }
memstore: { regions: 4, flush-size: 1MiB, global-limit: 4MiB, low-water: 0.9 }
";
    std::fs::write(dir.join("m.yaml"), yaml).unwrap();
    let out = stria(dir, &["format", "--config", "m.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
}
