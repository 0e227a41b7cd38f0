//! `stria bench compare`: the same workloads on Stria's backends and on
//! its peers, alternated, with medians, ratios, CPU per operation, a JSON
//! file of every number and SVG charts.
//!
//! Systems: Stria on each map `--stria` names (by default the shipped maps
//! of `uring`, `psync` and `sim`), RocksDB (cargo feature `peers`), Redis
//! with every write fsynced (`redis-server`), and fio (the device's
//! floor). A system that cannot run is reported as "not run: <why>".
//!
//! Alternation: for each case of a workload, round after round, every
//! system runs once (A B A B ...), so drift of the machine (another
//! tenant, the page cache, the disk's own state) hits all alike; the
//! server workload starts each server once a round and runs all its
//! cases against it. Each Stria run starts from an empty engine and
//! erases what it wrote; each RocksDB run gets a fresh database; Redis a
//! fresh folder.

mod chart;
mod floor;
mod machine;
mod progress;
mod report;
#[cfg(feature = "peers")]
mod rocks;
mod sample;
mod server;
mod stria;
mod systems;
mod workloads;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use machine::Machine;
pub use report::Goal;
pub use sample::{Medians, Percentiles, Sample};
pub use systems::SystemInfo;
pub use workloads::{IngestCase, ServerTest, WalPeCase, Workload};

use crate::bench::process::{self, Serve, STOP_TIMEOUT};
use crate::config::Durability;
use progress::Progress;
use server::ServerSpec;
use systems::StriaMap;

/// `stria bench compare`'s options.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// A Stria system: NAME=MAP runs Stria as `stria-NAME` on the map
    /// (repeatable; default: the shipped maps uring=conf/uring.yaml,
    /// psync=conf/psync.yaml and sim=conf/sim.yaml).
    #[arg(long = "stria", value_name = "NAME=MAP", value_parser = systems::parse_stria)]
    pub stria: Vec<(String, PathBuf)>,
    /// Only these systems (stria-NAME, rocksdb, redis, fio), comma-separated
    /// (default: all).
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    /// Workloads to run, comma-separated: floor, wal-pe, ingest, latency,
    /// server (default: all).
    #[arg(long, value_delimiter = ',', value_parser = Workload::parse)]
    pub workloads: Vec<Workload>,
    /// Rounds: every system runs each case once a round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Seconds of each timed run (floor, wal-pe, latency).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// wal-pe's thread counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16, 100])]
    pub threads: Vec<usize>,
    /// ingest's clients.
    #[arg(long, default_value_t = 5)]
    pub clients: usize,
    /// ingest's records per client.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Requests of each redis-benchmark test at -c 50 -P 1 (times P with a
    /// pipeline, a fifth with one client).
    #[arg(long, default_value_t = 20_000)]
    pub requests: u64,
    /// redis-benchmark tests (set, get, incr, incr-1-key, lpush, rpush,
    /// lpop, rpop, sadd, zadd).
    #[arg(long, value_delimiter = ',', value_parser = ServerTest::parse,
          default_value = "set,get,incr,incr-1-key,lpush,rpop,sadd,zadd")]
    pub tests: Vec<ServerTest>,
    /// Server cases, CLIENTSxPIPELINE.
    #[arg(long, value_delimiter = ',', value_parser = workloads::parse_server_case,
          default_value = "1x1,50x1,50x16")]
    pub server_cases: Vec<(usize, usize)>,
    /// The redis-server to compare with (default: redis-server on PATH).
    #[arg(long, value_name = "PATH")]
    pub redis_server: Option<PathBuf>,
    /// Where the peers keep their files (default: the folder of the first
    /// WAL device file of the first file-backed Stria map: the same disk).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Where results.json, report.md and the charts go.
    #[arg(long, value_name = "DIR", default_value = "compare-results")]
    pub out: PathBuf,
    /// Run even on maps whose engine keeps data, destroying it.
    #[arg(long)]
    pub force: bool,
}

/// The results of one system on one case.
#[derive(Clone, Debug, Serialize)]
pub struct SystemResult {
    pub system: String,
    pub samples: Vec<Sample>,
    /// Over the samples; `None` when it did not run.
    pub medians: Option<Medians>,
    /// Why it did not run (or stopped).
    pub not_run: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    pub name: String,
    pub results: Vec<SystemResult>,
}

impl CaseReport {
    pub fn result(&self, system: &str) -> Option<&SystemResult> {
        self.results.iter().find(|r| r.system == system)
    }

    pub fn medians(&self, system: &str) -> Option<&Medians> {
        self.result(system).and_then(|r| r.medians.as_ref())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    pub name: String,
    pub description: String,
    /// The peer Stria's ratios are to (rocksdb, redis), if any.
    pub peer: Option<String>,
    pub cases: Vec<CaseReport>,
}

impl WorkloadReport {
    pub fn case(&self, name: &str) -> Option<&CaseReport> {
        self.cases.iter().find(|c| c.name == name)
    }
}

/// Everything a comparison measured.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    pub date: String,
    pub command: String,
    pub machine: Machine,
    pub load_after: [f64; 3],
    pub rounds: usize,
    pub systems: Vec<SystemInfo>,
    pub workloads: Vec<WorkloadReport>,
    pub goals: Vec<Goal>,
    /// Files written (JSON, report, charts).
    pub files: Vec<String>,
}

impl CompareReport {
    pub fn workload(&self, name: &str) -> Option<&WorkloadReport> {
        self.workloads.iter().find(|w| w.name == name)
    }

    /// True when some Stria run failed.
    pub fn stria_failed(&self) -> bool {
        self.workloads.iter().any(|w| {
            w.cases.iter().any(|c| {
                c.results.iter().any(|r| {
                    r.system.starts_with("stria-")
                        && r.not_run
                            .as_deref()
                            .is_some_and(|n| n.starts_with("failed"))
                })
            })
        })
    }
}

/// Everything the runs need.
struct Plan {
    args: CompareArgs,
    maps: Vec<StriaMap>,
    dir: PathBuf,
    serve: Serve,
    /// Every system considered, with why it is not run.
    systems: Vec<SystemInfo>,
}

impl Plan {
    fn selected(&self, name: &str) -> bool {
        self.args.systems.is_empty() || self.args.systems.iter().any(|s| s == name)
    }

    /// The systems of a workload (by name) that are selected, with why
    /// each is not run.
    fn of(&self, names: &[&str]) -> Vec<(String, Option<String>)> {
        self.systems
            .iter()
            .filter(|s| {
                names.contains(&s.name.as_str())
                    || (names.contains(&"stria-*") && s.name.starts_with("stria-"))
            })
            .map(|s| (s.name.clone(), s.not_run.clone()))
            .collect()
    }

    fn map(&self, name: &str) -> &StriaMap {
        self.maps
            .iter()
            .find(|m| m.name == name)
            .expect("a Stria system has a map")
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.args.seconds)
    }
}

/// Runs the comparison and writes its files into `args.out`.
pub fn run(args: CompareArgs, command: String) -> Result<CompareReport, String> {
    if args.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    if !(args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(format!(
            "--seconds {}: must be more than 0 and at most 3600",
            args.seconds
        ));
    }
    if args.threads.contains(&0) || args.clients == 0 || args.records == 0 || args.requests == 0 {
        return Err("--threads, --clients, --records and --requests must be at least 1".into());
    }
    let stria_names: Vec<String> = if args.stria.is_empty() {
        systems::DEFAULT_MAPS
            .iter()
            .map(|(n, _)| format!("stria-{n}"))
            .collect()
    } else {
        args.stria
            .iter()
            .map(|(n, _)| format!("stria-{n}"))
            .collect()
    };
    for name in &args.systems {
        let known = stria_names.contains(name)
            || ["rocksdb", "redis", "fio", "stria-spdk"].contains(&name.as_str());
        if !known {
            return Err(format!(
                "--systems {name}: not a system here ({}, rocksdb, redis, fio)",
                stria_names.join(", ")
            ));
        }
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let maps = systems::stria_maps(&args.stria, &args.out.join("maps"))?;
    let dir = systems::peer_dir(args.dir.as_deref(), &maps)?;
    let serve = Serve::current(None).map_err(|e| format!("cannot find stria itself: {e}"))?;
    let mut plan = Plan {
        args,
        maps,
        dir,
        serve,
        systems: Vec::new(),
    };
    plan.systems = list_systems(&plan)?;
    let machine = Machine::read(&plan.dir);
    let workloads = if plan.args.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        plan.args.workloads.clone()
    };
    let progress = Progress::new(count_runs(&plan, &workloads));
    let mut reports = Vec::new();
    for w in &workloads {
        process::settle();
        reports.push(match w {
            Workload::Floor => run_floor(&plan, &progress),
            Workload::WalPe => run_wal_pe(&plan, &progress),
            Workload::Ingest => run_ingest(&plan, &progress),
            Workload::Latency => run_latency(&plan, &progress),
            Workload::Server => run_server(&plan, &progress),
        });
    }
    progress.finish();
    let mut report = CompareReport {
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command,
        machine,
        load_after: machine::load_average(),
        rounds: plan.args.rounds,
        systems: plan.systems.clone(),
        workloads: reports,
        goals: Vec::new(),
        files: Vec::new(),
    };
    report.goals = report::goals(&report);
    report.files = write_files(&report, &plan.args.out)?;
    Ok(report)
}

/// Every system considered, in the order they run, with why a system is
/// not run.
fn list_systems(plan: &Plan) -> Result<Vec<SystemInfo>, String> {
    let mut out = Vec::new();
    for m in &plan.maps {
        if !plan.selected(&m.name) {
            continue;
        }
        let not_run = match systems::prepare(m, plan.args.force) {
            Ok(_) => None,
            Err(e) => return Err(e),
        };
        out.push(SystemInfo {
            name: m.name.clone(),
            detail: format!("stria {} with {}", env!("CARGO_PKG_VERSION"), m.cfg.source),
            not_run,
            simulated: m.cfg.wal.devices.iter().any(|d| {
                m.cfg
                    .device(d)
                    .is_some_and(|d| d.kind() == crate::device::BackendKind::Sim)
            }),
        });
    }
    if plan.selected("stria-spdk") && !plan.maps.iter().any(|m| m.name == "stria-spdk") {
        out.push(SystemInfo {
            name: "stria-spdk".into(),
            detail: "Stria on SPDK's NVMe driver".into(),
            not_run: Some(if cfg!(feature = "spdk") {
                "no SPDK map given (--stria spdk=MAP with spdk devices)".into()
            } else {
                "built without the spdk feature (cargo build --release --features spdk)".into()
            }),
            simulated: false,
        });
    }
    if plan.selected("rocksdb") {
        out.push(SystemInfo {
            name: "rocksdb".into(),
            detail: rocksdb_version(),
            not_run: systems::rocksdb_missing(),
            simulated: false,
        });
    }
    if plan.selected("redis") {
        let bin = plan
            .args
            .redis_server
            .clone()
            .unwrap_or_else(|| PathBuf::from("redis-server"));
        let not_run = systems::program_missing(&bin, "redis-server")
            .or_else(|| systems::program_missing(Path::new("redis-benchmark"), "redis-tools"));
        out.push(SystemInfo {
            name: "redis".into(),
            detail: if not_run.is_none() {
                format!(
                    "{}, appendonly yes, appendfsync always, save \"\"",
                    systems::version_of(&bin, "--version")
                )
            } else {
                "Redis with appendfsync always".into()
            },
            not_run,
            simulated: false,
        });
    }
    if plan.selected("fio") {
        let not_run = systems::program_missing(Path::new("fio"), "fio");
        out.push(SystemInfo {
            name: "fio".into(),
            detail: if not_run.is_none() {
                systems::version_of(Path::new("fio"), "--version")
            } else {
                "fio".into()
            },
            not_run,
            simulated: false,
        });
    }
    Ok(out)
}

fn rocksdb_version() -> String {
    #[cfg(feature = "peers")]
    {
        rocks::version()
    }
    #[cfg(not(feature = "peers"))]
    {
        "RocksDB through the rocksdb crate".into()
    }
}

/// How many runs the progress bar counts.
fn count_runs(plan: &Plan, workloads: &[Workload]) -> u64 {
    let ready = |names: &[&str]| plan.of(names).iter().filter(|s| s.1.is_none()).count() as u64;
    let r = plan.args.rounds as u64;
    workloads
        .iter()
        .map(|w| match w {
            Workload::Floor => floor::CASES.len() as u64 * r * ready(&["fio"]),
            Workload::WalPe => plan.args.threads.len() as u64 * r * ready(&["stria-*", "rocksdb"]),
            Workload::Ingest => 2 * r * ready(&["stria-*", "rocksdb"]),
            Workload::Latency => r * ready(&["stria-*", "rocksdb"]),
            Workload::Server => r * ready(&["stria-*", "redis"]),
        })
        .sum()
}

/// Runs `cases` x rounds x `systems`, the systems alternating within each
/// round; a system that fails stops for that case and says why.
fn alternate(
    plan: &Plan,
    progress: &Progress,
    workload: Workload,
    cases: &[String],
    systems: &[(String, Option<String>)],
    mut run: impl FnMut(usize, &str) -> Result<Sample, String>,
) -> Vec<CaseReport> {
    let mut out = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        let mut results: Vec<SystemResult> = systems
            .iter()
            .map(|(name, not_run)| SystemResult {
                system: name.clone(),
                samples: Vec::new(),
                medians: None,
                not_run: not_run.as_ref().map(|w| format!("not run: {w}")),
            })
            .collect();
        for round in 1..=plan.args.rounds {
            for r in results.iter_mut().filter(|r| r.not_run.is_none()) {
                let what = format!("{} {case} {} (round {round})", workload.name(), r.system);
                progress.start(&what);
                match run(c, &r.system) {
                    Ok(s) => {
                        progress.done(&what, &s);
                        r.samples.push(s);
                    }
                    Err(e) => {
                        progress.line(&format!("{what}: failed: {e}"));
                        r.not_run = Some(format!("failed in round {round}: {e}"));
                    }
                }
            }
        }
        for r in &mut results {
            if !r.samples.is_empty() {
                r.medians = Some(Medians::of(&r.samples));
            }
        }
        out.push(CaseReport {
            name: case.clone(),
            results,
        });
    }
    out
}

fn workload_report(w: Workload, peer: Option<&str>, cases: Vec<CaseReport>) -> WorkloadReport {
    WorkloadReport {
        name: w.name().into(),
        description: w.description().into(),
        peer: peer.map(str::to_string),
        cases,
    }
}

fn run_floor(plan: &Plan, progress: &Progress) -> WorkloadReport {
    let cases: Vec<String> = floor::CASES.iter().map(|(n, _)| n.to_string()).collect();
    let systems = plan.of(&["fio"]);
    let cases = alternate(plan, progress, Workload::Floor, &cases, &systems, |c, _| {
        floor::run(&plan.dir, c, plan.args.seconds)?.ok_or_else(|| "fio is not installed".into())
    });
    workload_report(Workload::Floor, None, cases)
}

/// A peer's run, or why this build cannot make it.
#[cfg(not(feature = "peers"))]
fn peer_missing() -> Result<Sample, String> {
    Err(systems::rocksdb_missing().unwrap_or_default())
}

/// An in-process workload: `cases` on every Stria map (`stria`) and on
/// RocksDB (`peer`).
fn in_process<T>(
    plan: &Plan,
    progress: &Progress,
    workload: Workload,
    cases: &[T],
    name: fn(&T) -> String,
    stria: impl Fn(&crate::config::Config, &T) -> Result<Sample, String>,
    peer: impl Fn(&T) -> Result<Sample, String>,
) -> WorkloadReport {
    let names: Vec<String> = cases.iter().map(name).collect();
    let systems = plan.of(&["stria-*", "rocksdb"]);
    let results = alternate(plan, progress, workload, &names, &systems, |c, sys| {
        if sys == "rocksdb" {
            peer(&cases[c])
        } else {
            stria(&plan.map(sys).cfg, &cases[c])
        }
    });
    workload_report(workload, Some("rocksdb"), results)
}

fn run_wal_pe(plan: &Plan, progress: &Progress) -> WorkloadReport {
    let cases: Vec<WalPeCase> = plan
        .args
        .threads
        .iter()
        .map(|&threads| WalPeCase {
            threads,
            value_size: 1024,
            durability: Durability::Sync,
        })
        .collect();
    let d = plan.duration();
    #[cfg(feature = "peers")]
    let peer = |c: &WalPeCase| rocks::wal_pe(&plan.dir, c, d);
    #[cfg(not(feature = "peers"))]
    let peer = |_: &WalPeCase| peer_missing();
    let stria = |cfg: &crate::config::Config, c: &WalPeCase| stria::wal_pe(cfg, c, d);
    in_process(
        plan,
        progress,
        Workload::WalPe,
        &cases,
        WalPeCase::name,
        stria,
        peer,
    )
}

fn run_ingest(plan: &Plan, progress: &Progress) -> WorkloadReport {
    let cases: Vec<IngestCase> = [Durability::Sync, Durability::Write]
        .into_iter()
        .map(|durability| IngestCase {
            clients: plan.args.clients,
            records: plan.args.records,
            value_size: 500,
            durability,
        })
        .collect();
    #[cfg(feature = "peers")]
    let peer = |c: &IngestCase| rocks::ingest(&plan.dir, c);
    #[cfg(not(feature = "peers"))]
    let peer = |_: &IngestCase| peer_missing();
    in_process(
        plan,
        progress,
        Workload::Ingest,
        &cases,
        IngestCase::name,
        stria::ingest,
        peer,
    )
}

fn run_latency(plan: &Plan, progress: &Progress) -> WorkloadReport {
    let d = plan.duration();
    #[cfg(feature = "peers")]
    let peer = |_: &()| rocks::latency(&plan.dir, 1024, Durability::Sync, d);
    #[cfg(not(feature = "peers"))]
    let peer = |_: &()| peer_missing();
    let stria =
        |cfg: &crate::config::Config, _: &()| stria::latency(cfg, 1024, Durability::Sync, d);
    let name = |_: &()| "1 KiB sync put".to_string();
    in_process(plan, progress, Workload::Latency, &[()], name, stria, peer)
}

/// The server workload: each round starts every server in turn, runs all
/// of its cases, and stops it.
fn run_server(plan: &Plan, progress: &Progress) -> WorkloadReport {
    let spec = ServerSpec {
        cases: plan.args.server_cases.clone(),
        tests: plan.args.tests.clone(),
        requests: plan.args.requests,
        data_size: 1024,
    };
    let systems = plan.of(&["stria-*", "redis"]);
    let benchmark_missing = systems::program_missing(Path::new("redis-benchmark"), "redis-tools");
    let names: Vec<String> = spec
        .cases
        .iter()
        .flat_map(|&(c, p)| spec.tests.iter().map(move |t| server::case_name(t, c, p)))
        .collect();
    let mut results: Vec<Vec<SystemResult>> = names
        .iter()
        .map(|_| {
            systems
                .iter()
                .map(|(name, not_run)| SystemResult {
                    system: name.clone(),
                    samples: Vec::new(),
                    medians: None,
                    not_run: not_run
                        .clone()
                        .or_else(|| benchmark_missing.clone())
                        .map(|w| format!("not run: {w}")),
                })
                .collect()
        })
        .collect();
    for round in 1..=plan.args.rounds {
        for (s, (system, _)) in systems.iter().enumerate() {
            if results.iter().all(|case| case[s].not_run.is_some()) {
                continue;
            }
            let what = format!("server {system} (round {round})");
            progress.start(&what);
            let got = server_round(plan, &spec, system, |name, sample| {
                progress.line(&format!("  {system} {name}: {}", progress::summary(sample)));
            });
            match got {
                Ok(samples) => {
                    for (case, (_, sample)) in results.iter_mut().zip(samples) {
                        case[s].samples.push(sample);
                    }
                    progress.step();
                }
                Err(e) => {
                    progress.line(&format!("{what}: failed: {e}"));
                    for case in &mut results {
                        case[s].not_run = Some(format!("failed in round {round}: {e}"));
                    }
                    progress.step();
                }
            }
        }
    }
    let cases = names
        .into_iter()
        .zip(results)
        .map(|(name, mut results)| {
            for r in &mut results {
                if !r.samples.is_empty() {
                    r.medians = Some(Medians::of(&r.samples));
                }
            }
            CaseReport { name, results }
        })
        .collect();
    workload_report(Workload::Server, Some("redis"), cases)
}

/// One round of one server: start it, run every case, stop it, and (for
/// Stria) erase what it kept.
fn server_round(
    plan: &Plan,
    spec: &ServerSpec,
    system: &str,
    done: impl FnMut(&str, &Sample),
) -> Result<Vec<(String, Sample)>, String> {
    if system == "redis" {
        let bin = plan
            .args
            .redis_server
            .clone()
            .unwrap_or_else(|| PathBuf::from("redis-server"));
        let folder = plan
            .dir
            .join(format!("stria-compare-redis-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder)
            .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
        let _remove = crate::bench::redis_compare::RemoveOnDrop(folder.clone());
        let redis = crate::bench::redis_compare::start_redis(&bin, &folder)?;
        let out = server::run(&redis, None, spec, done);
        let stopped = stop(redis);
        return out.and_then(|o| stopped.map(|()| o));
    }
    let map = plan.map(system);
    let serve = Serve {
        exe: plan.serve.exe.clone(),
        config: Some(map.path.clone()),
    };
    let stria = serve.start(&map.cfg)?;
    let out = server::run(&stria, map.cfg.server.password.as_deref(), spec, done);
    // Erased whatever happened, so a failed round leaves no data behind.
    let stopped = stop(stria);
    let erased = crate::admin::erase(&map.cfg).map_err(|e| e.to_string());
    out.and_then(|o| stopped.and(erased).map(|()| o))
}

fn stop(server: process::ServerProcess) -> Result<(), String> {
    let name = server.name().to_string();
    let s = server
        .stop(STOP_TIMEOUT)
        .map_err(|e| format!("stopping {name}: {e}"))?;
    if s.killed {
        return Err(format!(
            "{name} did not stop within {}s of SIGTERM and was killed",
            STOP_TIMEOUT.as_secs()
        ));
    }
    Ok(())
}

/// Writes results.json, report.md and the charts; returns their paths.
fn write_files(report: &CompareReport, out: &Path) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    let json = out.join("results.json");
    let charts = chart::draw_all(report, out)?;
    let mut with_files = report.clone();
    files.push(json.display().to_string());
    let md = out.join("report.md");
    files.push(md.display().to_string());
    files.extend(charts.iter().map(|p| p.display().to_string()));
    with_files.files = files.clone();
    let text = serde_json::to_string_pretty(&with_files).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("{}: {e}", json.display()))?;
    let names: Vec<String> = charts
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    std::fs::write(&md, report::markdown(&with_files, &names))
        .map_err(|e| format!("{}: {e}", md.display()))?;
    Ok(files)
}
