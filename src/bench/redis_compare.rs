//! `stria bench redis-compare`: `redis-benchmark` SET, GET, INCR (random
//! keys) and INCR of one key against Stria and against Redis with every
//! write fsynced, on the same disk, with each server's CPU time and
//! context switches per request (from `/proc`) next to its rate.
//!
//! Stria is a `stria serve` the bench starts on a free loopback port.
//! Redis (when `redis-server` is installed) runs on another free port with
//! `--appendonly yes --appendfsync always --save ""` and its directory in a
//! fresh folder next to the map's first WAL device file, so both log to the
//! same disk. For each case (clients, pipeline) in (1,1), (50,1), (50,16),
//! redis-benchmark runs against Stria and then against Redis, so that both
//! see the machine in the same state; then both servers get SIGTERM.
//!
//! redis-benchmark cannot send `STRIA.DURABILITY`: its connections get the
//! server's default durability (the map's `wal.durability`, `sync` in the
//! shipped maps); the report says which it is.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::latency::fmt_us;
use super::process::{self, Serve, ServerProcess, STOP_TIMEOUT};
use super::procstat;
use super::table::Table;
use crate::config::{Config, Durability};

/// The (clients, pipeline) cases, in order.
pub const CASES: [(usize, usize); 3] = [(1, 1), (50, 1), (50, 16)];

/// Keys are `key:<random below this>` (redis-benchmark's `-r`).
pub const KEYSPACE: u64 = 100_000;

/// What to run.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// Requests per test of an unpipelined case (`-n`); a case with
    /// pipeline depth P runs P times as many (see [`requests_of`]).
    pub requests: u64,
    /// Bytes per value (`-d`).
    pub data_size: usize,
    /// The redis-server to compare with; `None`: `redis-server` on PATH,
    /// and Stria alone when there is none.
    pub redis_server: Option<PathBuf>,
}

/// One line of redis-benchmark's `--csv` output.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvRow {
    pub test: String,
    pub rps: f64,
    /// Latencies in milliseconds, as redis-benchmark prints them (`None`
    /// when the column is absent, as in versions before 7).
    pub avg_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// The server's CPU time (user + system) and context switches per
    /// request over the run, when its process could be read.
    pub cpu_us: Option<f64>,
    pub switches: Option<f64>,
}

/// The redis-benchmark tests of each case: the test, and whether its keys
/// are random (`-r`) or one key (INCR of a hot counter).
pub const TESTS: [(&str, bool); 4] = [
    ("set", true),
    ("get", true),
    ("incr", true),
    ("incr", false),
];

/// The name a one-key test's row gets.
pub const HOT_INCR: &str = "INCR-1-KEY";

/// Parses redis-benchmark's `--csv` output. Redis 7's has the header
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
/// "p95_latency_ms","p99_latency_ms","max_latency_ms"`; older versions
/// print `"test","rps"` rows without a header, which are read as well.
pub fn parse_csv(text: &str) -> Result<Vec<CsvRow>, String> {
    let fields = |line: &str| -> Vec<String> {
        line.split(',')
            .map(|f| f.trim().trim_matches('"').to_string())
            .collect()
    };
    // Progress lines end with a carriage return; keep what follows the last.
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.rsplit('\r').next())
        .map(str::trim)
        .filter(|l| l.starts_with('"'))
        .collect();
    let mut header: Vec<String> = vec!["test".into(), "rps".into()];
    let mut rows = Vec::new();
    for line in lines {
        let f = fields(line);
        if f.first().is_some_and(|t| t == "test") {
            header = f;
            continue;
        }
        let col = |name: &str| -> Option<&str> {
            header
                .iter()
                .position(|h| h == name)
                .and_then(|i| f.get(i))
                .map(String::as_str)
        };
        let num = |name: &str| -> Result<Option<f64>, String> {
            col(name)
                .map(|v| {
                    v.parse::<f64>()
                        .map_err(|_| format!("redis-benchmark's {name} {v:?} is not a number"))
                })
                .transpose()
        };
        let test = col("test")
            .ok_or_else(|| format!("redis-benchmark's line {line:?} has no test"))?
            .to_string();
        let rps =
            num("rps")?.ok_or_else(|| format!("redis-benchmark's line {line:?} has no rps"))?;
        rows.push(CsvRow {
            test,
            rps,
            avg_ms: num("avg_latency_ms")?,
            p50_ms: num("p50_latency_ms")?,
            p99_ms: num("p99_latency_ms")?,
            max_ms: num("max_latency_ms")?,
            cpu_us: None,
            switches: None,
        });
    }
    if rows.is_empty() {
        return Err("redis-benchmark printed no results".into());
    }
    Ok(rows)
}

/// One case against one server.
#[derive(Clone, Debug)]
pub struct Case {
    pub clients: usize,
    pub pipeline: usize,
    pub stria: Vec<CsvRow>,
    pub redis: Option<Vec<CsvRow>>,
}

/// What was measured.
#[derive(Clone, Debug)]
pub struct CompareReport {
    pub opts: CompareOptions,
    pub stria_source: String,
    pub stria_durability: Durability,
    /// Redis's directory, or why Redis was not run.
    pub redis: Result<PathBuf, String>,
    pub cases: Vec<Case>,
    /// Servers that had to be killed or did not exit cleanly.
    pub stop_notes: Vec<String>,
}

/// Runs the comparison; `cfg` is the map `serve` gets. `progress` hears
/// about each redis-benchmark as it ends.
pub fn run(
    serve: &Serve,
    cfg: &Config,
    opts: &CompareOptions,
    mut progress: impl FnMut(&str),
) -> Result<CompareReport, String> {
    if opts.requests == 0 {
        return Err("--requests must be at least 1".into());
    }
    let benchmark = Path::new("redis-benchmark");
    if !process::installed(benchmark) {
        return Err(
            "redis-benchmark is not installed: install Debian's redis-tools (apt install redis-tools)"
                .into(),
        );
    }
    // The folder goes before the servers so that it is removed after them.
    let (redis_bin, folder, redis_dir) =
        redis_folder(cfg, opts.redis_server.as_ref(), "stria-redis-compare")?;
    let stria = serve.start(cfg)?;
    let redis = match &redis_dir {
        Ok(dir) => Some(start_redis(&redis_bin, dir)?),
        Err(_) => None,
    };
    let password = cfg.server.password.as_deref();
    let mut cases = Vec::with_capacity(CASES.len());
    for (clients, pipeline) in CASES {
        let stria_rows = benchmark_run(&stria, password, opts, clients, pipeline)?;
        progress(&format!(
            "stria c={clients} P={pipeline}: {}",
            summary(&stria_rows)
        ));
        let redis_rows = match &redis {
            Some(r) => {
                let rows = benchmark_run(r, None, opts, clients, pipeline)?;
                progress(&format!(
                    "redis c={clients} P={pipeline}: {}",
                    summary(&rows)
                ));
                Some(rows)
            }
            None => None,
        };
        cases.push(Case {
            clients,
            pipeline,
            stria: stria_rows,
            redis: redis_rows,
        });
    }
    let mut stop_notes = Vec::new();
    for server in [Some(stria), redis].into_iter().flatten() {
        let name = server.name().to_string();
        let s = server
            .stop(STOP_TIMEOUT)
            .map_err(|e| format!("stopping {name}: {e}"))?;
        if s.killed {
            stop_notes.push(format!(
                "{name} did not stop within {}s of SIGTERM and was killed",
                STOP_TIMEOUT.as_secs()
            ));
        } else if !s.status.success() {
            stop_notes.push(format!("{name} exited with {} after SIGTERM", s.status));
        }
    }
    drop(folder);
    Ok(CompareReport {
        opts: opts.clone(),
        stria_source: cfg.source.clone(),
        stria_durability: cfg.wal.durability,
        redis: redis_dir,
        cases,
        stop_notes,
    })
}

fn summary(rows: &[CsvRow]) -> String {
    rows.iter()
        .map(|r| format!("{} {:.0} rps", r.test, r.rps))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The redis-server to compare with (`wanted`, or the one on PATH) and a
/// new folder for it beside the map's first WAL device file (same disk),
/// named `name-<pid>` and removed when the guard drops; or why Redis is
/// not run (not installed: Stria alone). A `wanted` one that is missing
/// is an error.
pub(crate) type RedisFolder = (PathBuf, Option<RemoveOnDrop>, Result<PathBuf, String>);

pub(crate) fn redis_folder(
    cfg: &Config,
    wanted: Option<&PathBuf>,
    name: &str,
) -> Result<RedisFolder, String> {
    let bin = wanted
        .cloned()
        .unwrap_or_else(|| PathBuf::from("redis-server"));
    if !process::installed(&bin) {
        if wanted.is_some() {
            return Err(format!("--redis-server {}: not found", bin.display()));
        }
        let why = format!(
            "{} is not installed (Debian: apt install redis-server); Stria alone",
            bin.display()
        );
        return Ok((bin, None, Err(why)));
    }
    // Absolute: redis-server changes to --dir before it opens --logfile.
    let wal_dir = process::wal_dir(cfg)?;
    let dir = std::fs::canonicalize(&wal_dir)
        .map_err(|e| format!("{}: {e}", wal_dir.display()))?
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok((bin, Some(RemoveOnDrop(dir.clone())), Ok(dir)))
}

/// Removes a folder and what it holds when dropped.
pub(crate) struct RemoveOnDrop(pub(crate) PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts Redis with every write fsynced before its reply, in `dir`.
pub(crate) fn start_redis(bin: &Path, dir: &Path) -> Result<ServerProcess, String> {
    let port = process::free_port().map_err(|e| format!("no free port: {e}"))?;
    let mut cmd = Command::new(bin);
    cmd.arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--daemonize", "no"])
        .args([
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"));
    let addr = ([127, 0, 0, 1], port).into();
    ServerProcess::spawn_pinged("redis-server", cmd, addr, Duration::from_secs(30)).map_err(|e| {
        let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        format!(
            "{e}; the end of its log: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )
    })
}

/// Requests of a case with `pipeline` depth: a pipelined case completes
/// requests about `pipeline` times as fast, and with the same `-n` it
/// lasted a fraction of a second, mostly its clients' ramp (at `-n 20000`,
/// `-P 16` ran 0.2 s and Redis's rate varied from 55,000 to 92,000 between
/// runs).
pub fn requests_of(requests: u64, pipeline: usize) -> u64 {
    // redis-benchmark reads -n as a C int.
    requests
        .saturating_mul(pipeline as u64)
        .min(i32::MAX as u64)
}

/// Each of [`TESTS`] against `server`, one redis-benchmark each, with the
/// server's CPU time and context switches per request around it.
fn benchmark_run(
    server: &ServerProcess,
    password: Option<&str>,
    opts: &CompareOptions,
    clients: usize,
    pipeline: usize,
) -> Result<Vec<CsvRow>, String> {
    let mut rows = Vec::new();
    let requests = requests_of(opts.requests, pipeline);
    for (test, random) in TESTS {
        let before = procstat::sample(server.pid());
        let mut got = benchmark_one(server, password, opts, clients, pipeline, test, random)?;
        let after = procstat::sample(server.pid());
        if let (Some(a), Some(b)) = (before, after) {
            let (cpu, switches) = a.per_op(&b, requests);
            for r in &mut got {
                r.cpu_us = Some(cpu);
                r.switches = Some(switches);
            }
        }
        if !random {
            for r in &mut got {
                r.test = HOT_INCR.to_string();
            }
        }
        rows.extend(got);
    }
    Ok(rows)
}

/// `redis-benchmark -t test` against `server`.
pub(crate) fn benchmark_one(
    server: &ServerProcess,
    password: Option<&str>,
    opts: &CompareOptions,
    clients: usize,
    pipeline: usize,
    test: &str,
    random: bool,
) -> Result<Vec<CsvRow>, String> {
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", &server.addr.ip().to_string()])
        .args(["-p", &server.addr.port().to_string()])
        .args(["-t", test])
        .args(["-d", &opts.data_size.to_string()])
        .args(["-n", &requests_of(opts.requests, pipeline).to_string()])
        .args(["-c", &clients.to_string()])
        .args(["-P", &pipeline.to_string()])
        .arg("--csv");
    if random {
        cmd.args(["-r", &KEYSPACE.to_string()]);
    }
    if let Some(p) = password {
        cmd.args(["-a", p]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "redis-benchmark against {} ({}) failed ({}): {}{}",
            server.name(),
            server.addr,
            out.status,
            stdout.trim(),
            stderr.trim()
        ));
    }
    parse_csv(&stdout).map_err(|e| {
        format!(
            "{e} against {} ({}): {}{}",
            server.name(),
            server.addr,
            stdout.trim(),
            stderr.trim()
        )
    })
}

fn per_op(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

fn p99_us(row: Option<&CsvRow>) -> String {
    row.and_then(|r| r.p99_ms)
        .map_or_else(|| "-".to_string(), |ms| fmt_us(ms * 1000.0))
}

impl fmt::Display for CompareReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.opts;
        writeln!(
            f,
            "redis-benchmark -t set / get / incr -d {} -n {} (times P with -P P) -r {KEYSPACE}, and -t incr without -r ({HOT_INCR}); cpu: server utime+stime per request; cs: server context switches per request; stria: stria serve with {}, durability {} (the server's default: redis-benchmark cannot set one)",
            o.data_size,
            o.requests,
            self.stria_source,
            self.stria_durability.as_str()
        )?;
        if self.stria_durability != Durability::Sync {
            writeln!(
                f,
                "  NOTE: Stria is not at durability sync: the comparison with Redis's appendfsync always is not like for like"
            )?;
        }
        match &self.redis {
            Ok(dir) => writeln!(
                f,
                "redis: appendonly yes, appendfsync always, save \"\", in {}",
                dir.display()
            )?,
            Err(why) => writeln!(f, "redis: not run: {why}")?,
        }
        let mut t = Table::new([
            "test",
            "c",
            "P",
            "stria rps",
            "redis rps",
            "stria/redis",
            "stria p99 us",
            "redis p99 us",
            "stria cpu us",
            "redis cpu us",
            "stria cs",
            "redis cs",
        ]);
        for case in &self.cases {
            for s in &case.stria {
                let r = case
                    .redis
                    .as_ref()
                    .and_then(|rows| rows.iter().find(|r| r.test == s.test));
                t.row([
                    s.test.clone(),
                    case.clients.to_string(),
                    case.pipeline.to_string(),
                    format!("{:.0}", s.rps),
                    r.map_or_else(|| "-".into(), |r| format!("{:.0}", r.rps)),
                    r.map_or_else(
                        || "-".into(),
                        |r| format!("{:.2}x", s.rps / r.rps.max(1e-9)),
                    ),
                    p99_us(Some(s)),
                    p99_us(r),
                    per_op(s.cpu_us, 1),
                    per_op(r.and_then(|r| r.cpu_us), 1),
                    per_op(s.switches, 2),
                    per_op(r.and_then(|r| r.switches), 2),
                ]);
            }
        }
        write!(f, "{t}")?;
        for note in &self.stop_notes {
            writeln!(f, "{note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// redis-benchmark 7.0.15's output for `-t set,get -d 1024 -n 2000 -c 1
    /// -P 1 -r 100000 --csv` against a local Redis.
    const SAMPLE: &str = include_str!("testdata/redis-benchmark-7.0.csv");

    #[test]
    fn parses_redis_7_csv() {
        let rows = parse_csv(SAMPLE).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            CsvRow {
                test: "SET".into(),
                rps: 15873.02,
                avg_ms: Some(0.055),
                p50_ms: Some(0.047),
                p99_ms: Some(0.351),
                max_ms: Some(1.559),
                cpu_us: None,
                switches: None,
            }
        );
        assert_eq!(rows[1].test, "GET");
        assert_eq!(rows[1].p99_ms, Some(0.095));
    }

    #[test]
    fn parses_headerless_csv_of_older_versions_and_skips_progress() {
        let text = "SET: 1234.00\r\"SET\",\"15873.02\"\n\"GET\",\"21978.02\"\n";
        let rows = parse_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].rps, 15873.02);
        assert_eq!(rows[0].p99_ms, None);
    }

    #[test]
    fn a_pipelined_case_runs_its_depth_times_the_requests() {
        assert_eq!(requests_of(20_000, 1), 20_000);
        assert_eq!(requests_of(20_000, 16), 320_000);
        assert_eq!(requests_of(u64::MAX, 16), i32::MAX as u64);
    }

    #[test]
    fn says_what_is_wrong() {
        assert!(parse_csv("").unwrap_err().contains("no results"));
        assert!(parse_csv("\"SET\",\"fast\"\n")
            .unwrap_err()
            .contains("not a number"));
    }

    #[test]
    fn a_report_without_redis_prints_stria_alone() {
        let rows = parse_csv(SAMPLE).unwrap();
        let report = CompareReport {
            opts: CompareOptions {
                requests: 2000,
                data_size: 1024,
                redis_server: None,
            },
            stria_source: "conf/local.yaml".into(),
            stria_durability: Durability::Sync,
            redis: Err("redis-server is not installed".into()),
            cases: vec![Case {
                clients: 1,
                pipeline: 1,
                stria: rows,
                redis: None,
            }],
            stop_notes: vec![],
        };
        let text = report.to_string();
        assert!(
            text.contains("redis: not run: redis-server is not installed"),
            "{text}"
        );
        assert!(text.contains("SET   1  1      15873  -"), "{text}");
    }
}
