//! Turns the raw YAML shape into a [`Config`], checking every field.
//!
//! Each check stops at the first problem and reports it with the location of
//! the offending leaf and the path of its field, so an operator fixes one
//! line at a time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use super::raw::{Leaf, RawConfig, RawDevice, RawSim};
use super::{
    BackendConfig, Config, ConfigError, DeviceConfig, DeviceLoss, Durability, FlushConfig,
    IdlePolicy, MemstoreConfig, ReactorsConfig, Role, ServerConfig, SimConfig, SimFaults,
    SpdkConfig, SpdkEnvConfig, WalConfig, WalSubmit, MIN_DATA_BYTES, RESERVED_BYTES,
};

mod devices;

use devices::{device, device_set, spdk_env};

type Result<T> = std::result::Result<T, ConfigError>;

/// The longest a parked reactor may spin before sleeping.
const MAX_SPIN_US: u64 = 1_000_000;

/// The longest latency a simulated device may model: ten seconds.
const MAX_SIM_US: u64 = 10_000_000;

/// Builds errors for one source.
struct Checker<'a> {
    source: &'a str,
}

impl Checker<'_> {
    /// An error at `leaf`, for `field`.
    fn at(&self, leaf: &Leaf, field: &str, message: impl Into<String>) -> ConfigError {
        let loc = leaf.referenced;
        ConfigError {
            source: self.source.to_string(),
            line: (loc.line() > 0).then_some(loc.line() as u32),
            column: (loc.column() > 0).then_some(loc.column() as u32),
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// An error at `leaf` when the key was written, else (a default is at
    /// fault) at no particular line.
    fn at_opt(&self, leaf: Option<&Leaf>, field: &str, message: impl Into<String>) -> ConfigError {
        match leaf {
            Some(leaf) => self.at(leaf, field, message),
            None => ConfigError {
                source: self.source.to_string(),
                line: None,
                column: None,
                field: field.to_string(),
                message: message.into(),
            },
        }
    }

    /// An error about a key missing near `near` (the map that lacks it).
    fn missing(&self, near: &Leaf, field: &str, message: impl Into<String>) -> ConfigError {
        self.at(near, field, message)
    }

    fn size(&self, leaf: &Leaf, field: &str) -> Result<u64> {
        let text = leaf.value.trim();
        let parsed = bytesize::ByteSize::from_str(text).map_err(|_| {
            self.at(
                leaf,
                field,
                format!("{text:?} is not a size (use 4096, 64KiB, 64MiB, 2GiB, ...)"),
            )
        })?;
        Ok(parsed.as_u64())
    }

    fn uint<T: FromStr>(&self, leaf: &Leaf, field: &str, what: &str) -> Result<T> {
        let text = leaf.value.trim();
        text.parse::<T>()
            .map_err(|_| self.at(leaf, field, format!("{text:?} is not {what}")))
    }

    fn boolean(&self, leaf: &Leaf, field: &str) -> Result<bool> {
        match leaf.value.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(self.at(leaf, field, format!("{other:?} is not true or false"))),
        }
    }

    fn fraction(&self, leaf: &Leaf, field: &str, low_open: bool) -> Result<f64> {
        let text = leaf.value.trim();
        let value: f64 = text
            .parse()
            .map_err(|_| self.at(leaf, field, format!("{text:?} is not a number")))?;
        let low_ok = if low_open { value > 0.0 } else { value >= 0.0 };
        if !(low_ok && value <= 1.0) {
            let range = if low_open { "(0, 1]" } else { "[0, 1]" };
            return Err(self.at(leaf, field, format!("{value} is outside {range}")));
        }
        Ok(value)
    }

    fn choice<T: Copy>(
        &self,
        leaf: &Leaf,
        field: &str,
        what: &str,
        options: &[(&str, T)],
    ) -> Result<T> {
        let text = leaf.value.trim();
        options
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, value)| *value)
            .ok_or_else(|| {
                let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
                self.at(
                    leaf,
                    field,
                    format!(
                        "unknown {what} {text:?} (expected one of: {})",
                        names.join(", ")
                    ),
                )
            })
    }

    /// Optional leaf, parsed by `f`, or `default`.
    fn or<T>(
        &self,
        leaf: &Option<Leaf>,
        default: T,
        f: impl FnOnce(&Leaf) -> Result<T>,
    ) -> Result<T> {
        leaf.as_ref().map_or(Ok(default), f)
    }
}

pub fn validate(raw: RawConfig, source: &str, cores: &[usize]) -> Result<Config> {
    let c = Checker { source };

    let appliance = raw.appliance.value.trim().to_string();
    check_name(&c, &raw.appliance, "appliance")?;

    let reactors = reactors(&c, &raw, cores)?;

    let mut devices = Vec::with_capacity(raw.devices.len());
    let mut names: HashMap<String, &Leaf> = HashMap::new();
    let mut paths: HashMap<PathBuf, &Leaf> = HashMap::new();
    let data_dir = data_dir(&c, raw.data_dir.as_ref())?;
    for (i, dev) in raw.devices.iter().enumerate() {
        let mut parsed = device(&c, dev, i)?;
        if let Some(dir) = &data_dir {
            parsed.resolve_under(dir);
        }
        if let Some(first) = names.insert(parsed.name.clone(), &dev.name) {
            return Err(c.at(
                &dev.name,
                &format!("devices[{i}].name"),
                format!(
                    "duplicate device name {:?} (first used at line {})",
                    parsed.name,
                    first.referenced.line()
                ),
            ));
        }
        if let (Some(path), Some(leaf)) = (parsed.path(), dev.path.as_ref()) {
            if let Some(first) = paths.insert(path.to_path_buf(), leaf) {
                return Err(c.at(
                    leaf,
                    &format!("devices[{i}].path"),
                    format!(
                        "{} is already used by the device at line {}",
                        path.display(),
                        first.referenced.line()
                    ),
                ));
            }
        }
        devices.push(parsed);
    }

    let wal = wal(&c, &raw, &devices)?;
    let flush = flush(&c, &raw, &devices)?;
    check_layout(&c, &raw, &devices, &wal, &flush)?;
    let memstore = memstore(&c, &raw, &wal)?;
    let server = server(&c, &raw, &memstore)?;

    let spdk = spdk_env(&c, &raw, &reactors, &devices)?;

    Ok(Config {
        source: source.to_string(),
        appliance,
        reactors,
        devices,
        wal,
        memstore,
        flush,
        server,
        spdk,
        data_dir,
    })
}

/// `data-dir`: a directory, absolute or relative to where stria runs.
fn data_dir(c: &Checker, leaf: Option<&Leaf>) -> Result<Option<PathBuf>> {
    let Some(leaf) = leaf else { return Ok(None) };
    let dir = leaf.value.trim();
    if dir.is_empty() {
        return Err(c.at(leaf, "data-dir", "is empty"));
    }
    Ok(Some(PathBuf::from(dir)))
}

fn server(c: &Checker, raw: &RawConfig, memstore: &MemstoreConfig) -> Result<ServerConfig> {
    let s = &raw.server;
    let addr = |l: &Leaf, field: &str| -> Result<SocketAddr> {
        l.value
            .trim()
            .parse()
            .map_err(|_| c.at(l, field, format!("{:?} is not an address:port", l.value)))
    };
    let listen = c.or(&s.listen, SocketAddr::from(([127, 0, 0, 1], 6380)), |l| {
        addr(l, "server.listen")
    })?;
    let password = match &s.password {
        Some(l) if l.value.is_empty() => {
            return Err(c.at(
                l,
                "server.password",
                "is empty (leave it out for no password)".to_string(),
            ))
        }
        Some(l) => Some(l.value.clone()),
        None => None,
    };
    if password.is_none() && !listen.ip().is_loopback() {
        let l = s
            .listen
            .as_ref()
            .expect("a non-loopback address comes from the map");
        return Err(c.at(
            l,
            "server.listen",
            format!(
                "{listen} is not a loopback address and server.password is not set: anyone who can reach it could read and overwrite every key (set a password, or listen on 127.0.0.1)"
            ),
        ));
    }
    let max_clients = c.or(&s.max_clients, 1024, |l| {
        match l.value.trim().parse::<usize>() {
            Ok(n) if (1..=65536).contains(&n) => Ok(n),
            _ => Err(c.at(
                l,
                "server.max-clients",
                format!("{:?} is not a number from 1 to 65536", l.value),
            )),
        }
    })?;
    // One shard reactor runs every command (see ARCHITECTURE.md, Server):
    // more threads would need commands routed to shards by key.
    let io_threads = c.or(&s.io_threads, 1, |l| {
        match l.value.trim().parse::<usize>() {
            Ok(1) => Ok(1),
            Ok(n) if n > 1 => Err(c.at(
                l,
                "server.io-threads",
                format!("{n}: one shard reactor runs every command, so the only value is 1"),
            )),
            _ => Err(c.at(
                l,
                "server.io-threads",
                format!("{:?} is not a number; the only value is 1", l.value),
            )),
        }
    })?;
    // A value at the memstore's limit must fit in a bulk string.
    let need = memstore.max_value.max(memstore.max_key);
    let max_bulk = c.or(&s.max_bulk, need.max(16 << 20), |l| {
        let v = c.size(l, "server.max-bulk")?;
        if v < need {
            return Err(c.at(l, "server.max-bulk", format!("{v} bytes is below memstore.max-value ({need} bytes): such values could never be sent")));
        }
        Ok(v)
    })?;
    let max_query = c.or(&s.max_query, (max_bulk * 4).max(64 << 20), |l| {
        let v = c.size(l, "server.max-query")?;
        if v < max_bulk + 4096 {
            return Err(c.at(l, "server.max-query", format!("{v} bytes cannot hold one request with a bulk string of server.max-bulk ({max_bulk} bytes)")));
        }
        Ok(v)
    })?;
    let row_cache = c.or(&s.row_cache, 256 << 20, |l| {
        let v = c.size(l, "server.row-cache")?;
        if v != 0 && v < 1 << 20 {
            return Err(c.at(
                l,
                "server.row-cache",
                format!("{v} bytes is below 1MiB: give at least 1MiB, or 0 to turn the cache off"),
            ));
        }
        Ok(v)
    })?;
    let metrics = match &s.metrics {
        Some(l) if l.value.trim() == "off" => None,
        Some(l) => Some(addr(l, "server.metrics")?),
        None => None,
    };
    Ok(ServerConfig {
        listen,
        password,
        max_clients,
        io_threads,
        max_bulk,
        max_query,
        row_cache,
        metrics,
    })
}

/// Names (appliance, devices) end up in superblocks and metrics: keep them short and plain.
fn check_name(c: &Checker, leaf: &Leaf, field: &str) -> Result<()> {
    let name = leaf.value.trim();
    let plain = name
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
    if name.is_empty() || name.len() > 32 || !plain {
        return Err(c.at(
            leaf,
            field,
            format!("{name:?} is not a name (1 to 32 of A-Z a-z 0-9 - _)"),
        ));
    }
    Ok(())
}

fn reactors(c: &Checker, raw: &RawConfig, allowed: &[usize]) -> Result<ReactorsConfig> {
    let r = &raw.reactors;
    let mut seen: HashMap<usize, String> = HashMap::new();
    let mut sets = [Vec::new(), Vec::new()];
    for (set, (leaves, name)) in sets.iter_mut().zip([(&r.wal, "wal"), (&r.flush, "flush")]) {
        if leaves.is_empty() {
            return Err(c.at_opt(None, &format!("reactors.{name}"), "needs at least one core"));
        }
        for (i, leaf) in leaves.iter().enumerate() {
            let field = format!("reactors.{name}[{i}]");
            let core: usize = c.uint(leaf, &field, "a core number")?;
            if !allowed.contains(&core) {
                return Err(c.at(
                    leaf,
                    &field,
                    format!("core {core} does not exist or is not available to this process (available: {})", list(allowed)),
                ));
            }
            if let Some(other) = seen.insert(core, field.clone()) {
                return Err(c.at(
                    leaf,
                    &field,
                    format!("core {core} is already given to {other}: a reactor owns its core"),
                ));
            }
            set.push(core);
        }
    }
    let [wal, flush] = sets;
    let idle = c.or(&r.idle, IdlePolicy::Park, |l| {
        c.choice(
            l,
            "reactors.idle",
            "idle policy",
            &[("poll", IdlePolicy::Poll), ("park", IdlePolicy::Park)],
        )
    })?;
    let spin_us = c.or(&r.spin_us, 50, |l| {
        let us: u64 = c.uint(l, "reactors.spin-us", "a number of microseconds")?;
        if us > MAX_SPIN_US {
            return Err(c.at(
                l,
                "reactors.spin-us",
                format!(
                    "{us} is more than {MAX_SPIN_US} (one second); use `idle: poll` to never sleep"
                ),
            ));
        }
        Ok(us)
    })?;
    Ok(ReactorsConfig {
        wal,
        flush,
        idle,
        spin_us,
    })
}

fn list(cores: &[usize]) -> String {
    let names: Vec<String> = cores.iter().map(usize::to_string).collect();
    names.join(", ")
}

fn wal(c: &Checker, raw: &RawConfig, devices: &[DeviceConfig]) -> Result<WalConfig> {
    let w = &raw.wal;
    let devs = device_set(c, w.devices.as_deref(), "wal.devices", Role::Wal, devices)?;
    let segment_size = c.or(&w.segment_size, 64 << 20, |l| c.size(l, "wal.segment-size"))?;
    let max_batch = c.or(&w.max_batch, 9 << 20, |l| c.size(l, "wal.max-batch"))?;
    let durability = c.or(&w.durability, Durability::Sync, |l| {
        c.choice(
            l,
            "wal.durability",
            "durability",
            &[
                ("none", Durability::None),
                ("async", Durability::Async),
                ("write", Durability::Write),
                ("sync", Durability::Sync),
            ],
        )
    })?;
    let fua = c.or(&w.fua, true, |l| c.boolean(l, "wal.fua"))?;
    let copies = c.or(&w.copies, 1, |l| {
        c.uint(l, "wal.copies", "a number of copies")
    })?;
    if copies == 0 || copies > devs.len() {
        return Err(c.at_opt(
            w.copies.as_ref(),
            "wal.copies",
            format!(
                "{copies} copies of each batch need as many WAL devices, and the stripe has {}: give at least 1 and at most {}",
                devs.len(),
                devs.len()
            ),
        ));
    }
    let on_device_loss = c.or(&w.on_device_loss, DeviceLoss::Degrade, |l| {
        c.choice(
            l,
            "wal.on-device-loss",
            "device-loss policy",
            &[
                ("degrade", DeviceLoss::Degrade),
                ("refuse-writes", DeviceLoss::RefuseWrites),
            ],
        )
    })?;
    let submit = c.or(&w.submit, WalSubmit::Shard, |l| {
        c.choice(
            l,
            "wal.submit",
            "submitting thread",
            &[("shard", WalSubmit::Shard), ("reactor", WalSubmit::Reactor)],
        )
    })?;
    for name in &devs {
        let dev = devices
            .iter()
            .find(|d| &d.name == name)
            .expect("device_set checked the name");
        let bs = u64::from(dev.block_size);
        let at = w.segment_size.as_ref();
        if segment_size == 0 || segment_size % bs != 0 {
            return Err(c.at_opt(at, "wal.segment-size", format!("{segment_size} bytes is not a whole number of {bs}-byte blocks of device {name:?}")));
        }
        let at = w.max_batch.as_ref();
        if max_batch < bs || max_batch > segment_size || max_batch % bs != 0 {
            return Err(c.at_opt(at, "wal.max-batch", format!("{max_batch} bytes must be whole {bs}-byte blocks of device {name:?}, at least one and at most a segment ({segment_size})")));
        }
    }
    Ok(WalConfig {
        devices: devs,
        segment_size,
        max_batch,
        durability,
        fua,
        copies,
        on_device_loss,
        submit,
    })
}

/// Every device must hold the reserved area and what its role lays out.
fn check_layout(
    c: &Checker,
    raw: &RawConfig,
    devices: &[DeviceConfig],
    wal: &WalConfig,
    flush: &FlushConfig,
) -> Result<()> {
    for (i, (dev, rawdev)) in devices.iter().zip(&raw.devices).enumerate() {
        if dev.size == 0 {
            continue; // an spdk namespace, sized when opened
        }
        let (need, why) = match dev.role {
            Role::Wal => (
                wal.segment_size
                    .checked_mul(2)
                    .and_then(|s| s.checked_add(RESERVED_BYTES))
                    .unwrap_or(u64::MAX),
                format!(
                    "the reserved area ({RESERVED_BYTES} bytes) and two WAL segments of {} bytes",
                    wal.segment_size
                ),
            ),
            Role::Data => (
                RESERVED_BYTES + flush.manifest_size + MIN_DATA_BYTES,
                format!(
                    "the reserved area ({RESERVED_BYTES} bytes), the manifest ({} bytes) and {MIN_DATA_BYTES} bytes of data",
                    flush.manifest_size
                ),
            ),
        };
        if dev.size < need {
            let leaf = rawdev.size.as_ref().unwrap_or(&rawdev.name);
            return Err(c.at(
                leaf,
                &format!("devices[{i}].size"),
                format!(
                    "{} bytes is smaller than the layout needs: {need} bytes for {why}",
                    dev.size
                ),
            ));
        }
    }
    Ok(())
}

fn flush(c: &Checker, raw: &RawConfig, devices: &[DeviceConfig]) -> Result<FlushConfig> {
    let f = &raw.flush;
    let devs = device_set(
        c,
        f.devices.as_deref(),
        "flush.devices",
        Role::Data,
        devices,
    )?;
    let copies = c.or(&f.copies, 1, |l| {
        let n: usize = c.uint(l, "flush.copies", "a number of copies")?;
        if n == 0 || n > devs.len() {
            return Err(c.at(
                l,
                "flush.copies",
                format!(
                    "{n} copies of each block file need as many data devices, and flush.devices has {}: give at least 1 and at most {}",
                    devs.len(),
                    devs.len()
                ),
            ));
        }
        Ok(n)
    })?;
    let block_size = c.or(&f.block_size, 32 << 10, |l| {
        let n = c.size(l, "flush.block-size")?;
        if !(512..=(16 << 20)).contains(&n) {
            return Err(c.at(
                l,
                "flush.block-size",
                format!("{n} bytes is outside 512 bytes to 16MiB"),
            ));
        }
        Ok(n)
    })?;
    let bloom_bits = c.or(&f.bloom_bits, 10, |l| {
        let n: u32 = c.uint(l, "flush.bloom-bits", "a number of bits per key")?;
        if !(1..=64).contains(&n) {
            return Err(c.at(l, "flush.bloom-bits", format!("{n} is outside 1 to 64")));
        }
        Ok(n)
    })?;
    let compact_at = c.or(&f.compact_at, 8, |l| {
        let n: u32 = c.uint(l, "flush.compact-at", "a number of block files")?;
        if !(2..=1000).contains(&n) {
            return Err(c.at(l, "flush.compact-at", format!("{n} is outside 2 to 1000")));
        }
        Ok(n)
    })?;
    let manifest_size = c.or(&f.manifest_size, 8 << 20, |l| {
        let n = c.size(l, "flush.manifest-size")?;
        if n < (128 << 10) || n % (64 << 10) != 0 {
            return Err(c.at(
                l,
                "flush.manifest-size",
                format!("{n} bytes is not a multiple of 64KiB of at least 128KiB"),
            ));
        }
        Ok(n)
    })?;
    let block_cache = c.or(&f.block_cache, 256 << 20, |l| {
        let n = c.size(l, "flush.block-cache")?;
        // The cache is sharded; a block heavier than a shard's share is
        // never kept, so a cache of a few blocks would keep nothing.
        let least = (block_size * 64).max(1 << 20);
        if n != 0 && n < least {
            return Err(c.at(
                l,
                "flush.block-cache",
                format!(
                    "{n} bytes is below {least} (64 blocks of flush.block-size, at least 1MiB); give 0 to turn the cache off"
                ),
            ));
        }
        Ok(n)
    })?;
    let scrub_rate = c.or(&f.scrub_rate, 16 << 20, |l| {
        let n = c.size(l, "flush.scrub-rate")?;
        if n != 0 && n < 64 << 10 {
            return Err(c.at(
                l,
                "flush.scrub-rate",
                format!("{n} bytes a second is below 64KiB: a pass would never end; give 0 to turn the scrub off"),
            ));
        }
        Ok(n)
    })?;
    let scrub_every = c.or(
        &f.scrub_every,
        std::time::Duration::from_secs(24 * 3600),
        |l| {
            let text = l.value.trim();
            match humantime::parse_duration(text) {
                Ok(d) if d >= std::time::Duration::from_secs(1) => Ok(d),
                Ok(_) => Err(c.at(
                    l,
                    "flush.scrub-every",
                    format!("{text:?} is below one second"),
                )),
                Err(_) => Err(c.at(
                    l,
                    "flush.scrub-every",
                    format!("{text:?} is not a duration (use 30s, 6h, 1d, ...)"),
                )),
            }
        },
    )?;
    Ok(FlushConfig {
        devices: devs,
        copies,
        block_size,
        bloom_bits,
        compact_at,
        manifest_size,
        block_cache,
        scrub_rate,
        scrub_every,
    })
}

fn memstore(c: &Checker, raw: &RawConfig, wal: &WalConfig) -> Result<MemstoreConfig> {
    let m = &raw.memstore;
    let regions: u32 = c.or(&m.regions, 16, |l| {
        let n: u32 = c.uint(l, "memstore.regions", "a region count")?;
        if n == 0 || n > 65536 {
            return Err(c.at(l, "memstore.regions", format!("{n} is outside 1 to 65536")));
        }
        Ok(n)
    })?;
    let split_keys = match &m.split_keys {
        None => MemstoreConfig::even_splits(regions),
        Some(leaves) => {
            if let Some(l) = &m.regions {
                return Err(c.at(
                    l,
                    "memstore.regions",
                    "give regions or split-keys, not both",
                ));
            }
            let mut keys: Vec<Vec<u8>> = Vec::with_capacity(leaves.len());
            for (i, l) in leaves.iter().enumerate() {
                let field = format!("memstore.split-keys[{i}]");
                let key = l.value.as_bytes().to_vec();
                if key.is_empty() {
                    return Err(c.at(l, &field, "a split key cannot be empty"));
                }
                if let Some(prev) = keys.last() {
                    if *prev >= key {
                        return Err(c.at(l, &field, format!("{:?} is not after the split key before it ({:?}); split keys must be strictly increasing", l.value, String::from_utf8_lossy(prev))));
                    }
                }
                keys.push(key);
            }
            if keys.len() >= 65536 {
                return Err(c.at(
                    &leaves[0],
                    "memstore.split-keys",
                    "more than 65535 split keys",
                ));
            }
            keys
        }
    };
    let regions = split_keys.len() as u32 + 1;
    let flush_size = c.or(&m.flush_size, 64 << 20, |l| {
        c.size(l, "memstore.flush-size")
    })?;
    let global_limit = c.or(&m.global_limit, 2 << 30, |l| {
        c.size(l, "memstore.global-limit")
    })?;
    let low_water = c.or(&m.low_water, 0.95, |l| {
        c.fraction(l, "memstore.low-water", true)
    })?;
    if flush_size == 0 {
        let at = m.flush_size.as_ref();
        return Err(c.at_opt(at, "memstore.flush-size", "must be more than 0 bytes"));
    }
    if global_limit < flush_size {
        let at = m.global_limit.as_ref();
        return Err(c.at_opt(
            at,
            "memstore.global-limit",
            format!("{global_limit} bytes is below flush-size ({flush_size} bytes)"),
        ));
    }
    // Keys as long as the formats allow (a key's length is 16 bits): a
    // Redis client may use keys of any size, and tens of KiB occur.
    let max_key = c.or(&m.max_key, 64 << 10, |l| c.size(l, "memstore.max-key"))?;
    if max_key == 0 || max_key > u64::from(u16::MAX) + 1 {
        let at = m.max_key.as_ref();
        return Err(c.at_opt(
            at,
            "memstore.max-key",
            format!("{max_key} bytes is outside 1 byte to 64KiB"),
        ));
    }
    // The largest record must fit in one WAL batch; without `max-value`,
    // values may be 8MiB or as large as the batch allows, whichever is less.
    let room = wal.max_batch.saturating_sub(RECORD_ROOM);
    let fitting = room.saturating_sub(max_key).clamp(1, 8 << 20);
    let max_value = c.or(&m.max_value, fitting, |l| c.size(l, "memstore.max-value"))?;
    if max_key + max_value > room {
        let at = m.max_value.as_ref().or(m.max_key.as_ref());
        return Err(c.at_opt(
            at,
            "memstore.max-value",
            format!(
                "a {max_key}-byte key and a {max_value}-byte value do not fit in one WAL batch (wal.max-batch is {} bytes; raise it to at least {} or lower the limits)",
                wal.max_batch,
                (max_key + max_value + RECORD_ROOM).div_ceil(4096) * 4096
            ),
        ));
    }
    Ok(MemstoreConfig {
        regions,
        split_keys,
        flush_size,
        global_limit,
        low_water,
        max_key,
        max_value,
    })
}

/// Bytes of a WAL batch that are not key or value: the batch header and
/// one record header, rounded up.
const RECORD_ROOM: u64 = 128;
