//! Memstores: the sorted in-memory maps writes land in after the WAL, their
//! memory accounting, and the global limit that makes writers wait.
//!
//! - [`Memstore`]: one region's map of each key to its versions (a value
//!   or a tombstone each): a hash index that finds a key by point, and a
//!   B-tree for walks in key order that new keys join in sorted batches
//!   (`tree.rs`), behind a reader-writer lock. Writers insert
//!   runs of writes once their WAL appends are acknowledged, readers look
//!   up and iterate under the read lock, a flush reactor walks it once it
//!   is frozen. Keys and values are the writes' shared records
//!   ([`crate::record`]).
//! - [`Memory`]: the bytes of every memstore together, and the blocking of
//!   writers above `global-limit` until the total is below
//!   `low-water × global-limit`.
//! - [`Regions`]: which region a key belongs to.
//!
//! Accounting is exact in what it counts and conservative in what it
//! cannot see: an entry costs its key, its value and [`ENTRY_OVERHEAD`]
//! bytes (its share of the B-tree node, the handle of the shared record
//! that holds key and value, and the allocator's rounding), and a
//! write is charged when it is admitted, before its WAL append, so bytes
//! on their way to the memstore count too.

mod admission;
mod chain;
mod key;
mod limit;
mod map;
mod regions;
#[cfg(test)]
mod tests;
mod tree;

pub use admission::{Admission, Inserter};
pub use limit::{Memory, MemoryStats};
pub use map::{entry_bytes, KeepVersions, Memstore, MemstoreStats, ENTRY_OVERHEAD};
pub use regions::Regions;
