//! The YAML shape, as serde reads it. Every leaf is a [`Leaf`]: the scalar as
//! written plus where it was written, so that `validate` can turn it into a
//! typed value and point at it when it is wrong.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ConfigError;

/// A scalar as written, with its location.
pub type Leaf = Spanned<String>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawConfig {
    pub appliance: Leaf,
    pub reactors: RawReactors,
    pub devices: Vec<RawDevice>,
    #[serde(default)]
    pub wal: RawWal,
    #[serde(default)]
    pub memstore: RawMemstore,
    #[serde(default)]
    pub flush: RawFlush,
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub spdk: RawSpdk,
    /// Where relative device paths resolve (default: the directory stria
    /// runs in).
    #[serde(default)]
    pub data_dir: Option<Leaf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawReactors {
    pub wal: Vec<Leaf>,
    pub flush: Vec<Leaf>,
    pub idle: Option<Leaf>,
    pub spin_us: Option<Leaf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawDevice {
    pub name: Leaf,
    pub backend: Leaf,
    pub role: Leaf,
    pub size: Option<Leaf>,
    pub block_size: Option<Leaf>,
    pub queue_depth: Option<Leaf>,
    // psync, uring
    pub path: Option<Leaf>,
    // uring
    pub direct: Option<Leaf>,
    // spdk
    pub transport: Option<Leaf>,
    pub address: Option<Leaf>,
    pub port: Option<Leaf>,
    pub nqn: Option<Leaf>,
    pub namespace: Option<Leaf>,
    // sim
    pub sim: Option<RawSim>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawSim {
    pub write_us: Option<Leaf>,
    pub read_us: Option<Leaf>,
    pub flush_us: Option<Leaf>,
    pub bandwidth: Option<Leaf>,
    pub sector_size: Option<Leaf>,
    pub volatile_cache: Option<Leaf>,
    pub seed: Option<Leaf>,
    pub read_error_rate: Option<Leaf>,
    pub write_error_rate: Option<Leaf>,
    pub flush_error_rate: Option<Leaf>,
    #[serde(default)]
    pub fail_ops: Vec<Leaf>,
    pub power_cut_at_op: Option<Leaf>,
    pub misdirect_rate: Option<Leaf>,
    pub lost_write_rate: Option<Leaf>,
    pub corrupt_read_rate: Option<Leaf>,
    #[serde(default)]
    pub latent_errors: Vec<Leaf>,
    pub slow_from_op: Option<Leaf>,
    pub slow_ops: Option<Leaf>,
    pub slow_factor: Option<Leaf>,
    pub vanish_at_op: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawWal {
    pub devices: Option<Vec<Leaf>>,
    pub segment_size: Option<Leaf>,
    pub max_batch: Option<Leaf>,
    pub durability: Option<Leaf>,
    pub fua: Option<Leaf>,
    pub copies: Option<Leaf>,
    pub on_device_loss: Option<Leaf>,
    pub submit: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawMemstore {
    pub regions: Option<Leaf>,
    pub split_keys: Option<Vec<Leaf>>,
    pub max_key: Option<Leaf>,
    pub max_value: Option<Leaf>,
    pub flush_size: Option<Leaf>,
    pub global_limit: Option<Leaf>,
    pub low_water: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawFlush {
    pub devices: Option<Vec<Leaf>>,
    pub copies: Option<Leaf>,
    pub block_size: Option<Leaf>,
    pub bloom_bits: Option<Leaf>,
    pub compact_at: Option<Leaf>,
    pub manifest_size: Option<Leaf>,
    pub block_cache: Option<Leaf>,
    pub scrub_rate: Option<Leaf>,
    pub scrub_every: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawServer {
    pub listen: Option<Leaf>,
    pub password: Option<Leaf>,
    pub max_clients: Option<Leaf>,
    pub io_threads: Option<Leaf>,
    pub max_bulk: Option<Leaf>,
    pub max_query: Option<Leaf>,
    pub row_cache: Option<Leaf>,
    pub metrics: Option<Leaf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawSpdk {
    pub mem_size: Option<Leaf>,
    pub hugepages: Option<Leaf>,
    pub shm_id: Option<Leaf>,
}

/// Reads the YAML shape; errors carry the parser's line and column.
pub fn parse(text: &str, source: &str) -> Result<RawConfig, ConfigError> {
    serde_saphyr::from_str(text).map_err(|err| {
        let location = err.location();
        let plain = err.without_snippet().to_string();
        // The plain message ends with " at line L, column C"; the location is
        // printed in front instead, so drop the suffix.
        let message = match plain.rfind(" at line ") {
            Some(at) if location.is_some() => plain[..at].to_string(),
            _ => plain,
        };
        let (line, column) = match location {
            Some(l) => (Some(l.line() as u32), Some(l.column() as u32)),
            None => (None, None),
        };
        // Messages such as "expected string scalar" do not say which key
        // they are about; the key is the last `name:` before the column.
        let field = if message.contains('`') {
            String::new()
        } else {
            key_before(text, line, column).unwrap_or_default()
        };
        ConfigError {
            source: source.to_string(),
            line,
            column,
            field,
            message,
        }
    })
}

/// The mapping key written last before `line`:`column` on that line, if any.
fn key_before(text: &str, line: Option<u32>, column: Option<u32>) -> Option<String> {
    let line = text.lines().nth(line? as usize - 1)?;
    let before: String = line.chars().take(column? as usize - 1).collect();
    let colon = before.rfind(':')?;
    let key = before[..colon]
        .rsplit(|ch: char| ch.is_whitespace() || matches!(ch, '{' | ','))
        .next()?;
    (!key.is_empty()).then(|| key.to_string())
}
