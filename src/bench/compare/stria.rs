//! Stria's in-process runs of `bench compare`: wal-pe on the WAL alone (as
//! HBase's WALPerformanceEvaluation measures HBase's), and ingest and
//! latency through the whole engine. Each run starts from an empty engine
//! and erases what it wrote, so runs and rounds do not see each other.

use std::time::Duration;

use super::sample::{Percentiles, Sample};
use super::workloads::{IngestCase, WalPeCase};
use crate::admin;
use crate::bench::ingest::{self, IngestOptions};
use crate::bench::procstat;
use crate::bench::walpe::{self, WalPeOptions};
use crate::config::{Config, Durability};
use crate::device::AnyDevice;
use crate::engine::Engine;

/// Bytes of each wal-pe key, as `stria bench wal-pe` writes them.
pub const WAL_PE_KEY: usize = 16;

/// T threads, one durable append at a time each, for `duration`.
pub fn wal_pe(cfg: &Config, case: &WalPeCase, duration: Duration) -> Result<Sample, String> {
    let opts = WalPeOptions {
        threads: case.threads,
        iterations: u64::MAX,
        value_size: case.value_size,
        key_size: WAL_PE_KEY,
        durability: case.durability,
        in_flight: 1,
        devices: None,
        keep: false,
        // `bench compare` checked the map before its first run; what is on
        // it now is an earlier run's.
        force: true,
        duration: Some(duration),
    };
    let r = walpe::run(cfg, &opts).map_err(|e| e.to_string())?;
    Ok(Sample::new(
        r.ops(),
        r.ops() * (case.value_size + walpe::key_len(WAL_PE_KEY)) as u64,
        r.elapsed.as_secs_f64(),
        r.usage,
        Percentiles::of(&r.latency),
    ))
}

/// Opens the engine of `cfg`, runs `f`, closes the engine and erases it.
fn with_engine<T>(
    cfg: &Config,
    f: impl FnOnce(&Engine<AnyDevice>) -> Result<T, String>,
) -> Result<T, String> {
    let (engine, _) = Engine::<AnyDevice>::open_config(&cfg.without_background_scrub())
        .map_err(|e| e.to_string())?;
    let out = f(&engine);
    let closed = engine.close().map_err(|e| e.to_string());
    admin::erase(cfg).map_err(|e| e.to_string())?;
    let out = out?;
    closed?;
    Ok(out)
}

/// Accumulo's TestIngest shape: C clients of R records in BatchWriter
/// batches (see `bench ingest`).
pub fn ingest(cfg: &Config, case: &IngestCase) -> Result<Sample, String> {
    with_engine(cfg, |engine| {
        let opts = IngestOptions {
            clients: case.clients,
            records: case.records,
            start: 0,
            value_size: case.value_size,
            durability: case.durability,
            window: ingest::DEFAULT_WINDOW,
        };
        let before = procstat::own();
        let run = ingest::run_clients(engine, &opts).map_err(|e| e.to_string())?;
        let usage = procstat::own().since(&before);
        Ok(Sample::new(
            run.total.records,
            run.total.bytes,
            run.total.elapsed.as_secs_f64(),
            usage,
            Percentiles::of(&run.latency),
        ))
    })
}

/// One client, one durable put of `value_size` bytes at a time, for
/// `duration` (HBase PE's randomWrite with one client).
pub fn latency(
    cfg: &Config,
    value_size: usize,
    durability: Durability,
    duration: Duration,
) -> Result<Sample, String> {
    with_engine(cfg, |engine| {
        super::workloads::timed_puts(value_size, duration, |key, value| {
            engine
                .submit(&[(key, Some(value))], Some(durability))
                .and_then(|p| p.wait())
                .map_err(|e| e.to_string())
        })
    })
}
