//! `stria bench flush`: does flushing scale with flush reactors? The shape
//! of HBASE-6466 (multiple memstore flusher threads).
//!
//! For each flush reactor count k, on a fresh engine (sim devices only:
//! they are blank each time they are opened): N regions split evenly on
//! the first two key bytes, memstores frozen at S bytes, k unpinned flush
//! reactors; W writers write T bytes of V-byte values at durability
//! `write`, as `bench ingest` clients do (batches in flight), then every
//! memstore is flushed. With data devices whose bandwidth is the limit, one
//! reactor keeps one device busy while writers wait for memory; k reactors
//! keep up to k devices busy (the engine sends each flush to the data
//! device with the fewest flushes running).

use std::fmt;
use std::time::{Duration, Instant};

use super::ingest::{self, run_clients, thousands, IngestError, IngestOptions};
use super::table::Table;
use crate::config::{Config, Durability, MemstoreConfig};
use crate::device::{AnyDevice, BackendKind};
use crate::engine::{Engine, EngineDevices, EngineError, EngineOptions, EngineStats};
use crate::reactor::ReactorConfig;

/// What to run.
#[derive(Clone, Debug)]
pub struct FlushOptions {
    pub regions: u32,
    pub flush_size: u64,
    /// Flush reactor counts, one run each.
    pub reactors: Vec<usize>,
    /// Bytes of keys and values written per run.
    pub bytes: u64,
    pub writers: usize,
    pub value_size: usize,
    /// Bytes each writer keeps in flight.
    pub window: u64,
}

/// Default bytes per run.
pub const DEFAULT_BYTES: u64 = 512 << 20;

/// One run.
#[derive(Clone, Debug)]
pub struct FlushRun {
    pub reactors: usize,
    pub records: u64,
    /// Writers' phase, and the whole run with the final flush of everything.
    pub write_time: Duration,
    pub total_time: Duration,
    pub stats: EngineStats,
    /// Times the engine stalled and the bench flushed everything.
    pub stalls: u64,
}

impl FlushRun {
    pub fn writes_per_sec(&self) -> f64 {
        self.records as f64 / self.write_time.as_secs_f64().max(1e-9)
    }

    pub fn flush_mb_per_sec(&self) -> f64 {
        self.stats.flush_bytes as f64 / 1e6 / self.total_time.as_secs_f64().max(1e-9)
    }

    /// Share of the writers' time spent waiting for memory.
    pub fn blocked_share(&self, writers: usize) -> f64 {
        self.stats.memory.blocked.as_secs_f64()
            / (self.write_time.as_secs_f64() * writers as f64).max(1e-9)
    }
}

/// What was measured.
#[derive(Clone, Debug)]
pub struct FlushReport {
    pub opts: FlushOptions,
    pub data_devices: Vec<String>,
    pub runs: Vec<FlushRun>,
}

/// Runs the bench on the devices of `cfg`, telling `progress` about each
/// run as it ends.
pub fn run(
    cfg: &Config,
    opts: &FlushOptions,
    mut progress: impl FnMut(&FlushRun),
) -> Result<FlushReport, IngestError> {
    if opts.reactors.is_empty() || opts.reactors.contains(&0) {
        return Err(IngestError::Usage(
            "--flush-reactors: give counts of at least 1, such as 1,2,4".into(),
        ));
    }
    if opts.regions == 0 || opts.writers == 0 || opts.flush_size == 0 || opts.window == 0 {
        return Err(IngestError::Usage(
            "--regions, --writers, --flush-size and --batch-bytes must be at least 1".into(),
        ));
    }
    if opts.regions > 65536 {
        return Err(IngestError::Usage(format!(
            "--regions {}: at most 65536 (the split is on two key bytes)",
            opts.regions
        )));
    }
    let not_sim: Vec<&str> = cfg
        .wal
        .devices
        .iter()
        .chain(&cfg.flush.devices)
        .filter_map(|n| cfg.device(n))
        .filter(|d| d.kind() != BackendKind::Sim)
        .map(|d| d.name.as_str())
        .collect();
    if !not_sim.is_empty() {
        return Err(IngestError::Usage(format!(
            "bench flush needs a fresh engine for every run and would destroy what the devices hold; it runs only on maps whose WAL and data devices are all sim devices ({} in {} {} not)",
            not_sim.join(", "),
            cfg.source,
            if not_sim.len() == 1 { "is" } else { "are" }
        )));
    }
    let record = ingest::key(0, 0).len() + opts.value_size;
    let records = (opts.bytes / record as u64 / opts.writers as u64).max(1);
    let mut runs = Vec::with_capacity(opts.reactors.len());
    for &k in &opts.reactors {
        let open = |names: &[String]| -> Result<Vec<AnyDevice>, IngestError> {
            names
                .iter()
                .map(|n| {
                    let d = cfg.device(n).expect("validated device name");
                    AnyDevice::open(d, &cfg.spdk)
                        .map_err(|e| IngestError::Engine(EngineError::from(e)))
                })
                .collect()
        };
        let devices = EngineDevices {
            wal: open(&cfg.wal.devices)?,
            data: open(&cfg.flush.devices)?,
        };
        let mut eo = EngineOptions::from_config(cfg, 0);
        // A bench measures its own reads and writes only.
        eo.scrub = crate::engine::ScrubOptions::off();
        eo.split_keys = MemstoreConfig::even_splits(opts.regions);
        eo.flush_size = opts.flush_size;
        // Flushes alone: compactions would share the devices' bandwidth and
        // blur what more flush reactors buy.
        eo.compact_at = usize::MAX;
        eo.flush_reactors = (0..k)
            .map(|i| ReactorConfig {
                idle: cfg.reactors.idle,
                spin: Duration::from_micros(cfg.reactors.spin_us),
                ..ReactorConfig::unpinned(format!("flush{i}"))
            })
            .collect();
        let (engine, _): (Engine<AnyDevice>, _) = Engine::open(devices, eo)?;
        let io = IngestOptions {
            clients: opts.writers,
            records,
            start: 0,
            value_size: opts.value_size,
            durability: Durability::Write,
            window: opts.window,
        };
        let started = Instant::now();
        let clients = run_clients(&engine, &io)?;
        let write_time = started.elapsed();
        engine.flush_all()?;
        let total_time = started.elapsed();
        let stats = engine.close()?;
        let run = FlushRun {
            reactors: k,
            records: clients.total.records,
            write_time,
            total_time,
            stats,
            stalls: clients.stalls,
        };
        progress(&run);
        runs.push(run);
    }
    Ok(FlushReport {
        opts: opts.clone(),
        data_devices: cfg.flush.devices.clone(),
        runs,
    })
}

impl FlushRun {
    /// One line about the run, for progress.
    pub fn line(&self) -> String {
        let s = &self.stats;
        format!(
            "flush reactors {}: {} records in {:.3}s{}, flushed {:.1} MiB in {} flushes by {:.3}s (a flush took {:.0} ms on average, {:.2} running on average); MiB per data device [{}]; writers blocked {} times for {:.3}s; memstore peak {:.1} MiB",
            self.reactors,
            thousands(self.records),
            self.write_time.as_secs_f64(),
            if self.stalls > 0 {
                format!(" (ENGINE STALLED {} times; the bench flushed everything each time)", self.stalls)
            } else {
                String::new()
            },
            s.flush_bytes as f64 / f64::from(1 << 20),
            s.flushes,
            self.total_time.as_secs_f64(),
            s.flush_time.as_secs_f64() * 1e3 / s.flushes.max(1) as f64,
            s.flush_time.as_secs_f64() / self.total_time.as_secs_f64().max(1e-9),
            s.device_written
                .iter()
                .map(|&b| format!("{:.0}", b as f64 / f64::from(1 << 20)))
                .collect::<Vec<_>>()
                .join(", "),
            s.memory.blocks,
            s.memory.blocked.as_secs_f64(),
            s.memory.peak as f64 / f64::from(1 << 20)
        )
    }
}

impl fmt::Display for FlushReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.opts;
        writeln!(
            f,
            "{} regions, flush-size {} bytes, {} writers of {}-byte values at durability write, {} bytes per run; data devices {}",
            o.regions,
            o.flush_size,
            o.writers,
            o.value_size,
            o.bytes,
            self.data_devices.join(", ")
        )?;
        let mut t = Table::new([
            "flush reactors",
            "writes/s",
            "flush MB/s",
            "flushes",
            "writer blocks",
            "blocked (s)",
            "blocked %",
            "flush MB/s vs first",
            "blocked vs first",
            "stalls",
        ]);
        let first = self.runs.first();
        for r in &self.runs {
            let blocked = r.stats.memory.blocked.as_secs_f64();
            let (mbx, blx) = match first {
                Some(b) => (
                    r.flush_mb_per_sec() / b.flush_mb_per_sec().max(1e-9),
                    blocked / b.stats.memory.blocked.as_secs_f64().max(1e-9),
                ),
                None => (1.0, 1.0),
            };
            t.row([
                r.reactors.to_string(),
                format!("{:.0}", r.writes_per_sec()),
                format!("{:.1}", r.flush_mb_per_sec()),
                r.stats.flushes.to_string(),
                r.stats.memory.blocks.to_string(),
                format!("{blocked:.3}"),
                format!("{:.1}", 100.0 * r.blocked_share(o.writers)),
                format!("{mbx:.2}x"),
                format!("{blx:.2}x"),
                r.stalls.to_string(),
            ]);
        }
        write!(f, "{t}")
    }
}
