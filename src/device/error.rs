//! Device errors: one enum for every backend, each variant naming the device
//! and, where there is one, the LBA.

use std::io;
use std::path::PathBuf;

use super::IoKind;

/// The result of a device call.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// What can go wrong on a device.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A buffer's address or length does not fit the device's rules.
    #[error("device {device}: {what}")]
    Misaligned { device: String, what: String },

    /// The request reaches past the end of the device, or is empty.
    #[error("device {device}: {kind} of {blocks} blocks at LBA {lba} is out of range (capacity {capacity} blocks)")]
    OutOfRange {
        device: String,
        kind: IoKind,
        lba: u64,
        blocks: u64,
        capacity: u64,
    },

    /// The request moves more bytes or buffers than one request may.
    #[error("device {device}: {what}")]
    TooLarge { device: String, what: String },

    /// The queue already holds as many requests as its depth allows.
    #[error("device {device}: queue full ({depth} requests in flight)")]
    QueueFull { device: String, depth: u32 },

    /// The device reported an error for a request.
    #[error("device {device}: {kind} at LBA {lba} failed: {source}")]
    Io {
        device: String,
        kind: IoKind,
        lba: u64,
        #[source]
        source: io::Error,
    },

    /// A buffer is in memory the device cannot reach (an SPDK PCIe
    /// controller needs DMA memory from `Device::alloc_buf`).
    #[error("device {device}: buffer {buffer} of the {kind} at LBA {lba} is not DMA memory; allocate it with the device's alloc_buf")]
    NotDma {
        device: String,
        kind: IoKind,
        lba: u64,
        buffer: usize,
    },

    /// The device is not what the configuration says (block size, size).
    #[error("device {device}: {what}")]
    Mismatch { device: String, what: String },

    /// The device lost power (simulated) or its controller went away; the
    /// request did not complete and nothing about it may be assumed.
    #[error("device {device}: offline ({why}); {kind} at LBA {lba} did not complete")]
    Offline {
        device: String,
        kind: IoKind,
        lba: u64,
        why: String,
    },

    /// The device could not be opened or created.
    #[error("device {device}: cannot open {}: {source}", path.display())]
    Open {
        device: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The backing file or block device is smaller than the configured size.
    #[error("device {device}: {} holds {actual} bytes, the configuration says {configured}; run `stria format`", path.display())]
    TooSmall {
        device: String,
        path: PathBuf,
        actual: u64,
        configured: u64,
    },

    /// The backend cannot run here (kernel refuses io_uring, feature not
    /// compiled in, ...).
    #[error("device {device}: {backend} backend unavailable: {why}")]
    Unavailable {
        device: String,
        backend: &'static str,
        why: String,
    },
}

impl DeviceError {
    /// True when the error is the queue being full, which the caller handles
    /// by polling completions and retrying.
    pub fn is_queue_full(&self) -> bool {
        matches!(self, DeviceError::QueueFull { .. })
    }
}
