//! WAL errors.

use super::recovery::RecoveryError;
use crate::device::DeviceError;
use crate::reactor::ReactorError;

/// Why a WAL call failed.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// The log on the devices could not be recovered.
    #[error(transparent)]
    Recovery(#[from] RecoveryError),
    #[error(transparent)]
    Device(DeviceError),
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    /// The record does not fit in a batch.
    #[error("a record of {bytes} bytes does not fit in a WAL batch (at most {max} bytes; raise wal.max-batch)")]
    TooLarge { bytes: usize, max: usize },
    /// A device failed; the write may or may not be in the log.
    #[error("the WAL failed: {0}")]
    Failed(String),
    /// The WAL was closed.
    #[error("the WAL is closed")]
    Closed,
    /// The WAL cannot be opened on these devices as configured.
    #[error("{0}")]
    Config(String),
}
