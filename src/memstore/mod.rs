//! Memstores: the sorted in-memory maps writes land in after the WAL, their
//! memory accounting, and the global limit that makes writers wait.
//!
//! - [`Memstore`]: one region's map of `(key, version)` to a value or a
//!   tombstone. Concurrent (a lock-free skip list): writers insert once
//!   their WAL append is acknowledged, readers look up and iterate at the
//!   same time, a flush reactor iterates it once it is frozen.
//! - [`Memory`]: the bytes of every memstore together, and the blocking of
//!   writers above `global-limit` until the total is below
//!   `low-water × global-limit`.
//! - [`Regions`]: which region a key belongs to.
//!
//! Accounting is exact in what it counts and conservative in what it
//! cannot see: an entry costs its key, its value and [`ENTRY_OVERHEAD`]
//! bytes (the skip-list node with its tower, the handle of the shared
//! record that holds key and value, and the allocator's rounding), and a
//! write is charged when it is admitted, before its WAL append, so bytes
//! on their way to the memstore count too.

mod limit;
mod map;
mod regions;

pub use limit::{Memory, MemoryStats};
pub use map::{entry_bytes, Admission, Inserter, Memstore, MemstoreStats, ENTRY_OVERHEAD};
pub use regions::Regions;
