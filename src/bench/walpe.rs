//! `stria bench wal-pe`: the shape of HBase's WALPerformanceEvaluation.
//!
//! T threads each append N records of V bytes at one durability level,
//! each waiting for its acknowledgement before the next (or keeping K in
//! flight), against the WAL devices of a map. What is durable is released
//! every millisecond, as if the memstores flushed at once, so a long run
//! measures the log and never fills it.
//!
//! The bench writes the engine's own log, so it refuses a map whose
//! engine keeps data (unless forced) and afterwards erases the engine's
//! metadata: the next open finds an empty engine, never a log of bench
//! records it would read as corruption. With `keep` the log is left for
//! the next run to recover, and the engine cannot use the devices until
//! they are formatted again.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::latency::{fmt_us, Latency};
use super::procstat::{self, ProcSample};
use crate::admin::{self, AdminError};
use crate::config::{Config, Durability};
use crate::device::{AnyDevice, DeviceError};
use crate::reactor::{CountersSnapshot, ReactorConfig};
use crate::wal::recovery::WalDevice;
use crate::wal::stats::WalStatsSnapshot;
use crate::wal::{Wal, WalError, WalOptions};

/// What to run.
#[derive(Clone, Debug)]
pub struct WalPeOptions {
    pub threads: usize,
    pub iterations: u64,
    pub value_size: usize,
    pub key_size: usize,
    pub durability: Durability,
    /// Appends each thread keeps in flight.
    pub in_flight: usize,
    /// Use the first `devices` WAL devices of the map (default: all).
    pub devices: Option<usize>,
    /// Keep everything appended (never release the log), so that the next
    /// open recovers it all: how recovery time of a full log is measured.
    /// The run must fit in the log, or writers wait for space forever.
    pub keep: bool,
    /// Run even on a map whose engine keeps data, destroying it.
    pub force: bool,
    /// Stop each thread after this long even if it has appends left (a
    /// timed run, as `bench compare` makes; `None`: all iterations).
    pub duration: Option<Duration>,
}

/// What was measured.
#[derive(Clone, Debug)]
pub struct WalPeReport {
    pub opts: WalPeOptions,
    pub devices: Vec<String>,
    pub elapsed: Duration,
    /// Appends acknowledged (fewer than threads x iterations in a timed run).
    pub appended: u64,
    /// The process's CPU time and context switches over the appends.
    pub usage: ProcSample,
    pub latency: Latency,
    pub stats: WalStatsSnapshot,
    /// The WAL reactor's counters at the end of the run.
    pub reactor: Option<CountersSnapshot>,
    pub recovery: String,
    /// What the engine kept on the map and the forced run destroyed.
    pub destroyed: Vec<String>,
}

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum WalPeError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error("{0}")]
    Usage(String),
}

/// Runs the bench on the WAL devices of `cfg`.
pub fn run(cfg: &Config, opts: &WalPeOptions) -> Result<WalPeReport, WalPeError> {
    if opts.threads == 0 || opts.iterations == 0 || opts.in_flight == 0 {
        return Err(WalPeError::Usage(
            "--threads, --iterations and --inflight must be at least 1".into(),
        ));
    }
    let mut names = cfg.wal.devices.clone();
    if let Some(k) = opts.devices {
        if k == 0 || k > names.len() {
            return Err(WalPeError::Usage(format!(
                "--devices {k}: the map has {} WAL devices",
                names.len()
            )));
        }
        names.truncate(k);
    }
    let destroyed = admin::guard(cfg, "stria bench wal-pe", opts.force)?;
    let mut opened = Vec::with_capacity(names.len());
    for name in &names {
        let dev_cfg = cfg.device(name).expect("validated WAL device");
        opened.push(AnyDevice::open(dev_cfg, &cfg.spdk)?);
    }
    let devices = WalDevice::stripe(&opened);
    // Segment headers carry the appliance id of the superblock (sim devices
    // have none: 0).
    let appliance_id = match crate::admin::read_superblock(&devices[0].device) {
        Ok(Ok(sb)) => sb.appliance_id,
        _ => 0,
    };
    let wal_opts = WalOptions::from_config(&cfg.wal, appliance_id);
    let reactor = ReactorConfig::pinned("wal", cfg.reactors.wal[0], &cfg.reactors);
    let (wal, recovered) = Wal::open(devices, &wal_opts, reactor)?;
    // Whatever an earlier run left is not this run's to keep.
    if !opts.keep {
        wal.release(recovered.next_lsn.saturating_sub(1));
    }
    let wal = Arc::new(wal);
    let latency = Arc::new(Mutex::new(Latency::new()));
    let failure: Arc<Mutex<Option<WalError>>> = Arc::default();
    let appended = AtomicU64::new(0);
    let before = procstat::own();
    let start = Instant::now();
    let end = opts.duration.map(|d| start + d);
    let writing = AtomicUsize::new(opts.threads);
    std::thread::scope(|s| {
        for t in 0..opts.threads {
            let (wal, latency, failure, writing) = (&wal, &latency, &failure, &writing);
            let appended = &appended;
            s.spawn(move || {
                if let Err(e) = writer(wal, t, opts, end, latency, appended) {
                    failure.lock().expect("lock").get_or_insert(e);
                }
                writing.fetch_sub(1, Ordering::SeqCst);
            });
        }
        // The engine's flushes release the log on their own, not when a
        // writer returns, so one thread releases what is durable every
        // millisecond. Writers releasing every 1024 appends let 8 threads
        // of 4 KiB values fill a 32 MiB log between two releases, and when
        // every writer waits for an append the full log holds back, nobody
        // would release what the WAL's own flush of a full log made durable.
        if !opts.keep {
            let (wal, writing) = (&wal, &writing);
            s.spawn(move || {
                while writing.load(Ordering::SeqCst) > 0 {
                    wal.release(wal.durable_lsn());
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let usage = procstat::own().since(&before);
    let failed = failure.lock().expect("lock").take();
    let wal = Arc::into_inner(wal).expect("writers are done");
    let reactor = wal.reactor_counters();
    let closed = wal.close();
    drop(opened);
    // Erased even when the run failed: the bench's records never stay on
    // the map for the next open to replay.
    if !opts.keep {
        admin::erase(cfg)?;
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    let stats = closed?;
    let latency = Arc::into_inner(latency)
        .expect("writers are done")
        .into_inner()
        .expect("lock");
    Ok(WalPeReport {
        opts: opts.clone(),
        devices: names,
        elapsed,
        appended: appended.into_inner(),
        usage,
        latency,
        stats,
        reactor,
        recovery: recovered.report.to_string(),
        destroyed,
    })
}

fn writer(
    wal: &Wal,
    thread: usize,
    opts: &WalPeOptions,
    end: Option<Instant>,
    shared: &Mutex<Latency>,
    appended: &AtomicU64,
) -> Result<(), WalError> {
    let mut latency = Latency::new();
    let value = vec![0x5a; opts.value_size];
    let mut in_flight = VecDeque::with_capacity(opts.in_flight);
    let key_len = key_len(opts.key_size);
    for i in 0..opts.iterations {
        if end.is_some_and(|end| Instant::now() >= end) {
            break;
        }
        let mut key = Vec::with_capacity(key_len);
        push_key(&mut key, thread, i, key_len);
        if in_flight.len() == opts.in_flight {
            let (at, ticket): (Instant, crate::wal::Ticket) = in_flight.pop_front().expect("full");
            ticket.wait()?;
            latency.record(at.elapsed());
        }
        let at = Instant::now();
        in_flight.push_back((at, wal.put(0, key, value.clone(), opts.durability)?));
    }
    for (at, ticket) in in_flight {
        ticket.wait()?;
        latency.record(at.elapsed());
    }
    if !opts.keep {
        wal.release(wal.durable_lsn());
    }
    appended.fetch_add(latency.count(), Ordering::Relaxed);
    shared.lock().expect("lock").add(&latency);
    Ok(())
}

/// Digits of the iteration number in a key (zero-padded).
const KEY_DIGITS: usize = 12;

/// Appends `n` in decimal, zero-padded to [`KEY_DIGITS`] digits (more if it
/// needs them).
fn push_digits(out: &mut Vec<u8>, n: u64) {
    super::push_decimal(out, n, KEY_DIGITS);
}

/// The length of the keys of at least `size` bytes: `t<thread>-<i>` is 18.
pub fn key_len(size: usize) -> usize {
    size.max(b"t0000-".len() + KEY_DIGITS)
}

/// Appends the key of append `i` of `thread`: `t<thread>-<i>` padded with
/// `k` to `len` bytes, built in place (no formatting machinery, no growth
/// when `out` has the capacity).
pub fn push_key(out: &mut Vec<u8>, thread: usize, i: u64, len: usize) {
    out.push(b't');
    super::push_decimal(out, thread as u64, 4);
    out.push(b'-');
    push_digits(out, i);
    if out.len() < len {
        out.resize(len, b'k');
    }
}

impl WalPeReport {
    pub fn ops(&self) -> u64 {
        self.appended
    }

    pub fn ops_per_sec(&self) -> f64 {
        self.ops() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl fmt::Display for WalPeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.opts;
        let s = self.latency.summary();
        let bytes = self.ops() * (o.value_size + o.key_size) as u64;
        writeln!(
            f,
            "threads={}, iterations={}, durability={}: {} appends in {:.3}s, {:.0} ops/s",
            o.threads,
            o.iterations,
            o.durability.as_str(),
            self.appended,
            self.elapsed.as_secs_f64(),
            self.ops_per_sec()
        )?;
        writeln!(
            f,
            "  process CPU {:.1} us per append, {:.2} context switches per append",
            self.usage.cpu_secs * 1e6 / self.ops().max(1) as f64,
            self.usage.switches as f64 / self.ops().max(1) as f64
        )?;
        writeln!(
            f,
            "  {:.1} MB/s of keys and values; {} in flight per thread; devices {}",
            bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9),
            o.in_flight,
            self.devices.join(", ")
        )?;
        writeln!(
            f,
            "  latency mean {}us p50 {}us p99 {}us p99.9 {}us max {}us",
            fmt_us(s.mean_us),
            fmt_us(s.p50_us),
            fmt_us(s.p99_us),
            fmt_us(s.p999_us),
            fmt_us(s.max_us)
        )?;
        writeln!(
            f,
            "  batches {} ({:.1} records/batch), batches per device {:?}, MiB per device [{}], \
             flushes per device {:?}",
            self.stats.batches,
            self.stats.records_per_batch(),
            self.stats.device_batches,
            self.stats
                .device_bytes
                .iter()
                .map(|&b| format!("{:.1}", b as f64 / f64::from(1 << 20)))
                .collect::<Vec<_>>()
                .join(", "),
            self.stats.flushes
        )?;
        writeln!(
            f,
            "  writers waited for log space {:.3}s; log full {} times; {} segments reclaimed",
            self.stats.writer_wait_ns as f64 / 1e9,
            self.stats.log_full,
            self.stats.segments_reclaimed
        )?;
        if let Some(r) = &self.reactor {
            writeln!(f, "  {r}")?;
        }
        writeln!(f, "  recovery at open: {}", self.recovery)?;
        if !self.destroyed.is_empty() {
            writeln!(
                f,
                "  forced: destroyed what the engine kept ({})",
                self.destroyed.join("; ")
            )?;
        }
        if self.opts.keep {
            writeln!(
                f,
                "  the log is kept for the next run to recover (give it --force); \
                 the engine cannot use these devices until `stria format --force`"
            )
        } else {
            writeln!(
                f,
                "  the engine's log and manifest were erased: the devices hold an empty engine"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{key_len, push_digits, push_key};

    #[test]
    fn keys_are_zero_padded_like_the_format_they_replace() {
        for n in [0, 7, 42, 999_999_999_999, 1_000_000_000_000, u64::MAX] {
            let mut out = b"t0003-".to_vec();
            push_digits(&mut out, n);
            assert_eq!(out, format!("t0003-{n:012}").into_bytes());
        }
        let mut k = Vec::new();
        push_key(&mut k, 3, 42, key_len(16));
        assert_eq!(k, b"t0003-000000000042");
        let mut k = Vec::new();
        push_key(&mut k, 12345, 42, key_len(24));
        assert_eq!(k, b"t12345-000000000042kkkkk");
    }
}
