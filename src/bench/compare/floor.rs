//! The device's floor, measured by fio on the disk of Stria's log: what
//! one durable write costs at the least, and the most bytes per second
//! the disk makes durable. Every other figure can be read as a fraction
//! of these.

use std::path::Path;

use super::sample::{Percentiles, Sample};
use crate::bench::fio;

/// A floor case: its name and fio's arguments.
pub const CASES: [(&str, &[&str]); 2] = [
    (
        "4k write+fdatasync",
        &[
            "--size=64m",
            "--bs=4k",
            "--rw=write",
            "--ioengine=psync",
            "--fdatasync=1",
        ],
    ),
    (
        "64k direct write+fdatasync",
        &[
            "--size=256m",
            "--bs=64k",
            "--rw=write",
            "--ioengine=psync",
            "--direct=1",
            "--fdatasync=1",
        ],
    ),
];

/// Runs floor case `case` for `seconds` in `dir`; `Ok(None)` when fio is
/// not installed.
pub fn run(dir: &Path, case: usize, seconds: f64) -> Result<Option<Sample>, String> {
    let (_, args) = CASES[case];
    match fio::run_job(dir, "floor", args, seconds)? {
        Some(out) => sample_of(&out).map(Some),
        None => Ok(None),
    }
}

/// A sample from fio's JSON: each operation is one write and the fdatasync
/// after it; its latency percentiles are the write's plus the fdatasync's
/// (fio reports the two apart; see `bench::fio`), its CPU fio's own.
pub fn sample_of(output: &str) -> Result<Sample, String> {
    let job = &fio::first_job(output)?;
    let write = &job["write"];
    let ops = write["total_ios"].as_u64().unwrap_or(0);
    let runtime_ms = write["runtime"].as_f64().unwrap_or(0.0);
    if ops == 0 || runtime_ms <= 0.0 {
        return Err("fio did no writes".into());
    }
    let bytes = write["io_bytes"].as_u64().unwrap_or(0);
    let secs = runtime_ms / 1000.0;
    let (w, s) = (&write["clat_ns"], &job["sync"]["lat_ns"]);
    let both = |f: &dyn Fn(&serde_json::Value) -> Option<f64>| -> Option<f64> {
        Some((f(w)? + f(s)?) / 1000.0)
    };
    let pct = |p: &'static str| both(&move |x: &serde_json::Value| x["percentile"][p].as_f64());
    let latency = Percentiles {
        mean: both(&|x: &serde_json::Value| x["mean"].as_f64()),
        p50: pct("50.000000"),
        p90: pct("90.000000"),
        p99: pct("99.000000"),
        p999: pct("99.900000"),
        p9999: pct("99.990000"),
        max: both(&|x: &serde_json::Value| x["max"].as_f64()),
    };
    let cpu_pct = job["usr_cpu"].as_f64().unwrap_or(0.0) + job["sys_cpu"].as_f64().unwrap_or(0.0);
    Ok(Sample {
        ops,
        bytes,
        secs,
        cpu_secs: cpu_pct / 100.0 * secs,
        switches: job["ctx"].as_u64().unwrap_or(0),
        latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../testdata/fio-randwrite-fdatasync.json");

    #[test]
    fn a_floor_sample_sums_the_write_and_its_fdatasync() {
        let s = sample_of(SAMPLE).unwrap();
        assert_eq!(s.ops, 5174);
        assert!((s.latency.p50.unwrap() - 354.368).abs() < 1e-9);
        assert!((s.latency.p99.unwrap() - (40.192 + 790.528)).abs() < 1e-9);
        assert!(s.secs > 0.0);
        assert!(sample_of("nothing").unwrap_err().contains("no JSON"));
    }
}
