//! How a comparison reads: a table per workload (medians, the spread of
//! throughput, ratios to the workload's peer and to the device's floor),
//! the performance goals of the issue that asked for this bench, met or
//! missed by how much, and the same in Markdown for `docs/benchmarks.md`.

use std::fmt;

use serde::Serialize;

use super::{CompareReport, Medians, WorkloadReport};
use crate::bench::latency::fmt_us;
use crate::bench::table::Table;

/// A performance goal, and what was measured of it.
#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    pub goal: String,
    pub system: String,
    pub target: String,
    pub measured: String,
    /// `None` when it could not be measured (a peer did not run).
    pub met: Option<bool>,
}

/// The floor's figures: ops/s of one 4 KiB write+fdatasync at a time, and
/// MB/s of 64 KiB direct writes each made durable.
fn floor(report: &CompareReport) -> (Option<&Medians>, Option<&Medians>) {
    let w = report.workload("floor");
    let m = |case: &str| w.and_then(|w| w.case(case)).and_then(|c| c.medians("fio"));
    (m("4k write+fdatasync"), m("64k direct write+fdatasync"))
}

/// The ratio of a system's figure to the floor's, for a workload: ops/s
/// to the 4 KiB floor for one-write-at-a-time workloads, MB/s to the
/// bandwidth floor for ingest.
fn of_floor(report: &CompareReport, workload: &str, system: &str, m: &Medians) -> Option<f64> {
    if report
        .systems
        .iter()
        .any(|s| s.name == system && s.simulated)
    {
        return None;
    }
    let (ops, bw) = floor(report);
    match workload {
        "wal-pe" | "latency" => ops.map(|f| m.ops_per_sec / f.ops_per_sec.max(1e-9)),
        "ingest" => bw.map(|f| m.mb_per_sec / f.mb_per_sec.max(1e-9)),
        _ => None,
    }
}

fn opt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), fmt_us)
}

fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |r| format!("{r:.2}x"))
}

fn thousands(v: f64) -> String {
    crate::bench::ingest::thousands(v.round().max(0.0) as u64)
}

/// The table of one workload.
pub fn table(report: &CompareReport, w: &WorkloadReport) -> Table {
    let peer = w.peer.as_deref();
    let mut t = Table::new([
        "case",
        "system",
        "ops/s",
        "min..max",
        "MB/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "CPU s/Mop",
        "cs/op",
        &format!("x {}", peer.unwrap_or("peer")),
        "CPU x peer",
        "x floor",
    ]);
    for c in &w.cases {
        let peer_m = peer.and_then(|p| c.medians(p));
        for r in &c.results {
            let Some(m) = &r.medians else { continue };
            let vs_peer = peer_m
                .filter(|_| Some(r.system.as_str()) != peer)
                .map(|p| m.ops_per_sec / p.ops_per_sec.max(1e-9));
            let cpu_vs = peer_m
                .filter(|_| Some(r.system.as_str()) != peer)
                .map(|p| m.cpu_per_mop / p.cpu_per_mop.max(1e-9));
            t.row([
                c.name.clone(),
                r.system.clone(),
                thousands(m.ops_per_sec),
                format!(
                    "{}..{}",
                    thousands(m.ops_per_sec_min),
                    thousands(m.ops_per_sec_max)
                ),
                format!("{:.1}", m.mb_per_sec),
                opt_us(m.latency.p50),
                opt_us(m.latency.p99),
                opt_us(m.latency.p999),
                format!("{:.1}", m.cpu_per_mop),
                format!("{:.2}", m.switches_per_op),
                ratio(vs_peer),
                ratio(cpu_vs),
                ratio(of_floor(report, &w.name, &r.system, m)),
            ]);
        }
    }
    t
}

/// The systems of a workload that did not run, once each, with why.
fn not_run(w: &WorkloadReport) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &w.cases {
        for r in &c.results {
            if let Some(why) = &r.not_run {
                let line = format!("{}: {why}", r.system);
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

/// Systems whose figures are compared with peers in the goals: Stria on
/// a real disk (not the simulated device).
fn stria_systems(report: &CompareReport) -> Vec<String> {
    report
        .systems
        .iter()
        .filter(|s| s.name.starts_with("stria-") && !s.simulated && s.not_run.is_none())
        .map(|s| s.name.clone())
        .collect()
}

fn medians<'r>(
    report: &'r CompareReport,
    w: &str,
    case: &str,
    system: &str,
) -> Option<&'r Medians> {
    report
        .workload(w)
        .and_then(|w| w.case(case))
        .and_then(|c| c.medians(system))
}

/// The goals of the benchmark issue, checked against `report`.
pub fn goals(report: &CompareReport) -> Vec<Goal> {
    let mut out = Vec::new();
    for s in stria_systems(report) {
        let s = s.as_str();
        let mut goal =
            |goal: &str, target: &str, measured: Option<(f64, String)>, met: fn(f64) -> bool| {
                out.push(Goal {
                    goal: goal.into(),
                    system: s.into(),
                    target: target.into(),
                    measured: measured
                        .as_ref()
                        .map_or_else(|| "not measured".into(), |(_, text)| text.clone()),
                    met: measured.map(|(v, _)| met(v)),
                });
            };
        let both = |w: &str, case: &str, peer: &str| {
            Some((
                medians(report, w, case, s)?,
                medians(report, w, case, peer)?,
            ))
        };
        let r = both("wal-pe", "threads=100", "rocksdb");
        goal(
            "wal-pe 100 threads, durable: throughput",
            ">= 3x RocksDB",
            r.map(|(a, b)| rate(a, b, "ops/s")),
            |x| x >= 3.0,
        );
        goal(
            "wal-pe 100 threads, durable: CPU per operation",
            "<= 0.5x RocksDB",
            r.map(|(a, b)| cpu(a, b)),
            |x| x <= 0.5,
        );
        let r = both("wal-pe", "threads=1", "rocksdb");
        for (name, get) in [
            (
                "p50",
                (|m: &Medians| m.latency.p50) as fn(&Medians) -> Option<f64>,
            ),
            ("p99", |m: &Medians| m.latency.p99),
        ] {
            goal(
                &format!("wal-pe 1 thread, durable: {name} latency"),
                "<= RocksDB's",
                r.and_then(|(a, b)| Some(latency(get(a)?, get(b)?))),
                |x| x <= 1.0,
            );
        }
        let f = floor(report).0;
        goal(
            "wal-pe 1 thread, durable: p50 latency",
            "<= 1.1x fio's 4 KiB write+fdatasync p50",
            medians(report, "wal-pe", "threads=1", s)
                .zip(f)
                .and_then(|(a, f)| Some(latency(a.latency.p50?, f.latency.p50?))),
            |x| x <= 1.1,
        );
        let r = both("ingest", "sync", "rocksdb");
        goal(
            "ingest, durable: throughput",
            ">= 3x RocksDB with the same batches",
            r.map(|(a, b)| rate(a, b, "records/s")),
            |x| x >= 3.0,
        );
        for (w, peer) in [
            ("wal-pe", "rocksdb"),
            ("ingest", "rocksdb"),
            ("latency", "rocksdb"),
            ("server", "redis"),
        ] {
            let Some(wr) = report.workload(w) else {
                continue;
            };
            for c in &wr.cases {
                goal(
                    &format!("{w} {}: CPU per operation", c.name),
                    &format!("< {peer}'s"),
                    c.medians(s).zip(c.medians(peer)).map(|(a, b)| cpu(a, b)),
                    |x| x < 1.0,
                );
            }
        }
    }
    out
}

/// `a`'s throughput over `b`'s, and how it reads.
fn rate(a: &Medians, b: &Medians, unit: &str) -> (f64, String) {
    let x = a.ops_per_sec / b.ops_per_sec.max(1e-9);
    let (a, b) = (thousands(a.ops_per_sec), thousands(b.ops_per_sec));
    (x, format!("{x:.2}x ({a} vs {b} {unit})"))
}

/// Latency `a` (microseconds) over `b`, and how it reads.
fn latency(a: f64, b: f64) -> (f64, String) {
    let x = a / b.max(1e-9);
    (x, format!("{x:.2}x ({}us vs {}us)", fmt_us(a), fmt_us(b)))
}

/// `a`'s CPU per operation over `b`'s, and how it reads.
fn cpu(a: &Medians, b: &Medians) -> (f64, String) {
    let x = a.cpu_per_mop / b.cpu_per_mop.max(1e-9);
    let (a, b) = (a.cpu_per_mop, b.cpu_per_mop);
    (x, format!("{x:.2}x ({a:.1} vs {b:.1} CPU s/Mop)"))
}

fn goal_table(goals: &[Goal]) -> Table {
    let mut t = Table::new(["goal", "system", "target", "measured", "met"]);
    for g in goals {
        t.row([
            g.goal.clone(),
            g.system.clone(),
            g.target.clone(),
            g.measured.clone(),
            match g.met {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "-".into(),
            },
        ]);
    }
    t
}

fn header(report: &CompareReport) -> Vec<String> {
    let m = &report.machine;
    let mut lines = vec![
        format!("date: {}; command: {}", report.date, report.command),
        format!(
            "machine: {} ({} cores, {:.1} GiB), Linux {}, disk {}; load average {:.2} {:.2} {:.2} before, {:.2} {:.2} {:.2} after",
            m.cpu, m.cores, m.memory_gib, m.kernel, m.disk,
            m.load_before[0], m.load_before[1], m.load_before[2],
            report.load_after[0], report.load_after[1], report.load_after[2]
        ),
        format!(
            "{} rounds; medians of the rounds, min..max of their throughput; CPU s/Mop: CPU seconds (user + system) per million operations of the system measured (this process for stria-* wal-pe/ingest/latency and RocksDB, the server process for the server workload); cs/op: its context switches per operation",
            report.rounds
        ),
    ];
    for s in &report.systems {
        lines.push(match &s.not_run {
            Some(why) => format!("{}: {} (not run: {why})", s.name, s.detail),
            None => format!("{}: {}", s.name, s.detail),
        });
    }
    lines
}

impl fmt::Display for CompareReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in header(self) {
            writeln!(f, "{l}")?;
        }
        for w in &self.workloads {
            writeln!(f, "\n== {}: {}", w.name, w.description)?;
            let t = table(self, w);
            if !t.is_empty() {
                write!(f, "{t}")?;
            }
            for l in not_run(w) {
                writeln!(f, "  {l}")?;
            }
        }
        if !self.goals.is_empty() {
            writeln!(f, "\n== goals")?;
            write!(f, "{}", goal_table(&self.goals))?;
        }
        writeln!(f)?;
        for file in &self.files {
            writeln!(f, "wrote {file}")?;
        }
        Ok(())
    }
}

/// The report in Markdown, with the charts (file names in the same
/// folder) under their workloads.
pub fn markdown(report: &CompareReport, charts: &[String]) -> String {
    let mut out = String::from("# Comparison\n\n");
    for l in header(report) {
        out.push_str(&format!("- {l}\n"));
    }
    for w in &report.workloads {
        out.push_str(&format!("\n## {}\n\n{}\n\n", w.name, w.description));
        let t = table(report, w);
        if !t.is_empty() {
            out.push_str(&t.markdown());
            out.push('\n');
        }
        for l in not_run(w) {
            out.push_str(&format!("- {l}\n"));
        }
        for c in charts
            .iter()
            .filter(|c| c.starts_with(&format!("{}-", w.name)))
        {
            out.push_str(&format!("\n![{c}]({c})\n"));
        }
    }
    if !report.goals.is_empty() {
        out.push_str("\n## Goals\n\n");
        out.push_str(&goal_table(&report.goals).markdown());
    }
    out
}
