//! The on-device layout: the superblock at the start of every device, the
//! manifest (which block files exist, in a fixed area of the data devices)
//! and the extent allocator (which bytes of the data devices are free).

pub mod extents;
pub mod manifest;
mod superblock;

pub use extents::{ExtentError, Extents};
pub use manifest::{Edit, FileRecord, Manifest, ManifestError, ManifestState, ManifestStats};
pub use superblock::{Superblock, SuperblockError, FORMAT_VERSION, MAGIC, SUPERBLOCK_BYTES};
