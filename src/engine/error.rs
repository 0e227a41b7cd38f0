//! What the engine's calls can fail with.

use crate::config::Durability;
use crate::device::DeviceError;
use crate::layout::extents::ExtentError;
use crate::layout::manifest::ManifestError;
use crate::reactor::ReactorError;
use crate::wal::recovery::RecoveryError;
use crate::wal::WalError;

/// An engine error. Refusals of bad input (`TooLarge`, `BadRange`) change
/// nothing; the others say what failed and where.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A key or value over the configured limit.
    #[error("{what} of {bytes} bytes is over the limit of {limit} bytes (memstore.{field})")]
    TooLarge {
        what: &'static str,
        field: &'static str,
        bytes: usize,
        limit: usize,
    },
    /// An empty key, or a scan whose end is not after its start.
    #[error("{0}")]
    BadRange(String),
    #[error("write-ahead log: {0}")]
    Wal(#[from] WalError),
    #[error("write-ahead log recovery: {0}")]
    Recovery(#[from] RecoveryError),
    #[error("manifest: {0}")]
    Manifest(#[from] ManifestError),
    #[error("extent allocator: {0}")]
    Extents(#[from] ExtentError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    /// A block file's bytes do not check out: never returned as data.
    #[error("block file {file} on device {device}, block {lba}: {what}")]
    Corrupt {
        file: u64,
        device: String,
        lba: u64,
        what: String,
    },
    /// No data device has room for a block file of this size.
    #[error("no data device has {bytes} free bytes in one piece for a block file (largest free: {largest} bytes)")]
    NoSpace { bytes: u64, largest: u64 },
    /// The devices do not hold what the device map describes.
    #[error("{0}")]
    Layout(String),
    /// A flush or the WAL failed earlier: the engine takes no more writes.
    #[error("the engine stopped taking writes after an error: {0}")]
    Failed(String),
    /// A write at this level was refused because the engine is closing.
    #[error("the engine is closing; a {} write was not taken", .0.as_str())]
    Closing(Durability),
}

pub type Result<T> = std::result::Result<T, EngineError>;
