//! The `stria` command.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use stria::admin::{self, Formatted};
use stria::bench::devbench::{self, DevbenchOptions};
use stria::bench::flush::{self as flushbench, FlushOptions};
use stria::bench::ingest::{self, IngestOptions, VerifyOptions};
use stria::bench::process::Serve;
use stria::bench::random_write::{self, RandomWriteOptions, Target};
use stria::bench::redis_compare::{self, CompareOptions};
use stria::bench::walpe::{self, WalPeOptions};
use stria::config::{Config, Durability, IdlePolicy, Origin, CONFIG_ENV, INSTALLED_PATH};

/// Writers allocate keys and values that the WAL reactor frees on its own
/// core; glibc's allocator serialises such cross-thread frees on an arena
/// lock, mimalloc returns them to the owning thread's heap without one.
/// It is built without transparent huge pages (the `no_thp` feature): with
/// them, every page it purged and touched again was a fresh 2 MiB page the
/// kernel zeroed, about a quarter of the server's CPU for a stream of
/// LPUSHes.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stria: a write-path storage appliance. Every command takes the device map
/// with --config. Without it, serve, format and inspect read the file
/// STRIA_CONFIG names, else /etc/stria/stria.yaml when it exists; benchmarks
/// (and those, failing both) use the embedded default (conf/local.yaml:
/// file-backed devices under ./data, the log through psync).
#[derive(Parser, Debug)]
#[command(name = "stria", version, about, long_about = None)]
struct Cli {
    /// Log level or filter (error, warn, info, debug, trace, or a tracing
    /// filter such as `stria=debug`); RUST_LOG is used when this is absent.
    #[arg(long, global = true, value_name = "FILTER")]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum DeviceCommand {
    /// Put a new, empty device where a WAL or data device was lost.
    ///
    /// A WAL device the running appliance lost is replaced online: its
    /// server writes the new device and takes it into the log, and this
    /// waits until the memstores are flushed past where it joined. Any
    /// other replacement is offline (stop the appliance first).
    ///
    /// With wal.copies above 1 the appliance runs degraded without a failed
    /// WAL device. This writes the new device through, gives it an empty
    /// log and the appliance's superblock; the next start writes every new
    /// batch to it again. With flush.copies above 1 the appliance runs
    /// degraded without a failed data device; a new one gets a blank
    /// manifest area and the superblock, then the engine is opened and
    /// every block file's copy on it is rewritten from the others before
    /// the command returns. Refuses a data device with flush.copies: 1
    /// (nothing to rebuild it from), and a device that still holds the
    /// appliance's valid superblock unless --force.
    Replace {
        /// The YAML device map (default: $STRIA_CONFIG, else /etc/stria/stria.yaml
        /// when it exists, else the embedded conf/local.yaml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The WAL or data device to replace, by its name in the map.
        #[arg(long)]
        device: String,
        /// The new device's path, when it is not the map's (then point the
        /// map at it before the next start).
        #[arg(long, value_name = "PATH")]
        with: Option<PathBuf>,
        /// Replace a device that still looks sound, or one whose log has no
        /// other copy (wal.copies: 1).
        #[arg(long)]
        force: bool,
        /// Where the running appliance's server listens, when it is not the
        /// map's server.listen (a WAL device the running appliance lost is
        /// replaced online, by the server).
        #[arg(long, value_name = "ADDR")]
        server: Option<std::net::SocketAddr>,
    },
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create and size file devices and write a superblock on each device.
    ///
    /// Refuses to touch any device that already holds a Stria superblock
    /// unless --force is given; a refusal changes nothing on any device.
    Format {
        /// The YAML device map (default: $STRIA_CONFIG, else /etc/stria/stria.yaml
        /// when it exists, else the embedded conf/local.yaml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Overwrite devices that already hold a Stria superblock.
        #[arg(long)]
        force: bool,
    },
    /// Print each device, its role, size and superblock; say clearly when a
    /// device is missing, unformatted, from another appliance or corrupt.
    ///
    /// Exits with status 1 when any device is not usable as the map says.
    Inspect {
        /// The YAML device map (default: $STRIA_CONFIG, else /etc/stria/stria.yaml
        /// when it exists, else the embedded conf/local.yaml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Read every live block file back from its device and check it
    /// (offline: stop the appliance first).
    ///
    /// Opening the engine checks the superblock copies (rewriting bad ones
    /// from those that agree), the manifest and the log; the scrub then
    /// reads every data block of every block file straight from the device
    /// and checks its checksum, which covers where the block lies, and its
    /// entries, in every copy of the file (`flush.copies`). A bad block is
    /// rewritten from a copy where it is good. Prints each bad block with
    /// its device, LBA, the keys it covers and whether it was repaired;
    /// exits with status 1 if any is left bad.
    Scrub {
        /// The YAML device map (default: $STRIA_CONFIG, else /etc/stria/stria.yaml
        /// when it exists, else the embedded conf/local.yaml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Benchmark every configured device: sequential 4 KiB and 64 KiB
    /// writes, write+flush pairs and 4 KiB random reads, at queue depth 1
    /// and 32, as one table.
    ///
    /// Give --config more than once to compare maps (say uring and psync on
    /// the same disk) side by side. Overwrites everything on the devices but
    /// the superblock area, so it refuses a map whose engine keeps data
    /// unless --force, and afterwards erases the engine's log and manifest:
    /// the devices hold an empty engine.
    Devbench {
        /// YAML device maps, benchmarked in order (default: the embedded
        /// conf/local.yaml).
        #[arg(long, short)]
        config: Vec<PathBuf>,
        /// Seconds each case runs.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Idle policy of the bench reactor (default: the map's).
        #[arg(long, value_parser = parse_idle)]
        idle: Option<IdlePolicy>,
        /// Only the devices with these names (default: all).
        #[arg(long = "device")]
        devices: Vec<String>,
        /// Run even when a map's engine keeps data, destroying it.
        #[arg(long)]
        force: bool,
    },
    /// Run the appliance: recover the engine and serve the Redis protocol
    /// (RESP2 and RESP3) until SHUTDOWN, SIGTERM or SIGINT.
    ///
    /// On the first start with file devices (none of the map's files
    /// exist yet) it formats them first, and says so.
    Serve {
        /// The YAML device map (default: $STRIA_CONFIG, else /etc/stria/stria.yaml
        /// when it exists, else the embedded conf/local.yaml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Listen here instead of the map's server.listen (port 0: any
        /// free port; the real one is printed).
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
    },
    /// Benchmarks of the write path.
    #[command(subcommand)]
    Bench(Bench),
    /// Devices of the map: replace a lost one.
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Write the manual pages, made from these very definitions: stria.1
    /// and one page per subcommand (stria-serve.1, stria-bench-wal-pe.1,
    /// ...).
    ///
    /// Example: stria man --out /usr/local/share/man/man1
    Man {
        /// The folder to write them into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Print the shell completion script for SHELL.
    ///
    /// Example: stria completions bash > /etc/bash_completion.d/stria
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// HBase's WALPerformanceEvaluation: threads appending to the WAL, each
    /// waiting for its acknowledgement (or keeping --inflight in flight).
    ///
    /// Appends to the WAL devices of the map (what is durable is released
    /// every millisecond). Refuses a map whose engine keeps data unless
    /// --force; afterwards erases the engine's log and manifest, so the
    /// devices hold an empty engine.
    WalPe {
        /// The YAML device map (default: the embedded conf/local.yaml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        #[arg(long, default_value_t = 100)]
        threads: usize,
        /// Appends per thread.
        #[arg(long, default_value_t = 10_000)]
        iterations: u64,
        /// Bytes per value.
        #[arg(long, default_value_t = 1024)]
        value_size: usize,
        /// Bytes per key.
        #[arg(long, default_value_t = 16)]
        key_size: usize,
        /// none, async, write or sync.
        #[arg(long, default_value = "sync", value_parser = parse_durability)]
        durability: Durability,
        /// Appends each thread keeps in flight.
        #[arg(long, default_value_t = 1)]
        inflight: usize,
        /// Use only the first K WAL devices of the map.
        #[arg(long, value_name = "K")]
        devices: Option<usize>,
        /// Never release the log, so the next open recovers all of it (for
        /// measuring recovery time); the run must fit in the log.
        #[arg(long)]
        keep: bool,
        /// Run even when the map's engine keeps data (block files, or log
        /// records past the replay point), destroying it.
        #[arg(long)]
        force: bool,
    },
    /// Accumulo's TestIngest: C clients each write R records through the
    /// engine, BatchWriter style, and report records/s and batch latency.
    ///
    /// Client c writes records i = S..S+R. Key: 8 bytes of xxh3(c, i), then
    /// `c<c>-r<i>` (the hash spreads keys over all regions); value: V bytes
    /// computed from (c, i), so `stria bench verify` with the same
    /// --clients, --records, --value-size and --start can check them. Each
    /// client fills batches of a quarter of --batch-bytes (at most 1 MiB),
    /// submits them without waiting while less than --batch-bytes are
    /// unacknowledged, and otherwise waits for its oldest batch.
    ///
    /// Writes into the engine of the map (sim devices start empty; file
    /// devices need `stria format` first and keep what is written).
    /// Example: stria bench ingest --config conf/sim.yaml --clients 5
    /// --records 1000000 --value-size 500 --durability sync
    Ingest {
        #[command(flatten)]
        set: RecordSet,
        /// none, async, write or sync (default: the map's wal.durability).
        #[arg(long, value_parser = parse_durability)]
        durability: Option<Durability>,
        /// Bytes of keys and values each client keeps in batches not yet
        /// acknowledged (4096, 512KiB, 8MiB, ...); batches are a quarter
        /// of it, at most 1MiB.
        #[arg(long, default_value = "8MiB", value_parser = parse_size)]
        batch_bytes: u64,
    },
    /// Accumulo's VerifyIngest: opens (recovers) the engine and reads back
    /// every record `stria bench ingest` wrote with the same --clients,
    /// --records, --value-size and --start, one thread per client.
    ///
    /// Prints how many records are right, missing or wrong, with get
    /// latency; exits with status 1 if any is missing or wrong. Use it on
    /// file devices (sim devices are empty at every open).
    Verify {
        #[command(flatten)]
        set: RecordSet,
    },
    /// HBASE-6466: does flush throughput scale with flush reactors, and do
    /// writers wait less for memory?
    ///
    /// For each count in --flush-reactors, a fresh engine with that many
    /// flush reactors (unpinned, so more reactors than cores is fine; idle
    /// policy from the map), --regions regions split evenly and memstores
    /// frozen at --flush-size; --writers write --bytes of keys and values
    /// at durability `write`, then everything is flushed. One table row per
    /// count: writes/s, flush MB/s (flushed bytes over the whole run),
    /// writer blocks and blocked time, and ratios to the first row.
    ///
    /// Only for maps whose WAL and data devices are all sim devices (each
    /// run starts blank); conf/sim-flush.yaml has four bandwidth-limited
    /// data devices. Example: stria bench flush --config conf/sim-flush.yaml
    /// --regions 16 --flush-size 8MiB --flush-reactors 1,2,4
    Flush {
        /// The YAML device map; must use sim devices only.
        #[arg(long, short)]
        config: PathBuf,
        /// Regions (split evenly on the first two key bytes).
        #[arg(long, default_value_t = 16)]
        regions: u32,
        /// Memstore size at which a region is frozen and flushed (default:
        /// the map's memstore.flush-size).
        #[arg(long, value_parser = parse_size)]
        flush_size: Option<u64>,
        /// Flush reactor counts to compare, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
        flush_reactors: Vec<usize>,
        /// Bytes of keys and values written per run.
        #[arg(long, default_value = "512MiB", value_parser = parse_size)]
        bytes: u64,
        /// Writer threads.
        #[arg(long, default_value_t = 8)]
        writers: usize,
        /// Bytes per value.
        #[arg(long, default_value_t = 1000)]
        value_size: usize,
        /// Bytes each writer keeps in batches not yet acknowledged.
        #[arg(long, default_value = "1MiB", value_parser = parse_size)]
        batch_bytes: u64,
    },
    /// HBase PerformanceEvaluation's randomWrite (autoFlush) over RESP:
    /// each client sends one SET at a time and waits for its reply.
    ///
    /// Client threads each send --rows SETs on their own connection; as in
    /// PE, --rows is per client and each key is `%010d` of a random number
    /// below rows x clients, each value --value-size random bytes. One
    /// table row per run (rows/s and latency from request to reply, in
    /// microseconds), then a summary.
    ///
    /// Without --connect, starts `stria serve --listen 127.0.0.1:0` with
    /// the map (file devices need `stria format` first) and stops it with
    /// SIGTERM at the end; each connection sets --durability (default
    /// sync). With --connect, drives that server and sends
    /// STRIA.DURABILITY only when --durability is given (so any RESP
    /// server, Redis included, can be measured at its own default).
    /// Example: stria bench random-write --rows 100000 --clients 1
    /// --durability sync --fio
    RandomWrite {
        /// The YAML device map of the server the bench starts (default:
        /// the embedded conf/local.yaml); with --connect, only tells --fio
        /// where the WAL's disk is.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Drive the RESP server at this address instead of starting one.
        #[arg(long, value_name = "ADDR")]
        connect: Option<String>,
        /// SETs per client.
        #[arg(long, default_value_t = 100_000)]
        rows: u64,
        /// Client threads, one connection each.
        #[arg(long, default_value_t = 1)]
        clients: usize,
        /// Runs, one table row each.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Bytes per value.
        #[arg(long, default_value_t = 1000)]
        value_size: usize,
        /// none, async, write or sync, set with STRIA.DURABILITY on each
        /// connection (default: sync for the server the bench starts,
        /// nothing sent with --connect).
        #[arg(long, value_parser = parse_durability)]
        durability: Option<Durability>,
        /// AUTH with this password (default: the map's server.password
        /// for the server the bench starts).
        #[arg(long, env = "STRIA_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// Afterwards, run fio's single 4 KiB write+fdatasync at queue
        /// depth one for --fio-seconds on a file next to the map's first
        /// WAL device, and compare the p50s.
        #[arg(long)]
        fio: bool,
        /// Seconds fio runs with --fio.
        #[arg(long, default_value_t = 5, requires = "fio")]
        fio_seconds: u32,
    },
    /// The same workloads on Stria's backends and on RocksDB, Redis and
    /// fio, alternated round by round: medians, ratios, CPU per operation,
    /// a JSON file, a Markdown report and SVG charts.
    ///
    /// Workloads: floor (fio's durable 4 KiB write and durable bandwidth on
    /// the disk of the log), wal-pe (T threads, one durable 1 KiB write at
    /// a time each), ingest (5 clients in BatchWriter batches, sync and
    /// write), latency (one client, one durable put at a time), server
    /// (redis-benchmark against stria serve and Redis with appendfsync
    /// always). RocksDB needs a build with --features peers; a peer that
    /// cannot run is reported as "not run: <why>". Refuses maps whose
    /// engine keeps data unless --force; leaves them formatted and empty.
    /// Example: stria bench compare --workloads wal-pe --threads 100
    Compare(Box<stria::bench::compare::CompareArgs>),
    /// Job queues, rate limiters, fan-out and event logs (MULTI/EXEC,
    /// EVALSHA, LPUSH/BRPOP, PUBLISH, XADD, XREADGROUP/XACK) against Stria
    /// and Redis with appendfsync always, alternating round by round.
    ///
    /// Starts `stria serve` with the map and, when redis-server is
    /// installed, Redis as `redis-compare` does. Each pattern is a closed
    /// loop of clients for --seconds; every element, message and entry
    /// handed over is checked to arrive exactly once. One table of
    /// operations/s, their ratio, and each server's CPU time and context
    /// switches per operation (from /proc).
    /// Example: stria bench patterns --seconds 5 --rounds 2
    Patterns(Box<stria::bench::patterns::PatternsArgs>),
    /// redis-benchmark -t set,get against Stria and against Redis with
    /// appendfsync always, on the same disk, side by side.
    ///
    /// Starts `stria serve` with the map on a free loopback port (its
    /// connections get the server's default durability, the map's
    /// wal.durability) and, when redis-server is installed, Redis with
    /// --appendonly yes --appendfsync always --save "" in a folder next to
    /// the map's first WAL device file. For clients x pipeline in 1x1,
    /// 50x1 and 50x16 it runs redis-benchmark against Stria, then Redis;
    /// one table of requests/s, their ratio, p99 latencies, and each
    /// server's CPU time and context switches per request (from /proc).
    /// Needs redis-benchmark (Debian: redis-tools).
    /// Example: stria bench redis-compare --requests 100000
    RedisCompare {
        /// The YAML device map (default: the embedded conf/local.yaml).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Requests per test of an unpipelined case (redis-benchmark -n);
        /// a pipelined case runs this times its pipeline depth, so that it
        /// lasts about as long.
        #[arg(long, default_value_t = 100_000)]
        requests: u64,
        /// Bytes per value (redis-benchmark -d).
        #[arg(long, default_value_t = 1024)]
        data_size: usize,
        /// The redis-server to compare with (default: redis-server on
        /// PATH; without one, Stria alone).
        #[arg(long, value_name = "PATH")]
        redis_server: Option<PathBuf>,
    },
}

/// The records `bench ingest` writes and `bench verify` reads back: give
/// both the same values.
#[derive(clap::Args, Debug)]
struct RecordSet {
    /// The YAML device map (default: the embedded conf/local.yaml).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Client threads (verify: one reader thread per client).
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Records each client writes.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 50)]
    value_size: usize,
    /// The first record number of every client.
    #[arg(long, default_value_t = 0)]
    start: u64,
}

fn parse_size(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|_| format!("{s:?} is not a size (use 4096, 64KiB, 8MiB, 2GiB, ...)"))
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    match s {
        "none" => Ok(Durability::None),
        "async" => Ok(Durability::Async),
        "write" => Ok(Durability::Write),
        "sync" => Ok(Durability::Sync),
        _ => Err(format!(
            "{s:?} is not a durability (none, async, write, sync)"
        )),
    }
}

fn parse_idle(s: &str) -> Result<IdlePolicy, String> {
    match s {
        "poll" => Ok(IdlePolicy::Poll),
        "park" => Ok(IdlePolicy::Park),
        _ => Err(format!("{s:?} is not an idle policy (poll or park)")),
    }
}

/// The map of an appliance command (see [`Config::locate`]).
fn locate(flag: Option<&PathBuf>) -> Result<(Config, Origin), String> {
    let env = std::env::var_os(CONFIG_ENV);
    Config::locate(
        flag.map(PathBuf::as_path),
        env.as_deref(),
        std::path::Path::new(INSTALLED_PATH),
    )
    .map_err(|e| e.to_string())
}

/// The map of a benchmark: the one named, else the embedded default, never
/// the installed appliance's (benchmarks overwrite their devices).
fn load(path: Option<&PathBuf>) -> Result<Config, String> {
    match path {
        Some(p) => Config::load(p).map_err(|e| e.to_string()),
        None => Ok(Config::embedded_default()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = match &cli.log_level {
        Some(level) => EnvFilter::try_new(level),
        None => EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new("warn")),
    };
    let filter = match filter {
        Ok(f) => f,
        Err(e) => {
            eprintln!("stria: bad --log-level: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match run(cli.command) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("stria: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<ExitCode, String> {
    match command {
        Command::Man { out } => {
            std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            clap_mangen::generate_to(Cli::command(), &out)
                .map_err(|e| format!("{}: {e}", out.display()))?;
            let pages = std::fs::read_dir(&out)
                .map_err(|e| format!("{}: {e}", out.display()))?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".1"))
                .count();
            println!("{pages} manual pages in {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "stria", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Format { config, force } => {
            let (cfg, _) = locate(config.as_ref())?;
            let report = admin::format(&cfg, force).map_err(|e| e.to_string())?;
            println!(
                "formatted appliance {} ({:032x}) from {}",
                cfg.appliance, report.appliance_id, cfg.source
            );
            for (name, what) in &report.devices {
                match what {
                    Formatted::Written(sb) => println!("  {name}: {sb}"),
                    Formatted::Skipped(why) => println!("  {name}: skipped: {why}"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Device(DeviceCommand::Replace {
            config,
            device,
            with,
            force,
            server,
        }) => {
            let (cfg, _) = locate(config.as_ref())?;
            if with.is_none() && cfg.wal.devices.contains(&device) && admin::serving(&cfg) {
                // The appliance runs: its server takes the device back.
                println!("the appliance is running: replacing {device} online");
                let addr = server.unwrap_or(cfg.server.listen);
                let from =
                    admin::replace_online(&cfg, addr, &device, Duration::from_secs(3600), |s| {
                        println!("  wal_replace:{s}")
                    })
                    .map_err(|e| e.to_string())?;
                println!(
                    "{device} holds the log again: every WAL batch from LSN {from} on has its copies, and the memstores are flushed past it"
                );
                return Ok(ExitCode::SUCCESS);
            }
            let moved = with.clone();
            let sb = admin::replace(&cfg, &device, with, force).map_err(|e| e.to_string())?;
            println!("replaced {device}: {sb}");
            if let Some(path) = &moved {
                println!(
                    "point device {device} of {} at {} before the next start",
                    cfg.source,
                    path.display()
                );
            }
            if sb.role == stria::config::Role::Wal && moved.is_some() {
                println!("the next start writes every new WAL batch to it again, flushes the memstores and clears the mark that it lacks the log");
                return Ok(ExitCode::SUCCESS);
            }
            if sb.role == stria::config::Role::Wal {
                // A start with every WAL device writes the log to it again
                // and, once the memstores are flushed, clears its mark.
                let (engine, opened) =
                    stria::engine::Engine::open_config(&cfg.without_background_scrub())
                        .map_err(|e| e.to_string())?;
                println!("opened: {opened}");
                engine.close().map_err(|e| e.to_string())?;
                println!(
                    "{device} holds the log again: every WAL batch from now on has its copies"
                );
                return Ok(ExitCode::SUCCESS);
            }
            if moved.is_some() {
                println!("its block files are rebuilt at the next start's scrub, or by `stria scrub` once the map points at it");
                return Ok(ExitCode::SUCCESS);
            }
            // A data device: every file's copy on it comes back from the
            // others now, before anything serves.
            let (engine, opened) =
                stria::engine::Engine::open_config(&cfg.without_background_scrub())
                    .map_err(|e| e.to_string())?;
            println!("opened: {opened}");
            let restored = engine.restore_copies(Duration::from_secs(3600));
            engine.close().map_err(|e| e.to_string())?;
            let report = restored?;
            print!("{report}");
            println!(
                "{device} holds a copy of every block file again ({} blocks rewritten from the other copies)",
                report.repaired()
            );
            Ok(if report.unrepaired() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Serve { config, listen } => {
            let (cfg, origin) = locate(config.as_ref())?;
            println!("config: {} ({origin})", cfg.source);
            if let Some(dir) = &cfg.data_dir {
                println!("data-dir: {}", dir.display());
            }
            stria::server::serve(&cfg, listen)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { config } => {
            let (cfg, _) = locate(config.as_ref())?;
            println!("appliance {} from {}", cfg.appliance, cfg.source);
            let reports = admin::inspect(&cfg);
            for r in &reports {
                let d = &r.device;
                let place = d
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| d.kind().to_string());
                println!(
                    "  {} ({} {}, {} bytes, {}-byte blocks, {}): {}",
                    d.name,
                    d.role,
                    d.kind(),
                    d.size,
                    d.block_size,
                    place,
                    r.state
                );
            }
            let bad = reports.iter().filter(|r| !r.state.is_healthy()).count();
            if bad > 0 {
                println!("{bad} of {} devices need attention", reports.len());
                return Ok(ExitCode::FAILURE);
            }
            println!("all {} devices ok", reports.len());
            Ok(ExitCode::SUCCESS)
        }
        Command::Scrub { config } => {
            let (cfg, _) = locate(config.as_ref())?;
            let (engine, opened) =
                stria::engine::Engine::open_config(&cfg.without_background_scrub())
                    .map_err(|e| e.to_string())?;
            println!("opened: {opened}");
            let report = engine.scrub();
            print!("{report}");
            engine.close().map_err(|e| e.to_string())?;
            Ok(if report.unrepaired() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Devbench {
            config,
            seconds,
            idle,
            devices,
            force,
        } => {
            if !(seconds > 0.0 && seconds <= 3600.0) {
                return Err(format!(
                    "--seconds {seconds}: must be more than 0 and at most 3600"
                ));
            }
            let configs = if config.is_empty() {
                vec![Config::embedded_default()]
            } else {
                config
                    .iter()
                    .map(|p| load(Some(p)))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let opts = DevbenchOptions {
                duration: Duration::from_secs_f64(seconds),
                idle,
                devices,
                force,
            };
            let report = devbench::run(&configs, &opts).map_err(|e| e.to_string())?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::WalPe {
            config,
            threads,
            iterations,
            value_size,
            key_size,
            durability,
            inflight,
            devices,
            keep,
            force,
        }) => {
            let cfg = load(config.as_ref())?;
            let opts = WalPeOptions {
                threads,
                iterations,
                value_size,
                key_size,
                durability,
                in_flight: inflight,
                devices,
                keep,
                force,
                duration: None,
            };
            let report = walpe::run(&cfg, &opts).map_err(|e| e.to_string())?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::Ingest {
            set,
            durability,
            batch_bytes,
        }) => {
            let cfg = load(set.config.as_ref())?;
            let opts = IngestOptions {
                clients: set.clients,
                records: set.records,
                start: set.start,
                value_size: set.value_size,
                durability: durability.unwrap_or(cfg.wal.durability),
                window: batch_bytes,
            };
            let report = ingest::ingest(&cfg, &opts, |open| println!("opened: {open}"))
                .map_err(|e| e.to_string())?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::Verify { set }) => {
            let cfg = load(set.config.as_ref())?;
            let opts = VerifyOptions {
                clients: set.clients,
                records: set.records,
                start: set.start,
                value_size: set.value_size,
            };
            let report = ingest::verify(&cfg, &opts, |open| println!("opened: {open}"))
                .map_err(|e| e.to_string())?;
            print!("{report}");
            if !report.passed() {
                return Err(format!(
                    "verify failed: {} records missing, {} wrong",
                    report.missing, report.wrong
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::Flush {
            config,
            regions,
            flush_size,
            flush_reactors,
            bytes,
            writers,
            value_size,
            batch_bytes,
        }) => {
            let cfg = load(Some(&config))?;
            let opts = FlushOptions {
                regions,
                flush_size: flush_size.unwrap_or(cfg.memstore.flush_size),
                reactors: flush_reactors,
                bytes,
                writers,
                value_size,
                window: batch_bytes,
            };
            let report = flushbench::run(&cfg, &opts, |run| println!("{}", run.line()))
                .map_err(|e| e.to_string())?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::RandomWrite {
            config,
            connect,
            rows,
            clients,
            runs,
            value_size,
            durability,
            password,
            fio,
            fio_seconds,
        }) => {
            let cfg = load(config.as_ref())?;
            let target = match connect {
                Some(addr) => Target::Connect(addr),
                None => Target::Serve(
                    Serve::current(config).map_err(|e| format!("cannot find stria itself: {e}"))?,
                ),
            };
            let opts = RandomWriteOptions {
                rows,
                clients,
                runs,
                value_size,
                durability,
                password,
                fio_seconds: fio.then_some(fio_seconds),
            };
            let report = random_write::run(&target, &cfg, &opts, |i, run| {
                eprintln!(
                    "run {}/{runs}: {} rows in {:.3}s, {:.0} rows/s",
                    i + 1,
                    run.rows,
                    run.elapsed.as_secs_f64(),
                    run.rows_per_sec()
                )
            })
            .map_err(|e| e.to_string())?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::Compare(args)) => {
            let command = std::env::args().collect::<Vec<_>>().join(" ");
            let report = stria::bench::compare::run(*args, command)?;
            print!("{report}");
            Ok(if report.stria_failed() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Bench(Bench::Patterns(args)) => {
            let cfg = load(args.config.as_ref())?;
            let mut serve = Serve::current(args.config.clone())
                .map_err(|e| format!("cannot find stria itself: {e}"))?;
            if let Some(exe) = &args.stria {
                serve.exe = exe.clone();
            }
            let report =
                stria::bench::patterns::run(&serve, &cfg, &args, |line| eprintln!("{line}"))?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(Bench::RedisCompare {
            config,
            requests,
            data_size,
            redis_server,
        }) => {
            let cfg = load(config.as_ref())?;
            let serve =
                Serve::current(config).map_err(|e| format!("cannot find stria itself: {e}"))?;
            let opts = CompareOptions {
                requests,
                data_size,
                redis_server,
            };
            let report = redis_compare::run(&serve, &cfg, &opts, |line| eprintln!("{line}"))?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
