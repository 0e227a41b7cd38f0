//! The reference `stria bench random-write --fio` compares with: fio's
//! single 4 KiB write followed by fdatasync, queue depth 1, on the disk of
//! the WAL.
//!
//! fio (3.x) reports the two halves of each operation apart: with
//! `--fdatasync=1` its JSON has the write's completion latency in
//! `jobs[0].write.clat_ns` (ioengine=sync: no submission latency, so
//! `lat_ns` is the same plus the clock) and the fdatasync's latency in
//! `jobs[0].sync.lat_ns`, each with percentiles; it has no percentile of
//! the pair. The reference p50 (and p99) is therefore the sum of the write's
//! and the fdatasync's: exact for the mean, close for the median when the
//! two vary little, and an upper bound in practice for the tail (the slow
//! writes and the slow syncs are not always the same operations). The mean
//! of the pair is also exact from the run: 1/IOPS, since fio counts one
//! write IO per write+fdatasync pair and runs them back to back.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::latency::fmt_us;

/// Write+fdatasync latencies, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FioReference {
    pub ops: u64,
    pub write_p50_us: f64,
    pub write_p99_us: f64,
    pub sync_p50_us: f64,
    pub sync_p99_us: f64,
    /// 1/IOPS: the mean time of one write+fdatasync pair.
    pub pair_mean_us: f64,
}

impl FioReference {
    /// The reference median: the write's plus the fdatasync's.
    pub fn p50_us(&self) -> f64 {
        self.write_p50_us + self.sync_p50_us
    }

    pub fn p99_us(&self) -> f64 {
        self.write_p99_us + self.sync_p99_us
    }
}

impl fmt::Display for FioReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "write+fdatasync p50 {}us (write {} + fdatasync {}), p99 {}us (write {} + fdatasync {}), mean {}us (1/IOPS), {} ops",
            fmt_us(self.p50_us()),
            fmt_us(self.write_p50_us),
            fmt_us(self.sync_p50_us),
            fmt_us(self.p99_us()),
            fmt_us(self.write_p99_us),
            fmt_us(self.sync_p99_us),
            fmt_us(self.pair_mean_us),
            self.ops
        )
    }
}

/// The first job of fio's `--output-format=json` output (anything before
/// the first `{`, such as warnings, is skipped), if it ran without error.
pub fn first_job(output: &str) -> Result<serde_json::Value, String> {
    let start = output
        .find('{')
        .ok_or_else(|| "fio printed no JSON".to_string())?;
    let v: serde_json::Value =
        serde_json::from_str(&output[start..]).map_err(|e| format!("fio's JSON: {e}"))?;
    let job = v["jobs"][0].clone();
    if job.is_null() {
        return Err("fio's JSON has no job".into());
    }
    if let Some(err) = job["error"].as_i64().filter(|&e| e != 0) {
        return Err(format!("fio's job failed with error {err}"));
    }
    Ok(job)
}

/// Parses fio's `--output-format=json` output (anything before the first
/// `{`, such as warnings, is skipped).
pub fn parse(output: &str) -> Result<FioReference, String> {
    let job = &first_job(output)?;
    let pct = |path: [&str; 2], p: &str| -> Result<f64, String> {
        job[path[0]][path[1]]["percentile"][p]
            .as_f64()
            .map(|ns| ns / 1000.0)
            .ok_or_else(|| {
                format!(
                    "fio's JSON has no jobs[0].{}.{}.percentile.{p}",
                    path[0], path[1]
                )
            })
    };
    let write = ["write", "clat_ns"];
    let sync = ["sync", "lat_ns"];
    let ops = job["write"]["total_ios"].as_u64().unwrap_or(0);
    let iops = job["write"]["iops"].as_f64().unwrap_or(0.0);
    if ops == 0 || iops <= 0.0 {
        return Err("fio did no writes".into());
    }
    Ok(FioReference {
        ops,
        write_p50_us: pct(write, "50.000000")?,
        write_p99_us: pct(write, "99.000000")?,
        sync_p50_us: pct(sync, "50.000000")?,
        sync_p99_us: pct(sync, "99.000000")?,
        pair_mean_us: 1e6 / iops,
    })
}

/// Runs the reference for `seconds` on a 64 MiB file `fio.ref` in `dir`
/// (removed afterwards). `Ok(None)` when fio is not installed.
pub fn run(dir: &Path, seconds: u32) -> Result<Option<FioReference>, String> {
    let args = [
        "--size=64m",
        "--bs=4k",
        "--rw=randwrite",
        "--ioengine=sync",
        "--fdatasync=1",
    ];
    let Some(out) = run_job(dir, "ref", &args, seconds as f64)? else {
        return Ok(None);
    };
    parse(&out).map(Some)
}

/// Runs one fio job named `name` with `args` for `seconds` (time based) on
/// a file `fio.<name>` in `dir` (removed afterwards) and returns its JSON
/// output. `Ok(None)` when fio is not installed.
pub fn run_job(
    dir: &Path,
    name: &str,
    args: &[&str],
    seconds: f64,
) -> Result<Option<String>, String> {
    if !super::process::installed(Path::new("fio")) {
        return Ok(None);
    }
    let file: PathBuf = dir.join(format!("fio.{name}"));
    let out = Command::new("fio")
        .arg(format!("--name={name}"))
        .arg(format!("--filename={}", file.display()))
        .args(args)
        // fio takes a runtime in whole units; milliseconds keep short runs.
        .arg(format!(
            "--runtime={}ms",
            (seconds * 1000.0).ceil().max(1.0)
        ))
        .args(["--time_based", "--output-format=json"])
        .output()
        .map_err(|e| format!("cannot run fio: {e}"));
    let _ = std::fs::remove_file(&file);
    let out = out?;
    if !out.status.success() {
        return Err(format!(
            "fio failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio 3.33's output for the reference job (2 s, trimmed to the fields
    /// read and a few percentiles).
    const SAMPLE: &str = include_str!("testdata/fio-randwrite-fdatasync.json");

    #[test]
    fn sums_write_and_fdatasync_percentiles() {
        let r = parse(SAMPLE).unwrap();
        assert_eq!(r.ops, 5174);
        assert!((r.write_p50_us - 12.352).abs() < 1e-9);
        assert!((r.sync_p50_us - 342.016).abs() < 1e-9);
        assert!((r.p50_us() - 354.368).abs() < 1e-9);
        assert!((r.p99_us() - (40.192 + 790.528)).abs() < 1e-9);
        assert!((r.pair_mean_us - 1e6 / 2585.707146).abs() < 1e-6);
        assert!(r.to_string().starts_with("write+fdatasync p50 354.4us"));
    }

    #[test]
    fn skips_warnings_before_the_json() {
        let text = format!("fio: some warning\n{SAMPLE}");
        assert_eq!(parse(&text).unwrap(), parse(SAMPLE).unwrap());
    }

    #[test]
    fn says_what_is_missing() {
        assert!(parse("no json").unwrap_err().contains("no JSON"));
        assert!(parse("{\"jobs\": []}").unwrap_err().contains("no job"));
        let no_sync = r#"{"jobs":[{"error":0,"write":{"iops":1.0,"total_ios":1,"clat_ns":{"percentile":{"50.000000":1,"99.000000":2}}}}]}"#;
        assert!(parse(no_sync).unwrap_err().contains("sync.lat_ns"));
        assert!(parse(r#"{"jobs":[{"error":5}]}"#)
            .unwrap_err()
            .contains("error 5"));
    }
}
