//! The write-ahead log, striped over the WAL devices.
//!
//! - `format`: segments, batches and records as they lie on a device.
//! - `commit`: the WAL reactor: group commit, durability, ordered acks;
//!   `stripe`: its devices and where a batch goes; `inflight`: a batch's
//!   copies and how far each has come.
//! - `segments`: each device's ring of segments, reuse after release.
//! - `recovery`: reading the longest gap-free prefix back at open.
//! - `writer`: the handle writers use ([`Wal`]), `ticket`: their acks.
//! - `host`: a thread that appends and drives the devices itself.

mod commit;
mod error;
pub mod format;
mod host;
mod inflight;
pub mod recovery;
mod segments;
pub mod stats;
mod stripe;
mod ticket;
mod writer;

pub use commit::GroupRecord;
pub use error::WalError;
pub use host::WalHost;
pub use ticket::{Notify, Ticket};
pub use writer::{LossHook, Wal, WalOptions};

/// A log sequence number. The first LSN of a fresh log is 1; 0 means "none".
pub type Lsn = u64;
