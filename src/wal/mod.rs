//! The write-ahead log: its on-device format and recovery.

pub mod format;
pub mod recovery;

/// A log sequence number. The first LSN of a fresh log is 1; 0 means "none".
pub type Lsn = u64;
