//! The device map and tuning, from YAML.
//!
//! [`Config::load`] reads a file, [`Config::parse`] a string; both validate
//! everything before returning, so the rest of Stria only ever sees a
//! configuration that makes sense. Every error is one line that names the
//! file, the line and column, and the field:
//!
//! ```text
//! conf/local.yaml:7:38: devices[1].size: "2GX" is not a size (use 64MiB, 2GiB, 4096, ...)
//! ```
//!
//! Parsing happens in two steps: serde checks the shape (unknown keys,
//! missing keys, lists where lists belong) into the `raw` structs, whose
//! leaves keep their source location; `validate` then turns each leaf into
//! its typed value and checks what serde cannot (sizes, cores, references
//! between sections, what the on-device layout needs).

mod error;
mod raw;
mod validate;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use error::ConfigError;

use crate::device::BackendKind;

/// The device map shipped as the embedded default (`conf/local.yaml`).
pub const EMBEDDED_DEFAULT: &str = include_str!("../../conf/local.yaml");

/// The name under which the embedded default appears in messages.
pub const EMBEDDED_NAME: &str = "<embedded conf/local.yaml>";

/// The map an installed appliance reads when no other is named.
pub const INSTALLED_PATH: &str = "/etc/stria/stria.yaml";

/// The environment variable that names the map.
pub const CONFIG_ENV: &str = "STRIA_CONFIG";

/// Where the map of an appliance command came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `--config`.
    Flag,
    /// [`CONFIG_ENV`].
    Env,
    /// [`INSTALLED_PATH`], which exists.
    Installed,
    /// None of those: [`EMBEDDED_DEFAULT`].
    Embedded,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Flag => "from --config",
            Origin::Env => "from STRIA_CONFIG",
            Origin::Installed => "the installed map",
            Origin::Embedded => "the embedded default",
        })
    }
}

/// Bytes at the start of every device reserved for the superblock and future
/// layout metadata. Nothing else is ever written there.
pub const RESERVED_BYTES: u64 = 1 << 20;

/// The smallest data area a data device may have after the reserved area.
pub const MIN_DATA_BYTES: u64 = 16 << 20;

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where it came from, for messages.
    pub source: String,
    /// The appliance name, written into every superblock.
    pub appliance: String,
    pub reactors: ReactorsConfig,
    pub devices: Vec<DeviceConfig>,
    pub wal: WalConfig,
    pub memstore: MemstoreConfig,
    pub flush: FlushConfig,
    pub server: ServerConfig,
    /// SPDK's environment, used when the map has `spdk` devices.
    pub spdk: SpdkEnvConfig,
    /// `data-dir`: where the relative device paths were resolved (none:
    /// the directory stria runs in).
    pub data_dir: Option<PathBuf>,
}

/// Cores and idle policy of the reactor sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReactorsConfig {
    /// Cores of the WAL reactor set, one reactor per core.
    pub wal: Vec<usize>,
    /// Cores of the flush reactor set, one reactor per core.
    pub flush: Vec<usize>,
    pub idle: IdlePolicy,
    /// With `park`: how long a reactor spins with nothing to do before it sleeps.
    pub spin_us: u64,
}

/// What a reactor does when it finds no work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Never sleep: lowest latency, burns its core (bare metal).
    Poll,
    /// Spin `spin-us`, then sleep until a message or a completion wakes it.
    Park,
}

/// What a device is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Holds a stripe of the write-ahead log.
    Wal,
    /// Holds block files and the manifest.
    Data,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Wal => "wal",
            Role::Data => "data",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One device of the map.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceConfig {
    pub name: String,
    pub role: Role,
    /// Configured size in bytes; for `spdk` devices, 0 means "the whole namespace".
    pub size: u64,
    pub block_size: u32,
    pub queue_depth: u32,
    pub backend: BackendConfig,
}

impl DeviceConfig {
    pub fn kind(&self) -> BackendKind {
        match self.backend {
            BackendConfig::Sim(_) => BackendKind::Sim,
            BackendConfig::Psync { .. } => BackendKind::Psync,
            BackendConfig::Uring { .. } => BackendKind::Uring,
            BackendConfig::Spdk(_) => BackendKind::Spdk,
        }
    }

    /// A relative path of a kernel backend made relative to `dir`.
    fn resolve_under(&mut self, dir: &Path) {
        if let BackendConfig::Psync { path } | BackendConfig::Uring { path, .. } = &mut self.backend
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }

    /// The backing file or block device, for the kernel backends.
    pub fn path(&self) -> Option<&Path> {
        match &self.backend {
            BackendConfig::Psync { path } | BackendConfig::Uring { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Capacity in blocks.
    pub fn capacity_blocks(&self) -> u64 {
        self.size / u64::from(self.block_size)
    }
}

/// Backend-specific settings.
#[derive(Clone, Debug, PartialEq)]
pub enum BackendConfig {
    Sim(SimConfig),
    Psync {
        path: PathBuf,
    },
    Uring {
        path: PathBuf,
        /// Open with O_DIRECT (default true); false only for filesystems
        /// that refuse it, such as tmpfs.
        direct: bool,
    },
    Spdk(SpdkConfig),
}

/// The simulated NVMe device's model.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Fixed latency of a write, a read and a flush, in microseconds.
    pub write_us: u64,
    pub read_us: u64,
    pub flush_us: u64,
    /// Transfer bandwidth in bytes per second (0: unlimited).
    pub bandwidth: u64,
    /// The device's atomic write unit; torn writes tear at these boundaries.
    pub sector_size: u32,
    /// True when completed writes sit in a volatile cache until a flush
    /// (false models power-loss protection: a completed write is durable).
    pub volatile_cache: bool,
    /// Seed of every random choice the device makes.
    pub seed: u64,
    pub faults: SimFaults,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            write_us: 15,
            read_us: 80,
            flush_us: 20,
            bandwidth: 3_000_000_000,
            sector_size: 512,
            volatile_cache: true,
            seed: 0,
            faults: SimFaults::default(),
        }
    }
}

/// Faults the simulated device injects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimFaults {
    /// Probability in [0, 1] that a read, write or flush fails with an I/O error.
    pub read_error_rate: f64,
    pub write_error_rate: f64,
    pub flush_error_rate: f64,
    /// Operation numbers (0-based, counting every accepted request on the
    /// device) that fail with an I/O error.
    pub fail_ops: Vec<u64>,
    /// Cut power when this operation number is submitted.
    pub power_cut_at_op: Option<u64>,
    /// Probability that a write lands at another LBA of the device (chosen
    /// at random) while reporting success: a misdirected write.
    pub misdirect_rate: f64,
    /// Probability that a write is dropped while reporting success.
    pub lost_write_rate: f64,
    /// Probability that a read returns its data with one bit flipped.
    pub corrupt_read_rate: f64,
    /// Blocks whose reads fail (latent sector errors) until rewritten.
    pub latent_errors: Vec<u64>,
    /// Gray failure: requests numbered from `slow_from_op`, `slow_ops` of
    /// them, take `slow_factor` times their latency and transfer time.
    pub slow_from_op: Option<u64>,
    pub slow_ops: u64,
    pub slow_factor: u64,
    /// Fail-stop: the device vanishes (as a pulled drive) when this
    /// operation number is submitted, and stays gone across reboots.
    pub vanish_at_op: Option<u64>,
}

/// Where an SPDK controller is, and which of its namespaces is the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpdkConfig {
    /// A local controller by PCI address (bare metal).
    Pcie { address: String, namespace: u32 },
    /// NVMe over TCP.
    Tcp {
        address: String,
        port: u16,
        nqn: String,
        namespace: u32,
    },
}

impl SpdkConfig {
    /// The NVMe namespace ID (`namespace`, default 1).
    pub fn namespace(&self) -> u32 {
        match self {
            SpdkConfig::Pcie { namespace, .. } | SpdkConfig::Tcp { namespace, .. } => *namespace,
        }
    }

    /// SPDK's transport ID string for the controller.
    pub fn transport_id(&self) -> String {
        match self {
            SpdkConfig::Pcie { address, .. } => format!("trtype:PCIe traddr:{address}"),
            SpdkConfig::Tcp {
                address, port, nqn, ..
            } => {
                let family = if address.contains(':') {
                    "IPv6"
                } else {
                    "IPv4"
                };
                format!("trtype:TCP adrfam:{family} traddr:{address} trsvcid:{port} subnqn:{nqn}")
            }
        }
    }
}

/// SPDK's environment (DPDK's EAL): one per process, set up when the first
/// `spdk` device opens, from the `spdk:` section and the device map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpdkEnvConfig {
    /// Bytes of DMA-able memory to reserve (`mem-size`, default 1GiB).
    pub mem_size: u64,
    /// Back the memory with hugepages (`hugepages`, default true); false
    /// runs on plain pages, for development machines without hugepages.
    pub hugepages: bool,
    /// DPDK's shared-memory ID (`shm-id`); `None` (the default) gives the
    /// process a private one, so it coexists with other SPDK processes.
    pub shm_id: Option<u32>,
    /// Cores the environment may use: every reactor core (not a key).
    pub cores: Vec<usize>,
    /// PCI addresses the environment may probe: those of the `pcie`
    /// devices in the map (not a key). Empty: no PCI probing at all.
    pub pci_allowed: Vec<String>,
}

impl SpdkEnvConfig {
    /// The default memory size, 1 GiB.
    pub const DEFAULT_MEM_SIZE: u64 = 1 << 30;

    /// The cores as a hexadecimal mask (`0x6` for cores 1 and 2); core 0
    /// when no core is named.
    pub fn core_mask(&self) -> String {
        let mut mask: u128 = 0;
        for &core in &self.cores {
            if core < 128 {
                mask |= 1 << core;
            }
        }
        format!("{:#x}", mask.max(1))
    }
}

impl Default for SpdkEnvConfig {
    fn default() -> SpdkEnvConfig {
        SpdkEnvConfig {
            mem_size: SpdkEnvConfig::DEFAULT_MEM_SIZE,
            hugepages: true,
            shm_id: None,
            cores: Vec::new(),
            pci_allowed: Vec::new(),
        }
    }
}

/// Durability of a write (see DESIGN section 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Durability {
    /// Not logged; lost on any crash.
    None,
    /// Logged in the next batch; acknowledged at once.
    Async,
    /// Acknowledged when the batch write completed (survives a process crash).
    Write,
    /// Acknowledged when a flush after the write completed (survives power loss).
    Sync,
}

impl Durability {
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::None => "none",
            Durability::Async => "async",
            Durability::Write => "write",
            Durability::Sync => "sync",
        }
    }
}

/// The write-ahead log.
#[derive(Clone, Debug, PartialEq)]
pub struct WalConfig {
    /// The WAL stripe, by device name (default: every `wal` device).
    pub devices: Vec<String>,
    pub segment_size: u64,
    pub max_batch: u64,
    pub durability: Durability,
    /// Write a batch that holds a `sync` append with forced unit access
    /// (one round trip) instead of a write and then a flush.
    pub fua: bool,
    /// Devices each batch is written to (at most the stripe's devices).
    pub copies: usize,
    /// What the WAL does when a device fails or vanishes.
    pub on_device_loss: DeviceLoss,
    /// Which thread submits the WAL's batches of the server's writes and
    /// reaps their completions.
    pub submit: WalSubmit,
}

/// Which thread puts the server's log writes on the WAL devices
/// (`wal.submit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WalSubmit {
    /// The shard that runs the commands: its writes go into the batch at
    /// once, and it submits the batches on the WAL queues and reaps their
    /// completions itself, watching them in its event loop.
    #[default]
    Shard,
    /// The WAL reactor: the shard hands it each turn's writes through its
    /// ring, and the reactor wakes the shard with the acknowledgements.
    Reactor,
}

/// What the WAL does when one of its devices fails (an I/O error, a failed
/// flush) or vanishes (`wal.on-device-loss`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceLoss {
    /// Go on without the device while every batch can still be written to
    /// a device that works: with `wal.copies: 2` on two devices, one copy
    /// until a replacement; with one copy, a loss fails the WAL.
    #[default]
    Degrade,
    /// Fail the WAL (refuse every write) once a batch could no longer be
    /// written to `wal.copies` devices.
    RefuseWrites,
}

/// Memstores and their limits.
#[derive(Clone, Debug, PartialEq)]
pub struct MemstoreConfig {
    pub regions: u32,
    /// Region boundaries: region `i` holds keys from `split_keys[i-1]`
    /// (inclusive) to `split_keys[i]` (exclusive); `regions - 1` keys,
    /// strictly increasing. Given as `split-keys`, or split evenly over the
    /// first two key bytes from `regions`.
    pub split_keys: Vec<Vec<u8>>,
    pub flush_size: u64,
    pub global_limit: u64,
    pub low_water: f64,
    /// The longest key and value a write may carry.
    pub max_key: u64,
    pub max_value: u64,
}

impl MemstoreConfig {
    /// `n` regions splitting the key space evenly on its first two bytes.
    pub fn even_splits(n: u32) -> Vec<Vec<u8>> {
        (1..u64::from(n))
            .map(|i| {
                let at = (i * 65536 / u64::from(n)) as u16;
                at.to_be_bytes().to_vec()
            })
            .collect()
    }
}

/// The flush reactor set.
#[derive(Clone, Debug, PartialEq)]
pub struct FlushConfig {
    /// The data devices block files go to (default: every `data` device).
    pub devices: Vec<String>,
    /// Each block file is written whole to this many data devices, one
    /// copy on each (`copies`, 1): a block bad in one copy is read from
    /// another, and a scrub rewrites it from there.
    pub copies: usize,
    /// Target size of a block file's data blocks (`block-size`, 32KiB).
    pub block_size: u64,
    /// Bloom filter bits per key (`bloom-bits`, 10: about 1% false positives).
    pub bloom_bits: u32,
    /// A region holding more block files than this is compacted into one
    /// (`compact-at`, 8).
    pub compact_at: u32,
    /// Bytes after the reserved area of each data device kept for the
    /// manifest (`manifest-size`, 8MiB); the first two data devices hold it.
    pub manifest_size: u64,
    /// Bytes of data blocks kept in memory for point lookups
    /// (`block-cache`, 256MiB; 0 turns the cache off).
    pub block_cache: u64,
    /// Bytes a second the background scrub reads back and checks
    /// (`scrub-rate`, 16MiB; 0 turns it off).
    pub scrub_rate: u64,
    /// A scrub pass over every block file starts at most this often
    /// (`scrub-every`, 24h).
    pub scrub_every: std::time::Duration,
}

/// The network front end.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// Where the RESP server listens (default 127.0.0.1:6380).
    pub listen: SocketAddr,
    /// With a password, every connection must AUTH first. A non-loopback
    /// `listen` without one is refused (protected mode).
    pub password: Option<String>,
    /// Connections beyond this are refused with an error.
    pub max_clients: usize,
    /// Event-loop threads serving the connections (default 2).
    pub io_threads: usize,
    /// The largest bulk string a request may carry.
    pub max_bulk: u64,
    /// The most a connection may have buffered of requests not yet complete.
    pub max_query: u64,
    /// Bytes the shard keeps of what the block files hold for keys it
    /// read lately (`row-cache`, 256MiB; 0 turns it off).
    pub row_cache: u64,
    /// Where the Prometheus `/metrics` endpoint listens; off when absent.
    pub metrics: Option<SocketAddr>,
}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::file(&source, e))?;
        Config::parse(&text, &source)
    }

    /// The map of an appliance command (serve, format, inspect): the file
    /// `flag` names (`--config`), else the one `env` names (the value of
    /// [`CONFIG_ENV`]; empty counts as unset), else `installed` when it
    /// exists, else the embedded default.
    pub fn locate(
        flag: Option<&Path>,
        env: Option<&std::ffi::OsStr>,
        installed: &Path,
    ) -> Result<(Config, Origin), ConfigError> {
        if let Some(p) = flag {
            return Ok((Config::load(p)?, Origin::Flag));
        }
        if let Some(p) = env.filter(|p| !p.is_empty()) {
            return Ok((Config::load(Path::new(p))?, Origin::Env));
        }
        if installed.exists() {
            return Ok((Config::load(installed)?, Origin::Installed));
        }
        Ok((Config::embedded_default(), Origin::Embedded))
    }

    /// The map without its background scrub: benches and offline tools
    /// (`stria scrub` reads everything itself) open the engine for a
    /// while, and a scrub's reads would only skew what they measure.
    pub fn without_background_scrub(&self) -> Config {
        let mut c = self.clone();
        c.flush.scrub_rate = 0;
        c
    }

    /// The embedded default, `conf/local.yaml`.
    pub fn embedded_default() -> Config {
        Config::parse(EMBEDDED_DEFAULT, EMBEDDED_NAME).expect("the embedded default is valid")
    }

    /// Parses and validates `text`; `source` names it in messages.
    pub fn parse(text: &str, source: &str) -> Result<Config, ConfigError> {
        Config::parse_with_cores(text, source, &crate::reactor::allowed_cores())
    }

    /// As [`Config::parse`], checking reactor cores against `cores` instead
    /// of the cores this process may run on.
    pub fn parse_with_cores(
        text: &str,
        source: &str,
        cores: &[usize],
    ) -> Result<Config, ConfigError> {
        let raw = raw::parse(text, source)?;
        validate::validate(raw, source, cores)
    }

    /// The device with this name.
    pub fn device(&self, name: &str) -> Option<&DeviceConfig> {
        self.devices.iter().find(|d| d.name == name)
    }
}
