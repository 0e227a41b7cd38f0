//! `stria devbench`: every case of [`standard_cases`] on every configured
//! device, each run by a reactor pinned to the map's first WAL core, with the
//! map's idle policy (or the one asked for), reported as one table.
//!
//! Rows are ordered case by case and, within a case, device by device, with
//! each map's row for the same device name next to the others: given
//! `conf/uring.yaml` and `conf/psync.yaml`, uring and psync on the same disk
//! stand side by side, with their IOPS ratio to the first map's row.

use std::fmt;
use std::sync::mpsc;
use std::time::Duration;

use super::device::{standard_cases, Case, CaseResult, Job, Pattern};
use super::latency::fmt_us;
use super::table::Table;
use crate::admin::{self, AdminError};
use crate::config::{Config, DeviceConfig, IdlePolicy, RESERVED_BYTES};
use crate::device::{AnyDevice, AnyQueue, Device, DeviceError};
use crate::reactor::{self, Progress, ReactorConfig, ReactorError, WaitHint, Work};

/// What to run.
#[derive(Clone, Debug)]
pub struct DevbenchOptions {
    /// How long each case runs.
    pub duration: Duration,
    /// The reactor's idle policy; `None` takes each map's.
    pub idle: Option<IdlePolicy>,
    /// Only these devices (by name); empty means all.
    pub devices: Vec<String>,
    /// Run even on a map whose engine keeps data, destroying it.
    pub force: bool,
}

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum DevbenchError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error("{0}")]
    Usage(String),
}

/// Bytes the random-read cases cover (written first, so reads hit real data).
const READ_REGION: u64 = 64 << 20;

/// One measured row.
#[derive(Clone, Debug)]
pub struct Row {
    pub config: String,
    pub device: String,
    pub backend: String,
    pub idle: IdlePolicy,
    pub result: CaseResult,
}

/// Everything measured, in run order.
#[derive(Clone, Debug)]
pub struct DevbenchReport {
    /// What the engines kept on the maps and the forced run destroyed.
    pub destroyed: Vec<String>,
    pub rows: Vec<Row>,
    pub duration: Duration,
    pub machine: String,
}

/// Runs the bench on every device of every map.
pub fn run(configs: &[Config], opts: &DevbenchOptions) -> Result<DevbenchReport, DevbenchError> {
    for name in &opts.devices {
        if !configs.iter().any(|c| c.device(name).is_some()) {
            return Err(DevbenchError::Usage(format!(
                "--device {name}: no such device in the maps given"
            )));
        }
    }
    // Every map is checked before any device is written.
    let mut destroyed = Vec::new();
    for cfg in configs {
        for what in admin::guard(cfg, "stria devbench", opts.force)? {
            destroyed.push(format!("{}: {what}", cfg.source));
        }
    }
    let mut rows = Vec::new();
    for cfg in configs {
        let idle = opts.idle.unwrap_or(cfg.reactors.idle);
        let mut rcfg = ReactorConfig::pinned("devbench", cfg.reactors.wal[0], &cfg.reactors);
        rcfg.idle = idle;
        for dev_cfg in &cfg.devices {
            if !opts.devices.is_empty() && !opts.devices.contains(&dev_cfg.name) {
                continue;
            }
            let dev = AnyDevice::open(dev_cfg, &cfg.spdk)?;
            tracing::info!(config = %cfg.source, device = %dev_cfg.name, "benchmarking");
            for case in standard_cases() {
                if case.pattern == Pattern::RandRead {
                    prefill(&dev, dev_cfg, &rcfg)?;
                }
                let result = run_case(&dev, dev_cfg, case, opts.duration, &rcfg)?;
                rows.push(Row {
                    config: cfg.appliance.clone(),
                    device: dev_cfg.name.clone(),
                    backend: dev_cfg.kind().to_string(),
                    idle,
                    result,
                });
            }
        }
        // Whatever the cases wrote over the log and the manifest, the
        // devices now hold an empty engine.
        admin::erase(cfg)?;
    }
    Ok(DevbenchReport {
        destroyed,
        rows,
        duration: opts.duration,
        machine: machine(),
    })
}

/// The LBAs the bench may use: everything past the reserved area.
fn data_region(dev: &AnyDevice) -> std::ops::Range<u64> {
    let info = dev.info();
    let first = RESERVED_BYTES / u64::from(info.block_size);
    first..info.capacity_blocks
}

/// Writes the random-read region once with large requests.
fn prefill(dev: &AnyDevice, cfg: &DeviceConfig, rcfg: &ReactorConfig) -> Result<(), DevbenchError> {
    let region = data_region(dev);
    let blocks = (READ_REGION / u64::from(cfg.block_size)).min(region.end - region.start);
    let case = Case {
        pattern: Pattern::SeqWrite,
        block: 1 << 20,
        qd: 8,
    };
    let bytes = blocks * u64::from(cfg.block_size);
    // Long enough to cover the region at a slow disk's pace; the job stops
    // once every request of the last pass has completed.
    let passes = bytes.div_ceil(case.block as u64) as usize;
    let res = run_job(
        dev,
        case,
        region.start..region.start + blocks,
        Duration::from_secs(3600),
        Some(passes),
        rcfg,
    )?;
    if let Some(e) = res.first_error {
        return Err(DevbenchError::Usage(format!(
            "{}: prefilling the read region failed: {e}",
            cfg.name
        )));
    }
    Ok(())
}

fn run_case(
    dev: &AnyDevice,
    cfg: &DeviceConfig,
    case: Case,
    duration: Duration,
    rcfg: &ReactorConfig,
) -> Result<CaseResult, DevbenchError> {
    let region = data_region(dev);
    let region = match case.pattern {
        Pattern::RandRead => {
            let blocks = (READ_REGION / u64::from(cfg.block_size)).min(region.end - region.start);
            region.start..region.start + blocks
        }
        _ => region,
    };
    run_job(dev, case, region, duration, None, rcfg)
}

/// A reactor running one bench job, sending its result when done.
struct BenchWork {
    /// The job, or why its queue could not be opened.
    job: Result<Job<AnyQueue>, Option<DeviceError>>,
    done: Option<mpsc::Sender<Result<CaseResult, DeviceError>>>,
}

impl Work for BenchWork {
    type Msg = ();

    fn handle(&mut self, _msg: ()) {}

    fn poll(&mut self) -> Progress {
        let (n, outcome) = match &mut self.job {
            Ok(job) => {
                let n = job.poll();
                (n, job.is_done().then(|| Ok(job.result())))
            }
            Err(e) => (0, e.take().map(Err)),
        };
        if let (Some(outcome), Some(tx)) = (outcome, self.done.as_ref()) {
            let _ = tx.send(outcome);
            self.done = None;
        }
        Progress {
            completions: n,
            work: 0,
        }
    }

    fn wait_hints(&self, out: &mut Vec<WaitHint>) {
        match &self.job {
            Ok(job) => out.push(job.wait_hint()),
            Err(_) => out.push(WaitHint::Idle),
        }
    }
}

fn run_job(
    dev: &AnyDevice,
    case: Case,
    region: std::ops::Range<u64>,
    duration: Duration,
    ops: Option<usize>,
    rcfg: &ReactorConfig,
) -> Result<CaseResult, DevbenchError> {
    let (tx, rx) = mpsc::channel();
    let dev = dev.clone();
    let reactor = reactor::spawn(rcfg.clone(), move || {
        let job = dev.open_queue().map_err(Some).map(|queue| {
            let mut job = Job::new(queue, case, region, duration, 1, |len| dev.alloc_buf(len));
            if let Some(n) = ops {
                job.limit_ops(n as u64);
            }
            job
        });
        BenchWork {
            job,
            done: Some(tx),
        }
    })?;
    let result = rx.recv();
    reactor.stop()?;
    match result {
        Ok(outcome) => Ok(outcome?),
        Err(_) => Err(DevbenchError::Usage(
            "the bench reactor stopped before its job finished".into(),
        )),
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown kernel".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores ({cpu}), Linux {kernel}")
}

impl DevbenchReport {
    /// The report as a table, rows grouped as described in the module doc.
    pub fn table(&self) -> Table {
        let configs: Vec<&str> = {
            let mut seen: Vec<&str> = Vec::new();
            for r in &self.rows {
                if !seen.contains(&r.config.as_str()) {
                    seen.push(&r.config);
                }
            }
            seen
        };
        let cases = standard_cases();
        let mut order: Vec<&Row> = self.rows.iter().collect();
        let config_index = |r: &Row| configs.iter().position(|c| *c == r.config).unwrap_or(0);
        let case_index = |r: &Row| cases.iter().position(|c| *c == r.result.case).unwrap_or(0);
        let device_order = |r: &Row| {
            self.rows
                .iter()
                .position(|x| x.device == r.device)
                .unwrap_or(0)
        };
        order.sort_by_key(|r| (case_index(r), device_order(r), config_index(r)));

        let mut t = Table::new([
            "case", "qd", "device", "backend", "map", "IOPS", "MB/s", "p50 us", "p99 us",
            "p99.9 us", "vs first", "errors",
        ]);
        for r in order {
            let res = &r.result;
            let s = res.latency.summary();
            let first = self
                .rows
                .iter()
                .find(|x| x.device == r.device && x.result.case == res.case);
            let ratio = match first {
                Some(f) if configs.len() > 1 && f.result.iops() > 0.0 => {
                    format!("{:.2}x", res.iops() / f.result.iops())
                }
                _ => "-".into(),
            };
            t.row([
                res.case.name(),
                res.qd.to_string(),
                r.device.clone(),
                r.backend.clone(),
                r.config.clone(),
                format!("{:.0}", res.iops()),
                format!("{:.1}", res.mb_per_s()),
                fmt_us(s.p50_us),
                fmt_us(s.p99_us),
                fmt_us(s.p999_us),
                ratio,
                res.errors.to_string(),
            ]);
        }
        t
    }
}

impl fmt::Display for DevbenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let idles: Vec<&str> = {
            let mut v: Vec<&str> = self
                .rows
                .iter()
                .map(|r| match r.idle {
                    IdlePolicy::Poll => "poll",
                    IdlePolicy::Park => "park",
                })
                .collect();
            v.dedup();
            v
        };
        writeln!(
            f,
            "stria devbench: {} per case, reactor idle policy {}, on {}",
            human_duration(self.duration),
            idles.join("/"),
            self.machine
        )?;
        write!(f, "{}", self.table())?;
        for r in self.rows.iter().filter(|r| r.result.first_error.is_some()) {
            writeln!(
                f,
                "errors on {} ({}), {} qd {}: {} (first: {})",
                r.device,
                r.config,
                r.result.case.name(),
                r.result.qd,
                r.result.errors,
                r.result.first_error.as_deref().unwrap_or("")
            )?;
        }
        for what in &self.destroyed {
            writeln!(f, "forced: destroyed what the engine kept on {what}")?;
        }
        writeln!(
            f,
            "the engine's log and manifest were erased: the devices hold an empty engine"
        )
    }
}

fn human_duration(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}
