//! The on-device layout. Today: the superblock at the start of every device.
//! The manifest and the extent allocator join it with the engine.

mod superblock;

pub use superblock::{Superblock, SuperblockError, FORMAT_VERSION, MAGIC, SUPERBLOCK_BYTES};
