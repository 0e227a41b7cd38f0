//! `stria bench compare` end to end, tiny: the harness runs every workload
//! it can on the simulated device, alternates rounds, reports the peers it
//! cannot run with why, and writes its JSON, Markdown and SVG charts; bad
//! options change nothing; a map that holds an engine's data is refused.

use std::path::Path;

#[path = "common/run.rs"]
mod run;

use run::{small_file_map, stria, tempdir, text};

fn json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("out/results.json")).expect("results.json");
    serde_json::from_str(&text).expect("valid JSON")
}

/// The result of `system` on `case` of `workload`.
fn result<'a>(
    v: &'a serde_json::Value,
    workload: &str,
    case: &str,
    system: &str,
) -> &'a serde_json::Value {
    let w = v["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == workload)
        .unwrap_or_else(|| panic!("no workload {workload}"));
    let c = w["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == case)
        .unwrap_or_else(|| panic!("no case {case} in {workload}"));
    c["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["system"] == system)
        .unwrap_or_else(|| panic!("no {system} in {workload} {case}"))
}

#[test]
fn a_tiny_comparison_on_the_simulated_device_writes_its_json_report_and_charts() {
    let dir = tempdir();
    let out = stria(
        dir.path(),
        &[
            "bench",
            "compare",
            "--systems",
            "stria-sim,rocksdb",
            "--workloads",
            "wal-pe,ingest,latency,server",
            "--rounds",
            "2",
            "--seconds",
            "0.2",
            "--threads",
            "1,2",
            "--clients",
            "2",
            "--records",
            "300",
            "--requests",
            "100",
            "--tests",
            "set,incr-1-key",
            "--server-cases",
            "2x1,1x16",
            "--out",
            "out",
        ],
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("CPU s/Mop") && all.contains("== wal-pe"),
        "{all}"
    );
    let v = json(dir.path());
    assert_eq!(v["rounds"], 2);
    assert!(v["machine"]["cores"].as_u64().unwrap() >= 1, "{v}");
    for (workload, case) in [
        ("wal-pe", "threads=1"),
        ("wal-pe", "threads=2"),
        ("ingest", "sync"),
        ("ingest", "write"),
        ("latency", "1 KiB sync put"),
        ("server", "SET -c 2 -P 1"),
        ("server", "INCR-1-KEY -c 2 -P 1"),
    ] {
        let r = result(&v, workload, case, "stria-sim");
        assert_eq!(
            r["samples"].as_array().unwrap().len(),
            2,
            "{workload} {case}: {r}"
        );
        let m = &r["medians"];
        assert!(
            m["ops_per_sec"].as_f64().unwrap() > 0.0,
            "{workload} {case}: {r}"
        );
        assert!(
            m["cpu_per_mop"].as_f64().unwrap() >= 0.0,
            "{workload} {case}: {r}"
        );
        assert!(r["not_run"].is_null(), "{r}");
        if cfg!(feature = "peers") || workload == "server" {
            continue;
        }
        let rocks = result(&v, workload, case, "rocksdb");
        assert!(
            rocks["not_run"].as_str().unwrap().contains("peers"),
            "{rocks}"
        );
    }
    // One client sends a fifth of --requests, rounded up to whole
    // pipelines of 16: 100 / 5 = 20, so two pipelines (never -n 0, on
    // which redis-benchmark runs forever).
    let piped = result(&v, "server", "SET -c 1 -P 16", "stria-sim");
    assert_eq!(piped["samples"][0]["ops"], 32, "{piped}");
    // The ingest runs wrote every record: 2 clients x 300.
    let ingest = result(&v, "ingest", "sync", "stria-sim");
    assert_eq!(ingest["samples"][0]["ops"], 600, "{ingest}");
    for chart in [
        "wal-pe-throughput.svg",
        "wal-pe-cpu.svg",
        "wal-pe-threads-1-latency.svg",
        "ingest-throughput.svg",
        "latency-1-kib-sync-put-latency.svg",
        "server-c-2-p-1-throughput.svg",
    ] {
        let svg = std::fs::read_to_string(dir.path().join("out").join(chart))
            .unwrap_or_else(|e| panic!("{chart}: {e}"));
        assert!(
            svg.starts_with("<svg") && svg.contains("stria-sim"),
            "{chart}"
        );
    }
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(
        md.contains("## wal-pe") && md.contains("![wal-pe-throughput.svg]"),
        "{md}"
    );
    assert!(md.contains("| threads=1 | stria-sim |"), "{md}");
}

#[test]
fn bad_options_are_refused_before_anything_is_written() {
    let dir = tempdir();
    for (args, says) in [
        (&["--workloads", "tpcc"][..], "not a workload"),
        (&["--rounds", "0"][..], "--rounds must be at least 1"),
        (&["--seconds", "0"][..], "--seconds 0"),
        (&["--systems", "mysql"][..], "not a system here"),
        (&["--stria", "conf/local.yaml"][..], "NAME=MAP"),
        (&["--server-cases", "50"][..], "CLIENTSxPIPELINE"),
        (&["--tests", "flushall"][..], "not a server test"),
    ] {
        let mut all = vec!["bench", "compare", "--out", "out"];
        all.extend_from_slice(args);
        let out = stria(dir.path(), &all);
        assert!(!out.status.success(), "{args:?}");
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
        assert!(
            !dir.path().join("out").exists(),
            "{args:?} wrote its folder"
        );
    }
}

#[test]
fn a_map_whose_engine_keeps_data_is_refused_unless_forced() {
    let dir = tempdir();
    small_file_map(dir.path());
    let set = ["--config", "m.yaml", "--clients", "2", "--records", "500"];
    let out = stria(dir.path(), &[&["bench", "ingest"][..], &set].concat());
    assert!(out.status.success(), "{}", text(&out));
    let compare = [
        "bench",
        "compare",
        "--stria",
        "p=m.yaml",
        "--workloads",
        "latency",
        "--rounds",
        "1",
        "--seconds",
        "0.1",
        "--out",
        "out",
    ];
    let out = stria(dir.path(), &compare);
    assert!(!out.status.success());
    assert!(text(&out).contains("would destroy"), "{}", text(&out));
    // Nothing changed: every record is still there.
    let out = stria(dir.path(), &[&["bench", "verify"][..], &set].concat());
    assert!(out.status.success(), "{}", text(&out));
    let out = stria(dir.path(), &[&compare[..], &["--force"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("stria-p"), "{}", text(&out));
    // Left formatted and empty.
    let out = stria(dir.path(), &[&["bench", "verify"][..], &set].concat());
    assert!(
        text(&out).contains("1000 records missing"),
        "{}",
        text(&out)
    );
}
