//! The workloads of `bench compare` and their cases, in the shapes of the
//! benchmarks Stria's design answers: the device's floor (fio), HBase's
//! WALPerformanceEvaluation (wal-pe), Accumulo's TestIngest (ingest),
//! HBase PE's randomWrite with one client (latency), and redis-benchmark
//! against the servers (server).

use std::time::{Duration, Instant};

use super::sample::{Percentiles, Sample};
use crate::bench::latency::Latency;
use crate::bench::procstat;
use crate::config::Durability;

/// A workload, by the name `--workloads` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Floor,
    WalPe,
    Ingest,
    Latency,
    Server,
}

impl Workload {
    pub const ALL: [Workload; 5] = [
        Workload::Floor,
        Workload::WalPe,
        Workload::Ingest,
        Workload::Latency,
        Workload::Server,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Floor => "floor",
            Workload::WalPe => "wal-pe",
            Workload::Ingest => "ingest",
            Workload::Latency => "latency",
            Workload::Server => "server",
        }
    }

    pub fn parse(s: &str) -> Result<Workload, String> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a workload ({})",
                    Workload::ALL.map(Workload::name).join(", ")
                )
            })
    }

    /// What it runs, for the report.
    pub fn description(self) -> &'static str {
        match self {
            Workload::Floor => "fio on the disk of the log: 4 KiB sequential writes each followed by fdatasync (psync, queue depth 1), the floor of one durable write; and 64 KiB O_DIRECT writes each followed by fdatasync, the disk's durable bandwidth",
            Workload::WalPe => "T threads, one durable 1 KiB append at a time each (HBase WALPerformanceEvaluation); Stria: its WAL alone, as `stria bench wal-pe`; RocksDB: put with sync=true, 64 MiB write buffer",
            Workload::Ingest => "5 clients x R records x 500 B in BatchWriter batches (Accumulo TestIngest), durable per batch (sync) and written to the OS only (write, hflush); RocksDB gets the same batches as WriteBatches, sync=true and sync=false",
            Workload::Latency => "one client, one durable 1 KiB put at a time (HBase PE randomWrite, one client), through the whole engine",
            Workload::Server => "redis-benchmark against `stria serve` (connections at the map's durability, sync) and Redis with appendonly yes, appendfsync always, on the same disk; CPU and context switches of the server process",
        }
    }
}

/// One case of wal-pe.
#[derive(Clone, Debug, PartialEq)]
pub struct WalPeCase {
    pub threads: usize,
    pub value_size: usize,
    pub durability: Durability,
}

impl WalPeCase {
    pub fn name(&self) -> String {
        format!("threads={}", self.threads)
    }
}

/// One case of ingest.
#[derive(Clone, Debug, PartialEq)]
pub struct IngestCase {
    pub clients: usize,
    pub records: u64,
    pub value_size: usize,
    pub durability: Durability,
}

impl IngestCase {
    pub fn name(&self) -> String {
        self.durability.as_str().to_string()
    }
}

/// A redis-benchmark test and whether its keys are random.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerTest {
    /// redis-benchmark's `-t` name.
    pub test: String,
    /// `-r`: random keys; without, the test's one key (a hot counter).
    pub random: bool,
}

impl ServerTest {
    /// Parses a test name; `incr-1-key` is INCR of one key.
    pub fn parse(s: &str) -> Result<ServerTest, String> {
        const KNOWN: [&str; 9] = [
            "set", "get", "incr", "lpush", "rpush", "lpop", "rpop", "sadd", "zadd",
        ];
        if s == "incr-1-key" {
            return Ok(ServerTest {
                test: "incr".into(),
                random: false,
            });
        }
        if KNOWN.contains(&s) {
            return Ok(ServerTest {
                test: s.into(),
                random: true,
            });
        }
        Err(format!(
            "{s:?} is not a server test ({}, incr-1-key)",
            KNOWN.join(", ")
        ))
    }

    pub fn name(&self) -> String {
        if self.random {
            self.test.to_uppercase()
        } else {
            format!("{}-1-KEY", self.test.to_uppercase())
        }
    }
}

/// A (clients, pipeline) case of the server workload.
pub fn parse_server_case(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("{s:?} is not a server case: CLIENTSxPIPELINE, such as 50x16");
    let (c, p) = s.split_once('x').ok_or_else(bad)?;
    let c: usize = c.parse().map_err(|_| bad())?;
    let p: usize = p.parse().map_err(|_| bad())?;
    if c == 0 || p == 0 {
        return Err(bad());
    }
    Ok((c, p))
}

/// Appends the key of put `n` of the latency workload (the same for every
/// system).
pub fn push_latency_key(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"lat-");
    crate::bench::push_decimal(out, n, 12);
}

/// The latency workload's loop: one put of `value_size` bytes at a time
/// through `put` for `duration`, each timed, with this process's CPU
/// around them.
pub fn timed_puts(
    value_size: usize,
    duration: Duration,
    mut put: impl FnMut(&[u8], &[u8]) -> Result<(), String>,
) -> Result<Sample, String> {
    let mut latency = Latency::new();
    let value = vec![0xa5u8; value_size];
    let mut key = Vec::with_capacity(32);
    let before = procstat::own();
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < duration {
        key.clear();
        push_latency_key(&mut key, n);
        let at = Instant::now();
        put(&key, &value)?;
        latency.record(at.elapsed());
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let usage = procstat::own().since(&before);
    Ok(Sample::new(
        n,
        n * (value_size + key.len()) as u64,
        secs,
        usage,
        Percentiles::of(&latency),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.name()).unwrap(), w);
        }
        assert!(Workload::parse("tpcc").unwrap_err().contains("wal-pe"));
        assert_eq!(
            ServerTest::parse("incr-1-key").unwrap().name(),
            "INCR-1-KEY"
        );
        assert_eq!(ServerTest::parse("zadd").unwrap().name(), "ZADD");
        assert!(ServerTest::parse("flushall").is_err());
        assert_eq!(parse_server_case("50x16").unwrap(), (50, 16));
        assert!(parse_server_case("50").is_err());
        assert!(parse_server_case("0x1").is_err());
    }

    #[test]
    fn latency_keys_are_numbered() {
        let mut k = Vec::new();
        push_latency_key(&mut k, 7);
        assert_eq!(k, b"lat-000000000007");
    }
}
