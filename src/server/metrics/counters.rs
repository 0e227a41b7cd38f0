//! Connections, bytes and per-command calls, errors and latency histograms.

use crate::server::shard::RowStats;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::hash::BytesHash;
use nohash_hasher::BuildNoHashHasher;

use super::errors::ErrorCodes;

// ---------------------------------------------------------------------------
// Latency histogram

/// Sub-buckets per power of two: 2^3 = 8.
pub(super) const SUB_BITS: u32 = 3;
pub(super) const SUB: usize = 1 << SUB_BITS;
/// Values of 2^40 ns (about 18 minutes) and more share the last bucket.
pub(super) const MAX_EXP: u32 = 40;
pub(super) const BUCKETS: usize = SUB + (MAX_EXP - SUB_BITS) as usize * SUB;

/// The bucket of `ns`: exact below 8, then 8 equal parts per power of two.
pub(super) fn bucket_of(ns: u64) -> usize {
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
pub(super) fn bucket_low(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let exp = ((i - SUB) / SUB) as u32 + SUB_BITS;
    let sub = (i - SUB) % SUB;
    ((SUB + sub) as u64) << (exp - SUB_BITS)
}

/// One past the highest value of bucket `i`.
pub(super) fn bucket_end(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        u64::MAX
    } else {
        bucket_low(i + 1)
    }
}

/// Upper bounds of the command latency buckets Prometheus sees: powers of
/// four nanoseconds, from about 1 µs to about 17 s.
pub(super) const COMMAND_BOUNDS_NS: [u64; 13] = {
    let mut b = [0u64; 13];
    let mut i = 0;
    while i < 13 {
        b[i] = 1 << (10 + 2 * i);
        i += 1;
    }
    b
};

/// A latency histogram any thread records into with one relaxed add.
pub(super) struct Histogram {
    buckets: Box<[AtomicU64]>,
}

impl Histogram {
    pub(super) fn new() -> Histogram {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(super) fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Relaxed);
    }

    pub(super) fn counts(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.load(Relaxed)).collect()
    }

    fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Relaxed);
        }
    }
}

/// The value below which a fraction `q` of what `counts` holds lies, in
/// nanoseconds (the middle of its bucket); 0 when empty.
pub(super) fn quantile(counts: &[u64], q: f64) -> f64 {
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
pub(super) fn count_below(counts: &[u64], bound: u64) -> u64 {
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
pub(super) struct CommandCounters {
    pub(super) name: &'static str,
    pub(super) calls: AtomicU64,
    pub(super) errors: AtomicU64,
    /// Calls refused before they ran (in scripts: over `maxmemory`,
    /// writes from read-only scripts, ACL, ...).
    pub(super) rejected: AtomicU64,
    pub(super) ns: AtomicU64,
    pub(super) latency: Histogram,
}

/// One command's figures, for INFO commandstats and latencystats.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandSummary {
    pub name: &'static str,
    pub calls: u64,
    /// Calls that answered with an error.
    pub errors: u64,
    /// Calls refused before they ran.
    pub rejected: u64,
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
pub(super) struct Sampler {
    last: Option<(Instant, [u64; 3])>,
    rates: Vec<[f64; 3]>,
    next: usize,
}

pub(super) const SAMPLES: usize = 16;
pub(super) const SAMPLE_EVERY: Duration = Duration::from_millis(100);

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
    /// Reads from clients' sockets that returned data, and writes to them.
    reads: AtomicU64,
    writes: AtomicU64,
    /// Connections a turn served after its first poll, so that their
    /// writes joined its group commit.
    gathered: AtomicU64,
    /// MIGRATE's connections kept open.
    migrate_sockets: AtomicU64,
    protocol_errors: AtomicU64,
    auth_failures: AtomicU64,
    /// Keys deleted because they expired (on access or by the cycle).
    expired_keys: AtomicU64,
    /// Replies held until the writes they depend on are acknowledged.
    replies_waiting: AtomicU64,
    replies_waiting_bytes: AtomicU64,
    /// Clients waiting in a blocking command (BLPOP and the like).
    blocked_clients: AtomicU64,
    /// Commands that changed the data.
    changes: AtomicU64,
    /// Keys that blocked clients wait on, and those an XREADGROUP waits on.
    blocking_keys: AtomicU64,
    blocking_keys_nokey: AtomicU64,
    /// CLIENT TRACKING: connections, keys, readers, BCAST prefixes.
    tracking: [AtomicU64; 4],
    /// Scripts in the shard's cache, and what its Lua state takes.
    scripts: AtomicU64,
    lua_memory: AtomicU64,
    /// Keys the shard wrote whose writes are not yet acknowledged and in
    /// the memstores, and the bytes they hold.
    dirty_keys: AtomicU64,
    dirty_bytes: AtomicU64,
    /// The shard's row cache: capacity, bytes, keys, hits, misses.
    rows: [AtomicU64; 7],
    pub(super) commands: Box<[CommandCounters]>,
    /// By name, hashed with xxh3 (not SipHash) in one call.
    index: HashMap<&'static str, usize, BytesHash>,
    /// By where the name given at the start is in memory: the server
    /// counts every command by its table's name, so a command is counted
    /// with no look at its bytes ([`ServerMetrics::slot`]).
    by_address: HashMap<usize, (&'static str, usize), BuildNoHashHasher<usize>>,
    /// Error replies by code (INFO errorstats).
    error_codes: ErrorCodes,
    /// Error replies, each counted once (`total_error_replies`).
    error_replies: AtomicU64,
    sampler: Mutex<Sampler>,
    /// The online replacement of a WAL device, for INFO's `wal_replace`.
    pub replacements: crate::server::replace::Replacements,
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
                rejected: AtomicU64::new(0),
                ns: AtomicU64::new(0),
                latency: Histogram::new(),
            })
            .collect();
        let index = all.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let by_address = all
            .iter()
            .enumerate()
            .map(|(i, &n)| (n.as_ptr() as usize, (n, i)))
            .collect();
        ServerMetrics {
            started: Instant::now(),
            connected: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            total_commands: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            gathered: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            migrate_sockets: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            auth_failures: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            replies_waiting: AtomicU64::new(0),
            replies_waiting_bytes: AtomicU64::new(0),
            blocked_clients: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            blocking_keys: AtomicU64::new(0),
            blocking_keys_nokey: AtomicU64::new(0),
            tracking: Default::default(),
            scripts: AtomicU64::new(0),
            lua_memory: AtomicU64::new(0),
            dirty_keys: AtomicU64::new(0),
            dirty_bytes: AtomicU64::new(0),
            rows: Default::default(),
            commands,
            index,
            by_address,
            error_codes: ErrorCodes::default(),
            error_replies: AtomicU64::new(0),
            sampler: Mutex::new(Sampler::default()),
            replacements: Default::default(),
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

    /// `held` more replies of `bytes` in all wait for writes (negative:
    /// fewer).
    pub fn replies_held(&self, held: i64, bytes: i64) {
        add_signed(&self.replies_waiting, held);
        add_signed(&self.replies_waiting_bytes, bytes);
    }

    /// One more (`+1`) or fewer (`-1`) client waiting in a blocking command.
    pub fn blocked(&self, by: i64) {
        add_signed(&self.blocked_clients, by);
    }

    pub fn set_tracking(&self, counts: [usize; 4]) {
        for (slot, n) in self.tracking.iter().zip(counts) {
            slot.store(n as u64, Relaxed);
        }
    }

    /// CLIENT TRACKING's tracking connections, keys in its table, readers
    /// of them in all, and BCAST prefixes.
    pub fn tracking(&self) -> [u64; 4] {
        self.tracking.each_ref().map(|a| a.load(Relaxed))
    }

    pub fn set_blocking_keys(&self, n: usize, nokey: usize) {
        self.blocking_keys.store(n as u64, Relaxed);
        self.blocking_keys_nokey.store(nokey as u64, Relaxed);
    }

    /// Keys that blocked clients wait on, and those an XREADGROUP waits on.
    pub fn blocking_keys(&self) -> (u64, u64) {
        (
            self.blocking_keys.load(Relaxed),
            self.blocking_keys_nokey.load(Relaxed),
        )
    }

    /// Clients waiting in a blocking command.
    pub fn blocked_clients(&self) -> u64 {
        self.blocked_clients.load(Relaxed)
    }

    /// Replies held until their writes are acknowledged.
    pub fn replies_waiting(&self) -> u64 {
        self.replies_waiting.load(Relaxed)
    }

    /// What the replies held take, about (see [`Reply::weight`]).
    ///
    /// [`Reply::weight`]: crate::server::resp::Reply::weight
    pub fn replies_waiting_bytes(&self) -> u64 {
        self.replies_waiting_bytes.load(Relaxed)
    }

    /// The shard's dirty keys and their bytes, as of its last turn.
    pub fn set_dirty(&self, keys: u64, bytes: u64) {
        self.dirty_keys.store(keys, Relaxed);
        self.dirty_bytes.store(bytes, Relaxed);
    }

    /// The shard's dirty keys and their bytes.
    pub fn dirty(&self) -> (u64, u64) {
        (
            self.dirty_keys.load(Relaxed),
            self.dirty_bytes.load(Relaxed),
        )
    }

    /// The shard's row cache, as of its last turn.
    pub fn set_rows(&self, r: RowStats) {
        let values = [
            r.capacity,
            r.bytes,
            r.entries,
            r.hits,
            r.misses,
            r.ahead_reads,
            r.ahead_hits,
        ];
        for (a, v) in self.rows.iter().zip(values) {
            a.store(v, Relaxed);
        }
    }

    /// The shard's row cache.
    pub fn rows(&self) -> RowStats {
        let [capacity, bytes, entries, hits, misses, ahead_reads, ahead_hits] =
            self.rows.each_ref().map(|a| a.load(Relaxed));
        RowStats {
            capacity,
            bytes,
            entries,
            hits,
            misses,
            ahead_reads,
            ahead_hits,
        }
    }

    /// A connection was refused (too many clients); it is not counted as
    /// received.
    pub fn connection_rejected(&self) {
        self.rejected.fetch_add(1, Relaxed);
    }

    /// A command ran: `name` in lower case, how long it took, and the
    /// message of the error it answered with, if it did.
    pub fn command(&self, name: &str, latency: Duration, error: Option<&str>) {
        let c = &self.commands[self.slot(name)];
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        c.calls.fetch_add(1, Relaxed);
        c.ns.fetch_add(ns, Relaxed);
        c.latency.record(ns);
        if let Some(msg) = error {
            c.errors.fetch_add(1, Relaxed);
            self.error_reply(msg);
        }
        self.total_commands.fetch_add(1, Relaxed);
    }

    /// A command that failed with an error already counted where it arose
    /// (a script's that a `redis.call` of it raised): a failed call, not
    /// another error reply.
    pub fn command_failed_counted(&self, name: &str, latency: Duration) {
        let c = &self.commands[self.slot(name)];
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        c.calls.fetch_add(1, Relaxed);
        c.ns.fetch_add(ns, Relaxed);
        c.latency.record(ns);
        c.errors.fetch_add(1, Relaxed);
        self.total_commands.fetch_add(1, Relaxed);
    }

    /// A call of `name` refused before it ran, with error `msg`.
    pub fn call_rejected(&self, name: &str, msg: &str) {
        self.commands[self.slot(name)]
            .rejected
            .fetch_add(1, Relaxed);
        self.error_reply(msg);
    }

    /// One more error reply, by its code.
    pub fn error_reply(&self, msg: &str) {
        self.error_replies.fetch_add(1, Relaxed);
        self.error_codes.count(msg);
    }

    fn slot(&self, name: &str) -> usize {
        // The same bytes at the same place (two names may share a start,
        // one being the other's prefix).
        if let Some(&(n, i)) = self.by_address.get(&(name.as_ptr() as usize)) {
            if n.len() == name.len() {
                return i;
            }
        }
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

    /// Bytes read from clients, by one read.
    pub fn bytes_in(&self, n: u64) {
        self.bytes_in.fetch_add(n, Relaxed);
        self.reads.fetch_add(1, Relaxed);
    }

    /// Bytes written to clients, by one write.
    pub fn bytes_out(&self, n: u64) {
        self.bytes_out.fetch_add(n, Relaxed);
        self.writes.fetch_add(1, Relaxed);
    }

    /// `n` connections joined a turn's group commit late.
    pub fn gathered(&self, n: u64) {
        self.gathered.fetch_add(n, Relaxed);
    }

    pub fn gathered_total(&self) -> u64 {
        self.gathered.load(Relaxed)
    }

    /// A client sent something that is not RESP.
    pub fn protocol_error(&self) {
        self.protocol_errors.fetch_add(1, Relaxed);
    }

    /// An AUTH (or HELLO AUTH) failed.
    pub fn auth_failure(&self) {
        self.auth_failures.fetch_add(1, Relaxed);
    }

    /// The scripts cached and the bytes the Lua state takes.
    pub fn set_scripting(&self, scripts: usize, memory: usize) {
        self.scripts.store(scripts as u64, Relaxed);
        self.lua_memory.store(memory as u64, Relaxed);
    }

    /// The scripts cached and the bytes the Lua state takes.
    pub fn scripting(&self) -> (u64, u64) {
        (self.scripts.load(Relaxed), self.lua_memory.load(Relaxed))
    }

    /// A command changed the data (Redis's `dirty`).
    pub fn changed(&self) {
        self.changes.fetch_add(1, Relaxed);
    }

    /// Commands that changed the data since the start.
    pub fn changes(&self) -> u64 {
        self.changes.load(Relaxed)
    }

    /// A key was deleted because it expired.
    pub fn key_expired(&self) {
        self.expired_keys.fetch_add(1, Relaxed);
    }

    /// CONFIG RESETSTAT: expired keys, every command's calls, errors
    /// and latencies (INFO commandstats and latencystats; Prometheus
    /// sees a counter reset), and the errors by code (errorstats).
    pub fn reset_expired(&self) {
        self.expired_keys.store(0, Relaxed);
        self.error_codes.reset();
        self.error_replies.store(0, Relaxed);
        for c in self.commands.iter() {
            c.calls.store(0, Relaxed);
            c.errors.store(0, Relaxed);
            c.rejected.store(0, Relaxed);
            c.ns.store(0, Relaxed);
            c.latency.reset();
        }
    }

    pub fn expired_keys(&self) -> u64 {
        self.expired_keys.load(Relaxed)
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

    /// How many connections MIGRATE keeps open.
    pub fn set_migrate_sockets(&self, n: usize) {
        self.migrate_sockets.store(n as u64, Relaxed);
    }

    pub fn migrate_sockets(&self) -> u64 {
        self.migrate_sockets.load(Relaxed)
    }

    /// Reads from and writes to clients' sockets (Redis's
    /// `total_reads_processed`, `total_writes_processed`).
    pub fn socket_calls(&self) -> (u64, u64) {
        (self.reads.load(Relaxed), self.writes.load(Relaxed))
    }

    pub fn protocol_errors(&self) -> u64 {
        self.protocol_errors.load(Relaxed)
    }

    pub fn auth_failures(&self) -> u64 {
        self.auth_failures.load(Relaxed)
    }

    /// Error replies by code, in code order.
    pub fn error_codes(&self) -> Vec<(String, u64)> {
        self.error_codes.snapshot()
    }

    /// Error replies, all commands together (an error a script's call
    /// raised counts once, not again as the script's reply).
    pub fn total_errors(&self) -> u64 {
        self.error_replies.load(Relaxed)
    }

    /// Every command called or refused at least once, by name.
    pub fn commands(&self) -> Vec<CommandSummary> {
        self.commands
            .iter()
            .filter(|c| c.calls.load(Relaxed) > 0 || c.rejected.load(Relaxed) > 0)
            .map(|c| {
                let counts = c.latency.counts();
                CommandSummary {
                    name: c.name,
                    calls: c.calls.load(Relaxed),
                    errors: c.errors.load(Relaxed),
                    rejected: c.rejected.load(Relaxed),
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

/// Adds `n` (which may be negative) to a gauge that never goes below 0.
fn add_signed(g: &AtomicU64, n: i64) {
    if n >= 0 {
        g.fetch_add(n as u64, Relaxed);
    } else {
        let _ = g.fetch_update(Relaxed, Relaxed, |v| {
            Some(v.saturating_sub(n.unsigned_abs()))
        });
    }
}
