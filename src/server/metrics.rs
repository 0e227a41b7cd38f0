//! What the server counts, the Prometheus text it exposes, and the small
//! HTTP endpoint that serves it.
//!
//! - [`ServerMetrics`]: connections, bytes and per-command calls, errors
//!   and latency, recorded by every connection thread with relaxed atomics
//!   only (no lock on the command path). Latencies go into a fixed
//!   log-linear histogram per command (8 buckets per power of two of
//!   nanoseconds, so a quantile is within about 6% of the true value).
//!   The command table is fixed when the metrics are made; a name outside
//!   it counts as `unknown`, so clients cannot grow it.
//! - [`render_prometheus`]: the text exposition format (version 0.0.4) of
//!   the server's and the engine's figures, every name prefixed `stria_`.
//! - [`spawn_endpoint`]: one thread answering `GET /metrics` over HTTP/1.1,
//!   one connection at a time, each with a deadline and a size limit.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::device::Device;
use crate::engine::{Engine, EngineStats};
use crate::wal::stats::WRITE_LATENCY_BOUNDS_NS;

// ---------------------------------------------------------------------------
// Latency histogram

/// Sub-buckets per power of two: 2^3 = 8.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Values of 2^40 ns (about 18 minutes) and more share the last bucket.
const MAX_EXP: u32 = 40;
const BUCKETS: usize = SUB + (MAX_EXP - SUB_BITS) as usize * SUB;

/// The bucket of `ns`: exact below 8, then 8 equal parts per power of two.
fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros();
    if exp >= MAX_EXP {
        return BUCKETS - 1;
    }
    let sub = (ns >> (exp - SUB_BITS)) as usize & (SUB - 1);
    SUB + (exp - SUB_BITS) as usize * SUB + sub
}

/// The lowest value of bucket `i`.
fn bucket_low(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let exp = ((i - SUB) / SUB) as u32 + SUB_BITS;
    let sub = (i - SUB) % SUB;
    ((SUB + sub) as u64) << (exp - SUB_BITS)
}

/// One past the highest value of bucket `i`.
fn bucket_end(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        u64::MAX
    } else {
        bucket_low(i + 1)
    }
}

/// Upper bounds of the command latency buckets Prometheus sees: powers of
/// four nanoseconds, from about 1 µs to about 17 s.
const COMMAND_BOUNDS_NS: [u64; 13] = {
    let mut b = [0u64; 13];
    let mut i = 0;
    while i < 13 {
        b[i] = 1 << (10 + 2 * i);
        i += 1;
    }
    b
};

/// A latency histogram any thread records into with one relaxed add.
struct Histogram {
    buckets: Box<[AtomicU64]>,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Relaxed);
    }

    fn counts(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.load(Relaxed)).collect()
    }
}

/// The value below which a fraction `q` of what `counts` holds lies, in
/// nanoseconds (the middle of its bucket); 0 when empty.
fn quantile(counts: &[u64], q: f64) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, &n) in counts.iter().enumerate() {
        seen += n;
        if seen >= rank {
            let (lo, end) = (bucket_low(i), bucket_end(i));
            if end == u64::MAX {
                return lo as f64;
            }
            return (lo as f64 + (end - 1) as f64) / 2.0;
        }
    }
    bucket_low(BUCKETS - 1) as f64
}

/// How many of `counts` are below `bound` (a power of two, so a bucket
/// boundary: the count is exact).
fn count_below(counts: &[u64], bound: u64) -> u64 {
    counts[..bucket_of(bound)].iter().sum()
}

// ---------------------------------------------------------------------------
// Server metrics

/// The command names counted on their own by [`ServerMetrics::new`]: the
/// commands a Redis client commonly sends. Any other name counts as
/// `unknown`.
pub const COMMANDS: &[&str] = &[
    "append",
    "auth",
    "bgrewriteaof",
    "bgsave",
    "client",
    "command",
    "config",
    "dbsize",
    "debug",
    "decr",
    "decrby",
    "del",
    "echo",
    "exists",
    "expire",
    "flushall",
    "flushdb",
    "get",
    "getdel",
    "getex",
    "getrange",
    "getset",
    "hello",
    "incr",
    "incrby",
    "info",
    "keys",
    "lastsave",
    "latency",
    "memory",
    "mget",
    "mset",
    "msetnx",
    "persist",
    "pexpire",
    "ping",
    "psetex",
    "pttl",
    "quit",
    "readonly",
    "readwrite",
    "reset",
    "save",
    "scan",
    "select",
    "set",
    "setex",
    "setnx",
    "setrange",
    "shutdown",
    "slowlog",
    "strlen",
    "substr",
    "time",
    "touch",
    "ttl",
    "type",
    "unlink",
    "wait",
];

/// The name that commands outside the table count under.
pub const UNKNOWN_COMMAND: &str = "unknown";

/// Counters of one command.
struct CommandCounters {
    name: &'static str,
    calls: AtomicU64,
    errors: AtomicU64,
    ns: AtomicU64,
    latency: Histogram,
}

/// One command's figures, for INFO commandstats and latencystats.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandSummary {
    pub name: &'static str,
    pub calls: u64,
    /// Calls that answered with an error.
    pub errors: u64,
    /// Time spent in the command, summed over calls, in microseconds.
    pub usec: u64,
    /// Latency quantiles in microseconds (within about 6%).
    pub p50_usec: f64,
    pub p99_usec: f64,
    pub p999_usec: f64,
}

impl CommandSummary {
    /// Mean time per call in microseconds.
    pub fn usec_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.usec as f64 / self.calls as f64
        }
    }
}

/// Rates over the last few seconds of samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rates {
    pub ops_per_sec: f64,
    pub input_kbps: f64,
    pub output_kbps: f64,
}

/// Samples every 100 ms or more, the last 16 kept (as Redis does).
#[derive(Default)]
struct Sampler {
    last: Option<(Instant, [u64; 3])>,
    rates: Vec<[f64; 3]>,
    next: usize,
}

const SAMPLES: usize = 16;
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The server's figures. Share it with an `Arc`; every method takes `&self`
/// and is safe to call from any number of threads.
pub struct ServerMetrics {
    /// When the server started.
    pub started: Instant,
    connected: AtomicU64,
    total_connections: AtomicU64,
    rejected: AtomicU64,
    total_commands: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    protocol_errors: AtomicU64,
    auth_failures: AtomicU64,
    commands: Box<[CommandCounters]>,
    index: HashMap<&'static str, usize>,
    sampler: Mutex<Sampler>,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics::new()
    }
}

impl std::fmt::Debug for ServerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetrics")
            .field("connected", &self.connected())
            .field("total_connections", &self.total_connections())
            .field("total_commands", &self.total_commands())
            .finish_non_exhaustive()
    }
}

impl ServerMetrics {
    /// Metrics counting the commands of [`COMMANDS`] by name.
    pub fn new() -> ServerMetrics {
        ServerMetrics::with_commands(COMMANDS)
    }

    /// Metrics counting `names` (lower case) by name and every other
    /// command as [`UNKNOWN_COMMAND`].
    pub fn with_commands(names: &[&'static str]) -> ServerMetrics {
        let mut all: Vec<&'static str> = names.to_vec();
        all.push(UNKNOWN_COMMAND);
        all.sort_unstable();
        all.dedup();
        let commands: Box<[CommandCounters]> = all
            .iter()
            .map(|&name| CommandCounters {
                name,
                calls: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                ns: AtomicU64::new(0),
                latency: Histogram::new(),
            })
            .collect();
        let index = all.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        ServerMetrics {
            started: Instant::now(),
            connected: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            total_commands: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            auth_failures: AtomicU64::new(0),
            commands,
            index,
            sampler: Mutex::new(Sampler::default()),
        }
    }

    /// A connection was accepted.
    pub fn connection_opened(&self) {
        self.connected.fetch_add(1, Relaxed);
        self.total_connections.fetch_add(1, Relaxed);
    }

    /// An accepted connection ended.
    pub fn connection_closed(&self) {
        let _ = self
            .connected
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    /// A connection was refused (too many clients); it is not counted as
    /// received.
    pub fn connection_rejected(&self) {
        self.rejected.fetch_add(1, Relaxed);
    }

    /// A command ran: `name` in lower case, how long it took, and whether
    /// it answered with an error.
    pub fn command(&self, name: &str, latency: Duration, error: bool) {
        let c = &self.commands[self.slot(name)];
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        c.calls.fetch_add(1, Relaxed);
        c.ns.fetch_add(ns, Relaxed);
        c.latency.record(ns);
        if error {
            c.errors.fetch_add(1, Relaxed);
        }
        self.total_commands.fetch_add(1, Relaxed);
    }

    fn slot(&self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            if let Some(&i) = self.index.get(name.to_ascii_lowercase().as_str()) {
                return i;
            }
        }
        self.index[UNKNOWN_COMMAND]
    }

    /// Bytes read from clients.
    pub fn bytes_in(&self, n: u64) {
        self.bytes_in.fetch_add(n, Relaxed);
    }

    /// Bytes written to clients.
    pub fn bytes_out(&self, n: u64) {
        self.bytes_out.fetch_add(n, Relaxed);
    }

    /// A client sent something that is not RESP.
    pub fn protocol_error(&self) {
        self.protocol_errors.fetch_add(1, Relaxed);
    }

    /// An AUTH (or HELLO AUTH) failed.
    pub fn auth_failure(&self) {
        self.auth_failures.fetch_add(1, Relaxed);
    }

    /// Connections open now.
    pub fn connected(&self) -> u64 {
        self.connected.load(Relaxed)
    }

    /// Connections accepted since start.
    pub fn total_connections(&self) -> u64 {
        self.total_connections.load(Relaxed)
    }

    /// Connections refused since start.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Relaxed)
    }

    /// Commands run since start.
    pub fn total_commands(&self) -> u64 {
        self.total_commands.load(Relaxed)
    }

    pub fn bytes_in_total(&self) -> u64 {
        self.bytes_in.load(Relaxed)
    }

    pub fn bytes_out_total(&self) -> u64 {
        self.bytes_out.load(Relaxed)
    }

    pub fn protocol_errors(&self) -> u64 {
        self.protocol_errors.load(Relaxed)
    }

    pub fn auth_failures(&self) -> u64 {
        self.auth_failures.load(Relaxed)
    }

    /// Commands that answered with an error, all commands together.
    pub fn total_errors(&self) -> u64 {
        self.commands.iter().map(|c| c.errors.load(Relaxed)).sum()
    }

    /// Every command called at least once, by name.
    pub fn commands(&self) -> Vec<CommandSummary> {
        self.commands
            .iter()
            .filter(|c| c.calls.load(Relaxed) > 0)
            .map(|c| {
                let counts = c.latency.counts();
                CommandSummary {
                    name: c.name,
                    calls: c.calls.load(Relaxed),
                    errors: c.errors.load(Relaxed),
                    usec: c.ns.load(Relaxed) / 1000,
                    p50_usec: quantile(&counts, 0.5) / 1e3,
                    p99_usec: quantile(&counts, 0.99) / 1e3,
                    p999_usec: quantile(&counts, 0.999) / 1e3,
                }
            })
            .collect()
    }

    /// Takes a sample for the instantaneous rates if 100 ms passed since
    /// the last one. A server cron calling this every 100 ms gives rates
    /// over the last 1.6 s, as Redis reports; without one the rates cover
    /// the time between reads.
    pub fn sample(&self) {
        let now = Instant::now();
        let current = [
            self.total_commands(),
            self.bytes_in_total(),
            self.bytes_out_total(),
        ];
        let mut s = self.sampler.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, prev)) = s.last {
            let dt = now.duration_since(at);
            if dt < SAMPLE_EVERY {
                return;
            }
            let secs = dt.as_secs_f64();
            let rate = |i: usize| current[i].saturating_sub(prev[i]) as f64 / secs;
            let r = [rate(0), rate(1) / 1024.0, rate(2) / 1024.0];
            if s.rates.len() < SAMPLES {
                s.rates.push(r);
            } else {
                let i = s.next;
                s.rates[i] = r;
            }
            s.next = (s.next + 1) % SAMPLES;
        }
        s.last = Some((now, current));
    }

    /// Commands per second and network kilobytes per second, averaged over
    /// the samples kept (takes one first, see [`ServerMetrics::sample`]).
    pub fn rates(&self) -> Rates {
        self.sample();
        let s = self.sampler.lock().unwrap_or_else(|e| e.into_inner());
        if s.rates.is_empty() {
            return Rates::default();
        }
        let n = s.rates.len() as f64;
        let avg = |i: usize| s.rates.iter().map(|r| r[i]).sum::<f64>() / n;
        Rates {
            ops_per_sec: avg(0),
            input_kbps: avg(1),
            output_kbps: avg(2),
        }
    }

    /// Seconds since the server started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}

// ---------------------------------------------------------------------------
// Devices, as both renderers show them

/// One device's figures, WAL or data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFigures {
    pub name: String,
    /// `wal` or `data`.
    pub role: &'static str,
    pub backend: &'static str,
    pub capacity: u64,
    /// Free bytes of the extent allocator (data devices only).
    pub free: Option<u64>,
    /// Block reads and their bytes (data devices only: WAL devices are read
    /// only by recovery, which does not count them).
    pub reads: Option<(u64, u64)>,
    /// Write requests and bytes written (WAL batches; block files and
    /// manifest records).
    pub writes: u64,
    pub written: u64,
    /// Flush commands.
    pub flushes: u64,
}

/// Every device of `engine`, WAL stripe first, with the figures in `stats`.
pub fn device_figures<D: Device<Queue: Send> + Clone>(
    engine: &Engine<D>,
    stats: &EngineStats,
) -> Vec<DeviceFigures> {
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let mut out = Vec::new();
    for (i, d) in engine.wal_devices().iter().enumerate() {
        let info = d.info();
        out.push(DeviceFigures {
            name: info.name.clone(),
            role: "wal",
            backend: info.backend.as_str(),
            capacity: info.capacity_bytes(),
            free: None,
            reads: None,
            writes: at(&stats.wal.device_batches, i),
            written: at(&stats.wal.device_bytes, i),
            flushes: at(&stats.wal.flushes, i),
        });
    }
    let m = &stats.manifest;
    let mdevs = stats.manifest_devices.max(1) as u64;
    for (i, d) in engine.data_devices().iter().enumerate() {
        let info = d.info();
        let (mwrites, mbytes) = if i < stats.manifest_devices {
            (m.writes, m.bytes_written / mdevs)
        } else {
            (0, 0)
        };
        out.push(DeviceFigures {
            name: info.name.clone(),
            role: "data",
            backend: info.backend.as_str(),
            capacity: info.capacity_bytes(),
            free: stats.device_free.get(i).copied(),
            reads: Some(stats.device_reads.get(i).copied().unwrap_or((0, 0))),
            writes: at(&stats.device_writes, i) + mwrites,
            written: at(&stats.device_written, i) + mbytes,
            flushes: at(&stats.device_flush_commands, i),
        });
    }
    out
}

/// Seconds since the Unix epoch of `t`.
pub(crate) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

// ---------------------------------------------------------------------------
// Prometheus text format

/// Escapes a label value: backslash, double quote and line feed.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A sample value as Prometheus reads it.
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Builds the exposition text family by family.
struct Text {
    out: String,
}

impl Text {
    /// Starts family `stria_<name>`.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP stria_{name} {help}");
        let _ = writeln!(self.out, "# TYPE stria_{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        self.out.push_str("stria_");
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = match value.into() {
            Value::Int(v) => writeln!(self.out, " {v}"),
            Value::Float(v) => writeln!(self.out, " {}", float(v)),
        };
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Into<Value>) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// The samples of one histogram: `cumulative[i]` observations at or
    /// below `bounds[i]` (seconds), then `count` and `sum` (seconds).
    fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        count: u64,
        sum: f64,
    ) {
        let bucket = format!("{name}_bucket");
        for (b, &n) in bounds.iter().zip(cumulative) {
            let le = float(*b);
            let mut l = labels.to_vec();
            l.push(("le", &le));
            self.sample(&bucket, &l, n);
        }
        let mut l = labels.to_vec();
        l.push(("le", "+Inf"));
        self.sample(&bucket, &l, count);
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, count);
    }
}

enum Value {
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(v as u64)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn ns_secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The server's and the engine's figures in the Prometheus text format
/// (version 0.0.4).
pub fn render_prometheus<D: Device<Queue: Send> + Clone>(
    engine: &Engine<D>,
    server: &ServerMetrics,
) -> String {
    let mut t = Text {
        out: String::with_capacity(32 << 10),
    };
    render_server(&mut t, server);
    let stats = engine.stats();
    let data_names: Vec<String> = engine
        .data_devices()
        .iter()
        .map(|d| d.info().name.clone())
        .collect();
    render_engine(&mut t, &stats, &data_names);
    render_devices(&mut t, &device_figures(engine, &stats));
    t.out
}

fn render_server(t: &mut Text, s: &ServerMetrics) {
    t.single(
        "uptime_seconds",
        "gauge",
        "Seconds since the server started.",
        secs(s.uptime()),
    );
    t.single(
        "connected_clients",
        "gauge",
        "Client connections open now.",
        s.connected(),
    );
    t.single(
        "connections_received_total",
        "counter",
        "Client connections accepted.",
        s.total_connections(),
    );
    t.single(
        "connections_rejected_total",
        "counter",
        "Client connections refused because the server had max-clients.",
        s.rejected(),
    );
    t.single(
        "net_input_bytes_total",
        "counter",
        "Bytes read from clients.",
        s.bytes_in_total(),
    );
    t.single(
        "net_output_bytes_total",
        "counter",
        "Bytes written to clients.",
        s.bytes_out_total(),
    );
    t.single(
        "protocol_errors_total",
        "counter",
        "Requests that were not valid RESP.",
        s.protocol_errors(),
    );
    t.single(
        "auth_failures_total",
        "counter",
        "Failed authentications.",
        s.auth_failures(),
    );
    t.single(
        "commands_processed_total",
        "counter",
        "Commands run, all commands together.",
        s.total_commands(),
    );
    let called: Vec<&CommandCounters> = s
        .commands
        .iter()
        .filter(|c| c.calls.load(Relaxed) > 0)
        .collect();
    t.family(
        "commands_total",
        "counter",
        "Calls per command (commands outside the server's table count as unknown).",
    );
    for c in &called {
        t.sample(
            "commands_total",
            &[("command", c.name)],
            c.calls.load(Relaxed),
        );
    }
    t.family(
        "command_errors_total",
        "counter",
        "Calls per command that answered with an error.",
    );
    for c in &called {
        t.sample(
            "command_errors_total",
            &[("command", c.name)],
            c.errors.load(Relaxed),
        );
    }
    t.family(
        "command_duration_seconds",
        "histogram",
        "Time to run a command, from its request parsed to its reply queued.",
    );
    let bounds: Vec<f64> = COMMAND_BOUNDS_NS.iter().map(|&b| ns_secs(b)).collect();
    for c in &called {
        let counts = c.latency.counts();
        let cumulative: Vec<u64> = COMMAND_BOUNDS_NS
            .iter()
            .map(|&b| count_below(&counts, b))
            .collect();
        // The buckets and the count come from one read of the histogram, so
        // they agree even while calls are recorded.
        let count = counts.iter().sum();
        t.histogram(
            "command_duration_seconds",
            &[("command", c.name)],
            &bounds,
            &cumulative,
            count,
            ns_secs(c.ns.load(Relaxed)),
        );
    }
}

fn render_engine(t: &mut Text, s: &EngineStats, data_names: &[String]) {
    t.single(
        "engine_failed",
        "gauge",
        "1 once a flush or the WAL failed and the engine refuses writes.",
        u64::from(s.failed.is_some()),
    );
    t.single(
        "engine_writes_total",
        "counter",
        "Puts and deletes.",
        s.writes,
    );
    t.single("engine_gets_total", "counter", "Gets.", s.gets);
    t.single("engine_scans_total", "counter", "Scans.", s.scans);
    t.single(
        "bloom_false_positives_total",
        "counter",
        "Block files read for a key their bloom filter let through but did not hold.",
        s.bloom_false_positives,
    );

    // Memory and memstores.
    let m = &s.memory;
    t.single(
        "memstore_bytes",
        "gauge",
        "Bytes of all memstores (active and frozen) together.",
        m.total,
    );
    t.single(
        "memstore_peak_bytes",
        "gauge",
        "Highest memstore total since open.",
        m.peak,
    );
    t.single(
        "memory_limit_bytes",
        "gauge",
        "The global memstore limit: writers wait at or above it.",
        m.limit,
    );
    t.single(
        "memory_low_water_bytes",
        "gauge",
        "Waiting writers resume below this.",
        m.low,
    );
    t.single(
        "writer_stalls_total",
        "counter",
        "Times a writer waited above the global memstore limit.",
        m.blocks,
    );
    t.single(
        "writer_stall_seconds_total",
        "counter",
        "Time writers waited above the global memstore limit, summed over writers.",
        secs(m.blocked),
    );
    t.family(
        "region_memstore_bytes",
        "gauge",
        "Memstore bytes per region: the active memstore and the frozen ones waiting for a flush.",
    );
    for (r, (&a, &f)) in s
        .region_active_bytes
        .iter()
        .zip(&s.region_frozen_bytes)
        .enumerate()
    {
        let r = r.to_string();
        t.sample(
            "region_memstore_bytes",
            &[("region", &r), ("state", "active")],
            a,
        );
        t.sample(
            "region_memstore_bytes",
            &[("region", &r), ("state", "frozen")],
            f,
        );
    }
    t.family(
        "region_frozen_memstores",
        "gauge",
        "Frozen memstores per region.",
    );
    for (r, &n) in s.region_frozen.iter().enumerate() {
        t.sample("region_frozen_memstores", &[("region", &r.to_string())], n);
    }
    t.family("region_files", "gauge", "Block files per region.");
    for (r, &n) in s.region_files.iter().enumerate() {
        t.sample("region_files", &[("region", &r.to_string())], n);
    }
    t.single(
        "memstore_freezes_total",
        "counter",
        "Memstores frozen.",
        s.freezes,
    );

    // Flushes and compactions.
    t.family(
        "flushes_total",
        "counter",
        "Memstore flushes written, per data device.",
    );
    t.family_per_data_device("flushes_total", &s.device_flushes, data_names);
    t.family(
        "flush_bytes_total",
        "counter",
        "Bytes of block files written by memstore flushes, per data device.",
    );
    t.family_per_data_device("flush_bytes_total", &s.device_flush_bytes, data_names);
    t.single(
        "flush_seconds_total",
        "counter",
        "Time spent in flushes, summed over flushes (they overlap on several reactors).",
        secs(s.flush_time),
    );
    t.single(
        "compactions_total",
        "counter",
        "Compactions done.",
        s.compactions,
    );
    t.single(
        "compaction_bytes_total",
        "counter",
        "Bytes of block files written by compactions.",
        s.compaction_bytes,
    );
    t.family(
        "jobs_queued",
        "gauge",
        "Flushes and compactions waiting for a flush reactor.",
    );
    t.sample("jobs_queued", &[("kind", "flush")], s.queued_flushes);
    t.sample(
        "jobs_queued",
        &[("kind", "compaction")],
        s.queued_compactions,
    );
    t.single(
        "jobs_running",
        "gauge",
        "Flushes and compactions running.",
        s.running_jobs,
    );
    t.single(
        "last_flush_timestamp_seconds",
        "gauge",
        "When the last flush was recorded (0: none since open).",
        s.last_flush.map_or(0, unix_secs),
    );
    t.single(
        "manifest_edits_total",
        "counter",
        "Manifest edit records written.",
        s.manifest.edits,
    );
    t.single(
        "manifest_checkpoints_total",
        "counter",
        "Manifest checkpoints written.",
        s.manifest.checkpoints,
    );

    // WAL.
    let w = &s.wal;
    t.single(
        "wal_appends_total",
        "counter",
        "Records appended to the WAL.",
        w.appends,
    );
    t.single(
        "wal_batches_total",
        "counter",
        "WAL batches written.",
        w.batches,
    );
    t.single(
        "wal_records_total",
        "counter",
        "Records in the WAL batches written.",
        w.records,
    );
    t.single(
        "wal_bytes_total",
        "counter",
        "Bytes of WAL batches written, padded to blocks.",
        w.bytes,
    );
    t.single(
        "wal_syncs_total",
        "counter",
        "Flush commands sent to the WAL devices, all devices together.",
        w.flushes.iter().sum::<u64>(),
    );
    t.family(
        "wal_batch_write_seconds",
        "histogram",
        "Time from submitting a WAL batch write to its completion.",
    );
    let bounds: Vec<f64> = WRITE_LATENCY_BOUNDS_NS
        .iter()
        .map(|&b| ns_secs(b))
        .collect();
    let cumulative: Vec<u64> = w
        .write_latency
        .iter()
        .take(bounds.len())
        .scan(0, |acc, &n| {
            *acc += n;
            Some(*acc)
        })
        .collect();
    t.histogram(
        "wal_batch_write_seconds",
        &[],
        &bounds,
        &cumulative,
        w.writes_completed(),
        ns_secs(w.write_ns),
    );
    t.single(
        "wal_writer_wait_seconds_total",
        "counter",
        "Time writers waited for room in the WAL's ring, summed over writers.",
        ns_secs(w.writer_wait_ns),
    );
    t.single(
        "wal_log_full_total",
        "counter",
        "Times the WAL found no free segment for a batch.",
        w.log_full,
    );
    t.single(
        "wal_segments_reclaimed_total",
        "counter",
        "WAL segments reclaimed.",
        w.segments_reclaimed,
    );
    t.single(
        "wal_segments_live",
        "gauge",
        "WAL segments holding log not yet released.",
        s.wal_live_segments,
    );
    t.single(
        "wal_segments",
        "gauge",
        "WAL segments in all devices together.",
        s.wal_segments,
    );
    t.single(
        "wal_segment_size_bytes",
        "gauge",
        "Bytes per WAL segment.",
        s.wal_segment_size,
    );
    t.single(
        "wal_written_lsn",
        "gauge",
        "Every LSN at or below this is written.",
        s.wal_written_lsn,
    );
    t.single(
        "wal_durable_lsn",
        "gauge",
        "Every LSN at or below this is durable.",
        s.wal_durable_lsn,
    );
    t.single(
        "replay_point",
        "gauge",
        "The first LSN recovery would replay now.",
        s.replay_point,
    );

    // Reactors.
    let mut reactors: Vec<(&str, &str, u64, u64, Option<u64>)> = Vec::new();
    if let Some(r) = &s.wal_reactor {
        reactors.push(("wal", &r.name, r.busy_ns, r.idle_ns, Some(r.parked_ns)));
    }
    for r in &s.flush_reactors {
        reactors.push((
            "flush",
            &r.name,
            r.busy.as_nanos() as u64,
            r.idle.as_nanos() as u64,
            None,
        ));
    }
    t.family(
        "reactor_busy_seconds_total",
        "counter",
        "Time a reactor spent working (handling messages, completions, flushes, compactions).",
    );
    for (set, name, busy, _, _) in &reactors {
        t.sample(
            "reactor_busy_seconds_total",
            &[("set", set), ("reactor", name)],
            ns_secs(*busy),
        );
    }
    t.family(
        "reactor_idle_seconds_total",
        "counter",
        "Time a reactor found nothing to do, parked or waiting time included.",
    );
    for (set, name, _, idle, _) in &reactors {
        t.sample(
            "reactor_idle_seconds_total",
            &[("set", set), ("reactor", name)],
            ns_secs(*idle),
        );
    }
    t.family(
        "reactor_parked_seconds_total",
        "counter",
        "The part of a poll-mode reactor's idle time spent asleep.",
    );
    for (set, name, _, _, parked) in &reactors {
        if let Some(p) = parked {
            t.sample(
                "reactor_parked_seconds_total",
                &[("set", set), ("reactor", name)],
                ns_secs(*p),
            );
        }
    }
}

impl Text {
    /// One sample per data device of `values`, labelled by device name.
    fn family_per_data_device(&mut self, name: &str, values: &[u64], names: &[String]) {
        for (v, n) in values.iter().zip(names) {
            self.sample(name, &[("device", n)], *v);
        }
    }
}

fn render_devices(t: &mut Text, devices: &[DeviceFigures]) {
    fn each(
        t: &mut Text,
        devices: &[DeviceFigures],
        name: &str,
        kind: &str,
        help: &str,
        f: impl Fn(&DeviceFigures) -> Option<u64>,
    ) {
        t.family(name, kind, help);
        for d in devices {
            if let Some(v) = f(d) {
                t.sample(name, &[("device", &d.name), ("role", d.role)], v);
            }
        }
    }
    each(
        t,
        devices,
        "device_capacity_bytes",
        "gauge",
        "Device capacity.",
        |d| Some(d.capacity),
    );
    each(
        t,
        devices,
        "device_free_bytes",
        "gauge",
        "Free bytes of a data device's extent allocator.",
        |d| d.free,
    );
    each(
        t,
        devices,
        "device_reads_total",
        "counter",
        "Read requests to a data device.",
        |d| d.reads.map(|r| r.0),
    );
    each(
        t,
        devices,
        "device_read_bytes_total",
        "counter",
        "Bytes read from a data device.",
        |d| d.reads.map(|r| r.1),
    );
    each(
        t,
        devices,
        "device_writes_total",
        "counter",
        "Write requests (WAL batches; block-file chunks and manifest records).",
        |d| Some(d.writes),
    );
    each(
        t,
        devices,
        "device_written_bytes_total",
        "counter",
        "Bytes written.",
        |d| Some(d.written),
    );
    each(
        t,
        devices,
        "device_flushes_total",
        "counter",
        "Flush commands sent.",
        |d| Some(d.flushes),
    );
}

// ---------------------------------------------------------------------------
// HTTP endpoint

/// The most bytes of a request (line and headers) the endpoint reads.
const MAX_REQUEST: usize = 8 << 10;
/// How long a client has to send its request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// How long writing the answer may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Stops a running [`spawn_endpoint`] thread.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
}

impl ShutdownHandle {
    /// Asks the endpoint to stop: it ends after the request it is serving,
    /// if any. Join its thread to wait for that.
    pub fn shutdown(&self) {
        self.stop.store(true, Relaxed);
        // Wake the blocking accept with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
    }
}

/// Serves `render()` at `GET /metrics` on `addr` (port 0: any free port)
/// from one thread. Returns the address bound, the thread, and the handle
/// that stops it.
pub fn spawn_endpoint(
    addr: SocketAddr,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> io::Result<(SocketAddr, JoinHandle<()>, ShutdownHandle)> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let handle = ShutdownHandle {
        stop: stop.clone(),
        addr: bound,
    };
    let thread = std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Relaxed) {
                    break;
                }
                match conn {
                    Ok(stream) => {
                        if let Err(e) = serve(stream, &*render) {
                            tracing::debug!("metrics endpoint: {e}");
                        }
                    }
                    Err(e) => {
                        tracing::warn!("metrics endpoint: accept: {e}");
                        // Out of fds and the like: do not spin on it.
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })?;
    Ok((bound, thread, handle))
}

/// What the request line asked for.
enum Asked {
    Get { head: bool, path: String },
    OtherMethod,
    Bad,
}

/// Answers one connection.
fn serve(mut stream: TcpStream, render: &(dyn Fn() -> String + Send + Sync)) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let asked = match read_request(&mut stream)? {
        Some(head) => parse_request(&head),
        None => {
            respond(&mut stream, "431 Request Header Fields Too Large", "", b"")?;
            return Ok(());
        }
    };
    match asked {
        Asked::Get { head, path } => {
            let path = path.split(['?', '#']).next().unwrap_or("");
            if path == "/metrics" {
                match catch_unwind(AssertUnwindSafe(render)) {
                    Ok(body) => respond_with(
                        &mut stream,
                        "200 OK",
                        "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
                        body.as_bytes(),
                        !head,
                    )?,
                    Err(_) => respond(
                        &mut stream,
                        "500 Internal Server Error",
                        "",
                        b"rendering the metrics failed\n",
                    )?,
                }
            } else {
                respond(
                    &mut stream,
                    "404 Not Found",
                    "",
                    b"not found; try /metrics\n",
                )?;
            }
        }
        Asked::OtherMethod => respond(
            &mut stream,
            "405 Method Not Allowed",
            "Allow: GET, HEAD\r\n",
            b"method not allowed\n",
        )?,
        Asked::Bad => respond(&mut stream, "400 Bad Request", "", b"bad request\n")?,
    }
    let _ = stream.shutdown(Shutdown::Write);
    Ok(())
}

/// Reads up to the blank line ending the headers, within the deadline;
/// `None` when the request is larger than [`MAX_REQUEST`]. A client that
/// closes or stalls early ends with what it sent (parsed as bad).
fn read_request(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            return Ok(Some(buf));
        }
        if buf.len() > MAX_REQUEST {
            return Ok(None);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Some(buf));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(Some(buf)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Some(buf));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn parse_request(head: &[u8]) -> Asked {
    let Some(line_end) = head.iter().position(|&b| b == b'\n') else {
        return Asked::Bad;
    };
    let Ok(line) = std::str::from_utf8(&head[..line_end]) else {
        return Asked::Bad;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::Bad;
    };
    if !version.starts_with("HTTP/1.") || !path.starts_with('/') || method.is_empty() {
        return Asked::Bad;
    }
    match method {
        "GET" => Asked::Get {
            head: false,
            path: path.to_owned(),
        },
        "HEAD" => Asked::Get {
            head: true,
            path: path.to_owned(),
        },
        m if m.bytes().all(|b| b.is_ascii_uppercase()) => Asked::OtherMethod,
        _ => Asked::Bad,
    }
}

fn respond(stream: &mut TcpStream, status: &str, headers: &str, body: &[u8]) -> io::Result<()> {
    respond_with(stream, status, headers, body, true)
}

/// Writes a response; the body only with `send_body` (not for HEAD).
fn respond_with(
    stream: &mut TcpStream,
    status: &str,
    headers: &str,
    body: &[u8],
    send_body: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\n{headers}");
    if !headers.contains("Content-Type") {
        head.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    let _ = write!(
        head,
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if send_body {
        stream.write_all(body)?;
    }
    stream.flush()
}

#[cfg(test)]
pub(super) mod testing {
    //! A small engine on simulated devices for the server's tests.

    use crate::config::{Durability, SimConfig};
    use crate::device::sim::SimDevice;
    use crate::engine::{Engine, EngineDevices, EngineOptions};
    use crate::reactor::ReactorConfig;
    use crate::table::TableOptions;
    use crate::wal::WalOptions;

    /// An engine on zero-latency simulated devices (two WAL, two data),
    /// three regions, unpinned reactors that park when idle.
    pub fn engine() -> Engine<SimDevice> {
        let model = SimConfig {
            write_us: 0,
            read_us: 0,
            flush_us: 0,
            bandwidth: 0,
            ..SimConfig::default()
        };
        let dev = |name: &str, blocks: u64| SimDevice::new(name, 4096, blocks, 64, model.clone());
        let devices = EngineDevices {
            wal: vec![dev("wal0", 4096), dev("wal1", 4096)],
            data: vec![dev("data0", 8192), dev("data \"1\"", 8192)],
        };
        let opts = EngineOptions {
            split_keys: vec![b"g".to_vec(), b"p".to_vec()],
            flush_size: 64 << 10,
            global_limit: 1 << 20,
            low_water: 0.5,
            max_key: 1024,
            max_value: 64 << 10,
            durability: Durability::Sync,
            table: TableOptions {
                block_bytes: 4096,
                bloom_bits_per_key: 10,
                device_block: 4096,
            },
            compact_at: 4,
            log_freeze_at: 0.5,
            manifest_bytes: 256 << 10,
            extent_unit: 4096,
            flush_chunk: 64 << 10,
            flush_depth: 4,
            wal: WalOptions {
                appliance_id: 7,
                segment_size: 512 << 10,
                max_batch: 128 << 10,
                in_flight_per_device: 2,
                fua: true,
                ring_capacity: 256,
                replay_from: None,
                truncate_corrupt: false,
            },
            wal_reactor: ReactorConfig::unpinned("wal"),
            flush_reactors: vec![
                ReactorConfig::unpinned("flush0"),
                ReactorConfig::unpinned("flush1"),
            ],
        };
        Engine::open(devices, opts).expect("open").0
    }

    /// Puts `n` keys over the three regions, then flushes everything.
    pub fn fill(engine: &Engine<SimDevice>, n: u64) {
        for i in 0..n {
            let lead = [b'a', b'h', b'q'][(i % 3) as usize] as char;
            let key = format!("{lead}{i:08}");
            engine.put(key.as_bytes(), &[b'v'; 200], None).expect("put");
        }
        engine.flush_all().expect("flush");
        assert_eq!(
            engine.get(b"a00000000").expect("get"),
            Some(vec![b'v'; 200])
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn buckets_cover_every_value_once_and_in_order() {
        for i in 0..BUCKETS {
            assert_eq!(bucket_of(bucket_low(i)), i, "bucket {i}");
            assert!(bucket_end(i) > bucket_low(i));
            if i + 1 < BUCKETS {
                assert_eq!(bucket_of(bucket_end(i) - 1), i);
            }
        }
        for v in [0, 1, 7, 8, 9, 15, 16, 1000, 123_456_789, u64::MAX] {
            let i = bucket_of(v);
            assert!(bucket_low(i) <= v && (v < bucket_end(i) || i == BUCKETS - 1));
        }
        // The Prometheus bounds are bucket boundaries, so counts are exact.
        for b in COMMAND_BOUNDS_NS.iter().chain(&WRITE_LATENCY_BOUNDS_NS) {
            assert_eq!(bucket_low(bucket_of(*b)), *b);
        }
    }

    #[test]
    fn quantiles_are_within_the_bucket_width() {
        let h = Histogram::new();
        for us in 1..=10_000u64 {
            h.record(us * 1000);
        }
        let counts = h.counts();
        for (q, want) in [
            (0.5, 5_000_000.0),
            (0.99, 9_900_000.0),
            (0.999, 9_990_000.0),
        ] {
            let got = quantile(&counts, q);
            assert!((got - want).abs() / want < 0.07, "q{q}: {got} vs {want}");
        }
        assert_eq!(quantile(&[0; BUCKETS], 0.5), 0.0);
        assert_eq!(count_below(&counts, 1 << 20), 1048); // 1..=1048 µs < 1048.576 µs
    }

    #[test]
    fn commands_are_counted_by_name_and_strangers_as_unknown() {
        let m = ServerMetrics::with_commands(&["get", "set"]);
        m.command("get", Duration::from_micros(10), false);
        m.command("GET", Duration::from_micros(30), true);
        m.command("set", Duration::from_micros(5), false);
        for i in 0..100 {
            m.command(&format!("nosuch{i}"), Duration::from_micros(1), true);
        }
        assert_eq!(m.total_commands(), 103);
        assert_eq!(m.total_errors(), 101);
        let c = m.commands();
        let names: Vec<&str> = c.iter().map(|c| c.name).collect();
        assert_eq!(names, ["get", "set", "unknown"]);
        assert_eq!((c[0].calls, c[0].errors, c[0].usec), (2, 1, 40));
        assert_eq!(c[0].usec_per_call(), 20.0);
        assert_eq!((c[2].calls, c[2].errors), (100, 100));
        assert!(c[0].p99_usec > 25.0 && c[0].p99_usec < 33.0, "{:?}", c[0]);
    }

    #[test]
    fn metrics_are_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<ServerMetrics>();
        let m = Arc::new(ServerMetrics::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        m.command("get", Duration::from_micros(5), false);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(m.total_commands(), 4000);
        assert_eq!(m.commands()[0].calls, 4000);
    }

    #[test]
    fn connections_and_bytes() {
        let m = ServerMetrics::new();
        m.connection_opened();
        m.connection_opened();
        m.connection_closed();
        m.connection_closed();
        m.connection_closed(); // one too many: stays at 0
        m.connection_rejected();
        m.bytes_in(10);
        m.bytes_out(20);
        m.protocol_error();
        m.auth_failure();
        assert_eq!(
            (m.connected(), m.total_connections(), m.rejected()),
            (0, 2, 1)
        );
        assert_eq!((m.bytes_in_total(), m.bytes_out_total()), (10, 20));
        assert_eq!((m.protocol_errors(), m.auth_failures()), (1, 1));
    }

    #[test]
    fn rates_come_from_samples_at_least_100ms_apart() {
        let m = ServerMetrics::new();
        m.sample();
        for _ in 0..50 {
            m.command("ping", Duration::from_micros(1), false);
        }
        m.bytes_in(2048);
        std::thread::sleep(Duration::from_millis(120));
        let r = m.rates();
        // 50 commands in a little over 0.12 s.
        assert!(r.ops_per_sec > 100.0 && r.ops_per_sec < 420.0, "{r:?}");
        assert!(r.input_kbps > 4.0 && r.input_kbps < 17.0, "{r:?}");
        assert_eq!(r.output_kbps, 0.0);
    }

    #[test]
    fn label_values_and_floats_are_escaped() {
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(float(f64::INFINITY), "+Inf");
        assert_eq!(float(f64::NAN), "NaN");
        assert_eq!(float(0.000001024), "0.000001024");
    }

    /// Checks the text exposition format line by line and returns each
    /// family's type and its samples (name with labels, value).
    pub(super) fn parse_exposition(text: &str) -> BTreeMap<String, (String, Vec<(String, f64)>)> {
        let mut families: BTreeMap<String, (String, Vec<(String, f64)>)> = BTreeMap::new();
        let mut current = String::new();
        let mut helped = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(helped.insert(name.to_owned()), "HELP twice for {name}");
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut p = rest.split(' ');
                let (name, kind) = (p.next().unwrap(), p.next().unwrap());
                assert!(helped.contains(name), "TYPE before HELP for {name}");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                assert!(
                    families
                        .insert(name.to_owned(), (kind.to_owned(), Vec::new()))
                        .is_none(),
                    "family {name} declared twice"
                );
                current = name.to_owned();
                continue;
            }
            assert!(!line.starts_with('#'), "stray comment {line}");
            let (series, value) = line.rsplit_once(' ').expect(line);
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("value of {line}")),
            };
            let name = series.split('{').next().unwrap();
            assert!(name.starts_with("stria_"), "{line}");
            assert!(
                name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{line}"
            );
            let (kind, samples) = families.get_mut(&current).expect("sample before TYPE");
            let ok = name == current
                || (kind == "histogram"
                    && ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name == format!("{current}{s}")));
            assert!(ok, "sample {name} in family {current}");
            if kind == "counter" {
                assert!(current.ends_with("_total"), "counter {current}");
            }
            if let Some(labels) = series.strip_prefix(name) {
                if !labels.is_empty() {
                    assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                }
            }
            samples.push((series.to_owned(), value));
        }
        families
    }

    #[test]
    fn render_covers_the_server_and_the_engine() {
        let engine = testing::engine();
        testing::fill(&engine, 600);
        let server = ServerMetrics::new();
        server.connection_opened();
        server.command("set", Duration::from_micros(40), false);
        server.command("get", Duration::from_micros(3), false);
        server.command("get", Duration::from_millis(2), true);
        let text = render_prometheus(&engine, &server);
        let f = parse_exposition(&text);
        for family in [
            "stria_commands_total",
            "stria_command_errors_total",
            "stria_command_duration_seconds",
            "stria_connected_clients",
            "stria_connections_received_total",
            "stria_connections_rejected_total",
            "stria_net_input_bytes_total",
            "stria_wal_batches_total",
            "stria_wal_records_total",
            "stria_wal_bytes_total",
            "stria_wal_syncs_total",
            "stria_wal_batch_write_seconds",
            "stria_flushes_total",
            "stria_flush_bytes_total",
            "stria_compactions_total",
            "stria_memstore_bytes",
            "stria_region_memstore_bytes",
            "stria_memory_limit_bytes",
            "stria_writer_stalls_total",
            "stria_writer_stall_seconds_total",
            "stria_reactor_busy_seconds_total",
            "stria_reactor_idle_seconds_total",
            "stria_device_reads_total",
            "stria_device_writes_total",
            "stria_device_written_bytes_total",
            "stria_device_flushes_total",
            "stria_replay_point",
        ] {
            assert!(f.contains_key(family), "no {family} in\n{text}");
        }
        let value = |family: &str, series: &str| {
            f[family]
                .1
                .iter()
                .find(|(s, _)| s == series)
                .unwrap_or_else(|| panic!("no {series}"))
                .1
        };
        assert_eq!(
            value(
                "stria_commands_total",
                "stria_commands_total{command=\"get\"}"
            ),
            2.0
        );
        assert_eq!(
            value(
                "stria_command_errors_total",
                "stria_command_errors_total{command=\"get\"}"
            ),
            1.0
        );
        // 3 µs is under the 4.096 µs bound, 2 ms under 4.19 ms.
        let get = "stria_command_duration_seconds";
        assert_eq!(
            value(
                get,
                &format!("{get}_bucket{{command=\"get\",le=\"0.000004096\"}}")
            ),
            1.0
        );
        assert_eq!(
            value(
                get,
                &format!("{get}_bucket{{command=\"get\",le=\"0.004194304\"}}")
            ),
            2.0
        );
        assert_eq!(
            value(get, &format!("{get}_bucket{{command=\"get\",le=\"+Inf\"}}")),
            2.0
        );
        assert_eq!(value(get, &format!("{get}_count{{command=\"get\"}}")), 2.0);
        // Buckets only grow.
        for (kind, samples) in f.values() {
            if kind == "histogram" {
                let mut last: BTreeMap<String, f64> = BTreeMap::new();
                for (s, v) in samples.iter().filter(|(s, _)| s.contains("_bucket")) {
                    let key = s
                        .split(",le=")
                        .next()
                        .unwrap()
                        .split("{le=")
                        .next()
                        .unwrap()
                        .to_owned();
                    assert!(*v >= last.get(&key).copied().unwrap_or(0.0), "{s}");
                    last.insert(key, *v);
                }
            }
        }
        let wal_batches = value("stria_wal_batches_total", "stria_wal_batches_total");
        assert!(wal_batches > 0.0);
        assert_eq!(
            value(
                "stria_wal_batch_write_seconds",
                "stria_wal_batch_write_seconds_count"
            ),
            wal_batches
        );
        let flushes: f64 = f["stria_flushes_total"].1.iter().map(|s| s.1).sum();
        assert!(flushes >= 3.0, "{flushes}");
        // The quote in the device name is escaped.
        assert!(text.contains("stria_device_writes_total{device=\"data \\\"1\\\"\",role=\"data\"}"));
        let wal0_writes = value(
            "stria_device_writes_total",
            "stria_device_writes_total{device=\"wal0\",role=\"wal\"}",
        );
        assert!(wal0_writes > 0.0);
        let data_writes: f64 = f["stria_device_writes_total"]
            .1
            .iter()
            .filter(|(s, _)| s.contains("role=\"data\""))
            .map(|s| s.1)
            .sum();
        assert!(data_writes >= flushes);
        let busy: f64 = f["stria_reactor_busy_seconds_total"]
            .1
            .iter()
            .map(|s| s.1)
            .sum();
        assert!(busy > 0.0);
        engine.close().expect("close");
    }

    fn http(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        let _ = s.shutdown(Shutdown::Write);
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn the_endpoint_serves_metrics_and_refuses_the_rest() {
        let render: Arc<dyn Fn() -> String + Send + Sync> =
            Arc::new(|| "# HELP stria_x X.\n# TYPE stria_x gauge\nstria_x 1\n".to_owned());
        let (addr, thread, stop) = spawn_endpoint("127.0.0.1:0".parse().unwrap(), render).unwrap();
        assert_ne!(addr.port(), 0);

        let ok = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(
            ok.ends_with("\r\n\r\n# HELP stria_x X.\n# TYPE stria_x gauge\nstria_x 1\n"),
            "{ok}"
        );
        let len: usize = ok
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(len, 49);
        let head = http(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        assert!(head.contains("Content-Length: 49\r\n"), "{head}");
        let q = http(addr, b"GET /metrics?x=1 HTTP/1.1\r\n\r\n");
        assert!(q.starts_with("HTTP/1.1 200 OK"), "{q}");

        let nf = http(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404 Not Found\r\n"), "{nf}");
        let na = http(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(
            na.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{na}"
        );
        assert!(na.contains("Allow: GET, HEAD\r\n"), "{na}");
        for garbage in [
            &b"\x00\xff\x13garbage\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET /metrics SPDY/3\r\n\r\n",
            b"GET /metrics HTTP/1.1", // closed before the headers end
            b"",
        ] {
            let bad = http(addr, garbage);
            assert!(
                bad.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{garbage:?}: {bad}"
            );
        }
        let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        huge.resize(64 << 10, b'a');
        let big = {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // The server stops reading at its limit: the write may fail.
            let _ = s.write_all(&huge);
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out
        };
        assert!(big.is_empty() || big.starts_with("HTTP/1.1 431"), "{big}");

        // Still serving after all that.
        let ok = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");

        stop.shutdown();
        thread.join().unwrap();
        assert!(TcpStream::connect(addr).is_err());
    }

    #[test]
    fn a_client_that_says_nothing_is_dropped_at_the_deadline() {
        let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(|| "stria_x 1\n".to_owned());
        let (addr, thread, stop) = spawn_endpoint("127.0.0.1:0".parse().unwrap(), render).unwrap();
        let silent = TcpStream::connect(addr).unwrap();
        let started = Instant::now();
        let ok = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        let waited = started.elapsed();
        assert!(
            waited < REQUEST_DEADLINE + Duration::from_secs(2),
            "{waited:?}"
        );
        drop(silent);
        stop.shutdown();
        thread.join().unwrap();
    }

    #[test]
    fn a_panicking_render_answers_500_and_keeps_serving() {
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(move || {
            if c.fetch_add(1, Relaxed) == 0 {
                panic!("first render fails");
            }
            "stria_x 1\n".to_owned()
        });
        let (addr, thread, stop) = spawn_endpoint("127.0.0.1:0".parse().unwrap(), render).unwrap();
        let err = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(err.starts_with("HTTP/1.1 500"), "{err}");
        let ok = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        stop.shutdown();
        thread.join().unwrap();
    }
}
