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
