//! `stria bench ingest` and `stria bench verify`: the shape of Accumulo's
//! TestIngest and VerifyIngest.
//!
//! C clients each write R records, `i` in `[S, S+R)`. The key of record
//! `i` of client `c` is the 8-byte big-endian xxh3 of `c` (4 bytes, big
//! endian) followed by `i` (8 bytes, big endian), then `c<c>-r<i>` with `i`
//! zero-padded to 10 digits: the hash spreads the keys evenly over regions
//! split on the first two key bytes. The value is V bytes of a splitmix64
//! stream seeded by that hash, so `verify` recomputes every value from
//! `(c, i)` alone.
//!
//! Each client writes the way Accumulo's BatchWriter does: it fills a batch
//! of up to [`batch_size`]`(B)` bytes of keys and values (a quarter of the
//! window B, at most 1 MiB), submits it without waiting, and keeps
//! submitting while the batches not yet acknowledged hold less than B bytes;
//! at the window it waits for the oldest batch. Like the BatchWriter, each
//! client acknowledges its batches on a thread of its own (in submission
//! order), so a client that the engine holds back (memstores over their
//! limit) still completes the batches it already submitted; the engine
//! flushes a memstore only once every write admitted to it is completed.

use super::push_decimal;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::xxh3_64;

use super::latency::{Latency, Summary};
use crate::config::{Config, Durability};
use crate::device::{AnyDevice, Device};
use crate::engine::{Engine, EngineError, EngineStats, Pending};

/// Default window of a client: bytes of keys and values in batches submitted
/// but not yet acknowledged.
pub const DEFAULT_WINDOW: u64 = 8 << 20;

/// The largest batch a client builds.
pub const MAX_BATCH: u64 = 1 << 20;

/// Bytes of keys and values a client puts in one batch for a window of
/// `window` bytes: a quarter of it (so about four batches are in flight),
/// at most [`MAX_BATCH`]. A batch always holds at least one record.
pub fn batch_size(window: u64) -> u64 {
    (window / 4).clamp(1, MAX_BATCH)
}

/// The hash that starts the key of record `i` of client `c` and seeds its
/// value.
pub fn key_hash(c: u64, i: u64) -> u64 {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&(c as u32).to_be_bytes());
    b[4..].copy_from_slice(&i.to_be_bytes());
    xxh3_64(&b)
}

/// Appends the key of record `i` of client `c` to `out`.
pub fn push_key(out: &mut Vec<u8>, c: u64, i: u64) {
    out.extend_from_slice(&key_hash(c, i).to_be_bytes());
    out.push(b'c');
    push_decimal(out, c, 1);
    out.extend_from_slice(b"-r");
    push_decimal(out, i, 10);
}

/// The key of record `i` of client `c`.
pub fn key(c: u64, i: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(32);
    push_key(&mut k, c, i);
    k
}

/// Appends the `len`-byte value of record `i` of client `c` to `out`.
pub fn push_value(out: &mut Vec<u8>, c: u64, i: u64, len: usize) {
    let mut state = key_hash(c, i) ^ 0x5851_f42d_4c95_7f2d;
    let end = out.len() + len;
    while out.len() < end {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let take = (end - out.len()).min(8);
        out.extend_from_slice(&z.to_le_bytes()[..take]);
    }
}

/// The value of record `i` of client `c`.
pub fn value(c: u64, i: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    push_value(&mut v, c, i, len);
    v
}

/// What `bench ingest` runs.
#[derive(Clone, Debug)]
pub struct IngestOptions {
    pub clients: usize,
    /// Records per client.
    pub records: u64,
    /// The first record number of every client.
    pub start: u64,
    pub value_size: usize,
    pub durability: Durability,
    /// Bytes of keys and values each client keeps in unacknowledged batches.
    pub window: u64,
}

impl IngestOptions {
    fn check(&self) -> Result<(), IngestError> {
        if self.clients == 0 || self.records == 0 {
            return Err(IngestError::Usage(
                "--clients and --records must be at least 1".into(),
            ));
        }
        if self.clients > u32::MAX as usize {
            return Err(IngestError::Usage(format!(
                "--clients {}: at most {}",
                self.clients,
                u32::MAX
            )));
        }
        if self.start.checked_add(self.records).is_none() {
            return Err(IngestError::Usage(
                "--start plus --records overflows".into(),
            ));
        }
        if self.window == 0 {
            return Err(IngestError::Usage(
                "--batch-bytes must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// Why a bench could not run (or verify found bad records).
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Usage(String),
}

/// The figures of one client.
#[derive(Clone, Debug)]
pub struct ClientFigures {
    pub records: u64,
    /// Bytes of keys and values.
    pub bytes: u64,
    pub elapsed: Duration,
}

impl ClientFigures {
    /// Accumulo's TestIngest line:
    /// `R records written | X records/sec | B bytes written | Y bytes/sec | Z secs`.
    pub fn line(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "{:>12} records written | {:>9} records/sec | {:>14} bytes written | {:>12} bytes/sec | {:7.3} secs",
            thousands(self.records),
            thousands((self.records as f64 / secs) as u64),
            thousands(self.bytes),
            thousands((self.bytes as f64 / secs) as u64),
            secs
        )
    }
}

/// `12345678` as `12,345,678`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// What the clients did together.
#[derive(Clone, Debug)]
pub struct ClientsRun {
    pub clients: Vec<ClientFigures>,
    pub total: ClientFigures,
    /// Submit to acknowledgement, per batch.
    pub latency: Latency,
    pub batches: u64,
    /// Times the watchdog found the engine stalled and flushed everything.
    pub stalls: u64,
}

type ClientResult = Result<(ClientFigures, Latency), EngineError>;

/// Runs `opts.clients` BatchWriter-like clients against `engine` (see the
/// module comment) and returns once every batch is acknowledged.
pub fn run_clients<D: Device<Queue: Send> + Clone + Sync>(
    engine: &Engine<D>,
    opts: &IngestOptions,
) -> Result<ClientsRun, EngineError> {
    let failed = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let (results, stalls): (Vec<ClientResult>, u64) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.clients)
            .map(|c| {
                let failed = &failed;
                s.spawn(move || {
                    let r = client(engine, c as u64, opts, failed);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let watchdog = s.spawn(|| watchdog(engine, &done));
        let results = handles
            .into_iter()
            .map(|h| h.join().expect("an ingest client panicked"))
            .collect();
        done.store(true, Ordering::Relaxed);
        (results, watchdog.join().expect("the watchdog panicked"))
    });
    let elapsed = started.elapsed();
    let mut clients = Vec::with_capacity(results.len());
    let mut latency = Latency::new();
    let mut first_error = None;
    for r in results {
        match r {
            Ok((f, l)) => {
                latency.add(&l);
                clients.push(f);
            }
            // The first client to fail says why; the others stopped after it.
            Err(e) => {
                if first_error.is_none() || !matches!(e, EngineError::Failed(_)) {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let total = ClientFigures {
        records: clients.iter().map(|c| c.records).sum(),
        bytes: clients.iter().map(|c| c.bytes).sum(),
        elapsed,
    };
    Ok(ClientsRun {
        clients,
        total,
        batches: latency.count(),
        latency,
        stalls,
    })
}

/// How long writes may make no progress, with the memstores at or above
/// their low-water mark and no flush queued or running, before the
/// watchdog calls it a stall.
const STALL: Duration = Duration::from_millis(500);

/// Works around a stall of the engine: a writer waiting for the memstores
/// to drop below the low-water mark asks for flushes once, when it starts
/// waiting; if other writers fill the memstores again before its flushes
/// end and then finish, nothing is frozen any more and it waits forever.
/// The watchdog sees no write progress, memstores at or above the low-water
/// mark and no flush queued or running, says so on stderr, and flushes
/// everything. Returns how many times it did.
fn watchdog<D: Device<Queue: Send> + Clone>(engine: &Engine<D>, done: &AtomicBool) -> u64 {
    let mut stalls = 0;
    let mut last = (u64::MAX, Instant::now());
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        let st = engine.stats();
        let idle = st.queued_flushes == 0 && st.running_jobs == 0;
        if st.writes != last.0 || !idle || st.memory.total < st.memory.low {
            last = (st.writes, Instant::now());
            continue;
        }
        if last.1.elapsed() >= STALL && !done.load(Ordering::Relaxed) {
            stalls += 1;
            eprintln!(
                "stria: engine stall: no write for {:.1?} with memstores at {:.1} MiB (low water {:.1} MiB, limit {:.1} MiB) and no flush queued or running; flushing every memstore to go on",
                last.1.elapsed(),
                mib(st.memory.total),
                mib(st.memory.low),
                mib(st.memory.limit)
            );
            if let Err(e) = engine.flush_all() {
                eprintln!("stria: flushing after a stall: {e}");
                return stalls;
            }
            last = (u64::MAX, Instant::now());
        }
    }
    stalls
}

/// Bytes of batches submitted and not yet acknowledged, and the window.
struct Window {
    used: Mutex<u64>,
    changed: Condvar,
    limit: u64,
}

impl Window {
    /// Waits until `bytes` more fit (or nothing is in flight), then takes them.
    fn take(&self, bytes: u64, stop: &AtomicBool) {
        let mut used = self.used.lock().expect("window lock");
        while *used > 0 && *used + bytes > self.limit && !stop.load(Ordering::Relaxed) {
            used = self
                .changed
                .wait_timeout(used, Duration::from_millis(50))
                .expect("window lock")
                .0;
        }
        *used += bytes;
    }

    fn give(&self, bytes: u64) {
        *self.used.lock().expect("window lock") -= bytes;
        self.changed.notify_all();
    }
}

type InFlight<'e, D> = (Instant, u64, Pending<'e, D>);

fn client<D: Device<Queue: Send> + Clone + Sync>(
    engine: &Engine<D>,
    c: u64,
    opts: &IngestOptions,
    failed: &AtomicBool,
) -> Result<(ClientFigures, Latency), EngineError> {
    let batch_cap = batch_size(opts.window) as usize;
    let window = Window {
        used: Mutex::new(0),
        changed: Condvar::new(),
        limit: opts.window,
    };
    let written = AtomicU64::new(0);
    let started = Instant::now();
    let (latency, result) = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<InFlight<'_, D>>();
        let (window, written) = (&window, &written);
        // The acknowledging side: waits for batches oldest first.
        let acks = s.spawn(move || {
            let mut latency = Latency::new();
            let mut error = None;
            for (at, bytes, pending) in rx {
                match pending.wait() {
                    Ok(()) => {
                        latency.record(at.elapsed());
                        written.fetch_add(bytes, Ordering::Relaxed);
                    }
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        error.get_or_insert(e);
                    }
                }
                window.give(bytes);
            }
            (latency, error)
        });
        let mut result = Ok(());
        let mut arena: Vec<u8> = Vec::with_capacity(batch_cap + 64 + opts.value_size);
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        let end = opts.start + opts.records;
        let mut i = opts.start;
        while i < end && !failed.load(Ordering::Relaxed) {
            arena.clear();
            spans.clear();
            while i < end && (spans.is_empty() || arena.len() < batch_cap) {
                let k = arena.len();
                push_key(&mut arena, c, i);
                let v = arena.len();
                push_value(&mut arena, c, i, opts.value_size);
                spans.push((k, v, arena.len()));
                i += 1;
            }
            let writes: Vec<(&[u8], Option<&[u8]>)> = spans
                .iter()
                .map(|&(k, v, e)| (&arena[k..v], Some(&arena[v..e])))
                .collect();
            let bytes = arena.len() as u64;
            window.take(bytes, failed);
            let at = Instant::now();
            match engine.submit(&writes, Some(opts.durability)) {
                Ok(p) => {
                    if tx.send((at, bytes, p)).is_err() {
                        unreachable!("the acknowledging thread outlives the sender");
                    }
                }
                Err(e) => {
                    window.give(bytes);
                    result = Err(e);
                    break;
                }
            }
        }
        drop(tx);
        let (latency, ack_error) = acks.join().expect("an acknowledging thread panicked");
        (latency, result.and(ack_error.map_or(Ok(()), Err)))
    });
    result?;
    let figures = ClientFigures {
        records: opts.records,
        bytes: written.into_inner(),
        elapsed: started.elapsed(),
    };
    Ok((figures, latency))
}

/// What `bench ingest` measured.
#[derive(Clone, Debug)]
pub struct IngestReport {
    pub opts: IngestOptions,
    pub open: String,
    pub run: ClientsRun,
    pub stats: EngineStats,
}

/// Opens the engine of `cfg`, runs the clients, closes the engine. `opened`
/// is told the open report as soon as there is one.
pub fn ingest(
    cfg: &Config,
    opts: &IngestOptions,
    opened: impl FnOnce(&str),
) -> Result<IngestReport, IngestError> {
    opts.check()?;
    let (engine, report): (Engine<AnyDevice>, _) =
        Engine::open_config(&cfg.without_background_scrub())?;
    let open = report.to_string();
    opened(&open);
    let run = run_clients(&engine, opts)?;
    let stats = engine.close()?;
    Ok(IngestReport {
        opts: opts.clone(),
        open,
        run,
        stats,
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

impl fmt::Display for IngestReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.opts;
        for (c, fig) in self.run.clients.iter().enumerate() {
            writeln!(f, "client {c:>3}: {}", fig.line())?;
        }
        writeln!(f, "total     : {}", self.run.total.line())?;
        writeln!(
            f,
            "  {} clients, records {}..{} each, {}-byte values, durability {}, batches up to {} bytes, {} bytes in flight per client",
            o.clients,
            o.start,
            o.start + o.records,
            o.value_size,
            o.durability.as_str(),
            batch_size(o.window),
            o.window
        )?;
        let s: Summary = self.run.latency.summary();
        writeln!(f, "  batch latency (submit to ack): {s}")?;
        if self.run.stalls > 0 {
            writeln!(
                f,
                "  ENGINE STALLED {} times (writers waiting for memory, nothing flushing); the bench flushed everything each time",
                self.run.stalls
            )?;
        }
        write_engine(f, &self.stats)
    }
}

/// The engine's figures every write bench prints.
pub fn write_engine(f: &mut fmt::Formatter<'_>, st: &EngineStats) -> fmt::Result {
    let m = &st.memory;
    writeln!(
        f,
        "  engine: {} writes; {} freezes, {} flushes ({:.1} MiB, {:.3}s summed over flushes), {} queued, {} compactions ({:.1} MiB)",
        st.writes,
        st.freezes,
        st.flushes,
        mib(st.flush_bytes),
        st.flush_time.as_secs_f64(),
        st.queued_flushes,
        st.compactions,
        mib(st.compaction_bytes)
    )?;
    writeln!(
        f,
        "  writers blocked {} times for {:.3}s; memstores now {:.1} MiB, peak {:.1} MiB of limit {:.1} MiB (low water {:.1} MiB)",
        m.blocks,
        m.blocked.as_secs_f64(),
        mib(m.total),
        mib(m.peak),
        mib(m.limit),
        mib(m.low)
    )?;
    writeln!(
        f,
        "  block files {} (per region {:?}); MiB written per data device [{}]",
        st.region_files.iter().sum::<usize>(),
        st.region_files,
        st.device_written
            .iter()
            .map(|&b| format!("{:.1}", mib(b)))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    writeln!(f, "  WAL: {}; replay point {}", st.wal, st.replay_point)
}

/// What `bench verify` reads back.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    pub clients: usize,
    pub records: u64,
    pub start: u64,
    pub value_size: usize,
}

/// What `bench verify` found.
#[derive(Clone, Debug)]
pub struct VerifyReport {
    pub opts: VerifyOptions,
    pub open: String,
    pub ok: u64,
    pub missing: u64,
    pub wrong: u64,
    /// A few of the bad records, as `(client, record, what)`.
    pub examples: Vec<(u64, u64, &'static str)>,
    pub elapsed: Duration,
    pub latency: Latency,
}

impl VerifyReport {
    pub fn passed(&self) -> bool {
        self.missing == 0 && self.wrong == 0
    }
}

/// How many bad records a verify report names.
const EXAMPLES: usize = 5;

/// Opens (recovers) the engine of `cfg` and reads back every record the
/// matching `ingest` wrote, one thread per client.
pub fn verify(
    cfg: &Config,
    opts: &VerifyOptions,
    opened: impl FnOnce(&str),
) -> Result<VerifyReport, IngestError> {
    IngestOptions {
        clients: opts.clients,
        records: opts.records,
        start: opts.start,
        value_size: opts.value_size,
        durability: Durability::None,
        window: 1,
    }
    .check()?;
    let (engine, report): (Engine<AnyDevice>, _) =
        Engine::open_config(&cfg.without_background_scrub())?;
    let open = report.to_string();
    opened(&open);
    let started = Instant::now();
    let results: Vec<Result<Checked, EngineError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.clients as u64)
            .map(|c| {
                let engine = &engine;
                s.spawn(move || check_client(engine, c, opts))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a verify thread panicked"))
            .collect()
    });
    let elapsed = started.elapsed();
    let mut total = Checked::default();
    for r in results {
        let r = r?;
        total.ok += r.ok;
        total.missing += r.missing;
        total.wrong += r.wrong;
        total.latency.add(&r.latency);
        for e in r.examples {
            if total.examples.len() < EXAMPLES {
                total.examples.push(e);
            }
        }
    }
    engine.close()?;
    Ok(VerifyReport {
        opts: opts.clone(),
        open,
        ok: total.ok,
        missing: total.missing,
        wrong: total.wrong,
        examples: total.examples,
        elapsed,
        latency: total.latency,
    })
}

#[derive(Default)]
struct Checked {
    ok: u64,
    missing: u64,
    wrong: u64,
    examples: Vec<(u64, u64, &'static str)>,
    latency: Latency,
}

fn check_client<D: Device<Queue: Send> + Clone>(
    engine: &Engine<D>,
    c: u64,
    opts: &VerifyOptions,
) -> Result<Checked, EngineError> {
    let mut out = Checked::default();
    let mut k = Vec::with_capacity(32);
    let mut expected = Vec::with_capacity(opts.value_size);
    for i in opts.start..opts.start + opts.records {
        k.clear();
        push_key(&mut k, c, i);
        let at = Instant::now();
        let got = engine.get(&k)?;
        out.latency.record(at.elapsed());
        let bad = match got {
            None => {
                out.missing += 1;
                Some("missing")
            }
            Some(v) => {
                expected.clear();
                push_value(&mut expected, c, i, opts.value_size);
                if v == expected {
                    out.ok += 1;
                    None
                } else {
                    out.wrong += 1;
                    Some("wrong value")
                }
            }
        };
        if let Some(what) = bad {
            if out.examples.len() < EXAMPLES {
                out.examples.push((c, i, what));
            }
        }
    }
    Ok(out)
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} records verified, {} missing, {} wrong, {:.3} secs",
            thousands(self.ok),
            thousands(self.missing),
            thousands(self.wrong),
            self.elapsed.as_secs_f64()
        )?;
        writeln!(
            f,
            "  {} clients, records {}..{} each, {}-byte values; {:.0} gets/s",
            self.opts.clients,
            self.opts.start,
            self.opts.start + self.opts.records,
            self.opts.value_size,
            (self.ok + self.missing + self.wrong) as f64 / self.elapsed.as_secs_f64().max(1e-9)
        )?;
        writeln!(f, "  get latency: {}", self.latency.summary())?;
        for (c, i, what) in &self.examples {
            writeln!(
                f,
                "  {what}: client {c} record {i} (key {})",
                String::from_utf8_lossy(&key(*c, *i)[8..])
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_are_deterministic_and_distinct() {
        let k = key(3, 42);
        assert_eq!(&k[8..], b"c3-r0000000042");
        assert_eq!(&k[..8], &key_hash(3, 42).to_be_bytes());
        assert_ne!(key(3, 42), key(42, 3));
        assert_eq!(value(3, 42, 37), value(3, 42, 37));
        assert_eq!(value(3, 42, 37).len(), 37);
        assert_ne!(value(3, 42, 37), value(3, 43, 37));
        assert_eq!(&k[8..], format!("c{}-r{:010}", 3, 42).as_bytes());
        assert_eq!(
            &key(12345, 12_345_678_901)[8..],
            format!("c{}-r{:010}", 12345, 12_345_678_901u64).as_bytes()
        );
    }

    #[test]
    fn batches_are_a_quarter_of_the_window_up_to_a_mebibyte() {
        assert_eq!(batch_size(8 << 20), 1 << 20);
        assert_eq!(batch_size(1 << 20), 256 << 10);
        assert_eq!(batch_size(2), 1);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }
}
